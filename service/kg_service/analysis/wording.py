"""What the numbers of `kg_service.analysis.comparisons` say, in words.

The statistics compute (`stats`, `comparisons`, `plain`); this module
phrases. How a number or a metric is shown (`format_p`, `shown`), the
verdict lines, the notes on degenerate tests, the one-line comparison in a
registered model's description and the sentences summary.json carries are
written here; `kg_service.analysis.tables` lays them out as tables. All of
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

>>> from kg_service.analysis import comparisons
>>> from kg_service.results import MemberResult
>>> h = {"loss": [0.3], "accuracy": [0.9], "val_loss": [0.3],
...      "val_accuracy": [0.9]}
>>> rs = [MemberResult(a, s, h, 0.3, acc, 1)
...       for a, accs in {"relu": [0.90, 0.91, 0.92],
...                       "gelu": [0.92, 0.92, 0.95]}.items()
...       for s, acc in enumerate(accs)]
>>> summary = comparisons.summarize(rs, baseline="relu")
>>> metric_note(summary)
'test accuracy, higher is better'
>>> comparison_verdict(summary, summary.comparisons[0])[:40]
'gelu vs relu: inconclusive (+2.00 pp, 95'
"""

import dataclasses
import math
from typing import Callable

from kg_service.analysis import plain
from kg_service.analysis import stats


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


# --- Sequential seeds (kg_service.analysis.sequential). ------------------------

SPENDING = {"obrien_fleming": "O'Brien-Fleming-type", "pocock": "Pocock-type"}
DECISIONS = {"better": "better", "worse": "worse", "equivalent": "equivalent", "": "inconclusive"}


def format_level(level):
    """A look's nominal alpha, or a p compared with one: "0.0046",
    "2.3e-05" (a level that small is shown, not rounded to 0)."""
    if level is None or math.isnan(level):
        return "n/a"
    return f"{level:.2g}" if level < 1e-3 else f"{level:.4f}"


def _look_decision(looks, activation, test):
    s = shown(looks.metric)
    if not test.decided:
        last = test.looks[-1] if test.looks else None
        if last is None:
            return f"{activation} vs {looks.baseline}: inconclusive (no paired seeds)"
        tost = (f"; TOST p={format_level(last.p_tost)} > "
                f"{format_level(last.equivalence_alpha)}" if looks.margin is not None else "")
        return (f"{activation} vs {looks.baseline}: inconclusive after "
                f"{seeds_text(last.n, 'paired seed')} (p={format_level(last.p_value)} > "
                f"{format_level(last.nominal_alpha)}{tost})")
    look = test.looks[-1]
    sign = 1.0 if looks.higher_is_better else -1.0
    diff = s.diff(sign * look.mean_diff)
    if test.decision == "equivalent":
        why = (f"TOST p={format_level(look.p_tost)} <= {format_level(look.equivalence_alpha)} "
               f"within ±{s.number(looks.margin)}{' pp' if s.kind.percent else ''}")
    else:
        why = f"p={format_level(look.p_value)} <= {format_level(look.nominal_alpha)}"
    return (f"{activation} vs {looks.baseline}: {DECISIONS[test.decision]} at look "
            f"{look.index + 1} ({seeds_text(look.n)}; {diff} {s.label}, {why})")


def look_line(looks, next_count=None):
    """The line kg-train prints after each look of a sequential sweep."""
    k, n = len(looks.counts), looks.counts[-1]
    parts = "; ".join(_look_decision(looks, a, t) for a, t in looks.comparisons)
    if looks.decided:
        tail = "every comparison decided: no more seeds"
    elif next_count is None:
        tail = f"at the most seeds ({looks.n_max}): the undecided stay inconclusive"
    else:
        tail = f"training seeds {n}..{next_count - 1}"
    return f"Look {k} at {seeds_text(n)}: {parts}. {tail[0].upper()}{tail[1:]}."


def sequential_lines(looks):
    """What a sequential sweep's looks decided, as lines for the terminal
    and the report: the design, each look's levels, each comparison."""
    margin = (f"equivalence within ±{shown(looks.metric).number(looks.margin)}"
              f"{' pp' if shown(looks.metric).kind.percent else ''} by TOST"
              if looks.margin is not None else "no equivalence margin set")
    family = (f"alpha {looks.family_alpha:g} over {len(looks.comparisons)} comparisons, "
              f"{looks.alpha:.4g} each (Bonferroni)" if len(looks.comparisons) > 1
              else f"alpha {looks.family_alpha:g}")
    lines = [
        f"Sequential seeds: {seeds_text(len(looks.counts), 'look')}, {looks.counts[-1]} of at most "
        f"{looks.n_max} seeds; {SPENDING[looks.spending]} alpha spending "
        f"(Lan-DeMets), {family}; {margin}.",
        "Nominal alpha per look (two-sided paired t; each TOST side): "
        + ", ".join(
            f"{i + 1}: {n} seeds {format_level(a)}"
            + (f" / {format_level(e)}" if looks.margin is not None else "")
            for i, (n, a, e) in enumerate(zip(looks.counts, looks.design.nominal_alpha,
                                              looks.design.equivalence_alpha))
        )
        + ".",
    ]
    return lines + [_look_decision(looks, a, t) + "." for a, t in looks.comparisons]


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


# --- Verdicts. ------------------------------------------------------------------


OUTCOME_WORDS = {
    stats.BETTER: "better", stats.WORSE: "worse", stats.EQUIVALENT: "equivalent",
    stats.INCONCLUSIVE: "inconclusive", stats.UNTESTED: "untested",
}


def margin_text(summary):
    """'±0.30 pp' in the compared metric's units, or '' with no margin."""
    if not math.isfinite(summary.margin):
        return ""
    s = shown(summary.metric.name)
    return "±" + s.diff(summary.margin).lstrip("+")


def pairs_text(test, failed=0):
    """'6 pairs' / '5 pairs (2 diverged members left out)'."""
    text = seeds_text(test.n, "pair")
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
    s = shown(summary.metric.name)
    pairs = pairs_text(test, failed)
    if test.n < 2 or v is None:
        return (f"{name} vs {baseline}: not tested ({pairs}; a paired test needs at "
                "least 2).")
    margin = margin_text(summary)
    d_z = f"d_z={format_d(test.statistics['d_z'])}"
    if math.isfinite(test.dz_low):
        d_z += f" [{test.dz_low:.2f}, {test.dz_high:.2f}]"
    by = f"{test.test} p{p_equals(test.p_value)}"
    if holm:
        by += f", Holm p{p_equals(v.p_holm)}"
    if test.degenerate:
        how = (f"all {test.n} differences equal {s.diff(test.mean_diff)}: the t-test and "
               "its interval are undefined, decided by the exact Wilcoxon test")
    else:
        how = None
    if v.outcome in (stats.BETTER, stats.WORSE):
        verb = "is better than" if v.outcome == stats.BETTER else "is worse than"
        ci = how or _interval(s, v.interval, v.confidence, "Holm-consistent " if holm else "")
        text = (f"{name} {verb} {baseline} by {s.diff(test.mean_diff)} {s.label} "
                f"({ci}, {by}, {d_z}, {pairs})")
        if v.within_margin:
            text += f"; the difference lies within the {margin} margin: real but negligible"
        return text
    tost = f"TOST p{p_equals(v.p_equivalence)}"
    if holm:
        tost += f", Holm p{p_equals(v.p_equivalence_holm)}"
    if v.outcome == stats.EQUIVALENT:
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
        return f"{head}: cannot be planned from {seeds_text(p.n, 'pair')}; {had}"
    parts = []
    if p.superiority is not None:
        parts.append(f"a difference at the observed d_z "
                     f"{format_d(c.paired.statistics['d_z'])}: ~{p.superiority}")
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
            f"{b.failed}/{b.attempted} (Fisher exact p{p_equals(c.failures_p)}, unadjusted)")


def winner_verdict(summary):
    """One line: who won, and whether the lead means anything."""
    w, baseline = summary.winner, summary.baseline
    s = shown(summary.metric.name)
    top = summary.activation(w.activation)
    if w.runner_up is None:
        return (f"Only {w.activation} was trained ({s.value(w.mean)} mean {s.label}): "
                "nothing to compare.")
    lead = w.lead
    if baseline in (w.activation, w.runner_up):
        how = ", Holm-adjusted" if summary.holm else ""
    else:
        how = " (unadjusted, post hoc)"
    text = (f"Winner: {w.activation} ({s.value(w.mean)} mean {s.label} over "
            f"{seeds_text(top.n)}). Its lead over the runner-up {w.runner_up} ")
    if lead.n < 2:
        text += (f"({s.diff(lead.mean_diff)} on {seeds_text(lead.n, 'paired seed')}) cannot "
                 "be tested: a paired test needs at least 2 seeds.")
    else:
        text += (f"({s.diff(lead.mean_diff)}, {ci_text(lead, summary.confidence)}, "
                 f"{lead.test} p{p_equals(w.lead_p)}{how}, "
                 f"{seeds_text(lead.n, 'paired seed')}) is ")
        text += "significant." if w.significant_over_runner_up else (
            "not significant: the data do not separate them.")
    pair = next((pc for pc in summary.pairs
                 if {pc.plus[0], pc.minus[0]} == {w.activation, w.runner_up}), None)
    if pair is not None and len(summary.pairs) > 1:
        outcome = pair.verdict.outcome
        if pair.plus[0] != w.activation:  # the pair reads runner-up vs winner
            outcome = {stats.BETTER: stats.WORSE, stats.WORSE: stats.BETTER}.get(
                outcome, outcome)
        text += (f" Over all {len(summary.pairs)} pairs (Holm), the winner is "
                 f"{OUTCOME_WORDS[outcome]} against the runner-up"
                 f" (Holm p{p_equals(pair.verdict.p_holm)}).")
    if summary.rank_first:
        text += f" {rank_text(summary)}."
    if w.significant_over_baseline is not None and w.runner_up != baseline:
        c = summary.comparison(w.activation)
        text += (f" Against the baseline {baseline}: {s.diff(c.paired.mean_diff)}, "
                 f"{_outcome(c, summary)} "
                 f"({'Holm p' if summary.holm else 'p'}{p_equals(c.p_holm)}).")
    return text


def _outcome(c, summary):
    """'better' / 'worse' / 'equivalent' / 'inconclusive' (or the old words
    for a comparison made without a verdict)."""
    if c.verdict is None:
        return significance(c.p_holm, summary.alpha)
    return OUTCOME_WORDS[c.verdict.outcome]


def plan_lines(summary, undecided_only=True):
    """The seed plan of each comparison the sweep has not decided yet (the
    terminal's), or of every comparison (the report's)."""
    return tuple(plan_line(summary, c) for c in summary.comparisons
                 if c.plan is not None and c.verdict is not None
                 and (not undecided_only
                      or c.verdict.outcome in (stats.INCONCLUSIVE, stats.UNTESTED)))


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
    s = shown(summary.metric.name)
    a = summary.activation(activation)
    head = (f"{activation}: {s.pm(a.estimate)} {s.label} over {seeds_text(a.n)} "
            f"(best seed {a.best_seed} by {shown(summary.select_by.name).label}).")
    c = summary.comparison(activation)
    if c is not None:
        return f"{head} {comparison_verdict(summary, c)}"
    w = summary.winner
    if w.runner_up is None:
        return head
    label = "Holm p" if summary.holm else "p"
    if w.activation == activation:
        return (f"{head} Baseline and winner of the sweep; lead over {w.runner_up} "
                f"{s.diff(w.lead.mean_diff)}, {significance(w.lead_p, summary.alpha)} "
                f"({label}{p_equals(w.lead_p)}).")
    wc = summary.comparison(w.activation)
    return (f"{head} Baseline of the sweep; winner {w.activation}: "
            f"{s.diff(wc.paired.mean_diff)} over {activation}, "
            f"{_outcome(wc, summary)} ({label}{p_equals(wc.p_holm)}).")


# --- summary.json: the numbers and their sentences. -----------------------------


def summary_json(summary):
    """What summary.json holds: `plain.summary_to_dict` plus the sentences.

    Adds "notes" and "verdicts" at the top, a "verdict" to each comparison
    and to the winner, and "notes" to each paired test. Strict JSON types.
    """
    d = plain.summary_to_dict(summary)
    short = summary.metric.short

    def with_notes(test_dict, test):
        test_dict["notes"] = list(paired_notes(test))

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
    return {**head, "notes": list(summary_notes(summary)),
            "verdicts": list(verdicts(summary)),
            "seed_plans": list(plan_lines(summary)),
            "failures": list(failure_lines(summary)),
            "contrast_verdicts": list(contrast_lines(summary)),
            "pair_verdicts": list(pair_lines(summary)), **d}

