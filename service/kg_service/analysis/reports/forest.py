"""The forest plot: each comparison's difference with its deciding interval.

The picture a reader wants first (issue 34 §2): one row per comparison, Δ
as a point, the interval that decides its verdict as a line, the
equivalence margin as a grey band around zero, and the verdict written
beside the row. It takes plain `Row`s (label, estimate, low, high, margin,
verdict), so a sweep's comparisons, a study's and declared claims all
draw through the same function; `sweep_rows` and `study_rows` make them.
"""

import dataclasses
import math

from kg_service.analysis.reports.canvas import blank_figure
from kg_service.analysis.words import study_wording
from kg_service.analysis.words import verdict_wording
from kg_service.analysis.words import wording

FOREST = "comparisons_forest.png"
ALT = "Forest plot: each comparison's difference from the baseline with its deciding interval"


@dataclasses.dataclass(frozen=True)
class Row:
    """One comparison, in the plot's units (e.g. percentage points).

    `low`/`high`: its deciding interval (NaN: none, e.g. constant
    differences decided by an exact test; the point is drawn alone);
    `margin`: the equivalence margin (NaN: none set); `verdict`: the
    words written beside the row ("better (97.5% CI)").
    """

    label: str
    estimate: float
    low: float
    high: float
    margin: float
    verdict: str


def _deciding(verdict, scale):
    """(low, high, confidence words) of a `decisions.Verdict`, scaled."""
    lo, hi = verdict.interval
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return math.nan, math.nan, "no interval"
    return scale * lo, scale * hi, f"{verdict.confidence:.1%} CI".replace(".0%", "%")


def sweep_rows(summary):
    """A sweep's comparisons with its baseline, as `Row`s in the metric's
    shown units."""
    s = wording.shown(summary.metric.name)
    rows = []
    for c in summary.comparisons:
        if c.verdict is None:
            continue
        lo, hi, level = _deciding(c.verdict, s.kind.scale)
        margin = c.verdict.margin
        rows.append(Row(
            label=f"{c.activation} vs {c.baseline}",
            estimate=s.kind.scale * c.paired.mean_diff, low=lo, high=hi,
            margin=s.kind.scale * margin if math.isfinite(margin) else math.nan,
            verdict=f"{verdict_wording.OUTCOME_WORDS[c.verdict.outcome]} ({level})"))
    return rows


def study_rows(study, metric_name):
    """A study's comparisons on the metric `metric_name`, as `Row`s."""
    s = wording.shown(metric_name)
    rows = []
    for c in study.comparisons:
        if c.metric.name != metric_name:
            continue
        lo, hi, level = _deciding(c.verdict, s.kind.scale)
        rows.append(Row(
            label=f"{c.sweep}: {c.activation} vs {c.baseline}",
            estimate=s.kind.scale * c.paired.mean_diff, low=lo, high=hi,
            margin=s.kind.scale * c.margin if math.isfinite(c.margin) else math.nan,
            verdict=f"{study_wording.study_outcome(c)} ({level})"))
    return rows


def axis_label(metric_name, higher_is_better):
    """"Δ test accuracy vs baseline (percentage points; higher is better)"."""
    s = wording.shown(metric_name)
    unit = "percentage points; " if s.kind.percent else ""
    better = "higher" if higher_is_better else "lower"
    return f"Δ {s.label} vs baseline ({unit}{better} is better)"


def forest_plot(rows, *, title, x_label):
    """The figure of `rows` (None when there is nothing to draw): a row per
    comparison, top to bottom in the given order."""
    rows = [r for r in rows if math.isfinite(r.estimate)]
    if not rows:
        return None
    height = 1.5 + 0.45 * len(rows)  # inches: a fixed frame, a line per row
    fig = blank_figure(8.5, height)
    ax = fig.subplots()
    # Room for the labels on the left and the verdicts on the right.
    fig.subplots_adjust(left=0.27, right=0.72, bottom=0.6 / height, top=1 - 0.6 / height)
    banded = False
    for y, r in enumerate(reversed(rows)):
        if math.isfinite(r.margin):
            ax.fill_betweenx([y - 0.35, y + 0.35], -r.margin, r.margin, color="0.88",
                             linewidth=0, label=None if banded else "±margin (equivalence)")
            banded = True
        if math.isfinite(r.low):
            ax.plot([r.low, r.high], [y, y], color="#0969da", linewidth=2.2)
        ax.plot([r.estimate], [y], marker="o", color="#0969da", markersize=6)
        ax.annotate(r.verdict, xy=(1.02, y), xycoords=("axes fraction", "data"),
                    va="center", fontsize=9)
    ax.axvline(0.0, color="0.3", linewidth=0.9)
    ax.set_yticks(range(len(rows)), [r.label for r in reversed(rows)], fontsize=9)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    spans = [abs(v) for r in rows for v in (r.estimate, r.low, r.high, r.margin)
             if math.isfinite(v)]
    half = 1.15 * max(spans) if max(spans) > 0 else 1.0
    ax.set_xlim(-half, half)  # zero in the middle: the sign reads at a glance
    ax.set_xlabel(x_label, fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    if banded:
        ax.legend(fontsize=8, loc="lower left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    fig.suptitle(title, fontsize=11)
    return fig
