"""McNemar per test example (issue 19) against statsmodels and scipy, and
the training-loss curve comparisons against scipy's paired t-test and the
end point's own verdict path (`decisions.decide`). Pure numbers: no training.
"""

import dataclasses
import json

import numpy as np
import pytest
from scipy import stats as st
from statsmodels.stats.contingency_tables import mcnemar

from kg_service.analysis.numbers import comparisons
from kg_service.analysis.numbers import curves
from kg_service.analysis.numbers import decisions
from kg_service.analysis.numbers import paired_examples
from kg_service.analysis.numbers import multiplicity
from kg_service.analysis.numbers import stats
from kg_service.analysis.reports import variance_report
from kg_service.analysis.reports.report import render_markdown
from kg_service.config.loading import config_to_dict
from kg_service.config.schema import Config
from kg_service.config.schema import TrainingConfig
from tests.service.analysis.members import member


def _table(b, c, both=30, neither=4):
    return np.array([[both, b], [c, neither]])


@pytest.mark.parametrize("b, c", [(0, 0), (0, 1), (1, 9), (3, 3), (7, 2), (12, 12),
                                  (24, 0), (13, 12), (20, 6), (40, 22), (150, 120)])
def test_mcnemar_p_equals_statsmodels_exact_below_25_else_corrected_chi_square(b, c):
    exact = b + c < paired_examples.EXACT_BELOW
    want = mcnemar(_table(b, c), exact=exact, correction=True).pvalue
    if b + c == 0:
        want = 1.0  # statsmodels: nan for the chi-square, 1 for the exact test
    assert paired_examples.mcnemar_p(b, c) == pytest.approx(want, rel=1e-12)
    # Both forms on request, whatever the count.
    for form in (True, False):
        if b + c:
            assert paired_examples.mcnemar_p(b, c, exact=form) == pytest.approx(
                mcnemar(_table(b, c), exact=form, correction=True).pvalue, rel=1e-12)


def _correct(rng, n, accuracy):
    return rng.random(n) < accuracy


def _members(rng, accuracy, seeds=5, n=200):
    out = {}
    for seed in range(seeds):
        m = member("x", seed, accuracy)
        m.test_correct = _correct(rng, n, accuracy)
        out[seed] = m
    return out


def test_example_test_pairs_by_seed_and_pools_the_discordant_counts():
    rng = np.random.default_rng(0)
    gelu, relu = _members(rng, 0.93), _members(rng, 0.88)
    test = paired_examples.example_test(gelu, relu, "gelu", "relu")
    assert len(test.seeds) == 5 and test.n == 1000 and test.unpaired == 0
    for s in test.seeds:
        a, r = gelu[s.seed].test_correct, relu[s.seed].test_correct
        # The 2x2 table of the seed, as statsmodels builds it from the labels.
        table = np.array([[np.sum(a & r), np.sum(a & ~r)], [np.sum(~a & r), np.sum(~a & ~r)]])
        assert (s.b, s.c) == (table[0, 1], table[1, 0])
        assert s.p_value == pytest.approx(
            mcnemar(table, exact=s.b + s.c < 25, correction=True).pvalue, rel=1e-12)
    assert (test.b, test.c) == (sum(s.b for s in test.seeds), sum(s.c for s in test.seeds))
    assert test.p_pooled == pytest.approx(
        mcnemar(_table(test.b, test.c), exact=False, correction=True).pvalue, rel=1e-12)
    assert test.p_fisher == pytest.approx(
        st.combine_pvalues([s.p_value for s in test.seeds], method="fisher").pvalue)
    assert test.difference == pytest.approx(
        np.mean([gelu[s].test_correct.mean() - relu[s].test_correct.mean() for s in gelu]))


def test_a_seed_without_predictions_on_either_side_is_left_out_and_counted():
    rng = np.random.default_rng(1)
    gelu, relu = _members(rng, 0.9, seeds=3), _members(rng, 0.9, seeds=4)
    gelu[1].test_correct = None
    test = paired_examples.example_test(gelu, relu, "gelu", "relu")
    assert [s.seed for s in test.seeds] == [0, 2] and test.unpaired == 2


def test_example_tests_are_holm_adjusted_over_the_activations_and_empty_without_predictions():
    rng = np.random.default_rng(2)
    results = []
    for name, accuracy in (("relu", 0.85), ("gelu", 0.9), ("elu", 0.86)):
        for m in _members(rng, accuracy).values():
            results.append(dataclasses.replace(m, activation=name))
    tests = paired_examples.example_tests(results, "relu")
    assert [t.activation for t in tests] == ["gelu", "elu"]
    assert [t.p_pooled_holm for t in tests] == pytest.approx(
        multiplicity.holm([t.p_pooled for t in tests]))
    for r in results:
        r.test_correct = None
    assert paired_examples.example_tests(results, "relu") == ()


# --- The training-loss curves. ------------------------------------------------


def _curve_sweep(rng, seeds=6, epochs=8):
    out = []
    for seed in range(seeds):
        start = 0.7 + 0.05 * rng.random()
        for name, rate in (("relu", 0.75), ("gelu", 0.65)):
            m = member(name, seed, 0.9, epochs=epochs)
            m.history["loss"] = list(start * rate ** np.arange(epochs)
                                     + 0.01 * rng.random(epochs))
            out.append(m)
    return out


def test_curve_measures_are_compared_with_scipys_paired_t_and_the_end_points_verdicts():
    results = _curve_sweep(np.random.default_rng(3))
    got = curves.compare_curves(results, "relu", threshold=0.2)
    assert (got.threshold, got.threshold_from, got.epochs) == (0.2, "config", 8)
    by = {(r.activation, r.seed): r for r in results}
    for c in got.comparisons:
        def value(r):
            losses = np.asarray(r.history["loss"])
            if c.measure == "loss_auc":
                return losses.mean()
            return int(np.argmax(losses <= 0.2)) + 1
        gelu = [value(by[("gelu", s)]) for s in range(6)]
        relu = [value(by[("relu", s)]) for s in range(6)]
        assert c.mean == pytest.approx(np.mean(gelu))
        assert c.reference_mean == pytest.approx(np.mean(relu))
        assert c.test.mean_diff == pytest.approx(np.mean(gelu) - np.mean(relu))
        if np.ptp(np.subtract(gelu, relu)) > 0:
            assert c.test.p_value == pytest.approx(st.ttest_rel(gelu, relu).pvalue)
        (want,) = decisions.decide([stats.paired_test(np.subtract(gelu, relu))],
                               alpha=0.05, higher_is_better=False)
        assert c.verdict.outcome == want.outcome
    # GELU's curve here falls faster: lower area, and better.
    auc = next(c for c in got.comparisons if c.measure == "loss_auc")
    assert auc.verdict.outcome == "better" and auc.test.mean_diff < 0


def test_default_threshold_is_reached_by_every_member_and_a_miss_is_censored():
    results = _curve_sweep(np.random.default_rng(4))
    got = curves.compare_curves(results, "relu")
    assert got.threshold_from == "data"
    assert got.threshold == max(r.history["loss"][-1] for r in results)
    assert all(c.censored == 0 for c in got.comparisons)
    low = curves.compare_curves(results, "relu", threshold=1e-6)
    etl = [c for c in low.comparisons if c.measure == "epochs_to_loss"]
    assert etl[0].censored == 12 and etl[0].mean == 9.0  # epochs + 1, every member


def test_the_report_and_summary_json_show_both_views():
    rng = np.random.default_rng(5)
    results = _curve_sweep(rng)
    for r in results:
        r.test_correct = _correct(rng, 100, 0.9 if r.activation == "gelu" else 0.8)
    summary = comparisons.summarize(results, "relu")
    config = Config(activations=("relu", "gelu"), seeds=tuple(range(6)),
                    training=TrainingConfig(loss_threshold=0.3))
    text = render_markdown(summary, results, title="t", config=config,
                           resolved=config_to_dict(config))
    assert "## Per-example tests (McNemar, test split)" in text
    assert "## Training-loss curves" in text and "of 0.3 (training.loss_threshold)" in text
    assert "covers the sampling of the test examples only" in text
    entries = variance_report.summary_entries(summary, results, config)
    json.dumps(entries, allow_nan=False)
    (test,) = paired_examples.example_tests(results, "relu")
    assert entries["per_example"]["gelu"]["b"] == test.b
    assert entries["per_example"]["gelu"]["p_pooled"] == test.p_pooled
    assert {c["measure"] for c in entries["curves"]["comparisons"]} == set(curves.MEASURES)
    # A member without kept predictions (resumed from the store) is said, not hidden.
    results[1].test_correct = None  # gelu, seed 0
    text = render_markdown(summary, results, title="t", config=config,
                           resolved=config_to_dict(config))
    assert "Seeds left out (a member without kept test predictions" in text
    assert "without kept test predictions, e.g. one a resumed sweep read back from the " \
           "store): gelu 1." in text


def test_no_curves_row_prints_an_interval_that_disagrees_with_its_verdict():
    """Issue 30 §8: the curves table printed the plain 95% interval beside a
    Holm verdict; here ELU's area has p = 0.043 (its plain interval clear of
    0) and is inconclusive over the family of 2. Each printed interval is
    scipy's t interval at the level the verdict states, and excludes 0
    exactly for better/worse."""
    rng = np.random.default_rng(0)
    results = []
    for seed in range(4):
        start = 0.7 + 0.05 * rng.random()
        for name, rate in (("relu", 0.75), ("gelu", 0.74), ("elu", 0.735)):
            m = member(name, seed, 0.9, epochs=6)
            m.history["loss"] = list(start * rate ** np.arange(6) + 0.03 * rng.random(6))
            results.append(m)
    got = curves.compare_curves(results, "relu", threshold=0.2)
    assert any((c.test.ci_low > 0 or c.test.ci_high < 0) and c.verdict.outcome == "inconclusive"
               for c in got.comparisons)
    header, rows = variance_report.curve_rows(got)
    col = header.index("Δ (deciding CI, level)")
    for row, c in zip(rows, got.comparisons):
        if "(" not in row[col]:
            continue  # constant differences: no interval to print
        inner = row[col].split("(")[1].rstrip(")")
        bounds, level = inner.rsplit(", ", 1)
        lo, hi = (float(v) for v in bounds.split(" to "))
        assert (lo > 0 or hi < 0) == (c.verdict.outcome in ("better", "worse")), row
        d = np.asarray(c.test.diffs)
        conf = float(level.rstrip("%")) / 100
        want = st.t.interval(c.verdict.confidence, d.size - 1, d.mean(), st.sem(d))
        assert conf == pytest.approx(c.verdict.confidence, abs=1e-3)
        assert (lo, hi) == pytest.approx(want, rel=1e-3)
