"""kg_service.analysis.numbers.stats against scipy and hand-computed references.

Independent references: Student's sleep data (Cushny & Peebles 1905) as
paired differences, whose paired t-test R reports as t = 4.0621, df = 9,
p = 0.002833, 95% CI 0.7001142 to 2.4598858 (`t.test(..., paired=TRUE)`);
small exact Wilcoxon and Holm examples worked by hand.
"""

import json
import math
import warnings

import numpy as np
import pytest
from scipy import stats as st

from kg_service.analysis.numbers import comparisons
from kg_service.analysis.numbers import plain
from kg_service.analysis.numbers import multiplicity
from kg_service.analysis.numbers import stats
from kg_service.analysis.words import tables
from kg_service.analysis.words import verdict_wording
from kg_service.analysis.words import wording
from kg_service.errors import ServiceError
from tests.service.analysis.members import member
from tests.service.analysis.members import sweep

SLEEP_DIFFS = [1.2, 2.4, 1.3, 1.3, 0.0, 1.0, 1.8, 0.8, 4.6, 1.4]


# --- estimate / paired_test / holm against references. -------------------------


def test_estimate_matches_scipy_t_interval_and_ddof1_std():
    x = [0.91, 0.93, 0.92, 0.95, 0.90]
    e = stats.estimate(x, 0.95)
    low, high = st.t.interval(0.95, len(x) - 1, loc=np.mean(x), scale=st.sem(x))
    assert e.n == 5
    assert e.mean == pytest.approx(np.mean(x))
    assert e.std == pytest.approx(np.std(x, ddof=1))
    assert (e.ci_low, e.ci_high) == pytest.approx((low, high))


def test_estimate_of_one_value_has_mean_but_no_spread():
    e = stats.estimate([0.9])
    assert e.mean == 0.9 and math.isnan(e.std) and math.isnan(e.ci_low)


def test_paired_test_reproduces_student_sleep_data_published_values():
    t = stats.paired_test(SLEEP_DIFFS)
    assert t.n == 10
    assert t.mean_diff == pytest.approx(1.58)
    assert t.t_statistic == pytest.approx(4.0621, abs=1e-4)
    assert t.p_t == pytest.approx(0.002833, abs=1e-6)
    assert (t.ci_low, t.ci_high) == pytest.approx((0.7001142, 2.4598858), abs=1e-7)
    assert t.statistics["d_z"] == pytest.approx(1.58 / np.std(SLEEP_DIFFS, ddof=1))
    assert t.statistics["d_z"] == pytest.approx(1.2846, abs=1e-4)
    assert t.test == "paired t" and t.p_value == t.p_t


def test_paired_test_agrees_with_scipy_ttest_rel_and_wilcoxon():
    rng = np.random.default_rng(1)
    a = rng.normal(0.95, 0.01, 12)
    b = a + rng.normal(0.004, 0.005, 12)
    t = stats.paired_test(b - a)
    ref = st.ttest_rel(b, a)
    assert t.t_statistic == pytest.approx(ref.statistic)
    assert t.p_t == pytest.approx(ref.pvalue)
    ci = ref.confidence_interval(0.95)
    assert (t.ci_low, t.ci_high) == pytest.approx((ci.low, ci.high))
    assert t.statistics["p_wilcoxon"] == pytest.approx(st.wilcoxon(b, a).pvalue)


def test_wilcoxon_exact_hand_example_all_positive_five_pairs():
    # All 5 signs positive: only 1 of 2^5 sign patterns is as extreme per
    # side, so the two-sided exact p = 2/32.
    t = stats.paired_test([0.1, 0.2, 0.3, 0.4, 0.5])
    assert t.statistics["p_wilcoxon"] == pytest.approx(0.0625)


def test_paired_t_hand_example_one_to_five():
    # mean 3, sd sqrt(2.5), t = 3 / (sqrt(2.5)/sqrt(5)) = 3*sqrt(2), df 4.
    t = stats.paired_test([1.0, 2.0, 3.0, 4.0, 5.0])
    assert t.t_statistic == pytest.approx(3 * math.sqrt(2))
    assert t.p_t == pytest.approx(2 * st.t.sf(3 * math.sqrt(2), 4))
    assert t.statistics["d_z"] == pytest.approx(3 / math.sqrt(2.5))


def test_all_zero_differences_give_p_one_no_interval_and_no_warnings():
    # No spread to estimate: the t-test and its interval are undefined (issue
    # 18: never a zero-width interval), and the exact Wilcoxon p is 1.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = stats.paired_test([0.0, 0.0, 0.0, 0.0])
    assert math.isnan(t.p_t) and t.statistics["p_wilcoxon"] == 1.0 and t.p_value == 1.0
    assert t.statistics["d_z"] == 0.0 and t.mean_diff == 0.0 and t.degenerate
    assert math.isnan(t.ci_low) and math.isnan(t.ci_high)
    assert any("zero" in n for n in wording.paired_notes(t))


def test_constant_nonzero_differences_are_inf_safe_and_decided_by_wilcoxon():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = stats.paired_test([0.0025] * 6)
    assert t.statistics["d_z"] == math.inf and t.t_statistic == math.inf
    assert t.test == "Wilcoxon" and t.degenerate
    assert t.p_value == pytest.approx(2 / 2**6)  # exact: all 6 signs positive
    # Not a zero-width interval with p = 0 (issue 18): both undefined.
    assert math.isnan(t.p_t) and math.isnan(t.ci_low) and math.isnan(t.ci_high)
    assert wording.paired_notes(t)


def test_fewer_than_two_pairs_give_nan_p_and_a_note():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        one = stats.paired_test([0.01])
        none = stats.paired_test([])
    assert one.mean_diff == 0.01 and math.isnan(one.p_value) and math.isnan(one.statistics["d_z"])
    assert "at least 2" in wording.paired_notes(one)[0]
    assert none.n == 0 and math.isnan(none.p_value)


def test_holm_hand_example_and_monotone_step_down():
    # sorted 0.01*3 = 0.03, 0.03*2 = 0.06, 0.04*1 = 0.04 -> max(0.06, 0.04).
    assert multiplicity.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert multiplicity.holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])
    adj = multiplicity.holm([0.02, math.nan, 0.01])
    assert adj[0] == pytest.approx(0.02) and math.isnan(adj[1]) and adj[2] == pytest.approx(0.02)


# --- summarize. ----------------------------------------------------------------------


def test_summary_per_activation_fields_from_known_numbers():
    rows = [  # seed, test acc, test loss, val acc, val loss, epochs to threshold
        (0, 0.90, 0.30, 0.91, 0.25, 10),
        (1, 0.92, 0.28, 0.93, 0.20, None),
        (2, 0.94, 0.26, 0.93, 0.22, 20),
        (3, 0.96, 0.24, 0.93, 0.20, 40),
    ]
    rs = [member("relu", s, ta, test_loss=tl, val_acc=va, val_loss=vl, epochs_to_threshold=e)
          for s, ta, tl, va, vl, e in rows]
    s = comparisons.summarize(rs, "relu")
    a = s.activation("relu")
    assert a.n == 4 and a.seeds == (0, 1, 2, 3)
    assert a.estimate.mean == pytest.approx(0.93)
    assert a.estimate.std == pytest.approx(np.std([0.90, 0.92, 0.94, 0.96], ddof=1))
    assert a.secondary["test_loss"].mean == pytest.approx(0.27)
    assert a.reached == 3 and wording.reached_text(a) == "3/4 reached"
    assert a.epochs_to_threshold_mean == pytest.approx(70 / 3)
    assert a.epochs_to_threshold_median == 20
    assert a.selection_mean == pytest.approx(0.925)
    # Seeds 1, 2, 3 tie on val acc 0.93; 1 and 3 tie on val loss 0.20 -> lower seed.
    assert a.best_seed == 1
    assert s.comparisons == () and s.winner.activation == "relu"


def test_best_seed_uses_validation_never_test():
    rs = [
        member("relu", 0, test_acc=0.99, val_acc=0.80),
        member("relu", 1, test_acc=0.80, val_acc=0.95),
    ]
    assert comparisons.summarize(rs, "relu").activation("relu").best_seed == 1


def test_comparison_pairs_by_seed_and_matches_scipy():
    relu = [0.950, 0.9425, 0.955, 0.9475, 0.960, 0.945, 0.9525, 0.950]
    gelu = [0.9575, 0.950, 0.9575, 0.955, 0.965, 0.9525, 0.955, 0.9660]
    rs = sweep({"gelu": gelu, "relu": relu})  # baseline listed second on purpose
    s = comparisons.summarize(rs, "relu")
    assert [a.activation for a in s.activations] == ["relu", "gelu"]
    (c,) = s.comparisons
    ref = st.ttest_rel(gelu, relu)
    assert c.paired.mean_diff == pytest.approx(np.mean(np.subtract(gelu, relu)))
    assert c.paired.p_t == pytest.approx(ref.pvalue)
    assert c.paired.statistics["p_wilcoxon"] == pytest.approx(st.wilcoxon(gelu, relu).pvalue)
    assert c.secondary["test_loss"].mean_diff == pytest.approx(-c.paired.mean_diff)
    assert c.p_holm == c.paired.p_value and not s.holm
    assert c.significant and ref.pvalue < 0.05
    assert c.sign == 1
    verdict = verdict_wording.comparison_verdict(s, c)
    assert verdict.startswith("gelu is better than relu by +0.70 pp test accuracy (95% CI +")
    assert "paired t p=0.002" in verdict and "8 pairs" in verdict
    assert s.winner.activation == "gelu" and s.winner.significant_over_runner_up
    assert s.winner.significant_over_baseline


def test_only_common_seeds_are_paired_with_a_note():
    rs = sweep({"relu": [0.90, 0.91, 0.92, 0.93], "gelu": [0.91, 0.92, 0.94]})
    rs = [r for r in rs if not (r.activation == "relu" and r.seed == 1)]
    c = comparisons.summarize(rs, "relu").comparisons[0]
    assert c.paired.seeds == (0, 2)
    assert c.paired.mean_diff == pytest.approx(0.015)
    assert any("common seeds" in n for n in wording.paired_notes(c.paired))


def test_no_significant_difference_verdict_reports_p():
    relu = [0.90, 0.92, 0.91, 0.93, 0.90]
    gelu = [0.91, 0.91, 0.92, 0.92, 0.90]
    s = comparisons.summarize(sweep({"relu": relu, "gelu": gelu}), "relu")
    c = s.comparisons[0]
    assert not c.significant
    assert verdict_wording.comparison_verdict(s, c).startswith(
        "gelu vs relu: inconclusive (")
    assert "not significant" in verdict_wording.winner_verdict(s)


def test_worse_activation_gets_worse_verdict():
    relu = [0.95, 0.96, 0.94, 0.95, 0.97, 0.96]
    elu = [0.92, 0.935, 0.91, 0.925, 0.94, 0.93]
    s = comparisons.summarize(sweep({"relu": relu, "elu": elu}), "relu")
    c = s.comparisons[0]
    assert c.significant and c.sign == -1
    assert verdict_wording.comparison_verdict(s, c).startswith("elu is worse than relu by -2.83 pp")


def test_holm_applied_across_several_comparisons():
    base = [0.90, 0.91, 0.92, 0.93, 0.94, 0.95]
    accs = {
        "relu": base,
        "gelu": [b + d for b, d in zip(base, [0.010, 0.012, 0.008, 0.011, 0.009, 0.010])],
        "silu": [b + d for b, d in zip(base, [0.010, -0.005, 0.004, -0.002, 0.006, 0.0])],
        "mish": [b + d for b, d in zip(base, [0.003, 0.006, -0.001, 0.005, 0.002, 0.004])],
    }
    s = comparisons.summarize(sweep(accs), "relu")
    assert s.holm
    raw = [c.paired.p_value for c in s.comparisons]
    assert [c.p_holm for c in s.comparisons] == pytest.approx(multiplicity.holm(raw))
    assert all(c.p_holm >= c.paired.p_value for c in s.comparisons)
    assert all(c.significant == (c.p_holm < 0.05) for c in s.comparisons)
    assert all("Holm p" in verdict_wording.comparison_verdict(s, c) for c in s.comparisons)
    assert s.winner.activation == "gelu" and s.winner.runner_up == "mish"
    # gelu vs mish is outside the Holm family.
    assert "post hoc" in verdict_wording.winner_verdict(s)


def test_identical_activations_all_zero_differences_without_warnings():
    accs = {"relu": [0.9, 0.91, 0.92], "gelu": [0.9, 0.91, 0.92]}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = comparisons.summarize(sweep(accs), "relu")
        tables.format_table(s)
    c = s.comparisons[0]
    assert c.paired.p_value == 1.0 and c.paired.statistics["d_z"] == 0.0 and not c.significant
    # Tied means: the baseline is preferred as winner.
    assert s.winner.activation == "relu" and not s.winner.significant_over_runner_up


def test_single_seed_sweep_is_handled_gracefully():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = comparisons.summarize(sweep({"relu": [0.9], "gelu": [0.95]}), "relu")
        text = tables.format_table(s)
    c = s.comparisons[0]
    assert math.isnan(c.paired.p_value) and not c.significant
    assert "not tested" in verdict_wording.comparison_verdict(s, c)
    assert "n/a" in text
    json.dumps(verdict_wording.summary_json(s), allow_nan=False)


def test_bad_inputs_raise_service_error_with_actionable_message():
    with pytest.raises(ServiceError, match="No sweep results"):
        comparisons.summarize([], "relu")
    with pytest.raises(ServiceError, match="gelu"):
        comparisons.summarize(sweep({"gelu": [0.9, 0.91]}), "relu")
    with pytest.raises(ServiceError, match="seed 0"):
        comparisons.summarize(sweep({"relu": [0.9]}) * 2, "relu")
    with pytest.raises(ServiceError, match="confidence"):
        comparisons.summarize(sweep({"relu": [0.9]}), "relu", confidence=95)


def test_confidence_level_changes_interval_and_alpha():
    relu = [0.90, 0.92, 0.91, 0.93, 0.90, 0.92]
    gelu = [0.915, 0.925, 0.92, 0.935, 0.91, 0.93]
    s90 = comparisons.summarize(sweep({"relu": relu, "gelu": gelu}), "relu", confidence=0.90)
    s99 = comparisons.summarize(sweep({"relu": relu, "gelu": gelu}), "relu", confidence=0.99)
    w90 = s90.comparisons[0].paired.ci_high - s90.comparisons[0].paired.ci_low
    w99 = s99.comparisons[0].paired.ci_high - s99.comparisons[0].paired.ci_low
    assert w99 > w90 and s90.alpha == pytest.approx(0.10)
    assert "90% CI" in verdict_wording.comparison_verdict(s90, s90.comparisons[0])


# --- Plain forms. -------------------------------------------------------------------


def test_flat_metrics_are_finite_floats(two_way):
    m = plain.flat_metrics(two_way)
    assert m["gelu.test_accuracy_mean"] == pytest.approx(0.9503125 + 0.007)
    assert "gelu.vs_baseline.p_holm" in m
    assert all(isinstance(v, float) and math.isfinite(v) for v in m.values())


def test_float32_round_off_in_metrics_counts_as_ties():
    # Keras reports accuracies in float32: equal accuracies may differ by ~1e-8.
    relu = [float(np.float32(v)) for v in (0.94, 0.955, 0.95, 0.945)]
    same = [v + e for v, e in zip(relu, (1e-8, -2e-8, 0.0, 3e-9))]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        zero = stats.paired_test(np.subtract(same, relu))
        const = stats.paired_test([0.0050000191, 0.0049999952, 0.005, 0.0050000012])
    assert zero.p_value == 1.0 and zero.statistics["d_z"] == 0.0
    assert const.test == "Wilcoxon" and const.statistics["d_z"] == math.inf
    assert const.p_value == pytest.approx(2 / 2**4)


def test_accuracy_interval_is_clipped_to_the_metric_range():
    wide = stats.estimate([0.90, 1.00], bounds=(0.0, 1.0))
    unclipped = stats.estimate([0.90, 1.00])
    assert unclipped.ci_high > 1.0  # 2 seeds: t(0.975, 1) = 12.7
    assert wide.ci_high == 1.0
    assert wide.ci_low == pytest.approx(unclipped.ci_low)


# --- Any metric, either direction. ---------------------------------------------------


def test_lower_is_better_metric_picks_the_lowest_mean_and_signs_by_direction():
    # Test loss as the compared metric: gelu lowest (best), elu highest (worst).
    losses = {
        "relu": [0.300, 0.320, 0.310, 0.330, 0.305, 0.315],
        "gelu": [0.270, 0.285, 0.280, 0.300, 0.262, 0.290],
        "elu": [0.330, 0.345, 0.340, 0.352, 0.331, 0.350],
    }
    # Accuracies that rank the other way, so a metric mix-up cannot pass.
    accs = {"relu": [0.90] * 6, "gelu": [0.89] * 6, "elu": [0.95] * 6}
    rs = sweep(accs, losses)
    s = comparisons.summarize(rs, "relu", metric="test_loss", higher_is_better=False)

    assert s.metric == stats.Metric("test_loss", False, (0.0, math.inf))
    assert s.secondary == ()  # test loss is the compared metric, not beside it
    assert s.winner.activation == "gelu"
    assert s.winner.mean == pytest.approx(np.mean(losses["gelu"]))
    assert s.winner.runner_up == "relu"
    gelu, elu = s.comparison("gelu"), s.comparison("elu")
    for c in (gelu, elu):
        ref = st.ttest_rel(losses[c.activation], losses["relu"])
        assert c.paired.metric == "test_loss"
        assert c.paired.mean_diff == pytest.approx(
            np.mean(np.subtract(losses[c.activation], losses["relu"])))
        assert c.paired.t_statistic == pytest.approx(ref.statistic)
        assert c.paired.p_t == pytest.approx(ref.pvalue)
        assert c.paired.statistics["p_wilcoxon"] == pytest.approx(
            st.wilcoxon(losses[c.activation], losses["relu"]).pvalue)
    # Lower loss is better: a negative difference is a win.
    assert gelu.paired.mean_diff < 0 and gelu.sign == 1 and gelu.significant
    assert elu.paired.mean_diff > 0 and elu.sign == -1 and elu.significant
    assert [c.p_holm for c in s.comparisons] == pytest.approx(
        multiplicity.holm([c.paired.p_value for c in s.comparisons]))
    # The lead is winner - runner-up, negative for a lower-is-better metric.
    assert s.winner.lead.mean_diff == pytest.approx(
        np.mean(np.subtract(losses["gelu"], losses["relu"])))
    assert s.winner.significant_over_baseline


def test_the_same_numbers_either_way_round_give_mirrored_results():
    # accuracy a (higher better) vs the metric 1 - a (lower better): the
    # same winner, opposite differences, same p-values and signs.
    accs = {"relu": [0.90, 0.92, 0.91, 0.93, 0.90], "gelu": [0.92, 0.93, 0.93, 0.94, 0.91]}
    up = comparisons.summarize(sweep(accs), "relu")
    down = comparisons.summarize(sweep(accs), "relu", metric="test_loss", higher_is_better=False)
    assert up.winner.activation == down.winner.activation == "gelu"
    cu, cd = up.comparisons[0], down.comparisons[0]
    assert cd.paired.mean_diff == pytest.approx(-cu.paired.mean_diff)
    assert cd.paired.p_value == pytest.approx(cu.paired.p_value)
    assert cd.sign == cu.sign == 1


def test_best_seed_follows_the_selection_metric_and_its_direction():
    rs = [
        member("relu", 0, test_acc=0.9, val_acc=0.95, val_loss=0.40),
        member("relu", 1, test_acc=0.9, val_acc=0.90, val_loss=0.20),
    ]
    assert comparisons.summarize(rs, "relu").activation("relu").best_seed == 0
    by_loss = comparisons.summarize(rs, "relu", metric="test_loss", higher_is_better=False)
    assert by_loss.select_by == stats.Metric("val_loss", False)
    assert by_loss.activation("relu").best_seed == 1


def test_an_unknown_metric_is_a_service_error():
    with pytest.raises(ServiceError, match="test_perplexity"):
        comparisons.summarize(sweep({"relu": [0.9, 0.91]}), "relu", metric="test_perplexity",
                        higher_is_better=False)


def test_summary_to_dict_holds_numbers_named_after_the_metric(two_way):
    d = plain.summary_to_dict(two_way)
    json.dumps(d, allow_nan=False)
    assert d["metric"] == "test_accuracy" and d["higher_is_better"] is True
    gelu = d["activations"]["gelu"]
    assert set(gelu["test_accuracy"]) == {"n", "mean", "std", "ci_low", "ci_high"}
    assert "test_loss" in gelu and "val_accuracy_mean" in gelu and "best_val_accuracy" in gelu
    assert d["comparisons"]["gelu"]["accuracy"]["d_z"] == pytest.approx(
        two_way.comparisons[0].paired.statistics["d_z"])
    assert d["winner"]["mean_test_accuracy"] == pytest.approx(two_way.winner.mean)

    def strings(x):
        if isinstance(x, dict):
            return [s for v in x.values() for s in strings(v)]
        if isinstance(x, list):
            return [s for v in x for s in strings(v)]
        return [x] if isinstance(x, str) else []

    # Numbers only: the only strings are names (activations, metric, test).
    assert set(strings(d)) <= {"relu", "gelu", "test_accuracy", "test_loss", "paired t",
                               "inf", "-inf", "better", "worse", "equivalent",
                               "inconclusive", "untested"}
