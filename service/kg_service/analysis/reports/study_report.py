"""A study's report: the terminal tables, report.md and report.html (one
`page.Page`), summary.json, the forest plots and the performance profile.

Words from `kg_service.analysis.words.wording` (its study block), laid out with
`kg_service.analysis.words.tables`; the numbers are `study.analyse`'s and
`aggregate.aggregate`'s, passed in. Nothing here opens a store.
"""

import dataclasses
import json
import math

import matplotlib

from kg_service.analysis.reports import figures
from kg_service.analysis.reports import forest
from kg_service.analysis.reports import page
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


def mixed_rows(fit):
    s = wording.shown(fit.metric)
    header = ["contrast", f"estimate ({s.label})", f"se{s.diff_unit}",
              f"{fit.confidence:.0%} simultaneous CI", "max-t adjusted p"]
    rows = [[c.name, s.diff(c.estimate), s.number(c.se), s.interval(c.low, c.high, " to ", True),
             wording.format_p(c.p_adjusted)] for c in fit.contrasts]
    return header, rows


def _mixed_lines(mixed):
    """The mixed model's lines for the terminal: the model in a sentence,
    its table, or why it was not fitted."""
    if isinstance(mixed, str):
        return [study_wording.mixed_not_fitted(mixed)]
    return [study_wording.mixed_model_note(mixed), *tables.text_table(*mixed_rows(mixed)),
            *[n for n in [study_wording.mixed_warning(mixed)] if n]]


def _mixed_blocks(mixed):
    """The mixed model's section's blocks (the same as `_mixed_lines`)."""
    if isinstance(mixed, str):
        return (page.Paragraph(study_wording.mixed_not_fitted(mixed)),)
    return (page.Paragraph(study_wording.mixed_model_note(mixed)), page.table(*mixed_rows(mixed)),
            *[page.Paragraph(n) for n in [study_wording.mixed_warning(mixed)] if n])


def claims_section(claims):
    """The declared claims, labelled (issue 32 §1), as a lead section; none
    without claims."""
    if not claims:
        return []
    return [page.Section("Claims", (
        page.Paragraph(claim_wording.caption(claims)),
        page.table(*claim_wording.claim_rows(claims)),
        *page.bullets([f"{line}." for line in claim_wording.claim_lines(claims)])), lead=True)]


def terminal_lines(study, aggregate, mixed=None):
    """What `kg report --study` prints; `mixed`: the mixed model's
    `MixedFit`, or why it was not fitted."""
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
    if mixed is not None:
        lines += ["", "One model across tasks (linear mixed model):"]
        lines += _mixed_lines(mixed)
    return lines


def study_page(study, aggregate, drawn=(), claims=(), mixed=None):
    """The study's report as a `page.Page`: its verdicts first, then the
    comparisons (with `drawn`'s forest plots), the interactions and the
    aggregate across tasks (with the performance profile, if drawn), the
    mixed model. `drawn`: (file name, alt text) of the figures written;
    `claims`: the declared claims labelled; `mixed`: the mixed model's
    `MixedFit`, or why it was not fitted."""
    verdicts = [study_wording.study_comparison_verdict(study, c) for c in study.comparisons]
    verdicts += [study_wording.interaction_verdict(study, i) for i in study.interactions]
    verdicts += [study_wording.improvement_verdict(aggregate, imp)
                 for imp in aggregate.improvements]
    blocks = [page.Paragraph(heading(study)),
              *[page.Paragraph(n) for n in [study_wording.failures_note(study)] if n],
              page.Section("Verdicts", tuple(page.bullets(verdicts)), lead=True),
              *claims_section(claims)]
    profile = [page.Figure(name, alt) for name, alt in drawn if name == PERFORMANCE_PROFILE]
    forests = [page.Figure(name, alt) for name, alt in drawn if name != PERFORMANCE_PROFILE]
    blocks.append(page.Section("Comparisons (one family)", (
        page.table(*comparison_rows(study)),
        page.Paragraph(
            f"Δ: mean paired difference from the sweep's baseline, seed by seed; p: paired "
            f"t-test; study Holm p: Holm over all {study.family_size} comparisons of every "
            f"sweep and metric, untestable ones counted in m; * marks p < {study.alpha:g}. "
            f"TOST Holm p: equivalence within ±margin (the sweep's analysis.margin), Holm "
            f"over the comparisons with a margin. Verdict: better or worse when the study "
            f"Holm p < {study.alpha:g}, else equivalent when the TOST Holm p is, else "
            f"inconclusive."),
        *forests)))
    if study.interactions:
        blocks.append(page.Section("Interactions", (
            page.table(*interaction_rows(study)),
            page.Paragraph("The change of an activation's paired gap to the baseline from "
                           "one sweep to the other, tested with Welch's t on the two sets "
                           "of paired differences (separate runs, unequal spreads); Holm "
                           "over the interactions."))))
    across = [page.Paragraph("No activation ran in two sweeps of the study: nothing to "
                             "aggregate.")]
    if aggregate.activations:
        across = [page.table(*aggregate_rows(aggregate)),
                  page.Paragraph(study_wording.normalization_note(aggregate, _metrics(study))),
                  *profile]
    blocks.append(page.Section("Across tasks", tuple(across)))
    if mixed is not None:
        blocks.append(page.Section("One model across tasks", _mixed_blocks(mixed)))
    return page.Page(f"Study {study.name}", tuple(blocks))


def forest_plots(study, out):
    """One forest plot per compared metric, saved into `out`; returns
    (file name, alt text) of each."""
    drawn = []
    metrics = {c.metric.name: c.metric.higher_is_better for c in study.comparisons}
    for metric, higher in sorted(metrics.items()):
        name = f"forest_{metric}.png"
        fig = forest.forest_plot(
            forest.study_rows(study, metric), x_label=forest.axis_label(metric, higher),
            title=f"Study {study.name}: each comparison's Δ and deciding interval")
        if figures.save(fig, out / name):
            drawn.append((name, f"{forest.ALT} ({wording.shown(metric).label})"))
    return drawn


def summary_dict(study, aggregate, mixed=None):
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
        "mixed_model": (None if mixed is None else {"not_fitted": mixed}
                        if isinstance(mixed, str) else
                        {**dataclasses.asdict(mixed), "note": study_wording.mixed_model_note(mixed)}),
    })


def write_study_report(study, aggregate, out, claims=(), mixed=None):
    """Writes report.md, report.html, summary.json, the forest plots and the
    performance profile into the folder `out` (a `pathlib.Path`, created);
    returns the paths written, report.md first. `claims`: the declared
    claims labelled; `mixed`: the mixed model's `MixedFit`, or why it was
    not fitted."""
    out.mkdir(parents=True, exist_ok=True)
    drawn = forest_plots(study, out)
    if performance_profile(aggregate, out / PERFORMANCE_PROFILE):
        drawn.append((PERFORMANCE_PROFILE, "Performance profile: the share of runs above "
                      "each normalized score, per activation"))
    md_path, html_path = page.write(study_page(study, aggregate, drawn, claims, mixed), out)
    summary = out / "summary.json"
    summary.write_text(json.dumps(summary_dict(study, aggregate, mixed), indent=2,
                                  allow_nan=False) + "\n")
    return [md_path, summary, html_path, *(out / name for name, _ in drawn)]
