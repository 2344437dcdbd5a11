"""docs/results.md's math and words (papers/maths.py,
sections.py, revival.py), on fixed numbers: ranks and
Spearman's rho against scipy, rank probabilities against plain numpy
resampling, the normalised attention entropy against a direct numpy
computation, and the page's verdicts on runs whose answer is known. No
store, no training (the page from a real store:
tests/service/cli/test_results.py)."""

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats as st

from kg_service.papers import published
from kg_service.analysis.numbers import resampling
from kg_service.papers import maths as rmath
from kg_service.papers import claims as rclaims
from kg_service.papers import page as rp
from kg_service.papers import revival as rrev
from kg_service.papers import sections as rsec
from kg_service.analysis.numbers import stats
from kg_service.analysis.numbers import study as study_lib
from kg_service.tasks.language import entropy

# The old page's GLU means (3 seeds) and the paper's 65k column, in the table's order.
OURS = [2.6371, 2.6329, 2.6437, 2.6570, 2.6123, 2.6004, 2.5957, 2.6082]
NAMES = list(published.GLU_65K)
PAPER = [published.GLU_65K[a][0] for a in NAMES]


def test_ranks_and_spearman_are_scipys_in_the_tables_order():
    agree = rmath.rank_agreement(NAMES, OURS, PAPER)
    ref = st.spearmanr(OURS, PAPER)
    assert agree.rho == pytest.approx(ref.statistic, rel=1e-12)
    assert agree.p_value == pytest.approx(ref.pvalue, rel=1e-12)
    # rho is Pearson's r of the ranks (no ties here: 1 - 6 sum d^2 / n(n^2 - 1)).
    d = np.array(agree.differences)
    assert agree.rho == pytest.approx(1 - 6 * (d ** 2).sum() / (8 * 63))
    assert list(agree.ours) == list(st.rankdata(OURS))
    assert list(agree.paper) == list(st.rankdata(PAPER))
    # In the table's order, item by item: GEGLU first in both, ReLU 6th vs 8th.
    assert dict(zip(NAMES, agree.differences))["geglu"] == 0
    assert dict(zip(NAMES, agree.differences))["relu"] == 6 - 8
    assert rsec.agreement_words(agree).startswith("agrees")


def test_a_reversed_ranking_is_not_called_agreement():
    agree = rmath.rank_agreement(NAMES, [-x for x in OURS], PAPER)
    assert agree.rho < 0
    assert not rsec.agreement_words(agree).startswith("agrees")


def test_higher_is_better_ranks_the_largest_first():
    assert rmath.ranks([0.91, 0.95, 0.93], higher_is_better=True).tolist() == [3.0, 1.0, 2.0]


# Seeds' values without ties (a resample's means never tie), geglu ahead.
_rng = np.random.default_rng(7)
TABLE = {a: {s: float(m + _rng.normal(0, 0.015)) for s in range(4)}
         for a, m in (("relu", 2.64), ("geglu", 2.61), ("reglu", 2.62))}


def test_paired_p_first_is_resampling_rank_first():
    probs = rmath.rank_probabilities(TABLE, paired=True, resamples=4000, seed=3)
    first = resampling.rank_first(TABLE, higher_is_better=False, resamples=4000, seed=3)
    for a in TABLE:
        assert probs[a][0] == pytest.approx(first[a], abs=1e-12)
    for a in TABLE:  # every activation takes some rank in every resample
        assert sum(probs[a]) == pytest.approx(1.0)


def test_independent_rank_probabilities_match_a_plain_numpy_loop():
    resamples, seed = 2000, 5
    probs = rmath.rank_probabilities(TABLE, paired=False, resamples=resamples, seed=seed)
    rng = np.random.default_rng(seed)
    means = np.stack([
        np.array(list(TABLE[a].values()))[rng.integers(0, 4, size=(resamples, 4))].mean(axis=1)
        for a in TABLE], axis=1)
    firsts = np.argmin(means, axis=1)
    for j, a in enumerate(TABLE):
        assert probs[a][0] == pytest.approx(np.mean(firsts == j))
        worst = np.argmax(means, axis=1)
        assert probs[a][-1] == pytest.approx(np.mean(worst == j))


def test_rank_probabilities_need_two_seeds_and_two_activations():
    assert rmath.rank_probabilities({"a": {0: 1.0, 1: 2.0}}) == {}
    assert rmath.rank_probabilities({"a": {0: 1.0}, "b": {0: 2.0}}) == {}


def _causal(rng, t, heads=2, batch=3, sharp=1.0):
    logits = rng.normal(0, sharp, (batch, heads, t, t))
    logits = np.where(np.tril(np.ones((t, t))) > 0, logits, -np.inf)
    p = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return p / p.sum(axis=-1, keepdims=True)


def test_normalised_entropy_is_each_rows_entropy_over_log_t():
    rng = np.random.default_rng(0)
    p = _causal(rng, t=6)
    expected = np.zeros((3, 2, 5))
    for b in range(3):
        for h in range(2):
            for i in range(1, 6):
                row = p[b, h, i, : i + 1]
                expected[b, h, i - 1] = st.entropy(row) / math.log(i + 1)
    np.testing.assert_allclose(entropy.normalised_row_entropy(p), expected, rtol=1e-12)
    np.testing.assert_allclose(entropy.normalised_head_entropy(p), expected.mean(axis=(0, 2)))
    assert entropy.layer_entropy(p) == pytest.approx(expected.mean())


def test_uniform_causal_attention_is_1_and_one_hot_is_0():
    t = 5
    uniform = np.tril(np.ones((t, t))) / np.arange(1, t + 1)[:, None]
    one_hot = np.eye(t)
    assert entropy.layer_entropy(uniform[None, None]) == pytest.approx(1.0)
    assert entropy.layer_entropy(one_hot[None, None]) == 0.0


def test_fixed_top_quarter_needs_no_head_there():
    # The old max-relative quarters put the highest head in the top quarter
    # always; against the fixed maximum 1, low-entropy heads are all low.
    low = [0.1, 0.2, 0.15, 0.05]
    assert entropy.top_quarter_shares(low)[3] == 0.0
    np.testing.assert_allclose(entropy.top_quarter_shares([0.1, 0.3, 0.6, 0.9, 1.0]),
                               np.bincount([0, 1, 2, 3, 3], minlength=4) / 5)


# --- The Revival verdicts on runs whose answer is known. ----------------------


def _run(name, ln, gelu_entropy, relu_entropy, slope=0.05, epochs=8, relu_gap=0.0):
    members = {}
    for a, h in (("gelu", gelu_entropy), ("relu", relu_entropy),
                 ("learnable_leaky_relu", relu_entropy)):
        gap = relu_gap * (a == "relu") + 0.0007 * s_noise(a)
        members[a] = {s: {"test_loss": 2.6 + (0.1 if not ln else 0) + 0.001 * s
                                       + gap * (1 + 0.1 * s),
                          "entropy_norm.block0": h + 0.001 * s,
                          "entropy_norm.block1": h - 0.001 * s,
                          "entropy_norm_quarter4": 0.5,
                          "leaky_slope.block0": slope, "leaky_slope.block1": -slope}
                      for s in range(3)}
    return rp.StoredRun(experiment=name, run_id=name, study="revival", baseline="gelu",
                        config={"model": {"layer_norm": ln}, "training": {"epochs": epochs}},
                        members=members, seconds=60.0)


def s_noise(activation):
    return {"gelu": 0, "relu": 1, "learnable_leaky_relu": -1}[activation]


def _study(runs, reference=True):
    metric = stats.Metric.of("test_loss", False)
    return study_lib.analyse("revival", [
        study_lib.StudySweep(name=r.experiment, baseline="gelu", metrics=(metric,),
                             values={"test_loss": r.values("test_loss")},
                             level=r.layer_norm) for r in runs],
        reference=reference, factor="model.layer_norm")


REVIVAL_CLAIMS = [
    {"name": "layernorm-hurts-gelu-more", "interaction": ["relu", "gelu"], "reference": True,
     "metric": "test_loss", "direction": "less", "smallest_effect": 0.01},
    {"name": "relu-relieves-entropy", "pair": ["relu", "gelu"], "level": False,
     "metric": "entropy_norm.block1", "direction": "less", "smallest_effect": 0.02},
]


def _claimed(run, reference=True, declared=REVIVAL_CLAIMS):
    """`run` with a config that declares the Revival claims (issue 32 §4)."""
    claims = [dict(c, reference=reference) if "interaction" in c else c for c in declared]
    config = {"activations": ["gelu", "relu", "learnable_leaky_relu"], "baseline": "gelu",
              "study": "revival", "data": {"dataset": "python_code"},
              "model": {"layer_norm": run.layer_norm},
              "training": {"epochs": run.config["training"]["epochs"], "learning_rate": 0.003},
              "study_factor": {"setting": "model.layer_norm", "reference": True},
              "claims": claims}
    return dataclasses.replace(run, config=config)


def _labels(runs, reference=True):
    return {lab.claim.name: lab for lab in rclaims.study_labels(
        "revival", [_claimed(r, reference) for r in runs])}


@pytest.mark.parametrize("reference", [True, False])
def test_the_revival_interaction_has_one_sign_whichever_half_started_first(reference):
    """Issue 30 §4: the no-LayerNorm half starting first (as on the old
    page) must not flip the interaction's sign: it is measured from the
    reference level the claim declares."""
    ln = _run("revival-layernorm", True, 0.6, 0.6, relu_gap=0.01)
    no = _run("revival-no-layernorm", False, 0.6, 0.6, relu_gap=-0.05)
    gap = {r.layer_norm: np.array([r.members["relu"][s]["test_loss"]
                                   - r.members["gelu"][s]["test_loss"] for s in range(3)])
           for r in (ln, no)}
    move = gap[not reference].mean() - gap[reference].mean()  # other level - reference
    estimates = [_labels(order, reference)["layernorm-hurts-gelu-more"].estimate
                 for order in ([ln, no], [no, ln])]
    assert estimates == [pytest.approx(move)] * 2


def test_the_relief_claim_is_labelled_from_its_numbers_only():
    runs = [_run("ln", True, 0.60, 0.60), _run("noln", False, 0.90, 0.70)]
    relief = _labels(runs)["relu-relieves-entropy"]
    assert relief.estimate == pytest.approx(-0.20) and relief.seeds == 3
    # Constant per-seed differences: no spread, no t-test can run.
    assert (relief.label, relief.why) == ("not tested", "no test")
    same = [_run("ln", True, 0.80, 0.80), _run("noln", False, 0.80, 0.81)]
    assert _labels(same)["relu-relieves-entropy"].label == "not tested"


def _sloped(run, slopes):
    """`run` with each seed's final slopes (block 0, block 1)."""
    for s, (b0, b1) in enumerate(slopes):
        m = run.members["learnable_leaky_relu"][s]
        m["leaky_slope.block0"], m["leaky_slope.block1"] = b0, b1
    return run


def test_the_slope_is_described_by_a_one_sided_t_test_without_a_label():
    """Issue 30 §6: a test of |slope| below its start (scipy's one-sample t),
    not a cut-off; issue 32: no label outside the declared claims."""
    runs = [_run("ln", True, 0.6, 0.6), _run("noln", False, 0.6, 0.6)]
    slopes = [(0.002, -0.003), (0.004, 0.001), (-0.001, 0.002)]
    long = _sloped(_run("long", False, 0.6, 0.6, epochs=24), slopes)
    finals = [np.mean(np.abs(s)) for s in slopes]
    ref = st.ttest_1samp(finals, published.REVIVAL_INITIAL_SLOPE, alternative="less")
    text = rrev.slope_text(runs, [long])
    assert f"p {rsec.fmt_p(ref.pvalue)} over 3 seeds" in text
    assert not any(w in text for w in ("reproduced", "inconclusive", "not tested"))
    flat = _run("flat", False, 0.6, 0.6, slope=0.001, epochs=24)
    assert "no one-sided t-test can run" in rrev.slope_text(runs, [flat])


def test_entropy_at_its_ceiling_leaves_the_relief_claim_not_tested_with_the_numbers():
    """Issue 30 §6: no-LayerNorm entropies at 0.98-0.99 of the maximum leave
    no room for ReLU's relief: "not tested", never "contradicted"."""
    runs = [_run("ln", True, 0.60, 0.60), _run("noln", False, 0.985, 0.99)]
    for r in runs:  # a spread per seed, so that the test itself could run
        for s, m in r.members["relu"].items():
            m["entropy_norm.block1"] += 0.002 * (s - 1) ** 2
    relief = _labels(runs)["relu-relieves-entropy"]
    assert (relief.label, relief.why) == ("not tested", "ceiling")
    side, mean, bound = relief.detail
    assert side == "a" and mean > 1 - 0.02 and bound == 1.0
    text = "\n".join(rrev.revival_checks({r.layer_norm: r for r in runs}))
    assert "at or above the ceiling 0.95" in text and "reproduced" not in text


def test_the_page_writes_each_papers_claims_table_from_the_claims_only():
    runs = [_claimed(_run("ln", True, 0.60, 0.60, relu_gap=0.01)),
            _claimed(_run("noln", False, 0.985, 0.99, relu_gap=-0.05))]
    page = rp.render({"revival": runs}, {"revival": _study(runs)}, command="kg results x",
                     commit="abc", when="now")
    table = page[page.index("**Claims**"):]
    assert "| layernorm-hurts-gelu-more |" in table and "| relu-relieves-entropy |" in table
    assert "**Verdict.**" not in page and "not reproduced" not in page
    lone = [_claimed(_run("ln", True, 0.6, 0.6), declared=[])]
    bare = rp.render({"revival": lone}, {"revival": _study(lone)}, command="c", commit="c",
                     when="w")
    assert "declares none (`claims:`)" in bare


def test_each_sweep_says_what_it_tuned_and_what_its_seeds_varied():
    tuning = {"parameter": "training.learning_rate", "values": [0.001, 0.003], "seeds": 1,
              "select_by": "val_loss"}
    lm = rp.StoredRun(
        experiment="glu", run_id="g", study="glu-variants", baseline="relu",
        config={"data": {"dataset": "python_code"}, "tuning": tuning,
                "vary": ["init", "order", "split"],
                "training": {"learning_rate": 0.001, "epochs": 2, "steps_per_epoch": 50,
                             "batch_size": 32}},
        members={}, seconds=1.0, tuned={"relu": "0.003", "geglu": "0.001"})
    digits = rp.StoredRun(
        experiment="digits", run_id="d", study="digits", baseline="relu",
        config={"data": {"dataset": "digits"}, "vary": ["init", "split"], "tuning": None,
                "training": {"learning_rate": 0.002, "epochs": 50, "batch_size": 128}},
        members={}, seconds=1.0)
    tuned, fixed = rsec.setup_lines([lm, digits])
    assert "grid [0.001, 0.003], 1 tuning seed per value" in tuned
    assert tuned.startswith("`glu`: 2 epochs of 50 steps, batch 32; ")
    assert "by val_loss" in tuned and "chosen: relu 0.003, geglu 0.001 (" in tuned
    # Both chosen values are the grid's ends: said, since the best may lie outside.
    assert "(every activation's on the grid's edge" in tuned
    assert ("each seed varies init, order, split (`vary`), each from its own derived seed "
            "(the split: which corpus blocks a member holds out)") in tuned
    assert fixed == ("`digits`: 50 epochs, batch 128; not tuned: learning rate 0.002 for "
                     "every activation; each seed varies init, split (`vary`), each from "
                     "its own derived seed.")
    inner = {**tuning, "values": [0.001, 0.002, 0.003]}
    assert rsec._edge_words(inner, {"relu": "0.002", "gelu": "0.003"}) == (
        " (gelu's on the grid's edge: a wider grid might choose a value outside it)")
    assert rsec._edge_words(inner, {"relu": "0.002"}) == ""


def test_each_seed_plan_stands_beside_the_seeds_it_ran():
    runs = [_run("ln", True, 0.60, 0.60), _run("noln", False, 0.90, 0.70)]
    text = "\n".join(rsec.comparison_lines(_study(runs)))
    plans = text.split("Seeds to decide each comparison")[1]
    # 2 sweeps x 2 activations against gelu, each on the 3 seeds _run made.
    assert plans.count("(ran 3)") == 4


def test_the_digits_section_shows_mcnemar_and_the_curves_from_stored_members():
    rng = np.random.default_rng(3)
    members, histories, examples = {}, {}, {}
    for a, shift in (("relu", 0.0), ("gelu", -0.1)):
        members[a] = {}
        for s in range(3):
            curve = [2.0 + shift - 0.3 * e + 0.01 * s for e in range(5)]
            members[a][s] = {"loss": curve[-1], "test_accuracy": 0.9 + 0.01 * s,
                             "test_loss": 0.3 - shift}
            histories[(a, s, "loss")] = curve
            examples[(a, s)] = (rng.random(40) < (0.8 if a == "gelu" else 0.7)).astype(int)
    run = rp.StoredRun(
        experiment="digits", run_id="d", study="digits", baseline="relu",
        config={"vary": ["init", "order", "split"], "training": {"epochs": 5},
                "analysis": {"alpha": 0.05}},
        members=members, seconds=1.0, histories=histories, examples=examples)
    text = "\n".join(rsec.variance_lines(run))
    assert "### Per-example tests (McNemar, test split)" in text
    assert "### Training-loss curves" in text
    b = sum(int(((examples[("gelu", s)] == 1) & (examples[("relu", s)] == 0)).sum())
            for s in range(3))
    c = sum(int(((examples[("gelu", s)] == 0) & (examples[("relu", s)] == 1)).sum())
            for s in range(3))
    assert f"| gelu vs relu | 3 | 120 | {b} | {c} |" in text
    # Nothing kept (a language model's members): no such sections.
    bare = rp.StoredRun(experiment="x", run_id="x", study="digits", baseline="relu",
                        config={}, members={"relu": {0: {}}, "gelu": {0: {}}}, seconds=1.0)
    assert rsec.variance_lines(bare) == []


def test_a_single_sweep_section_refuses_two_sweeps_rather_than_pick_the_first():
    """Issue 30 §4's class: no sweep is read by its position (start order)."""
    from kg_service.errors import ServiceError

    runs = [_run("glu-a", True, 0.6, 0.6), _run("glu-b", True, 0.6, 0.6)]
    for section in (rsec.glu_section, rsec.digits_section):
        with pytest.raises(ServiceError, match="reads one sweep, and the store holds 2"):
            section(runs, _study(runs[:1]))
