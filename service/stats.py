"""Which activation won, and by how much: seed statistics of a sweep.

Pure functions over `MemberResult` lists (numpy and scipy only; no Keras,
no MLflow, no files). The unit of replication is the seed: each seed
gives one test accuracy per activation, and the same seed means the same
initialisation stream and batch order, so activations are compared
*paired by seed* (Hendrycks & Gimpel 2016 report medians over runs; the
make_moons seed article asks for several seeds and a held-out test set).

The primary metric is test accuracy. For each activation other than the
baseline we test the mean paired difference (activation - baseline) with
a paired t-test, report a Wilcoxon signed-rank p-value as a
distribution-free check, Cohen's d_z, and a t-based confidence interval.
With several comparisons, significance is decided on Holm-adjusted
p-values (family: every activation vs the baseline, test accuracy).
The significance level is `alpha = 1 - confidence`, so an interval that
excludes zero and an unadjusted p below alpha say the same thing.

Model selection never looks at the test set: the "best seed" of an
activation is the one with the highest final validation accuracy.

Example:

>>> from service.results import MemberResult
>>> h = {"loss": [0.3], "accuracy": [0.9], "val_loss": [0.3],
...      "val_accuracy": [0.9]}
>>> rs = [MemberResult(a, s, h, 0.3, acc, 1)
...       for a, accs in {"relu": [0.90, 0.91, 0.92],
...                       "gelu": [0.92, 0.92, 0.95]}.items()
...       for s, acc in enumerate(accs)]
>>> summary = summarize(rs, baseline="relu")
>>> summary.winner.activation
'gelu'
"""

import dataclasses
import math
import warnings
from typing import Optional

import numpy as np
from scipy import stats as _st

from service.errors import ServiceError

ACCURACY = "test_accuracy"
LOSS = "test_loss"

# How a metric's difference is shown: accuracy in percentage points.
_UNITS = {ACCURACY: ("pp", 100.0), LOSS: ("", 1.0)}
_LABELS = {ACCURACY: "test accuracy", LOSS: "test loss"}


# --- Result types. -----------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Estimate:
    """Mean of one metric over seeds, with sd (ddof=1) and a t interval.

    `std`, `ci_low` and `ci_high` are NaN when n < 2.
    """

    n: int
    mean: float
    std: float
    ci_low: float
    ci_high: float


@dataclasses.dataclass(frozen=True)
class ActivationSummary:
    """One activation over its seeds."""

    activation: str
    n: int  # seeds
    seeds: tuple
    test_accuracy: Estimate
    test_loss: Estimate
    # Over the seeds that reached the threshold; NaN if none did.
    epochs_to_threshold_mean: float
    epochs_to_threshold_median: float
    reached: int  # seeds that reached the threshold ("reached/n reached")
    val_accuracy_mean: float  # final-epoch validation accuracy, mean over seeds
    best_seed: int  # highest final val accuracy; tie: lower val loss, lower seed
    best_val_accuracy: float
    best_val_loss: float
    train_seconds_mean: float

    @property
    def reached_text(self):
        return f"{self.reached}/{self.n} reached"


@dataclasses.dataclass(frozen=True)
class PairedTest:
    """Mean paired difference (activation - reference) of one metric.

    `p_value` is the one the decision uses: the paired t-test's, except
    when the differences are constant and non-zero (t is infinite), where
    it is the Wilcoxon p-value; `test` names which.
    """

    metric: str  # "test_accuracy" | "test_loss"
    n: int  # paired seeds
    seeds: tuple
    mean_diff: float
    std_diff: float
    ci_low: float
    ci_high: float
    t_statistic: float
    p_t: float
    p_wilcoxon: float
    d_z: float  # mean_diff / std_diff; 0 if both are 0; +-inf if only sd is 0
    p_value: float
    test: str  # "paired t" | "Wilcoxon"
    notes: tuple = ()


@dataclasses.dataclass(frozen=True)
class Comparison:
    """One activation against the baseline, paired by seed."""

    activation: str
    baseline: str
    accuracy: PairedTest
    loss: PairedTest
    # Holm-adjusted accuracy p-value over all comparisons with the
    # baseline (equal to accuracy.p_value when there is one comparison).
    p_holm: float
    significant: bool  # p_holm < alpha
    verdict: str


@dataclasses.dataclass(frozen=True)
class Winner:
    """The activation with the highest mean test accuracy, and its lead."""

    activation: str
    mean_test_accuracy: float
    runner_up: Optional[str]
    lead: Optional[PairedTest]  # winner - runner-up, test accuracy
    # The p-value the lead was judged on: Holm-adjusted when the pair is
    # (winner, baseline), otherwise the unadjusted paired p-value.
    lead_p: float
    significant_over_runner_up: bool
    # None when the winner is the baseline.
    significant_over_baseline: Optional[bool]
    verdict: str


@dataclasses.dataclass(frozen=True)
class Summary:
    """Everything `summarize` found; activations listed baseline first."""

    baseline: str
    confidence: float
    alpha: float
    activations: tuple  # ActivationSummary, baseline first
    comparisons: tuple  # Comparison, one per non-baseline activation
    winner: Winner
    holm: bool  # Holm adjustment applied (more than one comparison)
    notes: tuple = ()

    @property
    def verdicts(self):
        """The verdict lines: one per comparison, then the winner's."""
        return tuple(c.verdict for c in self.comparisons) + (self.winner.verdict,)

    def activation(self, name):
        for a in self.activations:
            if a.activation == name:
                return a
        raise KeyError(name)

    def comparison(self, name):
        for c in self.comparisons:
            if c.activation == name:
                return c
        return None


# --- Small statistics, each checked against scipy in the tests. --------------


def estimate(values, confidence=0.95, bounds=(-math.inf, math.inf)):
    """Mean, sd (ddof=1) and the t interval mean +- t_{(1+c)/2, n-1} sd/sqrt(n).

    Args:
        values: 1-D sequence of floats.
        confidence: interval coverage in (0, 1).
        bounds: the metric's range; the interval is clipped to it (an
            accuracy interval past 100% with 2 seeds says nothing more).

    Returns an `Estimate`; std and interval are NaN for fewer than 2 values,
    all fields NaN for none.

    >>> estimate([1.0, 2.0, 3.0]).mean
    2.0
    """
    x = np.asarray(values, dtype=float)
    n = int(x.size)
    if n == 0:
        return Estimate(0, math.nan, math.nan, math.nan, math.nan)
    mean = float(np.mean(x))
    if n < 2:
        return Estimate(1, mean, math.nan, math.nan, math.nan)
    sd = float(np.std(x, ddof=1))
    half = float(_st.t.ppf(0.5 + confidence / 2, n - 1)) * sd / math.sqrt(n)
    low, high = bounds
    return Estimate(n, mean, sd, max(low, mean - half), min(high, mean + half))


def paired_test(diffs, metric=ACCURACY, seeds=(), confidence=0.95):
    """Paired t-test, Wilcoxon signed-rank test and d_z of differences.

    t = mean(d) / (sd(d) / sqrt(n)), two-sided p from Student's t with
    n - 1 degrees of freedom; d_z = mean(d) / sd(d). Wilcoxon uses scipy's
    defaults (zeros dropped; exact when there are no ties, exact
    permutation for n <= 13 with ties, normal approximation beyond).

    Degenerate inputs give numbers and a note instead of warnings:
    n < 2 -> p NaN; all differences zero -> p = 1, d_z = 0; constant
    non-zero differences -> t = +-inf, d_z = +-inf, decision on Wilcoxon.

    >>> round(paired_test([1.0, 2.0, 3.0, 4.0, 5.0]).p_t, 6)
    0.013236
    """
    d = np.asarray(diffs, dtype=float)
    n = int(d.size)
    seeds = tuple(seeds)
    if n < 2:
        mean = float(d[0]) if n else math.nan
        return PairedTest(
            metric, n, seeds, mean, math.nan, math.nan, math.nan, math.nan,
            math.nan, math.nan, math.nan, math.nan, "paired t",
            (f"{_seeds(n, 'paired seed')}: a paired test needs at least 2",),
        )
    est = estimate(d, confidence)
    mean, sd = est.mean, est.std
    notes = []
    # Keras reports metrics in float32, so equal accuracies can differ by
    # ~1e-7; on the tie grid they are equal, and round-off neither fakes a
    # huge t nor breaks Wilcoxon's zeros and ties.
    snapped = _snap(d)
    if np.all(snapped == snapped[0]):
        sd = 0.0
        if snapped[0] == 0.0:
            mean = 0.0
    if sd == 0.0 and mean == 0.0:
        notes.append("all paired differences are zero")
        return PairedTest(
            metric, n, seeds, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0,
            "paired t", tuple(notes),
        )
    p_w = _wilcoxon_p(snapped)
    if sd == 0.0:
        t = math.copysign(math.inf, mean)
        notes.append(
            "the paired differences are all equal: the t-test is degenerate "
            "(t infinite), so the decision uses the Wilcoxon p-value"
        )
        return PairedTest(
            metric, n, seeds, mean, 0.0, mean, mean, t, 0.0, p_w, t, p_w,
            "Wilcoxon", tuple(notes),
        )
    t = mean / (sd / math.sqrt(n))
    p_t = float(2.0 * _st.t.sf(abs(t), n - 1))
    return PairedTest(
        metric, n, seeds, mean, sd, est.ci_low, est.ci_high, t, p_t, p_w,
        mean / sd, p_t, "paired t", tuple(notes),
    )


# Differences closer than this count as ties (float32 metrics; 1e-6 is far
# below one test example, 1/n_test, for any test set under a million).
_TIE_GRID = 1e-6


def _snap(d):
    return np.round(np.asarray(d, dtype=float) / _TIE_GRID) * _TIE_GRID


def _wilcoxon_p(d):
    nonzero = d[d != 0]
    if nonzero.size == 0:
        return 1.0
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            return float(_st.wilcoxon(d).pvalue)
        except ValueError:
            return math.nan


def holm(p_values):
    """Holm's step-down adjustment of a family of p-values.

    Sorted ascending p_(1..m): adj_(i) = max_{j<=i} min(1, (m - j + 1) p_(j)).
    NaN entries are left NaN and not counted in m.

    >>> [round(p, 6) for p in holm([0.01, 0.04, 0.03])]
    [0.03, 0.06, 0.06]
    """
    p = [float(v) for v in p_values]
    idx = [i for i, v in enumerate(p) if not math.isnan(v)]
    m = len(idx)
    out = [math.nan] * len(p)
    running = 0.0
    for rank, i in enumerate(sorted(idx, key=lambda i: p[i])):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out


# --- The summary. ------------------------------------------------------------


def summarize(results, baseline, confidence=0.95):
    """Summarizes a sweep and compares every activation with the baseline.

    Args:
        results: iterable of `MemberResult` (`model` may be None).
        baseline: the activation the others are compared with.
        confidence: interval coverage; alpha = 1 - confidence.

    Returns:
        A `Summary`.

    Raises:
        ServiceError: no results, the baseline has no results, a duplicate
            (activation, seed), or confidence outside (0, 1).
    """
    results = list(results)
    if not 0.0 < confidence < 1.0:
        raise ServiceError(f"confidence must be in (0, 1), got {confidence!r}.")
    if not results:
        raise ServiceError("No sweep results to summarize: did any member train?")
    by_act = {}
    for r in results:
        members = by_act.setdefault(r.activation, {})
        if r.seed in members:
            raise ServiceError(
                f"Two results for activation {r.activation!r}, seed {r.seed}: "
                "each (activation, seed) must be trained once."
            )
        members[r.seed] = r
    if baseline not in by_act:
        raise ServiceError(
            f"The baseline {baseline!r} has no results; activations with "
            f"results: {', '.join(by_act)}. Set `baseline` to one of them."
        )
    order = [baseline] + [a for a in by_act if a != baseline]
    alpha = round(1.0 - confidence, 12)  # 0.05, not 0.050000000000000044
    notes = []

    activations = tuple(_summarize_one(a, by_act[a], confidence) for a in order)
    for s in activations:
        if s.n < 2:
            notes.append(f"{s.activation} has {s.n} seed: no spread or interval")

    raw = []
    for name in order[1:]:
        acc, loss = (
            _paired(by_act[name], by_act[baseline], m, confidence) for m in (ACCURACY, LOSS)
        )
        raw.append((name, acc, loss))
    use_holm = len(raw) > 1
    adjusted = holm([acc.p_value for _, acc, _ in raw]) if use_holm else [
        acc.p_value for _, acc, _ in raw
    ]
    comparisons = []
    for (name, acc, loss), p_adj in zip(raw, adjusted):
        significant = bool(p_adj < alpha)  # NaN -> False
        verdict = _verdict(name, baseline, acc, p_adj, use_holm, significant, confidence)
        comparisons.append(Comparison(name, baseline, acc, loss, p_adj, significant, verdict))
    comparisons = tuple(comparisons)

    winner = _winner(activations, comparisons, by_act, baseline, alpha, confidence, use_holm)
    return Summary(
        baseline, confidence, alpha, activations, comparisons, winner, use_holm, tuple(notes)
    )


def _summarize_one(name, members, confidence):
    seeds = tuple(sorted(members))
    rs = [members[s] for s in seeds]
    reached = [r.epochs_to_threshold for r in rs if r.epochs_to_threshold is not None]
    best = min(rs, key=lambda r: (-_num(r.val_accuracy), _num(r.val_loss, math.inf), r.seed))
    return ActivationSummary(
        activation=name,
        n=len(rs),
        seeds=seeds,
        test_accuracy=estimate(
            [r.test_accuracy for r in rs], confidence, bounds=(0.0, 1.0)
        ),
        test_loss=estimate(
            [r.test_loss for r in rs], confidence, bounds=(0.0, math.inf)
        ),
        epochs_to_threshold_mean=float(np.mean(reached)) if reached else math.nan,
        epochs_to_threshold_median=float(np.median(reached)) if reached else math.nan,
        reached=len(reached),
        val_accuracy_mean=float(np.mean([r.val_accuracy for r in rs])),
        best_seed=best.seed,
        best_val_accuracy=float(best.val_accuracy),
        best_val_loss=float(best.val_loss),
        train_seconds_mean=float(np.mean([r.train_seconds for r in rs])),
    )


def _num(value, nan_as=-math.inf):
    value = float(value)
    return nan_as if math.isnan(value) else value


def _paired(members, reference, metric, confidence):
    seeds = sorted(set(members) & set(reference))
    diffs, kept, dropped = [], [], 0
    for s in seeds:
        d = float(getattr(members[s], metric)) - float(getattr(reference[s], metric))
        if math.isfinite(d):
            diffs.append(d)
            kept.append(s)
        else:
            dropped += 1
    test = paired_test(diffs, metric, kept, confidence)
    extra = []
    unpaired = len(set(members) ^ set(reference))
    if unpaired:
        extra.append(f"paired on {len(seeds)} common seeds; {unpaired} seed results "
                     "without a partner left out")
    if dropped:
        extra.append(f"{dropped} seed(s) with a non-finite {_LABELS[metric]} left out")
    if extra:
        test = dataclasses.replace(test, notes=test.notes + tuple(extra))
    return test


def _winner(activations, comparisons, by_act, baseline, alpha, confidence, use_holm):
    ranked = sorted(
        activations,
        key=lambda a: (-_num(a.test_accuracy.mean), _num(a.test_loss.mean, math.inf),
                       a.activation != baseline, a.activation),
    )
    top = ranked[0]
    mean_pct = f"{100 * top.test_accuracy.mean:.2f}%"
    if len(ranked) == 1:
        return Winner(top.activation, top.test_accuracy.mean, None, None, math.nan, False,
                      None, f"Only {top.activation} was trained ({mean_pct} mean test "
                      "accuracy): nothing to compare.")
    second = ranked[1]
    lead = _paired(by_act[top.activation], by_act[second.activation], ACCURACY, confidence)
    pair = {top.activation, second.activation}
    comp_by_name = {c.activation: c for c in comparisons}
    if baseline in pair:
        other = (pair - {baseline}).pop()
        lead_p, how = comp_by_name[other].p_holm, ", Holm-adjusted" if use_holm else ""
    else:
        # The runner-up is chosen after seeing the data: say so.
        lead_p, how = lead.p_value, " (unadjusted, post hoc)"
    sig_runner = bool(lead_p < alpha)
    sig_base = None if top.activation == baseline else comp_by_name[top.activation].significant

    text = (f"Winner: {top.activation} ({mean_pct} mean test accuracy over "
            f"{_seeds(top.n)}). Its lead over the runner-up {second.activation} ")
    if lead.n < 2:
        text += (f"({_pp(lead.mean_diff)} on {_seeds(lead.n, 'paired seed')}) cannot be "
                 "tested: a paired test needs at least 2 seeds.")
    else:
        text += (f"({_pp(lead.mean_diff)}, {_ci_text(lead, confidence)}, "
                 f"{lead.test} p{p_equals(lead_p)}{how}, {_seeds(lead.n, 'paired seed')}) is ")
        text += "significant." if sig_runner else (
            "not significant: the data do not separate them.")
    if sig_base is not None and second.activation != baseline:
        c = comp_by_name[top.activation]
        text += (f" Against the baseline {baseline}: {_pp(c.accuracy.mean_diff)}, "
                 f"{_significance(c.p_holm, alpha)} "
                 f"({'Holm p' if use_holm else 'p'}{p_equals(c.p_holm)}).")
    return Winner(top.activation, top.test_accuracy.mean, second.activation, lead, lead_p,
                  sig_runner, sig_base, text)


# --- Words. ------------------------------------------------------------------


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


def _pp(diff, metric=ACCURACY):
    unit, scale = _UNITS[metric]
    if math.isnan(diff):
        return "n/a"
    return f"{scale * diff:+.2f} pp" if unit == "pp" else f"{diff:+.4f}"


def _ci_text(test, confidence):
    unit, scale = _UNITS[test.metric]
    if math.isnan(test.ci_low):
        return f"{confidence:.0%} CI n/a"
    digits = 2 if unit == "pp" else 4
    return (f"{confidence:.0%} CI {scale * test.ci_low:+.{digits}f} to "
            f"{scale * test.ci_high:+.{digits}f}")


def _seeds(n, word="seed"):
    return f"{n} {word}{'' if n == 1 else 's'}"


def _significance(p, alpha):
    if p is None or math.isnan(p):
        return "untested"
    return "significant" if p < alpha else "not significant"


def _verdict(name, baseline, acc, p_adj, use_holm, significant, confidence):
    seeds = _seeds(acc.n)
    if acc.n < 2:
        return (f"{name} vs {baseline}: not tested ({seeds} paired with the "
                "baseline; a paired test needs at least 2).")
    ci, d_z = _ci_text(acc, confidence), f"d_z={format_d(acc.d_z)}"
    holm_text = f", Holm p{p_equals(p_adj)}" if use_holm else ""
    if significant:
        verb = "beats" if acc.mean_diff > 0 else "is worse than"
        return (f"{name} {verb} {baseline} by {_pp(acc.mean_diff)} test accuracy "
                f"({ci}, {acc.test} p{p_equals(acc.p_value)}{holm_text}, {d_z}, {seeds})")
    lead = f"Holm p{p_equals(p_adj)}" if use_holm else f"p{p_equals(acc.p_value)}"
    tail = f", {acc.test} p{p_equals(acc.p_value)}" if use_holm else ""
    return (f"{name} vs {baseline}: no significant difference ({lead}; "
            f"{_pp(acc.mean_diff)} test accuracy, {ci}{tail}, {d_z}, {seeds})")


def comparison_sentence(summary, activation):
    """One line about `activation` for a registered model's description.

    >>> # comparison_sentence(summary, "gelu")
    >>> # 'gelu: 97.10% ± 0.42 test accuracy over 10 seeds (best seed 3 by
    >>> #  validation). gelu beats relu by +0.85 pp test accuracy (...)'
    """
    a = summary.activation(activation)
    head = (f"{activation}: {_acc_pm(a.test_accuracy)} test accuracy over {_seeds(a.n)} "
            f"(best seed {a.best_seed} by validation accuracy).")
    c = summary.comparison(activation)
    if c is not None:
        return f"{head} {c.verdict}"
    w = summary.winner
    if w.runner_up is None:
        return head
    label = "Holm p" if summary.holm else "p"
    if w.activation == activation:
        return (f"{head} Baseline and winner of the sweep; lead over {w.runner_up} "
                f"{_pp(w.lead.mean_diff)}, {_significance(w.lead_p, summary.alpha)} "
                f"({label}{p_equals(w.lead_p)}).")
    wc = summary.comparison(w.activation)
    return (f"{head} Baseline of the sweep; winner {w.activation}: "
            f"{_pp(wc.accuracy.mean_diff)} over {activation}, "
            f"{_significance(wc.p_holm, summary.alpha)} ({label}{p_equals(wc.p_holm)}).")


def _acc_pm(e):
    if math.isnan(e.std):
        return f"{100 * e.mean:.2f}%"
    return f"{100 * e.mean:.2f}% ± {100 * e.std:.2f}"


# --- The terminal table. -----------------------------------------------------


def table_rows(summary):
    """The results table as header + rows of strings (terminal and Markdown)."""
    conf = f"{summary.confidence:.0%} CI"
    p_head = "p (Holm)" if summary.holm else "p"
    header = ["activation", "seeds", "test acc %", conf, "test loss",
              "Δ acc vs base", p_head, "d_z", "epochs to thr"]
    rows = []
    for a in summary.activations:
        acc, loss = a.test_accuracy, a.test_loss
        acc_text = _acc_pm(acc).replace("%", "")
        ci = "n/a" if math.isnan(acc.ci_low) else f"{100 * acc.ci_low:.2f}–{100 * acc.ci_high:.2f}"
        loss_text = f"{loss.mean:.4f}" + ("" if math.isnan(loss.std) else f" ± {loss.std:.4f}")
        c = summary.comparison(a.activation)
        if a.activation == summary.baseline:
            delta, p, d = "(baseline)", "", ""
        else:
            delta = _pp(c.accuracy.mean_diff)
            p = format_p(c.p_holm) + ("*" if c.significant else "")
            d = format_d(c.accuracy.d_z)
        if a.reached:
            ett = f"{a.epochs_to_threshold_median:g} ({a.reached}/{a.n})"
        else:
            ett = f"– (0/{a.n})"
        rows.append([a.activation, str(a.n), acc_text, ci, loss_text, delta, p, d, ett])
    return header, rows


def format_table(summary):
    """A compact plain-text table of the summary, then the verdict lines.

    Epochs to threshold: median over the seeds that reached it (k/n).
    `*` marks p < alpha.
    """
    header, rows = table_rows(summary)
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    right = {1, 2, 4, 5, 6, 7}

    def line(cells):
        return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    out = [line(header), line(["-" * w for w in widths])]
    out += [line(r) for r in rows]
    out.append("")
    out += [f"- {v}" for v in summary.verdicts]
    foot = (f"epochs to thr: median epoch val accuracy first reached the threshold "
            f"(seeds that reached it / seeds). * p < {summary.alpha:g}")
    if summary.holm:
        foot += f", Holm-adjusted over {len(summary.comparisons)} comparisons"
    out.append(foot + ".")
    for n in summary.notes:
        out.append(f"note: {n}")
    for c in summary.comparisons:
        for n in c.accuracy.notes:
            out.append(f"note ({c.activation} vs {c.baseline}): {n}")
    return "\n".join(out)


# --- Serialization. ----------------------------------------------------------


def _clean(value):
    if isinstance(value, float) or isinstance(value, np.floating):
        value = float(value)
        if math.isnan(value):
            return None
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return value
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def summary_to_dict(summary):
    """The summary as plain JSON types (strict JSON: NaN -> None, inf -> "inf").

    Keys: baseline, confidence, alpha, holm, notes, verdicts,
    activations {name: {...}}, comparisons {name: {..., accuracy, loss}},
    winner {...}.
    """
    d = {
        "baseline": summary.baseline,
        "confidence": summary.confidence,
        "alpha": summary.alpha,
        "holm": summary.holm,
        "notes": list(summary.notes),
        "verdicts": list(summary.verdicts),
        "activations": {a.activation: dataclasses.asdict(a) for a in summary.activations},
        "comparisons": {c.activation: dataclasses.asdict(c) for c in summary.comparisons},
        "winner": dataclasses.asdict(summary.winner),
    }
    return _clean(d)


def flat_metrics(summary):
    """Finite numbers keyed "<activation>.<stat>" for a metrics logger.

    E.g. "gelu.test_accuracy_mean", "gelu.vs_baseline.p_holm".
    """
    out = {}
    for a in summary.activations:
        k = a.activation
        for metric in (ACCURACY, LOSS):
            e = getattr(a, metric)
            for stat in ("mean", "std", "ci_low", "ci_high"):
                out[f"{k}.{metric}_{stat}"] = getattr(e, stat)
        out[f"{k}.seeds"] = a.n
        out[f"{k}.reached_threshold"] = a.reached
        out[f"{k}.epochs_to_threshold_median"] = a.epochs_to_threshold_median
        out[f"{k}.val_accuracy_mean"] = a.val_accuracy_mean
    for c in summary.comparisons:
        k = f"{c.activation}.vs_baseline"
        for stat in ("mean_diff", "ci_low", "ci_high", "p_t", "p_wilcoxon", "d_z"):
            out[f"{k}.accuracy_{stat}"] = getattr(c.accuracy, stat)
        out[f"{k}.loss_mean_diff"] = c.loss.mean_diff
        out[f"{k}.p_holm"] = c.p_holm
    return {k: float(v) for k, v in out.items() if math.isfinite(float(v))}
