"""Three-way verdicts, seed plans and failure counts (issue 18), against
statsmodels, scipy and simulation: never against the code under test."""

import math
import types

import numpy as np
import pytest
from scipy import stats as st
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower
from statsmodels.stats.weightstats import ttost_paired

from kg_service.analysis.numbers import comparisons
from kg_service.analysis.numbers import decisions
from kg_service.analysis.numbers import planning
from kg_service.analysis.numbers import resampling
from kg_service.analysis.numbers import multiplicity
from kg_service.analysis.numbers import stats
from kg_service.analysis.words import tables
from kg_service.analysis.words import verdict_wording
from kg_service.analysis.words import wording
from kg_service.results import MemberResult
from tests.service.analysis import scipy_reference
from tests.service.analysis.members import sweep

RNG = np.random.default_rng(18)


# --- TOST and the intervals that decide. --------------------------------------------


@pytest.mark.parametrize("shift, margin", [(0.0, 0.3), (0.1, 0.3), (0.25, 0.2), (-0.05, 0.1)])
def test_tost_p_matches_statsmodels_ttost_paired(shift, margin):
    x = RNG.normal(0.0, 0.2, 7)
    y = x - shift + RNG.normal(0.0, 0.1, 7)
    p, _, _ = ttost_paired(x, y, -margin, margin)
    assert stats.tost_p(x - y, margin) == pytest.approx(float(p), rel=1e-10)


def test_tost_rejects_exactly_when_the_one_minus_two_alpha_interval_is_inside_the_margin():
    for _ in range(300):
        d = RNG.normal(RNG.uniform(-0.3, 0.3), RNG.uniform(0.05, 0.5), RNG.integers(3, 12))
        low, high = stats.t_interval(d, 0.90)
        assert (stats.tost_p(d, 0.3) < 0.05) == (-0.3 < low and high < 0.3)


def test_holm_levels_reject_exactly_what_statsmodels_holm_rejects():
    for _ in range(10):  # statsmodels' multipletests is slow to call
        p = RNG.uniform(0, 0.08, RNG.integers(1, 8))
        reject, _, _, _ = multipletests(p, alpha=0.05, method="holm")
        levels = multiplicity.holm_levels(p, 0.05)
        assert [bool(pi < li) for pi, li in zip(p, levels)] == [bool(r) for r in reject]


def test_a_verdict_and_its_interval_never_disagree():
    """Better/worse iff the deciding interval excludes 0 on that side;
    equivalent iff it lies inside the margin (random families of 1-6)."""
    for _ in range(60):
        m = int(RNG.integers(1, 7))
        tests = [stats.paired_test(RNG.normal(RNG.uniform(-0.02, 0.02), 0.01,
                                              RNG.integers(3, 10)))
                 for _ in range(m)]
        for t, v in zip(tests, decisions.decide(tests, margin=0.01)):
            low, high = v.interval
            if v.outcome == decisions.BETTER:
                assert low > 0
            elif v.outcome == decisions.WORSE:
                assert high < 0
            elif v.outcome == decisions.EQUIVALENT:
                assert -0.01 < low and high < 0.01
            else:
                assert v.outcome == decisions.INCONCLUSIVE
                assert not (-0.01 < low and high < 0.01)
                sup_low, sup_high = v.superiority
                assert sup_low <= 0 <= sup_high


def test_lower_is_better_metric_calls_a_negative_difference_better():
    t = stats.paired_test([-0.03, -0.035, -0.031, -0.029, -0.033])
    (v,) = decisions.decide([t], margin=0.01, higher_is_better=False)
    assert v.outcome == decisions.BETTER and v.interval[1] < 0


def test_constant_differences_are_decided_by_exact_wilcoxon_with_no_interval():
    # Six equal differences: the exact Wilcoxon p is 2/2^6 (a difference),
    # and each one-sided test of TOST 1/2^6 (inside the margin): a real
    # difference too small to matter.
    (v,) = decisions.decide([stats.paired_test([0.001] * 6)], margin=0.003)
    assert v.outcome == decisions.BETTER and v.within_margin
    assert v.p_equivalence == pytest.approx(
        st.wilcoxon(np.full(6, 0.004), alternative="greater").pvalue)
    assert all(math.isnan(x) for x in v.interval)
    (v,) = decisions.decide([stats.paired_test([0.0025] * 6)], margin=None)
    assert v.outcome == decisions.BETTER and math.isnan(v.interval[0])


# --- d_z's interval and Wilcoxon's floor. --------------------------------------------


def test_dz_interval_covers_the_true_effect_95_percent_of_the_time():
    n, delta, reps = 8, 0.8, 400
    hits = 0
    for _ in range(reps):
        low, high = stats.dz_interval(RNG.normal(delta, 1.0, n), 0.95)
        hits += low <= delta <= high
    # Binomial sd at 0.95 over 400: 1.1 pp; 3.5 sd either side.
    assert 0.91 <= hits / reps <= 0.99


@pytest.mark.parametrize("n, shift, confidence", [(2, 0.3, 0.95), (5, -1.2, 0.9), (12, 0.05, 0.99),
                                                  (30, 2.5, 0.95)])
def test_dz_interval_equals_scipy_stats_nct_inversion_bit_for_bit(n, shift, confidence):
    d = np.random.default_rng(n).normal(shift, 1.0, n)
    assert stats.dz_interval(d, confidence) == scipy_reference.dz_interval(d, confidence)


def test_wilcoxon_floor_is_where_scipy_first_reaches_alpha():
    for alpha in (0.05, 0.01, 0.1):
        reachable = [n for n in range(2, 12)
                     if st.wilcoxon(np.arange(1.0, n + 1)).pvalue < alpha]
        assert stats.wilcoxon_floor(alpha) == reachable[0]


def test_wilcoxon_is_not_shown_below_its_floor_and_the_report_says_why():
    t = stats.paired_test([0.01, 0.02, 0.03, 0.04, 0.05])
    assert wording.statistic_text("p_wilcoxon", t, 0.05) == "n/a (n<6)"
    assert "below n=6" in wording.wilcoxon_floor_note(0.05)
    assert "not Holm-adjusted" in wording.wilcoxon_floor_note(0.05)


# --- Seed plans. -------------------------------------------------------------------------


@pytest.mark.parametrize("d_z", [0.2, 0.5, 0.8, 1.5, -0.4])
def test_superiority_seeds_match_statsmodels_ttestpower(d_z):
    n = TTestPower().solve_power(abs(d_z), alpha=0.05, power=0.8, alternative="two-sided")
    assert planning.superiority_seeds(d_z, 0.05, 0.8) == max(2, math.ceil(n))
    assert planning.t_power(12, d_z, 0.05) == pytest.approx(
        TTestPower().power(abs(d_z), 12, 0.05), abs=1e-9)


@pytest.mark.parametrize("n, mean, sd, margin", [(8, 0.0, 1.0, 1.0), (15, 0.002, 0.004, 0.003),
                                                 (30, -0.1, 0.5, 0.35)])
def test_tost_power_matches_a_simulation(n, mean, sd, margin):
    reps = 40_000
    d = RNG.normal(mean, sd, (reps, n))
    m, se = d.mean(1), d.std(1, ddof=1) / math.sqrt(n)
    c = st.t.ppf(0.95, n - 1)
    simulated = np.mean((m - c * se > -margin) & (m + c * se < margin))
    # Monte Carlo sd at most 0.0025.
    assert planning.tost_power(n, mean, sd, margin, 0.05) == pytest.approx(simulated, abs=0.01)


def test_superiority_plan_reaches_its_power_in_simulation_and_one_fewer_does_not():
    d_z = 0.9
    n = planning.superiority_seeds(d_z, 0.05, 0.8)
    reps = 40_000

    def rejected(k):
        d = RNG.normal(d_z, 1.0, (reps, k))
        t = d.mean(1) / (d.std(1, ddof=1) / math.sqrt(k))
        return np.mean(np.abs(t) > st.t.ppf(0.975, k - 1))

    assert rejected(n) >= 0.8 - 0.01 and rejected(n - 1) < 0.8 + 0.01


@pytest.mark.parametrize("n, mean, sd, margin, alpha", [
    (2, 0.0, 1.0, 0.8, 0.05), (3, 0.001, 0.004, 0.01, 0.05 / 7), (5, -0.004, 0.01, 0.005, 0.05),
    (17, 0.3, 1.0, 0.8, 0.05 / 3), (64, 0.002, 0.01, 0.01, 0.01), (5000, 0.0, 0.002, 0.005, 0.05),
])
def test_tost_power_equals_the_scipy_stats_integrand_bit_for_bit(n, mean, sd, margin, alpha):
    assert planning.tost_power(n, mean, sd, margin, alpha) == scipy_reference.tost_power(
        n, mean, sd, margin, alpha)


@pytest.mark.parametrize("mean, sd, margin, alpha, power", [
    (0.0, 1.0, 0.8, 0.05, 0.8), (0.002, 0.004, 0.01, 0.05 / 7, 0.8),
    (-0.003, 0.002, 0.005, 0.05, 0.9), (0.1, 0.5, 0.9, 0.01, 0.8),
    (0.0005, 0.01, 0.01, 0.05 / 28, 0.95),
])
def test_equivalence_seeds_are_the_least_n_the_reference_power_reaches(mean, sd, margin, alpha,
                                                                        power):
    """The plan equals the old algorithm's, the least n >= 2 whose power
    (the reference integrand's) reaches `power`: n - 1 seeds fall short."""
    n = planning.equivalence_seeds(mean, sd, margin, alpha, power)
    assert n > 2 and scipy_reference.tost_power(n, mean, sd, margin, alpha) >= power
    assert scipy_reference.tost_power(n - 1, mean, sd, margin, alpha) < power


def test_equivalence_cannot_be_planned_when_the_mean_is_outside_the_margin():
    assert planning.equivalence_seeds(0.004, 0.002, 0.003) is None
    p = planning.plan([0.001, 0.002, -0.001, 0.0, 0.003], margin=0.003, family=3)
    assert p.alpha == pytest.approx(0.05 / 3) and p.decide == min(p.superiority, p.equivalence)


# --- Summaries: verdicts, plans and failures reach the words. -----------------------


def _diverged(activation, seed):
    h = {"loss": [math.nan], "accuracy": [0.5], "val_loss": [math.nan], "val_accuracy": [0.5]}
    return MemberResult(activation, seed, h, math.nan, math.nan, None, failure="loss nan",
                        failed_epoch=1)


def test_diverged_members_are_counted_compared_and_left_out_of_the_pairs():
    relu = [0.950, 0.9425, 0.955, 0.9475, 0.960, 0.945]
    gelu = [0.9575, 0.950, 0.9575, 0.955]
    results = sweep({"relu": relu, "gelu": gelu}) + [_diverged("gelu", 4), _diverged("gelu", 5)]
    s = comparisons.summarize(results, "relu", margin=0.003)
    gelu_summary, c = s.activation("gelu"), s.comparison("gelu")
    assert (gelu_summary.n, gelu_summary.failed, gelu_summary.attempted) == (4, 2, 6)
    assert c.paired.n == 4
    # Fisher's exact test of 2/6 vs 0/6, by the hypergeometric distribution:
    # tables as or less likely than the observed one, both tails.
    h = st.hypergeom(12, 2, 6)
    p_ref = sum(h.pmf(k) for k in range(3) if h.pmf(k) <= h.pmf(2) + 1e-12)
    assert c.failures_p == pytest.approx(p_ref)
    text = "\n".join([verdict_wording.comparison_verdict(s, c), *verdict_wording.failure_lines(s)])
    assert "4 pairs (2 diverged members left out)" in text
    assert "gelu 2/6 diverged, relu 0/6" in text
    assert "failed" in tables.table_rows(s)[0]


def test_inconclusive_never_reads_as_no_difference_and_comes_with_a_seed_plan():
    relu = [0.950, 0.9425, 0.955, 0.9475, 0.960]
    gelu = [0.9525, 0.9425, 0.9500, 0.9500, 0.9625]
    s = comparisons.summarize(sweep({"relu": relu, "gelu": gelu}), "relu", margin=0.003)
    c = s.comparison("gelu")
    assert c.verdict.outcome == decisions.INCONCLUSIVE
    text = tables.format_table(s)
    assert "no difference" not in text.replace("no difference is shown", "")
    assert "no significant difference" not in text
    (line,) = verdict_wording.plan_lines(s)
    assert line.startswith("to decide gelu vs relu within ±0.30 pp: ~")
    assert line.endswith("this sweep had 5")
    assert f"~{c.plan.decide} seeds" in line


# --- Few-run statistics (issue 18 item 4). -----------------------------------------------


def test_bootstrap_interval_matches_scipy_percentile_bootstrap():
    d = RNG.normal(0.004, 0.006, 8)
    ref = st.bootstrap((d,), np.mean, confidence_level=0.95, n_resamples=20_000,
                       method="percentile", random_state=1).confidence_interval
    low, high = resampling.bootstrap_interval(d, 0.95)
    # Two Monte Carlo runs of the same interval: agree to a few % of its width.
    width = ref.high - ref.low
    assert low == pytest.approx(ref.low, abs=0.05 * width)
    assert high == pytest.approx(ref.high, abs=0.05 * width)
    assert all(math.isnan(v) for v in resampling.bootstrap_interval([0.0025] * 6))


def test_probability_of_improvement_is_mann_whitney_u_over_nm():
    x, y = RNG.normal(0.95, 0.01, 7).round(3), RNG.normal(0.948, 0.01, 9).round(3)
    u = st.mannwhitneyu(x, y).statistic
    assert resampling.probability_of_improvement(x, y) == pytest.approx(u / (7 * 9))
    assert resampling.probability_of_improvement(-x, -y, higher_is_better=False) == (
        pytest.approx(u / (7 * 9)))


def test_aso_matches_deepsig():
    deepsig = pytest.importorskip("deepsig")  # the reference; a test-only dependency
    from deepsig.aso import compute_violation_ratio

    for shift in (0.0, 0.003, 0.01):
        a, b = RNG.normal(0.95 + shift, 0.005, 8), RNG.normal(0.95, 0.005, 8)
        assert float(resampling.violation_ratio(a, b)) == pytest.approx(
            compute_violation_ratio(a, b, dt=0.005))
    # deepsig's bootstrap loop takes seconds: one epsilon_min, at 300 draws.
    # Both estimate sigma from their own draws: they agree to Monte Carlo noise.
    ref = deepsig.aso(a, b, seed=7, show_progress=False, num_bootstrap_iterations=300)
    assert resampling.aso_epsilon(a, b) == pytest.approx(ref, abs=0.06)


@pytest.mark.parametrize("k", [2, 3, 7])
def test_aso_over_k_comparisons_is_at_bonferronis_level_not_deepsigs(k):
    """Issue 30 §9: z at 1 - alpha/k (k = 7: 0.993), not deepsig's
    confidence + alpha/k (0.957). epsilon = ratio + sigma z, so two
    one-comparison values give ratio and sigma, and scipy's z the rest."""
    rng = np.random.default_rng(11)
    a, b = rng.normal(0.95, 0.01, 8), rng.normal(0.95, 0.01, 8)
    e1, e2 = (resampling.aso_epsilon(a, b, c, resamples=400) for c in (0.95, 0.99))
    z1, z2 = st.norm.isf(0.05), st.norm.isf(0.01)
    sigma = (e2 - e1) / (z2 - z1)
    ratio = e1 - sigma * z1
    assert 0 < ratio < 1 and sigma > 0
    want = ratio + sigma * st.norm.isf(0.05 / k)
    assert 0 < want < 1
    got = resampling.aso_epsilon(a, b, 0.95, comparisons=k, resamples=400)
    assert got == pytest.approx(want, abs=1e-9)


def test_rank_first_is_sure_of_a_dominant_winner_and_split_between_twins():
    seeds = range(8)
    base = RNG.normal(0.95, 0.01, 8)
    table = {"relu": dict(zip(seeds, base)), "gelu": dict(zip(seeds, base + 0.02)),
             "elu": dict(zip(seeds, base - 0.02))}
    assert resampling.rank_first(table) == {"relu": 0.0, "gelu": 1.0, "elu": 0.0}
    assert resampling.rank_first(table, higher_is_better=False)["elu"] == 1.0
    twins = {"a": dict(zip(seeds, base)), "b": dict(zip(seeds, base))}
    assert resampling.rank_first(twins) == {"a": 0.5, "b": 0.5}


def test_all_pairs_and_contrasts_are_paired_t_tests_holm_over_their_family():
    accs = {"relu": [0.950, 0.9425, 0.955, 0.9475, 0.960, 0.945],
            "gelu": [0.957, 0.950, 0.957, 0.955, 0.965, 0.950],
            "geglu": [0.960, 0.951, 0.962, 0.957, 0.970, 0.952]}
    contrast = types.SimpleNamespace(name="gated", plus=("geglu",), minus=("relu", "gelu"))
    s = comparisons.summarize(sweep(accs), "relu", margin=0.003, contrasts=[contrast])
    a = {k: np.array(v) for k, v in accs.items()}
    raw = [st.ttest_rel(a["gelu"], a["relu"]).pvalue, st.ttest_rel(a["geglu"], a["relu"]).pvalue,
           st.ttest_rel(a["geglu"], a["gelu"]).pvalue]
    _, adjusted, _, _ = multipletests(raw, method="holm")
    assert [pc.name for pc in s.pairs] == ["gelu vs relu", "geglu vs relu", "geglu vs gelu"]
    assert [pc.verdict.p_holm for pc in s.pairs] == pytest.approx(list(adjusted))
    (c,) = s.contrasts
    ref = st.ttest_1samp(a["geglu"] - (a["relu"] + a["gelu"]) / 2, 0.0)
    assert c.paired.p_value == pytest.approx(ref.pvalue) and c.verdict.outcome == decisions.BETTER
    (line,) = verdict_wording.contrast_lines(s)
    assert line.startswith("gated: geglu is better than mean(relu, gelu) by +")


def test_constant_differences_cannot_be_planned_even_with_float_round_off():
    # 0.9325 - 0.93 and 0.94 - 0.9375 differ in the 17th digit, not in fact.
    d = [0.9325 - 0.93, 0.94 - 0.9375, 0.9525 - 0.95]
    p = planning.plan(d, margin=0.003)
    assert p.superiority is None and p.equivalence is None and p.decide is None
