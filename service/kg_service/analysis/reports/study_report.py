"""A study's report: the terminal tables, report.md, summary.json, the figure.

Words from `kg_service.analysis.words.wording` (its study block), laid out with
`kg_service.analysis.words.tables`; the numbers are `study.analyse`'s and
`aggregate.aggregate`'s, passed in. Nothing here opens a store.
"""

import dataclasses
import json
import math

import matplotlib

from kg_service.analysis.reports import figures
from kg_service.analysis.numbers import plain
from kg_service.analysis.words import claim_wording
from kg_service.analysis.words import tables
from kg_service.analysis.words import study_wording
from kg_service.analysis.words import wording

# A study's figure (issue 18 §7): drawn here, with the report it belongs to.
PERFORMANCE_PROFILE = "performance_profile.png"


def performance_profile(aggregate, path):
    """rliable's performance profile of a study's `aggregate.Aggregate`:
    per activation, the share of runs whose normalized score exceeds tau,
    with its stratified-bootstrap band. Saves it to `path`; False (nothing
    saved) when no activation ran in two tasks."""
    if not aggregate.activations:
        return False
    fig = figures.blank_figure(6.4, 4.2, layout="constrained")
    ax = fig.add_subplot()
    cmap = matplotlib.colormaps["tab10"]
    for i, a in enumerate(aggregate.activations):
        color = cmap(i % 10)
        ax.plot(aggregate.taus, a.profile, color=color,
                label=f"{a.activation} (IQM {a.iqm:.2f}, {len(a.tasks)} tasks)")
        ax.fill_between(aggregate.taus, a.profile_low, a.profile_high, color=color, alpha=0.2)
    ax.set_xlabel("normalized score τ (min-max per task: 0 worst run, 1 best)")
    ax.set_ylabel("fraction of runs with score > τ")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"Performance profile ({aggregate.confidence:.0%} stratified "
                 "bootstrap bands)", fontsize=10)
    return figures.save(fig, path)


def comparison_rows(study):
    """Every comparison of the family: one row each."""
    header = ["sweep", "metric", "activation", "vs", "seeds", "Δ",
              "deciding CI (level)", "p", f"study Holm p (m={study.family_size})",
              "margin", "TOST Holm p", "verdict"]
    rows = []
    for c in study.comparisons:
        s, t = wording.shown(c.metric.name), c.paired
        margin = "±" + s.diff(c.margin).lstrip("+") if math.isfinite(c.margin) else "none"
        rows.append([c.sweep, s.label, c.activation, c.baseline, str(t.n),
                     s.diff(t.mean_diff), deciding_interval(s, *c.verdict.interval,
                                                            c.verdict.confidence),
                     wording.format_p(t.p_value),
                     wording.format_p(c.p_holm) + ("*" if c.significant else ""),
                     margin, wording.format_p(c.p_equivalence_holm),
                     study_wording.study_outcome(c)])
    return header, rows


def interaction_rows(study):
    """Every interaction: the gap in each sweep, its change, Welch's test."""
    header = ["metric", "gap", "reference level", "other level",
              "change (other - reference)", "CI at Holm's level", "Welch p", "df", "Holm p"]
    rows = []
    for i in study.interactions:
        s, t = wording.shown(i.metric.name), i.test
        rows.append([s.label, f"{i.activation} - {i.baseline}",
                     f"{s.diff(i.diff_first.mean_diff)} ({i.first}, n={t.n_first})",
                     f"{s.diff(i.diff_second.mean_diff)} ({i.second}, n={t.n_second})",
                     s.diff(t.estimate), deciding_interval(s, *i.ci_holm, i.ci_holm_confidence),
                     wording.format_p(t.p_value), f"{t.df:.1f}",
                     wording.format_p(i.p_holm) + ("*" if i.significant else "")])
    return header, rows


def deciding_interval(s, low, high, confidence):
    """'-0.0100 to +0.0300 (98.3%)': the interval that decides, with its
    level (issue 30 §8); 'n/a' where it is undefined."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return "n/a"
    return f"{s.interval(low, high, ' to ', True)} ({confidence:.1%})".replace(".0%", "%")


def aggregate_rows(aggregate):
    header = ["activation", "tasks", "runs", "IQM", f"{aggregate.confidence:.0%} CI"]
    rows = [[a.activation, str(len(a.tasks)), str(a.runs), f"{a.iqm:.3f}",
             f"{a.ci_low:.3f} to {a.ci_high:.3f}"] for a in aggregate.activations]
    return header, rows


def _metrics(study):
    return ", ".join(sorted({wording.shown(s.metric.name).label
                             + (", higher is better" if s.metric.higher_is_better
                                else ", lower is better") for s in study.sweeps}))


def heading(study):
    names = ", ".join(s.name for s in study.sweeps)
    return (f'Study "{study.name}": {len(study.sweeps)} sweeps ({names}); '
            f"{study.family_size} comparisons in one Holm family "
            f"({study.untestable} untestable, counted), alpha {study.alpha:g}.")


def terminal_lines(study, aggregate):
    """What `kg report --study` prints."""
    lines = [heading(study)] + [n for n in [study_wording.failures_note(study)] if n] + [""]
    lines += tables.text_table(*comparison_rows(study), left=(0, 1, 2, 3, 11))
    if study.interactions:
        lines += ["", "Interactions (difference of paired differences, Welch's t):"]
        lines += tables.text_table(*interaction_rows(study), left=(0, 1, 2, 3))
        lines += [study_wording.interaction_verdict(study, i) for i in study.interactions]
    if aggregate.activations:
        lines += ["", "Across tasks (IQM of normalized scores):"]
        lines += tables.text_table(*aggregate_rows(aggregate), left=(0,))
        lines += [study_wording.improvement_verdict(aggregate, imp)
                  for imp in aggregate.improvements]
    return lines


def claims_part(claims):
    """The study's declared claims, labelled (issue 32 §1); [] without any."""
    if not claims:
        return []
    return (["## Claims", "", claim_wording.caption(claims), "",
             *tables.markdown_table(*claim_wording.claim_rows(claims)), ""]
            + [f"- {line}." for line in claim_wording.claim_lines(claims)] + [""])


def markdown(study, aggregate, figure_written, claims=()):
    parts = [f"# Study {study.name}", "", heading(study), "",
             *[n + "\n" for n in [study_wording.failures_note(study)] if n],
             *claims_part(claims),
             "## Comparisons (one family)", "",
             *tables.markdown_table(*comparison_rows(study)), "",
             f"Δ: mean paired difference from the sweep's baseline, seed by seed; p: paired "
             f"t-test; study Holm p: Holm over all {study.family_size} comparisons of every "
             f"sweep and metric, untestable ones counted in m; * marks p < {study.alpha:g}. "
             f"TOST Holm p: equivalence within ±margin (the sweep's analysis.margin), Holm "
             f"over the comparisons with a margin. Verdict: better or worse when the study "
             f"Holm p < {study.alpha:g}, else equivalent when the TOST Holm p is, else "
             f"inconclusive.",
             ""]
    parts += [f"- {study_wording.study_comparison_verdict(study, c)}"
              for c in study.comparisons]
    if study.interactions:
        parts += ["", "## Interactions", "", *tables.markdown_table(*interaction_rows(study)),
                  "", "The change of an activation's paired gap to the baseline from one "
                  "sweep to the other, tested with Welch's t on the two sets of paired "
                  "differences (separate runs, unequal spreads); Holm over the "
                  "interactions.", ""]
        parts += [f"- {study_wording.interaction_verdict(study, i)}" for i in study.interactions]
    parts += ["", "## Across tasks", ""]
    if aggregate.activations:
        parts += [*tables.markdown_table(*aggregate_rows(aggregate)), "",
                  study_wording.normalization_note(aggregate, _metrics(study)), ""]
        parts += [f"- {study_wording.improvement_verdict(aggregate, imp)}"
                  for imp in aggregate.improvements]
        if figure_written:
            parts += ["", f"![performance profile]({PERFORMANCE_PROFILE})"]
    else:
        parts += ["No activation ran in two sweeps of the study: nothing to aggregate."]
    return "\n".join(parts) + "\n"


def summary_dict(study, aggregate):
    """summary.json: the numbers, and the sentences beside them."""
    def comparison(c):
        return {"sweep": c.sweep, "metric": c.metric.name, "activation": c.activation,
                "baseline": c.baseline, "paired": plain.paired_to_dict(c.paired),
                "p_holm": c.p_holm, "significant": c.significant, "outcome": c.outcome,
                "within_margin": c.within_margin, "margin": c.margin, "p_equivalence": c.p_equivalence,
                "p_equivalence_holm": c.p_equivalence_holm,
                "deciding_interval": list(c.verdict.interval),
                "deciding_confidence": c.verdict.confidence,
                "verdict": study_wording.study_comparison_verdict(study, c)}

    def interaction(i):
        return {"metric": i.metric.name, "activation": i.activation, "baseline": i.baseline,
                "first": i.first, "second": i.second,
                "mean_diff_first": i.diff_first.mean_diff,
                "mean_diff_second": i.diff_second.mean_diff,
                **dataclasses.asdict(i.test), "p_holm": i.p_holm,
                "significant": i.significant, "reference_level": i.first_level,
                "other_level": i.second_level, "ci_holm": list(i.ci_holm),
                "ci_holm_confidence": i.ci_holm_confidence,
                "verdict": study_wording.interaction_verdict(study, i)}

    def aggregated(a):
        d = dataclasses.asdict(a)
        return {k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in d.items()}

    return plain.json_ready({
        "study": study.name,
        "sweeps": [{"name": s.name, "baseline": s.baseline, "metric": s.metric.name,
                    "higher_is_better": s.metric.higher_is_better, "failed": s.failed}
                   for s in study.sweeps],
        "confidence": study.confidence, "alpha": study.alpha,
        "family_size": study.family_size, "untestable": study.untestable,
        "failures_note": study_wording.failures_note(study),
        "comparisons": [comparison(c) for c in study.comparisons],
        "interactions": [interaction(i) for i in study.interactions],
        "aggregate": {
            "normalization": aggregate.normalization,
            "note": study_wording.normalization_note(aggregate, _metrics(study)),
            "reps": aggregate.reps, "taus": aggregate.taus.tolist(),
            "activations": [aggregated(a) for a in aggregate.activations],
            "improvements": [{**dataclasses.asdict(imp),
                              "verdict": study_wording.improvement_verdict(aggregate, imp)}
                             for imp in aggregate.improvements],
        },
    })


def write_study_report(study, aggregate, out, claims=()):
    """Writes report.md, summary.json and the performance profile into the
    folder `out` (a `pathlib.Path`, created); returns the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    figure = out / PERFORMANCE_PROFILE
    drawn = performance_profile(aggregate, figure)
    if drawn:
        paths.append(figure)
    report = out / "report.md"
    report.write_text(markdown(study, aggregate, drawn, claims))
    summary = out / "summary.json"
    summary.write_text(json.dumps(summary_dict(study, aggregate), indent=2,
                                  allow_nan=False) + "\n")
    return [report, summary, *paths]
