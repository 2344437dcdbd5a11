"""One verdict rule (issue 31 §2): `decisions.verdict` decides, and every
table, sentence and study only words what it returns. Changing the rule
in that one place changes every table; nothing restates it."""

import dataclasses

import numpy as np

from kg_service.analysis.numbers import comparisons
from kg_service.analysis.numbers import decisions
from kg_service.analysis.numbers import stats
from kg_service.analysis.numbers import study
from kg_service.analysis.reports import study_report
from kg_service.analysis.words import study_wording
from kg_service.analysis.words import tables
from kg_service.analysis.words import verdict_wording
from tests.service.analysis.members import sweep

RELU = [0.950, 0.9425, 0.955, 0.9475, 0.960, 0.945, 0.9525, 0.950]
GELU = [0.9575, 0.950, 0.9575, 0.955, 0.965, 0.9525, 0.955, 0.9660]


def _change_the_rule(monkeypatch):
    """The rule, changed in its one place: every tested comparison is worse."""
    rule = decisions.verdict

    def changed(test, **numbers):
        v = rule(test, **numbers)
        return v if v.outcome == decisions.UNTESTED else dataclasses.replace(
            v, outcome=decisions.WORSE)

    monkeypatch.setattr(decisions, "verdict", changed)


def _study():
    metric = stats.Metric.of("test_loss", higher_is_better=False)
    base = np.array([2.50, 2.52, 2.49, 2.51, 2.50])
    values = {"gelu": dict(enumerate(base)),
              "swish": dict(enumerate(base - [0.050, 0.052, 0.049, 0.051, 0.050])),
              "relu": dict(enumerate(base + [0.001, -0.002, 0.000, 0.002, -0.001]))}
    one = study.StudySweep("a", "gelu", (metric,), {"test_loss": values},
                           margins={"test_loss": 0.01})
    return study.analyse("one-rule", [one])


def test_a_sweeps_verdicts_are_the_rules_in_every_table_and_sentence(monkeypatch):
    before = comparisons.summarize(sweep({"relu": RELU, "gelu": GELU}), "relu")
    assert [c.verdict.outcome for c in before.comparisons] == [decisions.BETTER]
    _change_the_rule(monkeypatch)
    after = comparisons.summarize(sweep({"relu": RELU, "gelu": GELU}), "relu")
    assert [c.verdict.outcome for c in after.comparisons] == [decisions.WORSE]
    header, rows = tables.comparison_rows(after)
    column = header.index("verdict")
    assert [row[column] for row in rows] == ["worse"]
    (line,) = [v for v in verdict_wording.verdicts(after) if v.startswith("gelu")]
    assert "gelu is worse than relu" in line
    entry = verdict_wording.summary_json(after)["comparisons"]["gelu"]
    assert entry["outcome"] == "worse" and entry["verdict"] == line


def test_a_studys_verdicts_are_the_rules_in_its_table_and_sentences(monkeypatch):
    before = {c.activation: c.outcome for c in _study().comparisons}
    assert before == {"swish": decisions.BETTER, "relu": decisions.EQUIVALENT}
    _change_the_rule(monkeypatch)
    s = _study()
    assert {c.activation: c.outcome for c in s.comparisons} == {
        "swish": decisions.WORSE, "relu": decisions.WORSE}
    header, rows = study_report.comparison_rows(s)
    assert {row[header.index("verdict")] for row in rows} == {"worse"}
    for c in s.comparisons:
        assert c.verdict.outcome == c.outcome == decisions.WORSE
        assert ": worse, " in study_wording.study_comparison_verdict(s, c)
