"""What the numbers of `kg_service.analysis.numbers.comparisons` say, in words.

The statistics compute (`stats`, `comparisons`, `plain`); this module
phrases. How a number or a metric is shown (`format_p`, `shown`), the
statistics' columns and the notes on degenerate tests are written here;
the verdicts' sentences and summary.json's in
`kg_service.analysis.words.verdict_wording`, the sequential looks' in
`kg_service.analysis.reports.sequential_report`; `kg_service.analysis.words.tables`
lays them out as tables. All of
it follows the compared metric and its direction ("test accuracy, higher
is better"; "test loss, lower is better").

A new statistic is one function plus its wording: its function in
`stats.PAIRED_STATISTICS`, and here a `Column` under the same name in
`STATISTICS`, which says how its value is headed and printed:

    =============  ======================================================
    name           Column
    =============  ======================================================
    "p_wilcoxon"   "Wilcoxon p", `format_p`, its meaning; report only
    "d_z"          "d_z", `format_d`, its meaning; terminal and report
    =============  ======================================================

Every entry becomes a column of the report's comparison table, and of
the terminal table when `terminal` is true (`tables`).

How a metric is shown comes from `_KINDS`, by the metric's kind (its name
without "test_"/"val_"): accuracy in percent, differences in percentage
points; any other kind as a plain number with 4 decimals.

Example:

>>> shown("test_accuracy").label, shown("test_accuracy").diff(0.02)
('test accuracy', '+2.00 pp')
>>> shown("test_loss").diff(-0.0123), format_p(0.01234)
('-0.0123', '0.012')
"""

import dataclasses
import math
from typing import Callable

from kg_service.analysis.numbers import stats


# --- Numbers as text. ----------------------------------------------------------


def format_p(p):
    if p is None or math.isnan(p):
        return "n/a"
    if p < 0.001:
        return "<0.001"
    if p < 0.1:
        return f"{p:.3f}"
    return f"{p:.2f}"


def p_equals(p):
    s = format_p(p)
    return s if s.startswith("<") else f"={s}"


def format_d(d):
    if d is None or math.isnan(d):
        return "n/a"
    if math.isinf(d):
        return "+inf" if d > 0 else "-inf"
    return f"{d:.2f}"


def seeds_text(n, word="seed"):
    return f"{n} {word}{'' if n == 1 else 's'}"


def significance(p, alpha):
    if p is None or math.isnan(p):
        return "untested"
    return "significant" if p < alpha else "not significant"


# --- The statistics' columns: one entry per stats.PAIRED_STATISTICS name. ----


@dataclasses.dataclass(frozen=True)
class Column:
    """How one statistic is headed and printed."""

    header: str
    format: Callable  # float -> str
    meaning: str  # the caption's explanation: "<header>: <meaning>."
    terminal: bool = False  # also a column of the terminal (and results) table


STATISTICS = {
    "p_wilcoxon": Column("Wilcoxon p", format_p, "two-sided Wilcoxon signed-rank test "
                         "of the paired differences"),
    "d_z": Column("d_z", format_d, "Cohen's effect size of the paired differences",
                  terminal=True),
}


def statistic_text(name, test, alpha):
    """One statistic of a paired test as its column prints it.

    The Wilcoxon p-value is shown only where its test can reach alpha
    (n >= `stats.wilcoxon_floor`); below, its floor is stated instead: with
    5 pairs its smallest p is 0.0625, so a "p=0.06" would read as a near
    miss when it is the best the test can give.
    """
    if name == "p_wilcoxon" and 2 <= test.n < stats.wilcoxon_floor(alpha):
        return f"n/a (n<{stats.wilcoxon_floor(alpha)})"
    return STATISTICS[name].format(test.statistics[name])


def wilcoxon_floor_note(alpha):
    n = stats.wilcoxon_floor(alpha)
    return (f"the Wilcoxon signed-rank test cannot reject at {alpha:g} below n={n} "
            f"pairs (its smallest two-sided p with {n - 1} is {2 / 2 ** (n - 1):.4g}), so "
            "it is shown only from there; it is not Holm-adjusted")


def columns(terminal_only=False):
    """(name, Column) in `stats.PAIRED_STATISTICS` order."""
    out = [(name, STATISTICS[name]) for name in stats.PAIRED_STATISTICS]
    return [(n, c) for n, c in out if c.terminal or not terminal_only]


# --- How a metric is shown. ------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Kind:
    abbrev: str  # in column headers: "test acc", "Δ acc"
    scale: float = 1.0
    digits: int = 4
    percent: bool = False  # values in %, differences in percentage points


_KINDS = {"accuracy": _Kind("acc", scale=100.0, digits=2, percent=True)}
_SPLITS = {"test": ("test", "test"), "val": ("validation", "val")}  # word, abbrev


@dataclasses.dataclass(frozen=True)
class Shown:
    """One metric's words and number formats."""

    label: str  # "test accuracy", "validation loss"
    header: str  # a column of values: "test acc", "val loss"
    kind: _Kind

    def number(self, x):
        return "n/a" if not math.isfinite(x) else f"{self.kind.scale * x:.{self.kind.digits}f}"

    def value(self, x):
        """94.29% / 0.2124."""
        return self.number(x) + ("%" if self.kind.percent and math.isfinite(x) else "")

    def pm(self, e, unit=True):
        """Mean ± sd: "94.29% ± 0.52" (unit=False: "94.29 ± 0.52")."""
        mean = self.value(e.mean) if unit else self.number(e.mean)
        return mean if math.isnan(e.std) else f"{mean} ± {self.number(e.std)}"

    def diff_number(self, d):
        return "n/a" if not math.isfinite(d) else f"{self.kind.scale * d:+.{self.kind.digits}f}"

    def diff(self, d):
        """+1.17 pp / +0.0123."""
        text = self.diff_number(d)
        return text + " pp" if self.kind.percent and text != "n/a" else text

    def interval(self, lo, hi, sep="–", signed=False):
        if not (math.isfinite(lo) and math.isfinite(hi)):
            return "n/a"
        fmt = self.diff_number if signed else self.number
        return f"{fmt(lo)}{sep}{fmt(hi)}"

    @property
    def diff_unit(self):
        return " (pp)" if self.kind.percent else ""


def shown(name):
    """The words and formats of the metric `name` ("test_accuracy", ...)."""
    m = stats.Metric(name)
    split = name[: len(name) - len(m.short) - 1] if m.short != name else ""
    word, abbrev = _SPLITS.get(split, (split, split))
    kind = _KINDS.get(m.short, _Kind(m.short.replace("_", " ")))
    label = " ".join(w for w in (word, m.short.replace("_", " ")) if w)
    header = " ".join(w for w in (abbrev, kind.abbrev) if w)
    return Shown(label=label, header=header, kind=kind)


def thresholded(summary):
    """Whether the tables show epochs to the convergence threshold.

    `training.convergence_threshold` is a validation accuracy: it says when
    a classifier has converged. A sweep that compares another metric (a
    language model's log-perplexity, whose next-byte accuracy stays far
    below any such threshold) gets no such column.
    """
    return shown(summary.metric.name).kind is _KINDS["accuracy"]


def metric_note(summary):
    """'test accuracy, higher is better'."""
    better = "higher" if summary.metric.higher_is_better else "lower"
    return f"{shown(summary.metric.name).label}, {better} is better"


def ci_text(test, confidence):
    """'95% CI +0.28 to +2.06' for a paired test, in its metric's units."""
    if math.isnan(test.ci_low):
        return f"{confidence:.0%} CI n/a"
    s = shown(test.metric)
    return f"{confidence:.0%} CI {s.interval(test.ci_low, test.ci_high, ' to ', True)}"


def reached_text(a):
    return f"{a.reached}/{a.n} reached"


# --- Notes: what a degenerate or incomplete test means. -----------------------------


def paired_notes(test):
    """The caveats of one `PairedTest`, as sentences."""
    notes = []
    if test.n < 2:
        notes.append(f"{seeds_text(test.n, 'paired seed')}: a paired test needs at least 2")
    elif test.degenerate and test.mean_diff == 0.0:
        notes.append("all paired differences are zero: the t-test and its interval are "
                     "undefined (no spread to estimate), so the decision uses the exact "
                     "Wilcoxon p-value (1)")
    elif test.degenerate:
        notes.append("the paired differences are all equal: the t-test and its interval "
                     "are undefined (no spread to estimate, not a zero-width interval), so "
                     "the decision uses the exact Wilcoxon p-value")
    if test.unpaired:
        notes.append(f"paired on {test.n + test.non_finite} common seeds; {test.unpaired} "
                     "seed results without a partner left out")
    if test.non_finite:
        notes.append(f"{test.non_finite} seed(s) with a non-finite "
                     f"{shown(test.metric).label} left out")
    return tuple(notes)


def summary_notes(summary):
    notes = [f"{a.activation} has {a.n} seed: no spread or interval"
             for a in summary.activations if a.n < 2]
    base = summary.activation(summary.baseline)
    for name, (k, p) in summary.failed_only.items():
        notes.append(f"{name}: all {k} members diverged, so it has no {shown(summary.metric.name).label} "
                     f"to compare; failure rate {k}/{k} vs {base.activation} "
                     f"{base.failed}/{base.attempted} (Fisher exact p{p_equals(p)}, unadjusted)")
    return tuple(notes)


def all_notes(summary):
    """(who, note): the summary's notes (who None), then each comparison's."""
    out = [(None, n) for n in summary_notes(summary)]
    for c in summary.comparisons:
        out += [(f"{c.activation} vs {c.baseline}", n) for n in paired_notes(c.paired)]
    return out
