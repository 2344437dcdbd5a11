"""Which activation won, and by how much: seed statistics of a sweep, as numbers.

Pure functions over `MemberResult` lists (numpy and scipy only; no Keras,
no MLflow, no files, no sentences: `kg_service.analysis.wording` phrases what this
module computes). The unit of replication is the seed: each seed gives one
final value of the compared metric per activation, and the same seed means
the same initialisation stream and batch order, so activations are
compared *paired by seed* (Hendrycks & Gimpel 2016 report medians over
runs; the make_moons seed article asks for several seeds and a held-out
test set).

The compared metric is any per-member final value with a direction: test
accuracy (higher is better) for the classifiers, test loss or perplexity
(lower is better) for a language model. For each activation other than the
baseline the mean paired difference (activation - baseline) is tested with
a paired t-test, with a t-based confidence interval; with several
comparisons, significance is decided on Holm-adjusted p-values (family:
every activation vs the baseline, on the compared metric). The winner is
the best mean by the metric's direction, and a comparison's `sign` says
whether the activation did better (+1) or worse (-1) than the baseline.
The significance level is `alpha = 1 - confidence`, so an interval that
excludes zero and an unadjusted p below alpha say the same thing.

Model selection never looks at the test set: the "best seed" of an
activation is the one with the best final validation value (`select_by`,
by default the validation counterpart of the metric, e.g. val_accuracy).

A new statistic is one function plus its wording. Every paired test
carries the statistics of `PAIRED_STATISTICS`, one function each of the
paired differences:

    =============  ==========================  ============================
    name           function                    wording.STATISTICS column
    =============  ==========================  ============================
    "p_wilcoxon"   `wilcoxon_p` (signed rank)  "Wilcoxon p", report
    "d_z"          `cohens_dz` (effect size)   "d_z", terminal and report
    =============  ==========================  ============================

Add a function and its entry here, and a `wording.Column` under the same
name in `wording.STATISTICS`: the new number then appears in summary.json,
the tracked metrics (`flat_metrics`), the report's comparison table, and
the terminal table if its column says so.

Example:

>>> from kg_service.results import MemberResult
>>> h = {"loss": [0.3], "accuracy": [0.9], "val_loss": [0.3],
...      "val_accuracy": [0.9]}
>>> rs = [MemberResult(a, s, h, 0.3, acc, 1)
...       for a, accs in {"relu": [0.90, 0.91, 0.92],
...                       "gelu": [0.92, 0.92, 0.95]}.items()
...       for s, acc in enumerate(accs)]
>>> summary = summarize(rs, baseline="relu")
>>> summary.winner.activation
'gelu'
>>> summary.comparisons[0].sign
1
"""

import dataclasses
import math
import warnings
from typing import Optional

import numpy as np
from scipy import stats as _st

from kg_service.errors import ServiceError

ACCURACY = "test_accuracy"
LOSS = "test_loss"

# The range of a metric, by its name without the split prefix: intervals
# are clipped to it (an accuracy interval past 100% with 2 seeds says
# nothing more). Metrics not listed are unbounded.
_RANGES = {
    "accuracy": (0.0, 1.0),
    "loss": (0.0, math.inf),
    "perplexity": (1.0, math.inf),
}


# --- Result types: numbers only. ---------------------------------------------


@dataclasses.dataclass(frozen=True)
class Metric:
    """A per-member final value, which way is better, and its range.

    `name` is a `MemberResult` attribute ("test_accuracy", "test_loss",
    "val_accuracy", ...).
    """

    name: str
    higher_is_better: bool = True
    bounds: tuple = (-math.inf, math.inf)

    @classmethod
    def of(cls, name, higher_is_better=True):
        """The metric `name` with the known range of its kind (`_RANGES`).

        >>> Metric.of("test_loss", higher_is_better=False).bounds
        (0.0, inf)
        """
        bounds = _RANGES.get(cls(name).short, (-math.inf, math.inf))
        return cls(name, higher_is_better, bounds)

    @property
    def short(self):
        """The name without its split: "accuracy" for "test_accuracy"."""
        for prefix in ("test_", "val_"):
            if self.name.startswith(prefix):
                return self.name[len(prefix):]
        return self.name


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
    estimate: Estimate  # the compared metric
    secondary: dict  # metric name -> Estimate, the metrics reported beside it
    # Over the seeds that reached the threshold; NaN if none did.
    epochs_to_threshold_mean: float
    epochs_to_threshold_median: float
    reached: int  # seeds that reached the threshold
    selection_mean: float  # final `select_by` value, mean over seeds
    # Best final `select_by` value; ties: lower val loss, then lower seed.
    best_seed: int
    best_selection: float
    best_val_loss: float
    train_seconds_mean: float


@dataclasses.dataclass(frozen=True)
class PairedTest:
    """Mean paired difference (activation - reference) of one metric.

    `p_value` is the one the decision uses: the paired t-test's, except
    when the differences are constant and non-zero (t is infinite), where
    it is the Wilcoxon p-value; `test` names which. `statistics` holds
    every `PAIRED_STATISTICS` entry (NaN when n < 2).

    Degenerate cases, told by the numbers: n < 2 (p NaN); all differences
    zero (std_diff == mean_diff == 0, p = 1); constant non-zero
    differences (test == "Wilcoxon", t infinite).
    """

    metric: str
    n: int  # paired seeds with a finite difference
    seeds: tuple
    mean_diff: float
    std_diff: float
    ci_low: float
    ci_high: float
    t_statistic: float
    p_t: float
    p_value: float
    test: str  # "paired t" | "Wilcoxon"
    statistics: dict  # name -> float, one per PAIRED_STATISTICS entry
    unpaired: int = 0  # seed results without a partner, left out
    non_finite: int = 0  # common seeds whose difference is not finite, left out


@dataclasses.dataclass(frozen=True)
class Comparison:
    """One activation against the baseline, paired by seed."""

    activation: str
    baseline: str
    paired: PairedTest  # the compared metric
    secondary: dict  # metric name -> PairedTest (unadjusted)
    # Holm-adjusted p-value over all comparisons with the baseline (equal
    # to paired.p_value when there is one comparison).
    p_holm: float
    significant: bool  # p_holm < alpha
    # +1: the activation's mean is better than the baseline's by the
    # metric's direction; -1: worse; 0: equal or untested (NaN).
    sign: int


@dataclasses.dataclass(frozen=True)
class Winner:
    """The activation with the best mean of the compared metric, and its lead."""

    activation: str
    mean: float
    runner_up: Optional[str]
    lead: Optional[PairedTest]  # winner - runner-up, the compared metric
    # The p-value the lead was judged on: Holm-adjusted when the pair is
    # (winner, baseline), otherwise the unadjusted paired p-value.
    lead_p: float
    significant_over_runner_up: bool
    # None when the winner is the baseline.
    significant_over_baseline: Optional[bool]


@dataclasses.dataclass(frozen=True)
class Summary:
    """Everything `summarize` found; activations listed baseline first."""

    baseline: str
    metric: Metric  # the compared metric
    secondary: tuple  # Metric, reported beside it
    select_by: Metric  # the validation value that picks each best seed
    confidence: float
    alpha: float
    activations: tuple  # ActivationSummary, baseline first
    comparisons: tuple  # Comparison, one per non-baseline activation
    winner: Winner
    holm: bool  # Holm adjustment applied (more than one comparison)

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
        return Estimate(n=0, mean=math.nan, std=math.nan, ci_low=math.nan, ci_high=math.nan)
    mean = float(np.mean(x))
    if n < 2:
        return Estimate(n=1, mean=mean, std=math.nan, ci_low=math.nan, ci_high=math.nan)
    sd = float(np.std(x, ddof=1))
    half = float(_st.t.ppf(0.5 + confidence / 2, n - 1)) * sd / math.sqrt(n)
    low, high = bounds
    return Estimate(n=n, mean=mean, std=sd, ci_low=max(low, mean - half),
                    ci_high=min(high, mean + half))


# Differences closer than this count as ties (float32 metrics; 1e-6 is far
# below one test example, 1/n_test, for any test set under a million).
_TIE_GRID = 1e-6


def _snap(d):
    return np.round(np.asarray(d, dtype=float) / _TIE_GRID) * _TIE_GRID


def _constant(d):
    """True when the differences are equal on the tie grid.

    Keras reports metrics in float32, so equal accuracies can differ by
    ~1e-7; on the tie grid they are equal, and round-off neither fakes a
    huge t nor breaks Wilcoxon's zeros and ties.
    """
    snapped = _snap(d)
    return bool(np.all(snapped == snapped[0]))


def wilcoxon_p(d):
    """Two-sided Wilcoxon signed-rank p-value of paired differences `d`.

    scipy's defaults on the differences snapped to the tie grid (zeros
    dropped; exact when there are no ties, exact permutation for n <= 13
    with ties, normal approximation beyond); 1 when every difference is
    zero. A distribution-free check of the t-test.

    >>> wilcoxon_p([0.1, 0.2, 0.3, 0.4, 0.5])  # 2 of 2^5 sign patterns
    0.0625
    """
    d = _snap(d)
    if not np.any(d != 0):
        return 1.0
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            return float(_st.wilcoxon(d).pvalue)
        except ValueError:
            return math.nan


def cohens_dz(d):
    """Cohen's d_z = mean(d) / sd(d) (ddof=1) of paired differences `d`.

    0 when every difference is zero, +-inf when they are equal and
    non-zero (on the tie grid).

    >>> round(cohens_dz([1.0, 2.0, 3.0, 4.0, 5.0]), 4)
    1.8974
    """
    d = np.asarray(d, dtype=float)
    mean = float(np.mean(d))
    if _constant(d):
        return 0.0 if _snap(d)[0] == 0.0 else math.copysign(math.inf, mean)
    return mean / float(np.std(d, ddof=1))


# name -> f(d): one number from the paired differences `d` (finite floats,
# n >= 2). See the module docstring: a new statistic is one entry here and
# its column in `wording.STATISTICS`.
PAIRED_STATISTICS = {
    "p_wilcoxon": wilcoxon_p,
    "d_z": cohens_dz,
}


def paired_test(diffs, metric=ACCURACY, seeds=(), confidence=0.95):
    """Paired t-test of differences, with every `PAIRED_STATISTICS` entry.

    t = mean(d) / (sd(d) / sqrt(n)), two-sided p from Student's t with
    n - 1 degrees of freedom, and its confidence interval of the mean.

    Degenerate inputs give numbers instead of warnings: n < 2 -> p NaN;
    all differences zero -> p = 1; constant non-zero differences ->
    t = +-inf, decision on the Wilcoxon p-value.

    >>> round(paired_test([1.0, 2.0, 3.0, 4.0, 5.0]).p_t, 6)
    0.013236
    """
    d = np.asarray(diffs, dtype=float)
    n = int(d.size)
    seeds = tuple(seeds)
    nan = math.nan
    if n < 2:
        return PairedTest(
            metric=metric, n=n, seeds=seeds, mean_diff=float(d[0]) if n else nan,
            std_diff=nan, ci_low=nan, ci_high=nan, t_statistic=nan, p_t=nan, p_value=nan,
            test="paired t", statistics={name: nan for name in PAIRED_STATISTICS},
        )
    statistics = {name: float(f(d)) for name, f in PAIRED_STATISTICS.items()}
    est = estimate(d, confidence)
    if _constant(d):
        if _snap(d)[0] == 0.0:
            return PairedTest(
                metric=metric, n=n, seeds=seeds, mean_diff=0.0, std_diff=0.0, ci_low=0.0,
                ci_high=0.0, t_statistic=0.0, p_t=1.0, p_value=1.0, test="paired t",
                statistics=statistics,
            )
        mean = est.mean
        return PairedTest(
            metric=metric, n=n, seeds=seeds, mean_diff=mean, std_diff=0.0, ci_low=mean,
            ci_high=mean, t_statistic=math.copysign(math.inf, mean), p_t=0.0,
            p_value=wilcoxon_p(d), test="Wilcoxon", statistics=statistics,
        )
    t = est.mean / (est.std / math.sqrt(n))
    p_t = float(2.0 * _st.t.sf(abs(t), n - 1))
    return PairedTest(
        metric=metric, n=n, seeds=seeds, mean_diff=est.mean, std_diff=est.std,
        ci_low=est.ci_low, ci_high=est.ci_high, t_statistic=t, p_t=p_t, p_value=p_t,
        test="paired t", statistics=statistics,
    )


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


def summarize(results, baseline, *, metric=ACCURACY, higher_is_better=True,
              confidence=0.95, secondary=None, select_by=None):
    """Summarizes a sweep and compares every activation with the baseline.

    Args:
        results: iterable of `MemberResult` (`model` may be None).
        baseline: the activation the others are compared with.
        metric: the per-member final value compared (a `MemberResult`
            attribute): "test_accuracy", "test_loss", "test_perplexity"...
        higher_is_better: the metric's direction; the winner, each
            comparison's sign and the ranking follow it.
        confidence: interval coverage; alpha = 1 - confidence.
        secondary: `Metric`s reported beside the compared one (estimate
            and unadjusted paired difference) and used, in order, to break
            ties for the winner. Default: test loss (lower is better),
            unless it is the compared metric.
        select_by: the `Metric` whose final validation value picks each
            activation's best seed (the one registered). Default: the
            metric's validation counterpart ("val_accuracy" for
            "test_accuracy"), in the same direction.

    Returns:
        A `Summary`.

    Raises:
        ServiceError: no results, the baseline has no results, a duplicate
            (activation, seed), confidence outside (0, 1), or results
            without the named metric.
    """
    results = list(results)
    if not 0.0 < confidence < 1.0:
        raise ServiceError(f"confidence must be in (0, 1), got {confidence!r}.")
    if not results:
        raise ServiceError("No sweep results to summarize: did any member train?")
    primary = Metric.of(metric, higher_is_better)
    if secondary is None:
        secondary = () if metric == LOSS else (Metric.of(LOSS, higher_is_better=False),)
    secondary = tuple(secondary)
    if select_by is None:
        select_by = Metric(f"val_{primary.short}", higher_is_better)
    for m in (primary, *secondary, select_by):
        _check_metric(results[0], m.name)
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

    activations = tuple(
        _summarize_one(a, by_act[a], primary, secondary, select_by, confidence)
        for a in order
    )
    comparisons = _compare(by_act, order, primary, secondary, alpha, confidence)
    use_holm = len(comparisons) > 1
    winner = _winner(activations, comparisons, by_act, baseline, primary, secondary,
                     alpha, confidence)
    return Summary(
        baseline=baseline, metric=primary, secondary=secondary, select_by=select_by,
        confidence=confidence, alpha=alpha, activations=activations,
        comparisons=comparisons, winner=winner, holm=use_holm,
    )


def _check_metric(result, name):
    if not hasattr(result, name):
        raise ServiceError(
            f"The sweep results have no {name!r}: summarize a metric every "
            f"member reports (e.g. {ACCURACY!r} or {LOSS!r})."
        )


def _better(m, a, b):
    """+1 if value a is better than b by the metric's direction, -1 worse, 0 else."""
    if not (math.isfinite(a) and math.isfinite(b)) or a == b:
        return 0
    return 1 if (a > b) == m.higher_is_better else -1


def _rank_key(m, value):
    """Sort key: better first, NaN last."""
    value = float(value)
    if math.isnan(value):
        return math.inf
    return -value if m.higher_is_better else value


def _summarize_one(name, members, primary, secondary, select_by, confidence):
    seeds = tuple(sorted(members))
    rs = [members[s] for s in seeds]
    reached = [r.epochs_to_threshold for r in rs if r.epochs_to_threshold is not None]
    best = min(rs, key=lambda r: (_rank_key(select_by, getattr(r, select_by.name)),
                                  _rank_key(_VAL_LOSS, _val_loss(r)), r.seed))
    return ActivationSummary(
        activation=name,
        n=len(rs),
        seeds=seeds,
        estimate=estimate([getattr(r, primary.name) for r in rs], confidence,
                          bounds=primary.bounds),
        secondary={m.name: estimate([getattr(r, m.name) for r in rs], confidence,
                                    bounds=m.bounds) for m in secondary},
        epochs_to_threshold_mean=float(np.mean(reached)) if reached else math.nan,
        epochs_to_threshold_median=float(np.median(reached)) if reached else math.nan,
        reached=len(reached),
        selection_mean=float(np.mean([getattr(r, select_by.name) for r in rs])),
        best_seed=best.seed,
        best_selection=float(getattr(best, select_by.name)),
        best_val_loss=float(_val_loss(best)),
        train_seconds_mean=float(np.mean([r.train_seconds for r in rs])),
    )


_VAL_LOSS = Metric("val_loss", higher_is_better=False)


def _val_loss(result):
    return getattr(result, "val_loss", math.nan)


def _compare(by_act, order, primary, secondary, alpha, confidence):
    """Every activation vs the baseline (order[0]), Holm over the family."""
    baseline = order[0]
    raw = [
        (name, _paired(by_act[name], by_act[baseline], primary.name, confidence),
         {m.name: _paired(by_act[name], by_act[baseline], m.name, confidence)
          for m in secondary})
        for name in order[1:]
    ]
    p_values = [test.p_value for _, test, _ in raw]
    adjusted = holm(p_values) if len(raw) > 1 else p_values
    return tuple(
        Comparison(
            activation=name, baseline=baseline, paired=test, secondary=others,
            p_holm=p_adj, significant=bool(p_adj < alpha),  # NaN -> False
            sign=_better(primary, test.mean_diff, 0.0),
        )
        for (name, test, others), p_adj in zip(raw, adjusted)
    )


def _paired(members, reference, metric, confidence):
    seeds = sorted(set(members) & set(reference))
    diffs, kept = [], []
    for s in seeds:
        d = float(getattr(members[s], metric)) - float(getattr(reference[s], metric))
        if math.isfinite(d):
            diffs.append(d)
            kept.append(s)
    test = paired_test(diffs, metric, kept, confidence)
    return dataclasses.replace(
        test, unpaired=len(set(members) ^ set(reference)), non_finite=len(seeds) - len(kept)
    )


def _winner(activations, comparisons, by_act, baseline, primary, secondary, alpha,
            confidence):
    ranked = sorted(
        activations,
        key=lambda a: (_rank_key(primary, a.estimate.mean),
                       *(_rank_key(m, a.secondary[m.name].mean) for m in secondary),
                       a.activation != baseline, a.activation),
    )
    top = ranked[0]
    if len(ranked) == 1:
        return Winner(activation=top.activation, mean=top.estimate.mean, runner_up=None,
                      lead=None, lead_p=math.nan, significant_over_runner_up=False,
                      significant_over_baseline=None)
    second = ranked[1]
    lead = _paired(by_act[top.activation], by_act[second.activation], primary.name,
                   confidence)
    comp_by_name = {c.activation: c for c in comparisons}
    if baseline in (top.activation, second.activation):
        other = second.activation if top.activation == baseline else top.activation
        lead_p = comp_by_name[other].p_holm
    else:
        lead_p = lead.p_value  # unadjusted: the runner-up was chosen after looking
    return Winner(
        activation=top.activation,
        mean=top.estimate.mean,
        runner_up=second.activation,
        lead=lead,
        lead_p=lead_p,
        significant_over_runner_up=bool(lead_p < alpha),
        significant_over_baseline=(None if top.activation == baseline
                                   else comp_by_name[top.activation].significant),
    )


# --- Plain forms: JSON and tracked metrics. ----------------------------------


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


def paired_to_dict(test):
    """A `PairedTest` as a flat dict: its fields, then its statistics by name."""
    d = {f.name: getattr(test, f.name) for f in dataclasses.fields(test)
         if f.name not in ("statistics", "unpaired", "non_finite")}
    d.update(test.statistics)
    d["unpaired"], d["non_finite"] = test.unpaired, test.non_finite
    return d


def summary_to_dict(summary):
    """The summary's numbers as plain JSON types (NaN -> None, inf -> "inf").

    Keys are named after the metrics: an activation's estimates under the
    metric names ("test_accuracy", "test_loss"), a comparison's paired
    tests under the short names ("accuracy", "loss"), the winner's mean as
    "mean_<metric>". `kg_service.analysis.wording.summary_json` adds the sentences.
    """
    sel = summary.select_by.name

    def activation(a):
        return {
            "activation": a.activation, "n": a.n, "seeds": a.seeds,
            summary.metric.name: dataclasses.asdict(a.estimate),
            **{k: dataclasses.asdict(e) for k, e in a.secondary.items()},
            "epochs_to_threshold_mean": a.epochs_to_threshold_mean,
            "epochs_to_threshold_median": a.epochs_to_threshold_median,
            "reached": a.reached,
            f"{sel}_mean": a.selection_mean,
            "best_seed": a.best_seed,
            f"best_{sel}": a.best_selection,
            "best_val_loss": a.best_val_loss,
            "train_seconds_mean": a.train_seconds_mean,
        }

    def comparison(c):
        return {
            "activation": c.activation, "baseline": c.baseline,
            summary.metric.short: paired_to_dict(c.paired),
            **{m.short: paired_to_dict(c.secondary[m.name]) for m in summary.secondary},
            "p_holm": c.p_holm, "significant": c.significant, "sign": c.sign,
        }

    w = summary.winner
    d = {
        "baseline": summary.baseline,
        "metric": summary.metric.name,
        "higher_is_better": summary.metric.higher_is_better,
        "confidence": summary.confidence,
        "alpha": summary.alpha,
        "holm": summary.holm,
        "activations": {a.activation: activation(a) for a in summary.activations},
        "comparisons": {c.activation: comparison(c) for c in summary.comparisons},
        "winner": {
            "activation": w.activation, f"mean_{summary.metric.name}": w.mean,
            "runner_up": w.runner_up,
            "lead": None if w.lead is None else paired_to_dict(w.lead),
            "lead_p": w.lead_p,
            "significant_over_runner_up": w.significant_over_runner_up,
            "significant_over_baseline": w.significant_over_baseline,
        },
    }
    return _clean(d)


def flat_metrics(summary):
    """Finite numbers keyed "<activation>.<stat>" for a metrics logger.

    E.g. "gelu.test_accuracy_mean", "gelu.vs_baseline.accuracy_d_z",
    "gelu.vs_baseline.p_holm".
    """
    out = {}
    sel = summary.select_by.name
    for a in summary.activations:
        k = a.activation
        for name, e in ((summary.metric.name, a.estimate), *a.secondary.items()):
            for stat in ("mean", "std", "ci_low", "ci_high"):
                out[f"{k}.{name}_{stat}"] = getattr(e, stat)
        out[f"{k}.seeds"] = a.n
        out[f"{k}.reached_threshold"] = a.reached
        out[f"{k}.epochs_to_threshold_median"] = a.epochs_to_threshold_median
        out[f"{k}.{sel}_mean"] = a.selection_mean
    for c in summary.comparisons:
        k = f"{c.activation}.vs_baseline"
        short = summary.metric.short
        for stat in ("mean_diff", "ci_low", "ci_high", "p_t"):
            out[f"{k}.{short}_{stat}"] = getattr(c.paired, stat)
        for stat, value in c.paired.statistics.items():
            out[f"{k}.{short}_{stat}"] = value
        for m in summary.secondary:
            out[f"{k}.{m.short}_mean_diff"] = c.secondary[m.name].mean_diff
        out[f"{k}.p_holm"] = c.p_holm
    return {k: float(v) for k, v in out.items() if math.isfinite(float(v))}
