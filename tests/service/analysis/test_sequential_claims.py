"""Claims run sequentially (issue 32 §2): a claim in a sequential sweep is
labelled by the one rule from its group-sequential test at the sweep's
looks, never by the fixed design over the seeds the sweep stopped at.
Pure, on synthetic per-seed numbers; the reference is
`sequential.sequential_test` on the same numbers."""

import math

import numpy as np
import pytest
from scipy import stats as sps

from kg_service.analysis.numbers import claims
from kg_service.analysis.numbers import sequential
from kg_service.analysis.numbers import sequential_claims
from kg_service.config.loading import config_to_dict


def claim(direction=claims.GREATER, effect=0.01, alpha=0.05, name="c"):
    return claims.Claim(name, "score", direction, effect, alpha, ("a",), ("b",))


def diffs_with(mean, sd, n):
    """n numbers with exactly this mean and sd (ddof=1)."""
    z = np.asarray(sps.norm.ppf((np.arange(n) + 0.5) / n))
    z = (z - z.mean()) / z.std(ddof=1)
    return mean + sd * z


def by_look(mean, sd, counts):
    """Seeds 0..counts[-1]-1 whose every look's batch has this mean and sd,
    so each look's numbers have the mean too (sorted ones would not)."""
    return np.concatenate([diffs_with(mean, sd, b - a)
                           for a, b in zip((0, *counts), counts)])


def evidence(c, diffs):
    table = {"a": {s: 1.0 + d for s, d in enumerate(diffs)},
             "b": {s: 1.0 for s in range(len(diffs))}}
    return claims.pair_evidence(c, table)


def one(c, diffs, counts, n_max):
    (lab,) = sequential_claims.label_all([evidence(c, diffs)], counts, n_max)
    return lab


@pytest.mark.parametrize("direction,mean,sd,effect,counts,n_max,expected", [
    # A large effect stops at the first look, in the claimed direction.
    (claims.GREATER, 0.05, 0.01, 0.01, (8, 16), 16, (claims.REPRODUCED, "")),
    (claims.LESS, 0.05, 0.01, 0.01, (8, 16), 16, (claims.CONTRADICTED, claims.OPPOSITE)),
    (claims.GREATER, 0.001, 0.05, 0.5, (10, 20), 20, (claims.CONTRADICTED, claims.EQUIVALENT)),
    # sd 0.1 against a smallest effect of 0.01 with at most 12 seeds: out of
    # reach at the first look (conditional power < 0.1): a futility stop.
    (claims.GREATER, 0.0, 0.1, 0.01, (4, 8, 12), 12,
     (claims.NOT_TESTED, claims.OUT_OF_REACH)),
    # Too few seeds for a futility look (< 4), ended undecided, power < 0.8.
    (claims.GREATER, 0.002, 0.05, 0.01, (2, 4), 4, (claims.NOT_TESTED, claims.UNDERPOWERED)),
    # Ended undecided at its last look with power >= 0.8.
    (claims.GREATER, 0.3, 1.0, 0.55, (30, 40), 40, (claims.INCONCLUSIVE, "")),
])
def test_each_label_is_reachable_sequentially(direction, mean, sd, effect, counts, n_max,
                                              expected):
    lab = one(claim(direction, effect), by_look(mean, sd, counts), counts, n_max)
    assert (lab.label, lab.why) == expected
    assert lab.spending == "obrien_fleming" and lab.look >= 1
    if lab.why == claims.OUT_OF_REACH:
        assert lab.detail == (effect, 1, 4)
    if lab.label == claims.INCONCLUSIVE:
        assert lab.power >= 0.8 and lab.look == 2


def test_a_claims_estimate_is_the_sequential_tests_median_unbiased_one():
    """Per look the claim's numbers cut at the look's seeds, oriented to
    the claimed direction, alpha / m (Bonferroni over m = 2 claims)."""
    rng = np.random.default_rng(11)
    d1, d2 = rng.normal(0.04, 0.03, 12), rng.normal(-0.03, 0.02, 12)
    c1, c2 = claim(effect=0.01, name="up"), claim(claims.LESS, effect=0.01, name="down")
    counts = (4, 8, 12)
    labels = sequential_claims.label_all([evidence(c1, d1), evidence(c2, d2)], counts, 24)
    for lab, d, sign in zip(labels, (d1, d2), (1.0, -1.0)):
        ref = sequential.sequential_test(
            [sign * d[:n] for n in counts], 24, 0.025, "obrien_fleming", margin=0.01,
            futility=sequential.Futility(0.01))
        assert ref.decided  # the case stops, so the adjustment matters
        assert lab.estimate == pytest.approx(sign * ref.adjusted, rel=1e-12)
        assert lab.naive_estimate == pytest.approx(sign * ref.naive_mean, rel=1e-12)
        assert sorted(lab.interval) == pytest.approx(sorted(sign * x for x in ref.interval))
        assert lab.look == ref.decided_at + 1 and lab.seeds == ref.looks[-1].n
        assert lab.confidence == pytest.approx(1 - 0.025)
        assert lab.label == claims.REPRODUCED and math.isnan(lab.p_holm)


def _sweep_case():
    from kg_service.config.claims import ClaimConfig
    from kg_service.config.schema import Config
    from tests.service.analysis.members import sweep

    results = sweep({"relu": [0.90, 0.91, 0.92, 0.90], "gelu": [0.93, 0.95, 0.95, 0.94]})
    # The config as a sequential sweep concludes: at the seeds it used.
    config = Config(activations=("relu", "gelu"), seeds=(0, 1, 2, 3), claims=(
        ClaimConfig(name="gelu-wins", pair=("gelu", "relu"), metric="test_accuracy",
                    direction="greater", smallest_effect=0.003),))
    values = {(r.activation, r.seed): r.test_accuracy for r in results}
    looks = sequential.compare_looks(values, "relu", (4,), 40)
    return config, results, looks


def test_a_sequential_sweeps_claims_never_get_the_fixed_design_label():
    """Fixed Holm over the 4 seeds says reproduced (p 0.001); the sweep's
    first look of 40 (O'Brien-Fleming) cannot, and 4 seeds give power < 0.8."""
    from kg_service.analysis.numbers import claim_data

    config, results, looks = _sweep_case()
    (fixed,) = claim_data.label_sweep(config, results)
    assert fixed.label == claims.REPRODUCED
    (lab,) = claim_data.label_sweep(config, results, looks)
    assert (lab.label, lab.why) == (claims.NOT_TESTED, claims.UNDERPOWERED)
    assert lab.spending == "obrien_fleming" and lab.look == 1 and lab.seeds == 4


def test_a_sequential_sweeps_report_says_its_claims_are_sequential():
    from kg_service.analysis.numbers import claim_data
    from kg_service.analysis.numbers import comparisons
    from kg_service.analysis.reports import report

    config, results, looks = _sweep_case()
    md = report.render_markdown(comparisons.summarize(results, "relu"), results, title="t",
                                config=config, resolved=config_to_dict(config),
                                claims=claim_data.label_sweep(config, results, looks))
    part = md[md.index("## Claims"):]
    assert "- gelu-wins: not tested: power" in part and "sequential" in part
    assert "reproduced" not in part.split("\n- ")[1]


@pytest.mark.parametrize("seeds", [{"start": 2, "step": 2, "max": 8}, 4])
def test_a_study_of_sequential_sweeps_gives_its_claims_no_fixed_design_label(seeds):
    """The study's claims pool its sweeps' seeds; over a sequential sweep's
    seeds the fixed design claims too much, so they are not tested there
    (each sweep's own report labels them from its looks)."""
    from kg_service.sweep import studies

    ran = {"activations": ["relu", "gelu"], "seeds": seeds, "claims": [
        {"name": "gelu-wins", "pair": ["gelu", "relu"], "metric": "test_accuracy",
         "direction": "greater", "smallest_effect": 0.003}]}
    accs = {"relu": [0.90, 0.91, 0.92, 0.90], "gelu": [0.93, 0.95, 0.95, 0.94]}
    members = {a: {s: {"test_accuracy": v} for s, v in enumerate(vs)} for a, vs in accs.items()}
    (lab,) = studies.label_claims("s", [(ran, members)])
    if isinstance(seeds, int):
        assert lab.label == claims.REPRODUCED
    else:
        assert (lab.label, lab.why) == (claims.NOT_TESTED, claims.NO_TEST)
        assert "sequential" in lab.detail[0]
