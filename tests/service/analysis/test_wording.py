"""kg_service.analysis.words.wording: the verdicts, tables and JSON that phrase kg_service.analysis.numbers.stats."""

import json

import pytest

from kg_service.analysis.numbers import comparisons
from kg_service.analysis.numbers import plain
from kg_service.analysis.numbers import stats
from kg_service.analysis.words import tables
from kg_service.analysis.words import verdict_wording
from kg_service.analysis.words import wording
from tests.service.analysis.members import sweep


def test_format_table_lists_every_activation_the_verdicts_and_the_metric(two_way):
    text = tables.format_table(two_way)
    header = text.splitlines()[0]
    for col in ("activation", "seeds", "test acc %", "95% CI", "test loss", "Δ acc vs base",
                "p", "d_z", "epochs to thr"):
        assert col in header
    relu = two_way.activation("relu").estimate
    assert "(baseline)" in text and "+0.70 pp" in text
    assert f"{100 * relu.mean:.2f} ± {100 * relu.std:.2f}" in text
    for verdict in verdict_wording.verdicts(two_way):
        assert f"- {verdict}" in text
    assert "Metric: test accuracy, higher is better." in text


def test_summary_json_is_strict_json_with_numbers_and_sentences(two_way):
    d = verdict_wording.summary_json(two_way)
    back = json.loads(json.dumps(d, allow_nan=False))
    assert back["baseline"] == "relu" and back["winner"]["activation"] == "gelu"
    assert back["metric"] == "test_accuracy" and back["higher_is_better"] is True
    assert set(back["activations"]) == {"relu", "gelu"}
    acc = back["comparisons"]["gelu"]["accuracy"]
    assert acc["p_t"] == pytest.approx(two_way.comparisons[0].paired.p_t)
    assert acc["notes"] == []
    assert back["verdicts"] == list(verdict_wording.verdicts(two_way))
    assert back["comparisons"]["gelu"]["verdict"] == back["verdicts"][0]
    assert back["winner"]["verdict"] == back["verdicts"][-1]
    # The numbers are stats' own, unchanged: wording only adds sentences.
    numbers = plain.summary_to_dict(two_way)
    assert back["activations"] == numbers["activations"]
    assert back["winner"]["mean_test_accuracy"] == numbers["winner"]["mean_test_accuracy"]


def test_summary_json_encodes_inf_and_nan_as_strict_json():
    s = comparisons.summarize(sweep({"relu": [0.90, 0.91, 0.92], "gelu": [0.91, 0.92, 0.93]}), "relu")
    d = verdict_wording.summary_json(s)
    assert d["comparisons"]["gelu"]["accuracy"]["d_z"] == "inf"
    assert "Wilcoxon" in d["comparisons"]["gelu"]["accuracy"]["notes"][0]
    json.dumps(d, allow_nan=False)


def test_comparison_sentence_is_one_line_for_each_activation(two_way):
    g = verdict_wording.comparison_sentence(two_way, "gelu")
    r = verdict_wording.comparison_sentence(two_way, "relu")
    assert "\n" not in g and "\n" not in r
    assert g.startswith("gelu: 95.73% ± 0.56 test accuracy over 8 seeds (best seed")
    assert "by validation accuracy)" in g and "is better than relu" in g
    assert r.startswith("relu: ") and "winner gelu" in r


def test_a_lower_is_better_metric_reads_in_its_own_units_and_direction():
    losses = {"relu": [0.30, 0.32, 0.31, 0.33, 0.30, 0.32],
              "gelu": [0.27, 0.285, 0.28, 0.30, 0.26, 0.29]}
    accs = {"relu": [0.9] * 6, "gelu": [0.9] * 6}
    s = comparisons.summarize(sweep(accs, losses), "relu", metric="test_loss",
                        higher_is_better=False)
    assert wording.metric_note(s) == "test loss, lower is better"
    (verdict, winner) = verdict_wording.verdicts(s)
    assert verdict.startswith("gelu is better than relu by -0.0325 test loss (95% CI -0.0369 to -0.0281")
    assert winner.startswith("Winner: gelu (0.2808 mean test loss over 6 seeds)")
    text = tables.format_table(s)
    header = text.splitlines()[0].split()
    assert header[:4] == ["activation", "seeds", "test", "loss"]
    assert "Δ loss vs base" in text.splitlines()[0] and "test acc" not in text
    assert "Metric: test loss, lower is better." in text
    assert "(best seed 0 by validation loss)" in verdict_wording.comparison_sentence(s, "gelu")
    header, rows = tables.comparison_rows(s)
    assert header[:3] == ["vs relu", "pairs", "Δ loss"]
    assert rows[0][2] == "-0.0325"


def test_the_statistics_tables_of_stats_and_wording_name_the_same_statistics():
    assert list(wording.STATISTICS) == list(stats.PAIRED_STATISTICS)


def test_a_new_statistic_is_one_function_plus_its_wording(monkeypatch, two_way):
    """Adding one entry to each table is all it takes to show everywhere."""
    import numpy as np

    from kg_service.analysis.reports import report

    monkeypatch.setitem(stats.PAIRED_STATISTICS, "median_diff",
                        lambda d: float(np.median(d)))
    monkeypatch.setitem(wording.STATISTICS, "median_diff", wording.Column(
        "median Δ", lambda v: f"{v:+.4f}", "median of the paired differences",
        terminal=True))
    relu = [0.950, 0.9425, 0.955, 0.9475, 0.960, 0.945, 0.9525, 0.950]
    gelu = [0.9575, 0.950, 0.9575, 0.955, 0.965, 0.9525, 0.955, 0.9660]
    s = comparisons.summarize(sweep({"relu": relu, "gelu": gelu}), "relu")
    median = float(np.median(np.subtract(gelu, relu)))

    assert s.comparisons[0].paired.statistics["median_diff"] == pytest.approx(median)
    assert verdict_wording.summary_json(s)["comparisons"]["gelu"]["accuracy"]["median_diff"] == (
        pytest.approx(median))
    assert plain.flat_metrics(s)["gelu.vs_baseline.accuracy_median_diff"] == (
        pytest.approx(median))
    table = tables.format_table(s)
    assert "median Δ" in table.splitlines()[0] and f"{median:+.4f}" in table
    md = report.render_markdown(s, [], title="t")
    assert "| median Δ |" in md and "median Δ: median of the paired differences." in md
