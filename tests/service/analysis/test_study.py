"""A study's numbers (issue 18 §6, §7) against scipy, statsmodels, rliable and
the shipped Revival figures; pure numbers, no training, no store."""

import json
import math
import re

import numpy as np
import pytest
from scipy import stats as st
from rliable import metrics as rliable_metrics
from statsmodels.stats.multitest import multipletests

from kg_service.analysis.numbers import aggregate as agg
from kg_service.analysis.numbers import decisions
from kg_service.analysis.numbers import multiplicity
from kg_service.analysis.numbers import stats
from kg_service.analysis.numbers import study
from kg_service.analysis.reports import study_report
from kg_service.analysis.words import study_wording

# docs/results.md §3 as issue 18 read it (commit b1c39f0; `kg results` has
# rewritten the page since): ReLU - GELU per half, mean and 95% CI.
ISSUE_18_PAGE = """
- With LayerNorm: ReLU − GELU +0.0120 nats/byte (95% CI −0.0106 to
  +0.0345, Holm p = 0.30), learnable leaky − GELU +0.0073 (Holm p = 0.30):
- Without LayerNorm: ReLU − GELU −0.0449 (CI −0.0877 to −0.0021, Holm
"""


# --- The family: Holm with untestable comparisons counted. -------------------


def test_holm_counting_untestable_matches_statsmodels_with_nan_as_one():
    rng = np.random.default_rng(3)
    for _ in range(5):
        p = rng.uniform(0, 0.2, size=7)
        p[rng.choice(7, size=2, replace=False)] = np.nan
        ours = study.holm_counting_untestable(p)
        ref = multipletests(np.where(np.isnan(p), 1.0, p), method="holm")[1]
        finite = ~np.isnan(p)
        np.testing.assert_allclose(np.array(ours)[finite], ref[finite], rtol=1e-12)
        assert all(math.isnan(v) for v in np.array(ours)[~finite])


def test_an_untestable_comparison_does_not_shrink_the_family():
    p = [0.02, math.nan, 0.04]
    assert study.holm_counting_untestable(p)[0] == pytest.approx(0.06)  # m = 3
    assert multiplicity.holm(p)[0] == pytest.approx(0.04)  # the per-sweep Holm: m = 2


# --- Welch's test of the interaction. ----------------------------------------


@pytest.mark.parametrize("n1,n2", [(3, 3), (3, 7), (10, 4)])
def test_welch_matches_scipy_statistic_p_and_interval(n1, n2):
    rng = np.random.default_rng(n1 * 10 + n2)
    a, b = rng.normal(0.0, 1.0, n1), rng.normal(0.8, 2.5, n2)
    ours = study.welch(a, b, confidence=0.9)
    ref = st.ttest_ind(b, a, equal_var=False)
    ci = ref.confidence_interval(confidence_level=0.9)
    assert ours.t_statistic == pytest.approx(ref.statistic, rel=1e-10)
    assert ours.p_value == pytest.approx(ref.pvalue, rel=1e-10)
    assert ours.df == pytest.approx(ref.df, rel=1e-10)
    assert (ours.ci_low, ours.ci_high) == pytest.approx((ci.low, ci.high), rel=1e-10)


def test_welch_of_a_side_with_one_value_is_untestable():
    t = study.welch([1.0], [2.0, 3.0])
    assert t.estimate == pytest.approx(1.5)
    assert math.isnan(t.p_value) and math.isnan(t.ci_low)


def _revival_gaps():
    """(mean, sd, n) of ReLU - GELU per half, from issue 18's page: the mean
    and its 95% t interval over 3 seeds give the sd of the differences."""
    text = ISSUE_18_PAGE.replace("−", "-")
    found = re.findall(
        r"ReLU - GELU ([+-][\d.]+)(?: nats/byte)?\s+\((?:95% )?CI\s+([+-][\d.]+) to\s+([+-][\d.]+)",
        text,
    )
    assert len(found) == 2, found  # with LayerNorm, then without
    n, half_t = 3, st.t.ppf(0.975, 2)
    return [(float(m), (float(hi) - float(lo)) / 2 * math.sqrt(n) / half_t, n)
            for m, lo, hi in found]


def test_revival_interaction_reproduces_the_issues_p_of_0_015_from_the_shipped_numbers():
    (m_ln, sd_ln, n_ln), (m_no, sd_no, n_no) = _revival_gaps()
    t = study.welch_from_stats(m_ln, sd_ln, n_ln, m_no, sd_no, n_no)
    ref = st.ttest_ind_from_stats(m_no, sd_no, n_no, m_ln, sd_ln, n_ln, equal_var=False)
    assert t.p_value == pytest.approx(ref.pvalue, rel=1e-10)
    assert round(t.p_value, 3) == 0.015  # issue 18 §6: "p ≈ 0.015"
    # Removing LayerNorm hurts GELU more than ReLU: ReLU's gap falls.
    assert t.estimate == pytest.approx(-0.0569, abs=1e-4)
    assert t.ci_high < 0


# --- The study: comparisons of every sweep and metric, interactions. ---------


def _sweep(name, gaps, seeds=3, baseline="gelu", seed=0, loss_only=True, level=None):
    """A StudySweep of test_loss; `gaps`: activation -> mean gap to the baseline."""
    rng = np.random.default_rng(seed)
    base = 2.5 + rng.normal(0, 0.01, seeds)
    values = {baseline: dict(enumerate(base))}
    for a, gap in gaps.items():
        values[a] = dict(enumerate(base + gap + rng.normal(0, 0.01, seeds)))
    metric = stats.Metric.of("test_loss", higher_is_better=False)
    return study.StudySweep(name=name, baseline=baseline, metrics=(metric,),
                            values={"test_loss": values}, level=level)


def test_study_holm_spans_every_sweep_and_its_interaction_is_welch_on_the_gaps():
    ln = _sweep("ln", {"relu": 0.01, "leaky": 0.005}, seed=1, level=True)
    no = _sweep("no-ln", {"relu": -0.045, "leaky": -0.04}, seed=2, level=False)
    s = study.analyse("revival", [ln, no], reference=True)
    assert s.family_size == 4 and s.untestable == 0
    raw = [c.paired.p_value for c in s.comparisons]
    np.testing.assert_allclose([c.p_holm for c in s.comparisons],
                               multipletests(raw, method="holm")[1], rtol=1e-12)
    relu = next(i for i in s.interactions if i.activation == "relu")
    _, d_ln = study.paired_differences(ln, ln.metric, "relu")
    _, d_no = study.paired_differences(no, no.metric, "relu")
    ref = st.ttest_ind(d_no, d_ln, equal_var=False)
    assert relu.test.p_value == pytest.approx(ref.pvalue, rel=1e-10)
    assert relu.test.estimate == pytest.approx(np.mean(d_no) - np.mean(d_ln))
    assert [i.p_holm for i in s.interactions] == pytest.approx(
        multipletests([i.test.p_value for i in s.interactions], method="holm")[1])


@pytest.mark.parametrize("reference", [True, False])
def test_the_interaction_has_the_declared_sign_whichever_sweep_comes_first(reference):
    """Issue 30 §4: (gain at the other level) - (gain at the reference level),
    the same signed number for either order of the sweeps."""
    ln = _sweep("ln", {"relu": 0.01}, seed=1, level=True)
    no = _sweep("no-ln", {"relu": -0.045}, seed=2, level=False)
    ref, other = (ln, no) if reference else (no, ln)
    _, d_ref = study.paired_differences(ref, ref.metric, "relu")
    _, d_other = study.paired_differences(other, other.metric, "relu")
    expected = st.ttest_ind(d_other, d_ref, equal_var=False)
    for order in ([ln, no], [no, ln]):
        (i,) = study.analyse("revival", order, reference=reference).interactions
        assert (i.first, i.second) == (ref.name, other.name)
        assert (i.first_level, i.second_level) == (ref.level, other.level)
        assert i.test.estimate == pytest.approx(np.mean(d_other) - np.mean(d_ref))
        assert i.test.p_value == pytest.approx(expected.pvalue, rel=1e-10)
        assert np.sign(i.test.t_statistic) == np.sign(expected.statistic)


@pytest.mark.parametrize("levels, reference", [
    ((None, None), None), ((True, False), None), ((True, False), "true"),
    ((True, None), True),
])
def test_sweeps_to_compare_without_a_declared_reference_are_refused(levels, reference):
    a = _sweep("a", {"relu": 0.01}, seed=1, level=levels[0])
    b = _sweep("b", {"relu": 0.02}, seed=2, level=levels[1])
    with pytest.raises(study.UndeclaredReference, match="declared, never"):
        study.analyse("s", [a, b], reference=reference)


def test_two_sweeps_at_one_level_are_replicates_not_an_interaction():
    a = _sweep("a", {"relu": 0.01}, seed=1, level=True)
    b = _sweep("b", {"relu": 0.02}, seed=2, level=True)
    assert study.analyse("s", [a, b], reference=True).interactions == ()


def test_a_one_seed_activation_is_untestable_but_counted_in_the_family():
    ln = _sweep("ln", {"relu": 0.01})
    values = dict(ln.values["test_loss"], leaky={0: 2.6})
    one = study.StudySweep("ln", "gelu", ln.metrics, {"test_loss": values})
    s = study.analyse("x", [one])
    assert s.family_size == 2 and s.untestable == 1
    relu = next(c for c in s.comparisons if c.activation == "relu")
    assert relu.p_holm == pytest.approx(min(1.0, 2 * relu.paired.p_value))


def test_three_way_verdicts_use_tost_and_holm_over_the_whole_study():
    from statsmodels.stats.weightstats import ttost_paired

    metric = stats.Metric.of("test_loss", higher_is_better=False)
    base = np.array([2.50, 2.52, 2.49, 2.51, 2.50])
    values = {"gelu": dict(enumerate(base)),
              "relu": dict(enumerate(base + [0.001, -0.002, 0.000, 0.002, -0.001])),
              "swish": dict(enumerate(base - [0.050, 0.052, 0.049, 0.051, 0.050])),
              "elu": dict(enumerate(base + [0.030, -0.040, 0.050, -0.020, 0.010])),
              "tiny": dict(enumerate(base - [0.0020, 0.0021, 0.0019, 0.0020, 0.0022]))}
    one = study.StudySweep("a", "gelu", (metric,), {"test_loss": values},
                           margins={"test_loss": 0.01})
    s = study.analyse("three-way", [one])
    by = {c.activation: c for c in s.comparisons}
    assert by["swish"].outcome == decisions.BETTER  # lower loss
    assert by["relu"].outcome == decisions.EQUIVALENT
    assert not by["swish"].within_margin  # 0.05 lower: far outside ±0.01
    # 0.002 lower on every seed: better, and equivalent within ±0.01 too.
    assert by["tiny"].outcome == decisions.BETTER and by["tiny"].within_margin
    assert by["elu"].outcome == decisions.INCONCLUSIVE
    order = ("relu", "swish", "elu", "tiny")
    tost = [ttost_paired(np.array(list(values[a].values())), base, -0.01, 0.01)[0]
            for a in order]
    assert [by[a].p_equivalence for a in order] == pytest.approx(tost)
    assert [by[a].p_equivalence_holm for a in order] == pytest.approx(
        multipletests(tost, method="holm")[1])


def test_without_a_margin_a_comparison_is_never_equivalent():
    one = _sweep("a", {"relu": 0.0})
    (c,) = study.analyse("x", [one]).comparisons
    assert math.isnan(c.margin) and c.outcome == decisions.INCONCLUSIVE


# --- Across tasks: rliable's statistics. -------------------------------------



def _scores(seed, runs=5, tasks=3):
    rng = np.random.default_rng(seed)
    return rng.uniform(0, 1, size=(runs, tasks)).round(1)  # ties on purpose


def test_iqm_matches_rliable_aggregate_iqm():
    x = _scores(1, runs=7)
    assert agg.iqm(list(x.T)) == pytest.approx(rliable_metrics.aggregate_iqm(x))


def test_probability_of_improvement_matches_rliable_with_ties():
    x, y = _scores(2), _scores(3, runs=4)
    ours = agg.probability_of_improvement(list(x.T), list(y.T))
    assert ours == pytest.approx(rliable_metrics.probability_of_improvement(x, y))


def test_performance_profile_is_rliables_score_distribution():
    # rliable.library (create_performance_profile) imports arch, which does
    # not import under pandas 3 here; its score distribution is
    # `np.mean(scores > tau)` over the (runs x tasks) matrix
    # (rliable/library.py, run_score_deviation).
    x = _scores(4)
    taus = np.linspace(0, 1, 11)
    ref = [np.mean(x > tau) for tau in taus]
    np.testing.assert_allclose(agg.performance_profile(list(x.T), taus), ref)


def test_one_task_bootstrap_interval_agrees_with_scipys_percentile_bootstrap():
    # With one task, resampling runs within the task is the ordinary
    # bootstrap: scipy's percentile interval of the same statistic.
    x = np.random.default_rng(5).normal(0.5, 0.2, size=12)
    low, high = agg.stratified_bootstrap("iqm", ([x],), reps=4000, seed=1)
    ref = st.bootstrap((x,), lambda s, axis: st.trim_mean(s, 0.25, axis=axis),
                       n_resamples=4000, method="percentile", random_state=2)
    # Two Monte Carlo estimates of the same interval: a few hundredths apart.
    ci = ref.confidence_interval
    assert (low, high) == pytest.approx((ci.low, ci.high), abs=0.03)


def test_the_bootstrap_is_stratified_each_task_keeps_its_run_count():
    # Task A: 2 runs at 0; task B: 6 at 1. Resampling within each task
    # always gives 2 zeros and 6 ones, so the IQM never moves; a pooled
    # bootstrap would.
    low, high = agg.stratified_bootstrap("iqm", ([[0.0, 0.0], [1.0] * 6],), reps=500)
    assert low == high == pytest.approx(agg.iqm([[0.0, 0.0], [1.0] * 6]))


def test_normalization_is_min_max_per_task_oriented_by_direction():
    out = agg.normalize({"t": {"a": [1.0, 3.0], "b": [2.0, 5.0]}}, higher_is_better=False)
    np.testing.assert_allclose(out["t"]["a"], [1.0, 0.5])
    np.testing.assert_allclose(out["t"]["b"], [0.75, 0.0])
    flat = agg.normalize({"t": {"a": [2.0, 2.0]}})
    np.testing.assert_allclose(flat["t"]["a"], [0.5, 0.5])


def test_the_study_report_writes_tables_json_and_the_profile(tmp_path):
    ln = _sweep("ln", {"relu": 0.01, "leaky": 0.005}, seed=1)
    ln = study.StudySweep(ln.name, ln.baseline, ln.metrics, ln.values, failed={"relu": 2},
                          level=True)
    no = _sweep("no-ln", {"relu": -0.045, "leaky": -0.04}, seed=2, level=False)
    s = study.analyse("revival", [ln, no], reference=True)
    normalized = {}
    for sw in (ln, no):
        runs = {a: list(v.values()) for a, v in sw.values["test_loss"].items()}
        normalized.update(agg.normalize({sw.name: runs}, higher_is_better=False))
    a = agg.aggregate(normalized, reps=200)
    paths = study_report.write_study_report(s, a, tmp_path / "out")
    assert {p.name for p in paths} == {"report.md", "summary.json", "report.html",
                                       "forest_test_loss.png", "performance_profile.png"}
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["family_size"] == 4
    assert {i["activation"] for i in summary["interactions"]} == {"relu", "leaky"}
    assert [r["activation"] for r in summary["aggregate"]["activations"]] == [
        r.activation for r in a.activations]
    text = "\n".join(study_report.terminal_lines(s, a))
    assert "Diverged members, left out of the comparisons" in text and "ln: relu 2" in text
    assert summary["sweeps"][0]["failed"] == {"relu": 2}
    assert "the gap moved -0.05" in text and "in relu's favour over gelu" in text


# --- Every interval beside a verdict is the one that decides (issue 30 §8). --


def _interval(cell):
    lo, hi = re.findall(r"[+-]?\d+\.\d+", cell.split("(")[0].replace("−", "-"))[:2]
    return float(lo), float(hi)


def test_no_study_row_prints_an_interval_that_disagrees_with_its_verdict():
    """Four comparisons each near p = 0.02 (a plain 95% interval clear of 0)
    and two interactions: Holm over the family leaves some inconclusive; the
    printed interval must then straddle 0, and exclude it for every
    better/worse (and every significant interaction)."""
    rng = np.random.default_rng(4)
    sweeps = []
    for k, level in enumerate((True, False)):
        base = 2.5 + rng.normal(0, 0.01, 4)
        values = {"gelu": dict(enumerate(base))}
        for j, a in enumerate(("relu", "leaky")):
            gap = (0.012, 0.04)[j] * (1 if level else -1)
            values[a] = dict(enumerate(base + gap + rng.normal(0, 0.008, 4)))
        sweeps.append(study.StudySweep(
            name=f"s{k}", baseline="gelu", metrics=(stats.Metric.of("test_loss", False),),
            values={"test_loss": values}, level=level))
    s = study.analyse("x", sweeps, reference=True)
    plain = [c.paired for c in s.comparisons]
    outcomes = [c.outcome for c in s.comparisons]
    # The case the issue found: a plain 95% interval clear of 0, inconclusive.
    assert any((t.ci_low > 0 or t.ci_high < 0) and o == "inconclusive"
               for t, o in zip(plain, outcomes))
    header, rows = study_report.comparison_rows(s)
    col = header.index("deciding CI (level)")
    for row, c in zip(rows, s.comparisons):
        lo, hi = _interval(row[col])
        assert (lo > 0 or hi < 0) == (c.outcome in ("better", "worse")), (row, c.outcome)
        line = study_wording.study_comparison_verdict(s, c)
        lo, hi = _interval(line.split("CI ")[1])
        assert (lo > 0 or hi < 0) == (c.outcome in ("better", "worse")), line
    header, rows = study_report.interaction_rows(s)
    col = header.index("CI at Holm's level")
    for row, i in zip(rows, s.interactions):
        lo, hi = _interval(row[col])
        assert (lo > 0 or hi < 0) == i.significant, row
        # scipy's Welch interval at Holm's level for it.
        ref = st.ttest_ind(*(study.paired_differences(sw, sw.metric, i.activation)[1]
                             for sw in sweeps[::-1]), equal_var=False)
        want = ref.confidence_interval(i.ci_holm_confidence)
        assert i.ci_holm == pytest.approx((want.low, want.high), rel=1e-9)
