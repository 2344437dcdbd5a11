"""A study's numbers in words (issue 18 §6, §7): its comparisons'
three-way verdicts, the interactions, the diverged members, the aggregate,
the mixed model across tasks (issue 32 §3).

The numbers are `kg_service.analysis.numbers.study`'s and `aggregate`'s; the
formats and outcome words are `kg_service.analysis.words.wording`'s, shared with
a sweep's report. `kg_service.analysis.reports.study_report` lays these out.
"""

import math

from kg_service.analysis.words.verdict_wording import OUTCOME_WORDS
from kg_service.analysis.words.wording import p_equals
from kg_service.analysis.words.wording import seeds_text
from kg_service.analysis.words.wording import shown


def study_outcome(c):
    """'better', 'worse (within margin)', 'equivalent', ... of a study comparison."""
    return OUTCOME_WORDS[c.outcome] + (" (within margin)" if c.within_margin else "")


def study_comparison_verdict(study, c):
    """One line: an activation against its sweep's baseline, its three-way
    verdict on the Holm p-values of the whole study's families."""
    s, test = shown(c.metric.name), c.paired
    head = f"{c.sweep}: {c.activation} vs {c.baseline} on {s.label}"
    if test.n < 2:
        return (f"{head}: untested ({seeds_text(test.n, 'paired seed')}); it still "
                f"counts in the family of {study.family_size}.")
    if math.isfinite(c.margin):
        margin = "±" + s.diff(c.margin).lstrip("+")
        equivalence = (f"; within {margin}: TOST p{p_equals(c.p_equivalence)}, study "
                       f"Holm p{p_equals(c.p_equivalence_holm)}")
    else:
        equivalence = "; no margin, so never equivalent"
    return (f"{head}: {study_outcome(c)}, {s.diff(test.mean_diff)} "
            f"({deciding_ci(s, *c.verdict.interval, c.verdict.confidence)}, "
            f"p{p_equals(test.p_value)}, study Holm "
            f"p{p_equals(c.p_holm)} over {study.family_size}{equivalence}; "
            f"{seeds_text(test.n)}).")


def deciding_ci(s, low, high, confidence):
    """'98.3% CI -0.01 to +0.03': the interval that decides, at its level
    (issue 30 §8: never a plain 95% one beside a Holm verdict)."""
    level = f"{confidence:.1%}".replace(".0%", "%")
    if not (math.isfinite(low) and math.isfinite(high)):
        return f"{level} CI n/a"
    return f"{level} CI {s.interval(low, high, ' to ', True)}"


def failures_note(study):
    """The diverged members each sweep left out, or '' when none diverged."""
    parts = [f"{s.name}: " + ", ".join(f"{a} {n}" for a, n in sorted(s.failed.items()))
             for s in study.sweeps if s.failed]
    if not parts:
        return ""
    return ("Diverged members, left out of the comparisons (their runs are FAILED in the "
            "store): " + "; ".join(parts) + ".")


def interaction_verdict(study, i):
    """One line: did the activation's gap to the baseline move between the
    two sweeps (the difference of paired differences, Welch's test)?"""
    s, t = shown(i.metric.name), i.test
    gap = f"({i.activation} - {i.baseline}) on {s.label}"
    moved = (f"{gap}: {s.diff(i.diff_first.mean_diff)} in {i.first}, "
             f"{s.diff(i.diff_second.mean_diff)} in {i.second}")
    if math.isnan(t.p_value):
        return f"{moved}; the change cannot be tested (each side needs 2 seeds and a spread)."
    gains = (t.estimate > 0) == i.metric.higher_is_better
    who, other = (i.activation, i.baseline) if gains else (i.baseline, i.activation)
    word = "significant" if i.significant else "not significant"
    holm_text = (f", Holm p{p_equals(i.p_holm)} over {len(study.interactions)} "
                 "interactions" if len(study.interactions) > 1 else "")
    return (f"{moved}: the gap moved {s.diff(t.estimate)} in {who}'s favour over "
            f"{other} ({deciding_ci(s, *i.ci_holm, i.ci_holm_confidence)}, "
            f"Welch p{p_equals(t.p_value)}, "
            f"df {t.df:.1f}{holm_text}): {word}.")


def normalization_note(aggregate, metrics):
    """How the aggregate's scores were made comparable across tasks."""
    return (f"Scores normalized per task (sweep), min-max over every run of every "
            f"activation in it: 1 = the task's best run, 0 = its worst, on each "
            f"task's compared metric ({metrics}). IQM and probability of improvement "
            f"with {aggregate.confidence:.0%} percentile intervals from "
            f"{aggregate.reps} stratified bootstrap resamples (runs within each task).")


def improvement_verdict(aggregate, imp):
    """'P(geglu > relu) = 0.83 (95% CI 0.61 to 1.00) over 2 tasks'."""
    return (f"P({imp.x} > {imp.y}) = {imp.probability:.2f} "
            f"({aggregate.confidence:.0%} CI {imp.ci_low:.2f} to {imp.ci_high:.2f}) over "
            f"{len(imp.tasks)} tasks")


def mixed_model_note(fit):
    """The mixed model in a sentence: what it fits and how the contrasts'
    intervals are made simultaneous."""
    s = shown(fit.metric)
    return (f"{s.label.capitalize()} of every seed ({fit.observations} runs, {fit.tasks} "
            "tasks), REML: "
            f"activation as fixed effect; task as random effect, with an activation-"
            f"within-task and a seed-within-task variance component (a seed is shared "
            f"by every activation of its task). Contrasts in the metric's units; "
            f"{fit.confidence:.0%} intervals simultaneous over the {len(fit.contrasts)} "
            f"contrast{'s' if len(fit.contrasts) != 1 else ''} by max-t (multivariate t, "
            f"df {fit.df} = (activations - 1)(tasks - 1)), critical value {fit.critical:.2f}.")


def mixed_warning(fit):
    """A line when the fit did not converge (its numbers are then not to be
    trusted), or '' ."""
    if fit.converged:
        return ""
    return ("The mixed model did NOT converge: its estimates and intervals are not "
            "to be trusted (statsmodels: " + "; ".join(fit.warnings)[:300] + ").")


def mixed_not_fitted(reason):
    """'The mixed model was not fitted: ...'."""
    return f"The mixed model: {reason}."
