"""kg_service.analysis.numbers.spending and .sequential against published
boundaries, scipy and simulation.

Independent references:
- Jennison & Turnbull (2000), "Group Sequential Methods with Applications
  to Clinical Trials", Tables 2.1 and 2.3: the classical Pocock constants
  C_P(K, 0.05) = 2.178, 2.289, 2.361, 2.413 and O'Brien-Fleming constants
  C_B(K, 0.05) = 1.977, 2.004, 2.024, 2.040 (boundaries C_B sqrt(K/k):
  2.797/1.977 for K = 2, 3.471/2.454/2.004 for K = 3) for K = 2..5 equally
  spaced looks, two-sided alpha 0.05.
- DeMets & Lan (1994), "Interim analysis: the alpha spending function
  approach", Stat Med 13:1341, Table I (as gsDesign's sfLDOF/sfLDPocock
  print them): Lan-DeMets spending, 5 equally spaced looks, alpha 0.05
  two-sided: O'Brien-Fleming type 4.877, 3.357, 2.680, 2.290, 2.031;
  Pocock type 2.438, 2.427, 2.410, 2.397, 2.386. Three looks, O'Brien-
  Fleming type: 3.710, 2.511, 1.993.
- Armitage, McPherson & Rowe (1969): five looks each at |z| >= 1.96 reject
  a true null with probability 0.142.
- scipy's one-sample t-tests for each look's p and TOST's two one-sided p.
- Simulation, vectorized over thousands of synthetic sweeps.
"""

import math

import numpy as np
import pytest
from scipy import stats as st

from kg_service.analysis.numbers import sequential
from kg_service.analysis.reports import sequential_report
from kg_service.analysis.numbers import spending as spending_lib

ALPHA = 0.05
LOOKS = tuple(range(4, 41, 4))  # seeds: {start: 4, step: 4, max: 40}


def _equal(k):
    return [i / k for i in range(1, k + 1)]


# --- Boundaries against published tables. -------------------------------------


@pytest.mark.parametrize(
    "k, pocock, obrien_fleming",
    [(2, 2.178, 1.977), (3, 2.289, 2.004), (4, 2.361, 2.024), (5, 2.413, 2.040)],
)
def test_classical_designs_reproduce_jennison_turnbull_constants(k, pocock, obrien_fleming):
    t = _equal(k)
    assert spending_lib.constant_boundaries(t, ALPHA, "pocock") == pytest.approx(
        [pocock] * k, abs=6e-4
    )
    expected = [obrien_fleming * math.sqrt(k / i) for i in range(1, k + 1)]
    assert spending_lib.constant_boundaries(t, ALPHA, "obrien_fleming") == pytest.approx(
        expected, abs=1.5e-3
    )


def test_brief_obrien_fleming_boundaries_for_two_and_three_looks():
    assert spending_lib.constant_boundaries(_equal(2), ALPHA, "obf") == pytest.approx(
        [2.797, 1.977], abs=6e-4
    )
    assert spending_lib.constant_boundaries(_equal(3), ALPHA, "obf") == pytest.approx(
        [3.471, 2.454, 2.004], abs=6e-4
    )


@pytest.mark.parametrize(
    "k, spending, expected",
    [
        (5, "obrien_fleming", [4.877, 3.357, 2.680, 2.290, 2.031]),
        (5, "pocock", [2.438, 2.427, 2.410, 2.397, 2.386]),
        (3, "obrien_fleming", [3.710, 2.511, 1.993]),
    ],
)
def test_spending_boundaries_reproduce_demets_lan_1994(k, spending, expected):
    assert spending_lib.boundaries(_equal(k), ALPHA, spending) == pytest.approx(
        expected, abs=6e-4
    )


def test_five_looks_at_1_96_reject_a_true_null_fourteen_percent_of_the_time():
    chances = spending_lib.crossing_chances([1.96] * 5, _equal(5))
    assert sum(chances) == pytest.approx(0.142, abs=5e-4)
    assert chances[0] == pytest.approx(2 * st.norm.sf(1.96), abs=1e-9)  # the first look alone


@pytest.mark.parametrize("spending", sorted(spending_lib.SPENDING))
def test_boundaries_at_unequal_looks_spend_alpha_as_a_brownian_simulation_finds(spending):
    # Unequal looks (no published table): the cumulative crossing rate of
    # simulated z paths at each look equals the spending function there.
    fractions = np.array([4, 12, 20, 40]) / 40
    c = spending_lib.boundaries(fractions, ALPHA, spending)
    rng = np.random.default_rng(7)
    paths = 200_000
    steps = rng.standard_normal((paths, fractions.size)) * np.sqrt(
        np.diff(np.concatenate([[0.0], fractions]))
    )
    z = np.cumsum(steps, axis=1) / np.sqrt(fractions)
    crossed = np.maximum.accumulate(np.abs(z) >= np.array(c), axis=1)
    tolerance = 4 * math.sqrt(ALPHA * (1 - ALPHA) / paths)
    expected = spending_lib.SPENDING[spending](fractions, ALPHA)
    np.testing.assert_allclose(crossed.mean(axis=0), expected, atol=tolerance)


def test_obrien_fleming_spends_little_early_and_pocock_evenly():
    of = sequential.plan(LOOKS, 40, ALPHA, "obrien_fleming").nominal_alpha
    po = sequential.plan(LOOKS, 40, ALPHA, "pocock").nominal_alpha
    assert of[0] < 1e-3 < po[0] and of[-1] > po[-1]
    # Calibrated to t, yet close to the z levels at 40 seeds.
    for levels, spending in ((of, "obrien_fleming"), (po, "pocock")):
        z = sequential.plan(LOOKS, 40, ALPHA, spending).z[-1]
        assert levels[-1] == pytest.approx(2 * st.norm.sf(z), rel=0.1)


def test_bad_looks_are_refused():
    with pytest.raises(ValueError, match="increase"):
        spending_lib.boundaries([0.5, 0.5])
    with pytest.raises(ValueError, match="spending"):
        spending_lib.boundaries([1.0], spending="haybittle")
    with pytest.raises(ValueError, match="look counts"):
        sequential.plan((1, 4), 4)
    with pytest.raises(ValueError, match="look counts"):
        sequential.plan((4, 8), 6)


# --- One look against scipy. ------------------------------------------------


def test_look_p_values_are_scipys_t_test_and_two_one_sided_tests():
    d = np.array([0.3, -0.1, 0.25, 0.05, 0.4, 0.1])
    margin = 0.5
    p, p_tost = sequential.look_tests(d.mean(), d.std(ddof=1), d.size, margin)
    assert float(p) == pytest.approx(st.ttest_1samp(d, 0.0).pvalue)
    lower = st.ttest_1samp(d, -margin, alternative="greater").pvalue
    upper = st.ttest_1samp(d, margin, alternative="less").pvalue
    assert float(p_tost) == pytest.approx(max(lower, upper))


def test_a_single_look_is_the_fixed_t_test_and_tost_at_alpha():
    design = sequential.plan((10,), 10)
    # Calibrated by simulation: alpha within its Monte Carlo error.
    assert design.nominal_alpha[0] == pytest.approx(ALPHA, abs=2e-3)
    assert design.equivalence_alpha[0] == pytest.approx(ALPHA, abs=2e-3)
    assert design.z[0] == pytest.approx(st.norm.isf(ALPHA / 2))


def test_constant_differences_decide_without_a_variance():
    design = sequential.plan((4,), 4)
    assert sequential.decide_look([0.01] * 4, design, 0).decision == sequential.BETTER
    assert sequential.decide_look([0.0] * 4, design, 0, margin=0.1).decision == (
        sequential.EQUIVALENT
    )
    assert sequential.decide_look([0.0] * 4, design, 0).decision == ""


def test_a_comparison_stops_at_its_first_decision_and_keeps_it():
    strong = [0.9, 1.1, 1.0, 0.95, 1.05, 1.0, 0.98, 1.02]
    result = sequential.sequential_test([strong[:4], strong], n_max=8)
    assert result.decided_at == 0 and result.decision == sequential.BETTER
    assert len(result.looks) == 1  # nothing looked at after deciding


def test_a_look_that_adds_no_finite_pair_is_merged_into_the_one_before():
    nan = math.nan
    d = [0.1, -0.2, 0.05, 0.1]
    result = sequential.sequential_test([d, d + [nan, nan], d + [nan, nan, 0.0, 0.1]], 8)
    assert [look.index for look in result.looks] == [0, 2]
    assert [look.n for look in result.looks] == [4, 6]
    assert result.design.counts == (4, 6) and not result.decided


# --- Thousands of synthetic sweeps. -------------------------------------------


def _simulate(delta, spending, margin=None, design=None, sims=20_000, seed=1):
    """(decision, seeds used) of `sims` sequential sweeps of one comparison
    with N(delta, 1) paired differences, looks at LOOKS, vectorized."""
    rng = np.random.default_rng(seed)
    d = rng.normal(delta, 1.0, (sims, LOOKS[-1]))
    design = design or sequential.plan(LOOKS, LOOKS[-1], ALPHA, spending)
    total, squares = np.cumsum(d, axis=1), np.cumsum(d * d, axis=1)
    decision = np.full(sims, "", dtype=object)
    used = np.full(sims, LOOKS[-1])
    for k, n in enumerate(LOOKS):
        mean = total[:, n - 1] / n
        sd = np.sqrt(np.maximum(squares[:, n - 1] - n * mean**2, 0.0) / (n - 1))
        now = sequential.decisions(
            mean, sd, np.full(sims, n), design.nominal_alpha[k],
            design.equivalence_alpha[k], margin,
        )
        new = (decision == "") & (now != "")
        decision[new], used[new] = now[new], n
    return decision, used


def _error(rate, sims=20_000):
    return 3 * math.sqrt(rate * (1 - rate) / sims)  # three Monte Carlo errors


@pytest.mark.parametrize("spending", sorted(spending_lib.SPENDING))
def test_under_no_difference_the_false_positive_rate_stays_at_alpha(spending):
    decision, _ = _simulate(0.0, spending, margin=0.5)
    rate = np.mean((decision == sequential.BETTER) | (decision == sequential.WORSE))
    assert rate <= ALPHA + _error(ALPHA)
    assert rate >= ALPHA - 2 * _error(ALPHA)  # and spends it: not needlessly strict


def test_nominal_z_levels_alone_would_let_too_many_false_positives_through():
    # Why the levels are calibrated to t: 2 (1 - Phi(c_k)) at 4, 8, ... seeds.
    calibrated = sequential.plan(LOOKS, 40, ALPHA, "pocock")
    plain = calibrated.__class__(
        **{**calibrated.__dict__,
           "nominal_alpha": tuple(2 * st.norm.sf(c) for c in calibrated.z)}
    )
    decision, _ = _simulate(0.0, "pocock", design=plain, sims=40_000, seed=3)
    rate = np.mean(decision != "")
    assert rate > ALPHA + _error(ALPHA, 40_000)


@pytest.mark.parametrize("spending", sorted(spending_lib.SPENDING))
def test_at_the_margin_a_false_equivalence_stays_at_alpha(spending):
    margin = 0.5
    decision, _ = _simulate(margin, spending, margin=margin)
    assert np.mean(decision == sequential.EQUIVALENT) <= ALPHA + _error(ALPHA)


@pytest.mark.parametrize("spending", sorted(spending_lib.SPENDING))
def test_with_a_true_effect_it_stops_early_and_still_finds_it(spending):
    decision, used = _simulate(0.6, spending)
    assert np.mean(decision == sequential.BETTER) > 0.85
    assert used.mean() < 0.75 * LOOKS[-1]  # the fixed design takes all 40


def test_with_a_margin_and_no_difference_most_sweeps_stop_as_equivalent():
    decision, used = _simulate(0.0, "obrien_fleming", margin=0.5)
    assert np.mean(decision == sequential.EQUIVALENT) > 0.7
    assert used.mean() < LOOKS[-1]


# --- A sweep's looks, and their words. ---------------------------------------


def _values(means, sd=0.001, seeds=8, seed=4):
    rng = np.random.default_rng(seed)
    return {(a, s): m + rng.normal(0.0, sd) for a, m in means.items() for s in range(seeds)}


def test_a_sweeps_looks_orient_a_lower_is_better_metric_and_split_alpha():
    # test_loss: gelu's loss is lower, so gelu is better; two comparisons
    # share alpha (Bonferroni).
    values = _values({"relu": 0.30, "gelu": 0.25, "swish": 0.30})
    looks = sequential.compare_looks(
        values, "relu", (4, 8), 8, metric="test_loss", higher_is_better=False,
        spending="pocock", margin=0.01,
    )
    assert looks.alpha == pytest.approx(ALPHA / 2) and looks.decided
    decisions = {a: t.decision for a, t in looks.comparisons}
    assert decisions == {"gelu": sequential.BETTER, "swish": sequential.EQUIVALENT}
    lines = sequential_report.sequential_lines(looks)
    assert lines[0].startswith("Sequential seeds: 2 looks, 8 of at most 8 seeds; Pocock-type")
    assert "0.05 over 2 comparisons, 0.025 each (Bonferroni)" in lines[0]
    assert lines[1].startswith("Nominal alpha per look (two-sided paired t; each TOST side): 1: 4 seeds")
    gelu = next(line for line in lines if line.startswith("gelu vs relu"))
    assert "better at look 1 (4 seeds; p=" in gelu and "test loss" in gelu
    # The decision, then the adjusted estimate and the repeated CI in the raw
    # sign; the naive mean only labelled as such (issue 32 §2).
    assert "median-unbiased estimate -0.05" in gelu and "97.5% repeated CI -0.05" in gelu
    assert "(naive mean -0.05" in gelu
    summary = sequential.looks_summary(looks)
    assert summary["comparisons"]["gelu"]["decision"] == "better"
    assert summary["nominal_alpha_per_look"] == list(looks.design.nominal_alpha)
    assert sequential.looks_metrics(looks)["sequential.looks"] == 2


def test_an_undecided_comparison_is_inconclusive_in_words_and_numbers():
    values = _values({"relu": 0.9, "gelu": 0.9}, sd=0.02, seeds=4)
    looks = sequential.compare_looks(values, "relu", (4,), 40)
    assert not looks.decided
    assert sequential.looks_summary(looks)["comparisons"]["gelu"]["decision"] == "inconclusive"
    assert sequential.looks_metrics(looks)["sequential.gelu.decided_at_look"] == 0
    line = sequential_report.look_line(looks, 8)
    assert line.startswith("Look 1 at 4 seeds: gelu vs relu: inconclusive after 4 paired seeds")
    assert line.endswith("Training seeds 4..7.")


# --- A sequential sweep states its sequential decision only (issue 30 §7). ---


def test_a_sequential_sweep_carries_no_fixed_design_verdict_anywhere(tmp_path):
    """8 seeds where the fixed-design test over all of them says better
    (paired t p < 0.01) but the looks left it undecided: the terminal table,
    report.md, summary.json, the registry sentence and the tracked metrics
    and tags all say the sequential decision (inconclusive), and carry no
    Holm p, pair verdict or fixed-design interval."""
    import json

    from kg_service.analysis.numbers import comparisons
    from kg_service.analysis.numbers import plain
    from kg_service.analysis.reports import report
    from kg_service.analysis.words import tables
    from kg_service.analysis.words import verdict_wording
    from tests.service.analysis.members import member

    rng = np.random.default_rng(1)
    base = 0.90 + rng.normal(0, 0.004, 8)
    gelu = base + 0.006 + rng.normal(0, 0.003, 8)
    fixed = st.ttest_rel(gelu, base)
    assert fixed.pvalue < 0.01 and gelu.mean() > base.mean()  # fixed design: better
    results = [member(a, s, float(v)) for a, vals in (("relu", base), ("gelu", gelu))
               for s, v in enumerate(vals)]
    assert comparisons.summarize(results, "relu").comparisons[0].verdict.outcome == "better"
    summary = comparisons.summarize(results, "relu", margin=0.001,
                                    sequential={"gelu": ""})  # the looks: undecided
    (c,) = summary.comparisons
    assert c.verdict.outcome == "inconclusive" and math.isnan(c.p_holm) and not c.significant
    assert summary.pairs == () and summary.contrasts == () and c.plan is None
    table = tables.format_table(summary)
    (row,) = [line for line in table.splitlines() if line.startswith("gelu ")]
    assert "inconclusive" in row and "better" not in row and "is better than" not in table
    assert plain.verdict_tags(summary) == {"verdict.gelu": "inconclusive"}
    tracked = plain.flat_metrics(summary)
    assert not any(k.endswith(("p_holm", "_ci_low", "_ci_high", "_p_t", "_decision_low"))
                   for k in tracked if k.startswith("gelu.vs_baseline")), tracked
    words = verdict_wording.comparison_sentence(summary, "gelu")
    assert "inconclusive by the sequential design" in words and "better" not in words
    assert "Holm" not in verdict_wording.comparison_sentence(summary, "relu")
    paths = report.write_report(summary, results, tmp_path, title="t", figures=())
    md, data = paths[0].read_text(), json.loads(paths[1].read_text())
    assert "is better than" not in md and "Verdict: the sequential design's decision" in md
    assert "rejects at" not in md.split("## Training-loss curves")[0]
    assert data["comparisons"]["gelu"]["verdict_numbers"]["outcome"] == "inconclusive"
    assert data["comparisons"]["gelu"]["p_holm"] is None
    assert data["pairs"] in ([], {}) and data["contrasts"] in ([], {})
