"""A paper's claims and their one label (issue 32 §1, §4): every label
reached by a constructed case, Holm over the claims as statsmodels'
multipletests, power and seeds as statsmodels' TTestPower, and an
interaction's sign from its declared reference, whatever the order of
the sweeps. Pure, on synthetic per-seed numbers."""

import math

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower

from kg_service.analysis.numbers import claims
from kg_service.analysis.numbers import decisions
from kg_service.config.loading import config_to_dict


def claim(direction=claims.GREATER, effect=0.01, metric="test_loss", alpha=0.05, **kw):
    return claims.Claim("c", metric, direction, effect, alpha, ("a",), ("b",), **kw)


def diffs_with(mean, sd, n):
    """n numbers with exactly this mean and sd (ddof=1)."""
    z = np.asarray(sps.norm.ppf((np.arange(n) + 0.5) / n))
    z = (z - z.mean()) / z.std(ddof=1)
    return mean + sd * z


def evidence(c, diffs, base=2.0):
    """Evidence of a pair claim whose b is `base` and a is b + diffs."""
    table = {"a": {s: base + d for s, d in enumerate(diffs)},
             "b": {s: base for s in range(len(diffs))}}
    return claims.pair_evidence(c, table)


def one(c, diffs, base=2.0):
    (lab,) = claims.label_all([evidence(c, diffs, base)])
    return lab


def test_significant_in_the_claimed_direction_is_reproduced():
    lab = one(claim(effect=0.01), diffs_with(0.05, 0.01, 6))
    assert (lab.label, lab.why) == (claims.REPRODUCED, "")
    assert lab.interval[0] > 0 and lab.seeds == 6


def test_significant_the_other_way_is_contradicted():
    lab = one(claim(claims.LESS, effect=0.01), diffs_with(0.05, 0.01, 6))
    assert (lab.label, lab.why) == (claims.CONTRADICTED, claims.OPPOSITE)


def test_equivalent_within_the_smallest_effect_is_contradicted():
    lab = one(claim(effect=0.5), diffs_with(0.01, 0.1, 20))
    assert (lab.label, lab.why) == (claims.CONTRADICTED, claims.EQUIVALENT)
    assert -0.5 < lab.interval[0] < lab.interval[1] < 0.5


def test_too_few_seeds_for_the_smallest_effect_is_not_tested_with_the_seeds_needed():
    lab = one(claim(effect=0.01), diffs_with(0.002, 0.05, 3))
    assert (lab.label, lab.why) == (claims.NOT_TESTED, claims.UNDERPOWERED)
    assert lab.power < 0.8 and lab.detail == (lab.needed, 3) and lab.needed > 3


def test_enough_power_and_neither_side_shown_is_inconclusive():
    # sd 1, 30 seeds: power 0.8 at d ~0.53; the mean 0.3 is neither
    # significant (t 1.64) nor within 0.55 by TOST (0.3 + 1.70 se > 0.55 - ...).
    lab = one(claim(effect=0.55, metric="score"), diffs_with(0.3, 1.0, 30))
    assert lab.power >= 0.8
    assert (lab.label, lab.why) == (claims.INCONCLUSIVE, "")


def test_a_metric_at_its_ceiling_is_not_tested_and_says_which_side_and_bound():
    c = claim(effect=0.003, metric="test_accuracy")
    lab = one(c, [0.0005, 0.001, 0.0, 0.0008], base=0.9985)
    assert (lab.label, lab.why) == (claims.NOT_TESTED, claims.CEILING)
    side, mean, bound = lab.detail
    assert side == "b" and mean == pytest.approx(0.9985) and bound == 1.0


def test_a_metric_at_its_floor_is_not_tested():
    c = claim(claims.LESS, effect=0.01, metric="loss")
    lab = one(c, [-0.001, -0.002, -0.0015, -0.001], base=0.004)
    assert (lab.label, lab.why) == (claims.NOT_TESTED, claims.FLOOR)
    assert lab.detail[2] == 0.0


def test_a_test_that_cannot_run_is_not_tested_and_says_why():
    lab = one(claim(), [0.02])
    assert (lab.label, lab.why) == (claims.NOT_TESTED, claims.NO_TEST)
    assert "a t-test needs 2" in lab.detail[0]
    missing = claims.pair_evidence(claim(), {"a": {0: 1.0, 1: 2.0}})
    (lab,) = claims.label_all([missing])
    assert lab.label == claims.NOT_TESTED and "no runs of b" in lab.detail[0]


def test_holm_over_the_claims_is_statsmodels_multipletests():
    rng = np.random.default_rng(7)
    cases = [rng.normal(m, 1.0, 8) for m in (0.9, 0.5, 0.2, 1.4)]
    labels = claims.label_all([evidence(claim(effect=0.3, metric="score"), d) for d in cases])
    raw = [sps.ttest_1samp(d, 0.0).pvalue for d in cases]
    _, adjusted, _, _ = multipletests(raw, method="holm")
    assert [lab.p_holm for lab in labels] == pytest.approx(list(adjusted), rel=1e-9)


@pytest.mark.parametrize("effect,sd,n", [(0.01, 0.02, 5), (0.003, 0.004, 12), (1.0, 0.5, 3)])
def test_power_and_seeds_are_statsmodels_ttestpower(effect, sd, n):
    ref = TTestPower()
    assert claims.power_at(n, effect, sd, 0.05) == pytest.approx(
        ref.power(effect_size=effect / sd, nobs=n, alpha=0.05, alternative="two-sided"),
        abs=1e-6)
    needed = claims.seeds_for(effect, sd, 0.025, 0.8)
    solved = ref.solve_power(effect_size=effect / sd, alpha=0.025, power=0.8,
                             alternative="two-sided")
    assert abs(needed - math.ceil(solved)) <= 1


def test_the_plan_uses_alpha_over_the_claims():
    c1, c2 = claim(effect=0.01), claims.Claim("d", "test_loss", claims.LESS, 0.02, 0.05,
                                              ("a",), ("b",))
    plans = claims.plan_claims([c1, c2], {"c": (0.02, 3)})
    assert [p.alpha for p in plans] == [0.025, 0.025]
    assert plans[0].needed == claims.seeds_for(0.01, 0.02, 0.025, 0.8)
    assert plans[1].needed is None  # no pilot sd


def _levels():
    ln = {"relu": {0: 2.50, 1: 2.52, 2: 2.51}, "gelu": {0: 2.49, 1: 2.50, 2: 2.50}}
    noln = {"relu": {0: 2.60, 1: 2.63, 2: 2.61}, "gelu": {0: 2.70, 1: 2.71, 2: 2.73}}
    return ln, noln


def test_an_interactions_sign_comes_from_the_reference_whichever_sweep_came_first():
    c = claims.Claim("i", "test_loss", claims.LESS, 0.01, 0.05, ("relu",), ("gelu",),
                     interaction=True, reference=True)
    ln, noln = _levels()
    first = claims.interaction_evidence(c, {True: ln, False: noln})
    second = claims.interaction_evidence(c, {False: noln, True: ln})
    by_hand = [(noln["relu"][s] - noln["gelu"][s]) - (ln["relu"][s] - ln["gelu"][s])
               for s in range(3)]
    assert first.diffs == second.diffs == pytest.approx(by_hand)
    assert np.mean(first.diffs) < 0
    flipped = claims.interaction_evidence(
        claims.Claim("i", "test_loss", claims.LESS, 0.01, 0.05, ("relu",), ("gelu",),
                     interaction=True, reference=False), {True: ln, False: noln})
    assert flipped.diffs == pytest.approx([-d for d in by_hand])


def test_an_interaction_without_both_levels_is_not_tested():
    c = claims.Claim("i", "test_loss", claims.LESS, 0.01, 0.05, ("relu",), ("gelu",),
                     interaction=True, reference=True)
    (lab,) = claims.label_all([claims.interaction_evidence(c, {True: _levels()[0]})])
    assert lab.label == claims.NOT_TESTED and "reference level True" in lab.detail[0]


def test_a_sequential_decision_plugs_into_the_same_rule():
    word, why, _ = claims.label(claim(), decisions.decided_elsewhere(decisions.BETTER),
                                estimate=0.02, power=0.9, target=0.8, seeds=12, needed=10)
    assert (word, why) == (claims.REPRODUCED, "")


def test_a_sweeps_report_shows_its_claims_table():
    from kg_service.analysis.numbers import comparisons
    from kg_service.analysis.reports import report
    from kg_service.config.claims import ClaimConfig
    from kg_service.config.schema import Config
    from tests.service.analysis.members import sweep

    results = sweep({"relu": [0.90, 0.91, 0.92, 0.90], "gelu": [0.93, 0.95, 0.95, 0.94]})
    config = Config(activations=("relu", "gelu"), seeds=(0, 1, 2, 3), claims=(
        ClaimConfig(name="gelu-wins", pair=("gelu", "relu"), metric="test_accuracy",
                    direction="greater", smallest_effect=0.003),
        ClaimConfig(name="ln", interaction=("gelu", "relu"), reference=True,
                    metric="test_accuracy", direction="greater", smallest_effect=0.003)))
    md = report.render_markdown(comparisons.summarize(results, "relu"), results, title="t",
                                config=config, resolved=config_to_dict(config))
    claims_part = md[md.index("## Claims"):]
    assert "| gelu-wins | gelu − relu | test_accuracy |" in claims_part
    assert "- gelu-wins: reproduced: significant in the claimed direction" in claims_part
    assert "- ln: not tested: the test could not run (an interaction needs" in claims_part


def test_a_sequential_sweeps_claims_get_no_fixed_design_label():
    """Issue 30 §7: over the seeds a sequential sweep stopped at, a fixed-
    design test claims too much; its claims wait for the looks' decision."""
    from kg_service.analysis.numbers import claim_data
    from kg_service.config.claims import ClaimConfig
    from kg_service.config.schema import Config
    from kg_service.config.schema import SequentialSeeds
    from tests.service.analysis.members import sweep

    results = sweep({"relu": [0.90, 0.91, 0.92, 0.90], "gelu": [0.93, 0.95, 0.95, 0.94]})
    config = Config(activations=("relu", "gelu"), seeds=SequentialSeeds(), claims=(
        ClaimConfig(name="gelu-wins", pair=("gelu", "relu"), metric="test_accuracy",
                    direction="greater", smallest_effect=0.003),))
    (lab,) = claim_data.label_sweep(config, results)
    assert (lab.label, lab.detail) == (claims.NOT_TESTED, (claim_data.SEQUENTIAL,))


# --- A level change and a value against a constant (issue 32 §1, §4). ---------


def change(direction=claims.GREATER, effect=0.02, reference=True, metric="entropy_norm.block1"):
    """GELU's metric at the other level minus at the reference level."""
    return claims.Claim("overload", metric, direction, effect, 0.05, ("gelu",), ("gelu",),
                        change=True, reference=reference)


def versus(direction=claims.LESS, effect=0.005, constant=0.01, metric="leaky_slope_abs.block1"):
    """The learnable slope's final value minus its start."""
    return claims.Claim("slope", metric, direction, effect, 0.05, ("learnable_leaky_relu",),
                        (), versus=constant)


def _two_levels(reference_mean, other_mean, spread=0.01, n=6):
    ref = diffs_with(reference_mean, spread, n)
    other = ref + diffs_with(other_mean - reference_mean, spread, n)[::-1]
    return ({"gelu": dict(enumerate(ref))}, {"gelu": dict(enumerate(other))})


def test_a_level_changes_sign_comes_from_the_reference_whichever_sweep_came_first():
    ln, noln = _two_levels(0.60, 0.90)
    first = claims.change_evidence(change(), {True: ln, False: noln})
    second = claims.change_evidence(change(), {False: noln, True: ln})
    by_hand = [noln["gelu"][s] - ln["gelu"][s] for s in range(6)]
    assert first.diffs == second.diffs == pytest.approx(by_hand)
    assert first.sides == pytest.approx((0.90, 0.60))
    flipped = claims.change_evidence(change(reference=False), {True: ln, False: noln})
    assert flipped.diffs == pytest.approx([-d for d in by_hand])


@pytest.mark.parametrize("ref,other,n,direction,expected", [
    (0.60, 0.90, 6, claims.GREATER, (claims.REPRODUCED, "")),
    (0.60, 0.90, 6, claims.LESS, (claims.CONTRADICTED, claims.OPPOSITE)),
    (0.60, 0.60, 40, claims.GREATER, (claims.CONTRADICTED, claims.EQUIVALENT)),
    (0.60, 0.61, 2, claims.GREATER, (claims.NOT_TESTED, claims.UNDERPOWERED)),
    # The reference level's entropy at 0.985 of its maximum: a rise of
    # 0.02 cannot show (issue 30 §6), whatever the test says.
    (0.985, 0.99, 6, claims.GREATER, (claims.NOT_TESTED, claims.CEILING)),
])
def test_a_level_change_reaches_each_label(ref, other, n, direction, expected):
    levels = _two_levels(ref, other, spread=0.001 if n == 40 else 0.01, n=n)
    (lab,) = claims.label_all([claims.change_evidence(change(direction),
                                                      {True: levels[0], False: levels[1]})])
    assert (lab.label, lab.why) == expected
    if lab.why == claims.CEILING:
        assert lab.detail == ("b", pytest.approx(0.985), 1.0)


def _slopes(values):
    return {"learnable_leaky_relu": dict(enumerate(values))}


@pytest.mark.parametrize("mean,sd,n,direction,expected", [
    (0.002, 0.001, 5, claims.LESS, (claims.REPRODUCED, "")),
    (0.030, 0.003, 3, claims.LESS, (claims.CONTRADICTED, claims.OPPOSITE)),
    (0.0101, 0.0005, 30, claims.LESS, (claims.CONTRADICTED, claims.EQUIVALENT)),
    (0.008, 0.01, 3, claims.LESS, (claims.NOT_TESTED, claims.UNDERPOWERED)),
    (0.007, 0.009, 30, claims.LESS, (claims.INCONCLUSIVE, "")),
])
def test_a_value_against_a_constant_reaches_each_label(mean, sd, n, direction, expected):
    values = diffs_with(mean, sd, n)
    e = claims.constant_evidence(versus(direction), _slopes(values))
    assert e.diffs == pytest.approx(list(values - 0.01)) and e.sides == pytest.approx(
        (mean, 0.01))
    (lab,) = claims.label_all([e])
    assert (lab.label, lab.why) == expected
    ref = sps.ttest_1samp(values, 0.01)
    assert lab.p_holm == pytest.approx(ref.pvalue, rel=1e-9)
    assert lab.power == pytest.approx(TTestPower().power(
        effect_size=0.005 / sd, nobs=n, alpha=0.05, alternative="two-sided"), abs=1e-6)


def test_a_constant_claim_at_a_bound_is_not_tested_with_the_number():
    c = versus(claims.GREATER, effect=0.03, constant=0.98, metric="entropy_norm.block1")
    e = claims.constant_evidence(c, {"learnable_leaky_relu": dict(enumerate(
        diffs_with(0.99, 0.002, 5)))})
    (lab,) = claims.label_all([e])
    assert (lab.label, lab.why) == (claims.NOT_TESTED, claims.CEILING)
    assert lab.detail == ("b", pytest.approx(0.98), 1.0)


def test_the_holm_family_takes_every_kind_of_claim_together():
    rng = np.random.default_rng(3)
    pair_d = rng.normal(0.02, 0.02, 6)
    ln, noln = ({"gelu": dict(enumerate(rng.normal(0.6, 0.05, 6)))},
                {"gelu": dict(enumerate(rng.normal(0.7, 0.05, 6)))})
    slopes = rng.normal(0.008, 0.003, 6)
    labels = claims.label_all([
        evidence(claim(effect=0.01, metric="score"), pair_d),
        claims.change_evidence(change(), {False: noln, True: ln}),
        claims.constant_evidence(versus(), _slopes(slopes))])
    raw = [sps.ttest_1samp(pair_d, 0.0).pvalue,
           sps.ttest_rel([noln["gelu"][s] for s in range(6)],
                         [ln["gelu"][s] for s in range(6)]).pvalue,
           sps.ttest_1samp(slopes, 0.01).pvalue]
    _, adjusted, _, _ = multipletests(raw, method="holm")
    assert [lab.p_holm for lab in labels] == pytest.approx(list(adjusted), rel=1e-9)
    assert all(lab.power == pytest.approx(TTestPower().power(
        effect_size=lab.claim.smallest_effect / np.std(d, ddof=1), nobs=6, alpha=0.05 / 3,
        alternative="two-sided"), abs=1e-6) for lab, d in zip(labels, (
            pair_d, [noln["gelu"][s] - ln["gelu"][s] for s in range(6)], slopes)))


def test_a_magnitude_cannot_fall_further_below_its_start_than_zero():
    """|slope| >= 0: from a start of 0.004 a fall of 0.005 cannot show."""
    c = versus(effect=0.005, constant=0.004)
    (lab,) = claims.label_all([claims.constant_evidence(c, _slopes(
        diffs_with(0.001, 0.0005, 6)))])
    assert (lab.label, lab.why, lab.detail) == (claims.NOT_TESTED, claims.FLOOR,
                                                ("b", 0.004, 0.0))
