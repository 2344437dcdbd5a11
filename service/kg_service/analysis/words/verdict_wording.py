"""The verdicts of a sweep in words, and summary.json's sentences.

One sentence per comparison (better, worse, equivalent within a margin,
inconclusive; with its deciding interval, Holm p and seeds), the winner's
verdict, the seed plans and failure lines, and `summary_json`, which
puts the numbers of `kg_service.analysis.numbers.plain` beside these sentences.
How a single number or metric is shown comes from
`kg_service.analysis.words.wording`; `kg_service.analysis.words.tables` lays the
sentences out.

Example:

>>> from kg_service.analysis.numbers import comparisons
>>> from kg_service.results import MemberResult
>>> h = {"loss": [0.3], "accuracy": [0.9], "val_loss": [0.3],
...      "val_accuracy": [0.9]}
>>> rs = [MemberResult(a, s, h, 0.3, acc, 1)
...       for a, accs in {"relu": [0.90, 0.91, 0.92],
...                       "gelu": [0.92, 0.92, 0.95]}.items()
...       for s, acc in enumerate(accs)]
>>> summary = comparisons.summarize(rs, baseline="relu")
>>> comparison_verdict(summary, summary.comparisons[0])[:40]
'gelu vs relu: inconclusive (+2.00 pp, 95'
"""

import math

from kg_service.analysis.numbers import decisions
from kg_service.analysis.numbers import plain
from kg_service.analysis.words import wording




OUTCOME_WORDS = {
    decisions.BETTER: "better", decisions.WORSE: "worse", decisions.EQUIVALENT: "equivalent",
    decisions.INCONCLUSIVE: "inconclusive", decisions.UNTESTED: "untested",
}


def margin_text(summary):
    """'±0.30 pp' in the compared metric's units, or '' with no margin."""
    if not math.isfinite(summary.margin):
        return ""
    s = wording.shown(summary.metric.name)
    return "±" + s.diff(summary.margin).lstrip("+")


def pairs_text(test, failed=0):
    """'6 pairs' / '5 pairs (2 diverged members left out)'."""
    text = wording.seeds_text(test.n, "pair")
    if failed:
        text += f" ({failed} diverged member{'s' if failed > 1 else ''} left out)"
    return text


def _interval(s, interval, confidence, what=""):
    lo, hi = interval
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return "no interval"
    return f"{what}{confidence:.1%} CI {s.interval(lo, hi, ' to ', True)}".replace(".0%", "%")


def comparison_verdict(summary, c):
    """One line: better, worse, equivalent or inconclusive against the baseline,
    with the interval that decides it."""
    failed = summary.activation(c.activation).failed + summary.activation(c.baseline).failed
    return verdict_text(summary, c.activation, c.baseline, c.paired, c.verdict, failed,
                        summary.holm)


def group_text(names):
    """'gelu', or 'mean(geglu, swiglu)' for a contrast's side."""
    return names[0] if len(names) == 1 else f"mean({', '.join(names)})"


def pair_verdict(summary, pc, family):
    """One line for a `comparisons.PairComparison` (a pair, or a contrast)."""
    left, right = group_text(pc.plus), group_text(pc.minus)
    text = verdict_text(summary, left, right, pc.paired, pc.verdict, 0, family > 1)
    return text if pc.name == f"{left} vs {right}" else f"{pc.name}: {text}"


def verdict_text(summary, name, baseline, test, v, failed=0, holm=False):
    """better / worse / equivalent / inconclusive, in the metric's units."""
    s = wording.shown(summary.metric.name)
    pairs = pairs_text(test, failed)
    if test.n < 2 or v is None:
        return (f"{name} vs {baseline}: not tested ({pairs}; a paired test needs at "
                "least 2).")
    if summary.sequential:  # issue 30 §7: the looks decided, nothing else does
        return (f"{name} vs {baseline}: {OUTCOME_WORDS[v.outcome]} by the sequential "
                f"design (its looks: \"Sequential seeds\"; {pairs}); a fixed-design test "
                "over every seed is no verdict here, and a mean after stopping is biased")
    margin = margin_text(summary)
    d_z = f"d_z={wording.format_d(test.statistics['d_z'])}"
    if math.isfinite(test.dz_low):
        d_z += f" [{test.dz_low:.2f}, {test.dz_high:.2f}]"
    by = f"{test.test} p{wording.p_equals(test.p_value)}"
    if holm:
        by += f", Holm p{wording.p_equals(v.p_holm)}"
    if test.degenerate:
        how = (f"all {test.n} differences equal {s.diff(test.mean_diff)}: the t-test and "
               "its interval are undefined, decided by the exact Wilcoxon test")
    else:
        how = None
    if v.outcome in (decisions.BETTER, decisions.WORSE):
        verb = "is better than" if v.outcome == decisions.BETTER else "is worse than"
        ci = how or _interval(s, v.interval, v.confidence, "Holm-consistent " if holm else "")
        text = (f"{name} {verb} {baseline} by {s.diff(test.mean_diff)} {s.label} "
                f"({ci}, {by}, {d_z}, {pairs})")
        if v.within_margin:
            text += f"; the difference lies within the {margin} margin: real but negligible"
        return text
    tost = f"TOST p{wording.p_equals(v.p_equivalence)}"
    if holm:
        tost += f", Holm p{wording.p_equals(v.p_equivalence_holm)}"
    if v.outcome == decisions.EQUIVALENT:
        ci = how or _interval(s, v.interval, v.confidence)
        return (f"{name} is equivalent to {baseline} within {margin} {s.label} "
                f"({s.diff(test.mean_diff)}, {ci} inside the margin, {tost}, {pairs})")
    # Inconclusive: never "no difference".
    ci = how or _interval(s, v.interval, v.confidence)
    if margin:
        return (f"{name} vs {baseline}: inconclusive ({s.diff(test.mean_diff)}, {ci} "
                f"reaches past {margin}; {by}; {tost}; {d_z}, {pairs}): neither a "
                "difference nor equivalence is shown")
    return (f"{name} vs {baseline}: inconclusive ({s.diff(test.mean_diff)}, {ci}, {by}, "
            f"{d_z}, {pairs}): no difference is shown, and with no margin set "
            "equivalence is not tested")


def contrast_lines(summary):
    """One verdict line per declared contrast (Holm over the contrasts)."""
    return tuple(pair_verdict(summary, pc, len(summary.contrasts)) for pc in summary.contrasts)


def pair_lines(summary):
    """One verdict line per pair of activations (Holm over every pair)."""
    return tuple(pair_verdict(summary, pc, len(summary.pairs)) for pc in summary.pairs)


def rank_text(summary):
    """'P(best mean) over 10,000 resamples of the seeds: gelu 0.62, relu 0.30, ...'."""
    if not summary.rank_first:
        return ""
    ranked = sorted(summary.rank_first.items(), key=lambda kv: -kv[1])
    return ("P(best mean), resampling the seeds: "
            + ", ".join(f"{a} {p:.2f}" for a, p in ranked))


def plan_line(summary, c):
    """'to decide gelu vs relu within ±0.30 pp: ~60 seeds (...); this sweep had 10'."""
    p = c.plan
    if p is None:
        return ""
    within = f" within {margin_text(summary)}" if margin_text(summary) else ""
    head = f"to decide {c.activation} vs {c.baseline}{within}"
    had = f"this sweep had {p.n}"
    if p.n < 2:
        return f"{head}: cannot be planned from {wording.seeds_text(p.n, 'pair')}; {had}"
    parts = []
    if p.superiority is not None:
        parts.append(f"a difference at the observed d_z "
                     f"{wording.format_d(c.paired.statistics['d_z'])}: ~{p.superiority}")
    if p.equivalence is not None:
        parts.append(f"equivalence: ~{p.equivalence}")
    if p.decide is None:
        why = ("the differences are constant (no spread to plan with)" if c.paired.degenerate
               else "no seed count reaches the power")
        return f"{head}: cannot be planned: {why}; {had}"
    return (f"{head}: ~{p.decide} seeds for power {p.power:g} at alpha {p.alpha:.3g} "
            f"({'; '.join(parts)}); {had}")


def failure_line(summary, c):
    """'failures: gelu 2/10, relu 0/10 (Fisher exact p=0.47)', or ''."""
    a, b = summary.activation(c.activation), summary.activation(c.baseline)
    if not (a.failed or b.failed):
        return ""
    return (f"failures: {a.activation} {a.failed}/{a.attempted} diverged, {b.activation} "
            f"{b.failed}/{b.attempted} (Fisher exact p{wording.p_equals(c.failures_p)}, unadjusted)")


def winner_verdict(summary):
    """One line: who won, and whether the lead means anything."""
    w, baseline = summary.winner, summary.baseline
    s = wording.shown(summary.metric.name)
    top = summary.activation(w.activation)
    if w.runner_up is None:
        return (f"Only {w.activation} was trained ({s.value(w.mean)} mean {s.label}): "
                "nothing to compare.")
    lead = w.lead
    if summary.sequential:  # issue 30 §7: no fixed-design test of the lead
        return (f"Winner: {w.activation} ({s.value(w.mean)} mean {s.label} over "
                f"{wording.seeds_text(top.n)}): the highest mean, not a verdict; a "
                "sequential sweep decides each activation against the baseline only, "
                "at its looks.")
    if baseline in (w.activation, w.runner_up):
        how = ", Holm-adjusted" if summary.holm else ""
    else:
        how = " (unadjusted, post hoc)"
    text = (f"Winner: {w.activation} ({s.value(w.mean)} mean {s.label} over "
            f"{wording.seeds_text(top.n)}). Its lead over the runner-up {w.runner_up} ")
    if lead.n < 2:
        text += (f"({s.diff(lead.mean_diff)} on {wording.seeds_text(lead.n, 'paired seed')}) cannot "
                 "be tested: a paired test needs at least 2 seeds.")
    else:
        text += (f"({s.diff(lead.mean_diff)}, {wording.ci_text(lead, summary.confidence)}, "
                 f"{lead.test} p{wording.p_equals(w.lead_p)}{how}, "
                 f"{wording.seeds_text(lead.n, 'paired seed')}) is ")
        text += "significant." if w.significant_over_runner_up else (
            "not significant: the data do not separate them.")
    pair = next((pc for pc in summary.pairs
                 if {pc.plus[0], pc.minus[0]} == {w.activation, w.runner_up}), None)
    if pair is not None and len(summary.pairs) > 1:
        outcome = pair.verdict.outcome
        if pair.plus[0] != w.activation:  # the pair reads runner-up vs winner
            outcome = {decisions.BETTER: decisions.WORSE, decisions.WORSE: decisions.BETTER}.get(
                outcome, outcome)
        text += (f" Over all {len(summary.pairs)} pairs (Holm), the winner is "
                 f"{OUTCOME_WORDS[outcome]} against the runner-up"
                 f" (Holm p{wording.p_equals(pair.verdict.p_holm)}).")
    if summary.rank_first:
        text += f" {rank_text(summary)}."
    if w.significant_over_baseline is not None and w.runner_up != baseline:
        c = summary.comparison(w.activation)
        text += (f" Against the baseline {baseline}: {s.diff(c.paired.mean_diff)}, "
                 f"{_outcome(c, summary)} "
                 f"({'Holm p' if summary.holm else 'p'}{wording.p_equals(c.p_holm)}).")
    return text


def _outcome(c, summary):
    """'better' / 'worse' / 'equivalent' / 'inconclusive' (or the old words
    for a comparison made without a verdict)."""
    if c.verdict is None:
        return wording.significance(c.p_holm, summary.alpha)
    return OUTCOME_WORDS[c.verdict.outcome]


def plan_lines(summary, undecided_only=True):
    """The seed plan of each comparison the sweep has not decided yet (the
    terminal's), or of every comparison (the report's)."""
    return tuple(plan_line(summary, c) for c in summary.comparisons
                 if c.plan is not None and c.verdict is not None
                 and (not undecided_only
                      or c.verdict.outcome in (decisions.INCONCLUSIVE, decisions.UNTESTED)))


def failure_lines(summary):
    return tuple(t for t in (failure_line(summary, c) for c in summary.comparisons) if t)


def verdicts(summary):
    """The verdict lines: one per comparison, then the winner's."""
    return tuple(comparison_verdict(summary, c) for c in summary.comparisons) + (
        winner_verdict(summary),)


def comparison_sentence(summary, activation):
    """One line about `activation` for a registered model's description.

    >>> # comparison_sentence(summary, "gelu")
    >>> # 'gelu: 97.10% ± 0.42 test accuracy over 10 seeds (best seed 3 by
    >>> #  validation accuracy). gelu beats relu by +0.85 pp test accuracy (...)'
    """
    s = wording.shown(summary.metric.name)
    a = summary.activation(activation)
    head = (f"{activation}: {s.pm(a.estimate)} {s.label} over {wording.seeds_text(a.n)} "
            f"(best seed {a.best_seed} by {wording.shown(summary.select_by.name).label}).")
    c = summary.comparison(activation)
    if c is not None:
        return f"{head} {comparison_verdict(summary, c)}"
    w = summary.winner
    if w.runner_up is None:
        return head
    if summary.sequential:  # issue 30 §7
        return f"{head} Baseline of the sequential sweep: the others are decided against it at its looks."
    label = "Holm p" if summary.holm else "p"
    if w.activation == activation:
        return (f"{head} Baseline and winner of the sweep; lead over {w.runner_up} "
                f"{s.diff(w.lead.mean_diff)}, {wording.significance(w.lead_p, summary.alpha)} "
                f"({label}{wording.p_equals(w.lead_p)}).")
    wc = summary.comparison(w.activation)
    return (f"{head} Baseline of the sweep; winner {w.activation}: "
            f"{s.diff(wc.paired.mean_diff)} over {activation}, "
            f"{_outcome(wc, summary)} ({label}{wording.p_equals(wc.p_holm)}).")


# --- summary.json: the numbers and their sentences. -----------------------------


def summary_json(summary):
    """What summary.json holds: `plain.summary_to_dict` plus the sentences.

    Adds "notes" and "verdicts" at the top, a "verdict" to each comparison
    and to the winner, and "notes" to each paired test. Strict JSON types.
    """
    d = plain.summary_to_dict(summary)
    short = summary.metric.short

    def with_notes(test_dict, test):
        test_dict["notes"] = list(wording.paired_notes(test))

    for c in summary.comparisons:
        entry = d["comparisons"][c.activation]
        with_notes(entry[short], c.paired)
        for m in summary.secondary:
            with_notes(entry[m.short], c.secondary[m.name])
        entry["verdict"] = comparison_verdict(summary, c)
        entry["outcome"] = c.verdict.outcome if c.verdict is not None else None
        entry["seed_plan_text"] = plan_line(summary, c)
        entry["failures_text"] = failure_line(summary, c)
    if summary.winner.lead is not None:
        with_notes(d["winner"]["lead"], summary.winner.lead)
    d["winner"]["verdict"] = winner_verdict(summary)
    head = {k: d.pop(k) for k in ("baseline", "metric", "higher_is_better", "confidence",
                                  "alpha", "holm", "margin", "power")}
    return {**head, "notes": list(wording.summary_notes(summary)),
            "verdicts": list(verdicts(summary)),
            "seed_plans": list(plan_lines(summary)),
            "failures": list(failure_lines(summary)),
            "contrast_verdicts": list(contrast_lines(summary)),
            "pair_verdicts": list(pair_lines(summary)), **d}


def model_description(summary, activation, member, seeds, dataset_name, dataset):
    """A registered model version's description: what it takes, returns
    and scored, the best of `seeds` seeds of a sweep on `dataset_name`."""
    selected_by = wording.shown(summary.select_by.name).label
    metric = summary.metric.name
    return (
        f"Input: {dataset.describe_inputs()} "
        f"Output: {dataset.describe_outputs()} "
        f"Best of {seeds} seeds (by final {selected_by}, "
        f"seed {member.seed}) of a kg-train sweep on {dataset_name}: "
        f"{wording.shown(metric).label} {getattr(member, metric):.4f}. "
        f"{comparison_sentence(summary, activation)}"
    )
