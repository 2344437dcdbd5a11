"""A study: several sweeps analysed as one family of comparisons (issue 18 §6).

Numbers only (`kg_service.analysis.words.wording` phrases them). A study is the
sweeps tagged with one `study:` name, e.g. the two halves of "ReLU's
Revival" (with and without LayerNorm). Within each sweep every activation
is compared with its baseline, paired by seed, on every metric the study
reads (`stats.paired_test`); the p-values of all of them, over all sweeps
and metrics, are one Holm family (`holm_counting_untestable`), so a study
of two halves does not get twice the chances of one.

Each comparison also gets the three-way verdict of `decisions.decide`
(better, worse, equivalent within the sweep's `analysis.margin` by TOST,
or inconclusive), its superiority and its equivalence p-values each Holm-
adjusted over the study: every comparison for the first, every comparison
with a margin for the second.

Across two sweeps with the same baseline at two levels of the study's
declared factor (`study_factor:`, e.g. model.layer_norm with reference
true), the *interaction* asks whether an activation's gain over the
baseline changed between them: the difference of the mean paired
differences, (a - base) at the other level minus (a - base) at the
reference level (issue 30 §4: declared, never the sweeps' order), with a
Welch test and its interval (the
seeds of two sweeps are separate runs, so the two sets of differences are
independent samples with their own spreads). On the Revival halves this is
the paper's claim itself: removing LayerNorm hurts GELU more than ReLU.
The interactions are a second Holm family of their own: the study's
questions, apart from the comparisons inside each sweep.

Example:

>>> t = welch_from_stats(0.0120, 0.009078, 3, -0.0449, 0.017229, 3)
>>> round(t.estimate, 4), round(t.p_value, 3)
(-0.0569, 0.015)
"""

import dataclasses
import itertools
import math

import numpy as np
from scipy import stats as _st

from kg_service.analysis.numbers import decisions
from kg_service.analysis.numbers import multiplicity
from kg_service.analysis.numbers import stats
from kg_service.errors import ServiceError


# --- Inputs and results: numbers only. ---------------------------------------


@dataclasses.dataclass(frozen=True)
class StudySweep:
    """One sweep of a study, as plain numbers.

    `values` maps a metric name to {activation: {seed: final value}} of the
    members that trained (diverged ones are counted in `failed`).
    `metrics` lists the `stats.Metric`s read, the compared one first.
    """

    name: str
    baseline: str
    metrics: tuple
    values: dict
    failed: dict = dataclasses.field(default_factory=dict)  # activation -> count
    # metric name -> equivalence margin in its units (the sweep's
    # `analysis.margin`); a metric without one gets no equivalence test.
    margins: dict = dataclasses.field(default_factory=dict)
    # The sweep's level of the study's factor (e.g. "false" for
    # model.layer_norm), None where the study declares no factor.
    level: object = None

    @property
    def metric(self):
        """The compared metric (the task's)."""
        return self.metrics[0]

    def activations(self):
        """The activations with results, baseline first."""
        names = self.values[self.metric.name]
        return [self.baseline] + [a for a in names if a != self.baseline]


@dataclasses.dataclass(frozen=True)
class StudyComparison:
    """One activation against its sweep's baseline on one metric."""

    sweep: str
    metric: stats.Metric
    activation: str
    baseline: str
    paired: stats.PairedTest
    p_holm: float  # over the whole study's family; NaN when untestable
    significant: bool
    # Three-way verdict (issue 18 §1) on the study's families: `stats`'
    # BETTER / WORSE / EQUIVALENT / INCONCLUSIVE / UNTESTED.
    outcome: str = decisions.UNTESTED
    margin: float = math.nan
    p_equivalence: float = math.nan  # TOST inside +-margin
    p_equivalence_holm: float = math.nan  # over the comparisons with a margin
    # Better or worse, and yet equivalent too: a real difference smaller than
    # the margin (as `decisions.Verdict.within_margin`).
    within_margin: bool = False
    # The same numbers as a `decisions.Verdict`, for the interval that
    # decides (issue 30 §8): `verdict.interval` at `verdict.confidence`,
    # at the level Holm tests this comparison at in the study's family.
    verdict: object = None


@dataclasses.dataclass(frozen=True)
class WelchTest:
    """Difference of two independent means (second - first), Welch's t."""

    estimate: float
    se: float
    df: float  # Welch-Satterthwaite
    t_statistic: float
    p_value: float
    ci_low: float
    ci_high: float
    n_first: int
    n_second: int


@dataclasses.dataclass(frozen=True)
class Interaction:
    """How an activation's paired gain over the baseline moved between two
    sweeps: `test.estimate` = mean(a - base | second) - mean(a - base | first),
    in the metric's units; `first` is the sweep at the declared reference
    level, `second` the one at `second_level`."""

    metric: stats.Metric
    activation: str
    baseline: str
    first: str  # sweep names
    second: str
    diff_first: stats.PairedTest
    diff_second: stats.PairedTest
    test: WelchTest
    p_holm: float  # over the study's interactions
    significant: bool
    # The interval at the level Holm tests this interaction at (over the
    # study's interactions): excludes 0 exactly when `significant`.
    ci_holm: tuple = (math.nan, math.nan)
    ci_holm_confidence: float = math.nan
    first_level: object = None  # the reference level
    second_level: object = None


@dataclasses.dataclass(frozen=True)
class Study:
    """Everything `analyse` found."""

    name: str
    sweeps: tuple  # StudySweep, in the order given (oldest first)
    confidence: float
    alpha: float
    comparisons: tuple  # StudyComparison
    interactions: tuple  # Interaction
    factor: object = None  # the declared factor's setting (e.g. model.layer_norm)
    reference: object = None  # its reference level

    @property
    def family_size(self):
        """m of the comparisons' Holm family, untestable ones included."""
        return len(self.comparisons)

    @property
    def untestable(self):
        """Comparisons without a p-value (fewer than 2 paired seeds)."""
        return sum(1 for c in self.comparisons if math.isnan(c.paired.p_value))


# --- The statistics, each checked against scipy/statsmodels in the tests. ----


def holm_counting_untestable(p_values):
    """Holm's step-down adjustment in which a NaN p-value still counts.

    A comparison that could not be tested (too few paired seeds) was still
    one of the family's questions: leaving it out of m would make the
    others' adjustment milder than the family planned (`multiplicity.holm` drops
    NaN from m; issue 18). Here m is the number of entries, NaN ones
    included, and a NaN ranks last (as p = 1, which can never be
    rejected), so the finite entries equal statsmodels'
    `multipletests(p_with_nan_as_1, method="holm")`; NaN stays NaN.

    >>> [round(p, 6) for p in holm_counting_untestable([0.01, float("nan"), 0.03])]
    [0.03, nan, 0.06]
    """
    p = [float(v) for v in p_values]
    m = len(p)
    order = sorted((i for i in range(m) if not math.isnan(p[i])), key=lambda i: p[i])
    out = [math.nan] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out


def welch_from_stats(mean_first, sd_first, n_first, mean_second, sd_second, n_second,
                     confidence=0.95):
    """Welch's t-test and interval of mean_second - mean_first from summaries.

    se = sqrt(s1^2/n1 + s2^2/n2); df by Welch-Satterthwaite,
    (s1^2/n1 + s2^2/n2)^2 / ((s1^2/n1)^2/(n1-1) + (s2^2/n2)^2/(n2-1));
    two-sided p from Student's t with df; the interval is
    estimate +- t_{(1+c)/2, df} se. As scipy's
    `ttest_ind_from_stats(..., equal_var=False)`.

    Every field but the estimate is NaN when a side has fewer than 2
    values or both spreads are zero (nothing to scale the difference by).
    """
    nan = math.nan
    estimate = float(mean_second) - float(mean_first)
    v1 = float(sd_first) ** 2 / n_first if n_first >= 2 else nan
    v2 = float(sd_second) ** 2 / n_second if n_second >= 2 else nan
    var = v1 + v2
    if not var > 0:  # NaN (a side too small) or both spreads zero
        return WelchTest(estimate, nan, nan, nan, nan, nan, nan, n_first, n_second)
    se = math.sqrt(var)
    df = var ** 2 / (v1 ** 2 / (n_first - 1) + v2 ** 2 / (n_second - 1))
    t = estimate / se
    p = float(2.0 * _st.t.sf(abs(t), df))
    half = float(_st.t.ppf(0.5 + confidence / 2, df)) * se
    return WelchTest(estimate, se, df, t, p, estimate - half, estimate + half,
                     n_first, n_second)


def welch(first, second, confidence=0.95):
    """`welch_from_stats` of two samples (sd with ddof=1).

    >>> round(welch([1.0, 2.0, 3.0], [2.0, 4.0, 6.0, 8.0]).p_value, 4)
    0.0999
    """
    a, b = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    sd = lambda x: float(np.std(x, ddof=1)) if x.size >= 2 else math.nan  # noqa: E731
    return welch_from_stats(float(np.mean(a)) if a.size else math.nan, sd(a), int(a.size),
                            float(np.mean(b)) if b.size else math.nan, sd(b), int(b.size),
                            confidence)


# --- The study. --------------------------------------------------------------


def paired_differences(sweep, metric, activation):
    """`(seeds, differences)`: activation - baseline on the seeds both have,
    finite differences only."""
    values = sweep.values[metric.name]
    mine, base = values.get(activation, {}), values.get(sweep.baseline, {})
    seeds, diffs = [], []
    for seed in sorted(set(mine) & set(base)):
        d = float(mine[seed]) - float(base[seed])
        if math.isfinite(d):
            seeds.append(seed)
            diffs.append(d)
    return tuple(seeds), diffs


def _paired(sweep, metric, activation, confidence):
    seeds, diffs = paired_differences(sweep, metric, activation)
    return stats.paired_test(diffs, metric.name, seeds, confidence)


class UndeclaredReference(ServiceError):
    """A study with sweeps to compare across, and no declared reference level
    to orient the interaction by (issue 30 §4)."""

    def __init__(self, name, sweeps, problem):
        super().__init__(
            f"study {name!r}: {problem} An interaction's sign is declared, never "
            "guessed from the sweeps' order: give every sweep of the study the same "
            "`study_factor: {setting: KEY, reference: VALUE}` (e.g. {setting: "
            "model.layer_norm, reference: true}) and train it again. Sweeps: "
            + ", ".join(f"{s.name} (level {s.level!r})" for s in sweeps) + "."
        )
        self.name = name


def analyse(name, sweeps, confidence=0.95, reference=None, factor=None):
    """The study `name` over `sweeps` (`StudySweep`s; their order matters to
    nothing but the tables' rows).

    Returns a `Study`: every (sweep, metric, activation) against the
    sweep's baseline, Holm over all of them (untestable ones counted), and
    an interaction for every pair of sweeps with the same baseline, one at
    the `reference` level of the study's `factor` and one at another level,
    per metric both read and activation both ran, Holm over the
    interactions.

    Raises:
        UndeclaredReference: sweeps with a shared baseline at different
            (or undeclared) levels, and no reference level among them.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    sweeps = tuple(sweeps)
    alpha = round(1.0 - confidence, 12)
    raw = [
        (s, m, a, _paired(s, m, a, confidence))
        for s in sweeps for m in s.metrics for a in s.activations()[1:]
    ]
    adjusted = holm_counting_untestable([test.p_value for *_, test in raw])
    levels = multiplicity.holm_levels([test.p_value for *_, test in raw], alpha, count_nan=True)
    margins = [_margin(s, m) for s, m, *_ in raw]
    with_margin = [i for i, margin in enumerate(margins) if math.isfinite(margin)]
    p_eq = [stats.tost_p(raw[i][3].diffs, margins[i]) for i in with_margin]
    eq_holm = dict(zip(with_margin, holm_counting_untestable(p_eq)))
    eq_levels = dict(zip(with_margin, multiplicity.holm_levels(p_eq, alpha, count_nan=True)))
    p_eq = dict(zip(with_margin, p_eq))
    comparisons = tuple(
        _comparison(s, m, a, test, p, alpha, margins[i], p_eq.get(i, math.nan),
                    eq_holm.get(i, math.nan), levels[i], eq_levels.get(i, math.nan))
        for i, ((s, m, a, test), p) in enumerate(zip(raw, adjusted))
    )
    pairs = oriented_pairs(name, sweeps, reference)
    return Study(name=name, sweeps=sweeps, confidence=confidence, alpha=alpha,
                 comparisons=comparisons,
                 interactions=_interactions(pairs, confidence, alpha),
                 factor=factor, reference=reference)


def oriented_pairs(name, sweeps, reference):
    """`[(reference-level sweep, other-level sweep)]` of every two sweeps
    with one baseline, by declared level (issue 30 §4): two sweeps at one
    level are replicates, not an interaction.

    Raises:
        UndeclaredReference: as `analyse`.
    """
    shared = [(a, b) for a, b in itertools.combinations(sweeps, 2) if a.baseline == b.baseline]
    if not shared:
        return []
    if reference is None or any(s.level is None for pair in shared for s in pair):
        raise UndeclaredReference(name, sweeps, "its sweeps declare no reference level.")
    if not any(s.level == reference for s in sweeps):
        raise UndeclaredReference(
            name, sweeps, f"no sweep is at the reference level {reference!r}.")
    out = []
    for a, b in shared:
        if (a.level == reference) != (b.level == reference):
            out.append((a, b) if a.level == reference else (b, a))
    return out


def _comparison(s, m, a, test, p, alpha, margin, p_eq, p_eq_holm, level, eq_level):
    """One `StudyComparison`, with the `decisions.Verdict` that decides it
    (the one rule, `decisions.verdict`, at Holm's level for it in the
    study's family)."""
    verdict = decisions.verdict(
        test, p_holm=p, p_equivalence=p_eq, p_equivalence_holm=p_eq_holm, level=level,
        equivalence_level=eq_level, margin=margin, alpha=alpha,
        higher_is_better=m.higher_is_better)
    return StudyComparison(
        sweep=s.name, metric=m, activation=a, baseline=s.baseline, paired=test,
        p_holm=p, significant=bool(p < alpha), outcome=verdict.outcome, margin=margin,
        p_equivalence=p_eq, p_equivalence_holm=p_eq_holm,
        within_margin=verdict.within_margin, verdict=verdict)


def _margin(sweep, metric):
    margin = sweep.margins.get(metric.name)
    return math.nan if margin is None else float(margin)


def _interactions(pairs, confidence, alpha):
    raw = []
    for first, second in pairs:
        second_metrics = {m.name for m in second.metrics}
        for metric in (m for m in first.metrics if m.name in second_metrics):
            shared = [a for a in first.activations()[1:] if a in second.activations()[1:]]
            for activation in shared:
                s1, x1 = paired_differences(first, metric, activation)
                s2, x2 = paired_differences(second, metric, activation)
                raw.append((metric, activation, first, second,
                            stats.paired_test(x1, metric.name, s1, confidence),
                            stats.paired_test(x2, metric.name, s2, confidence),
                            welch(x1, x2, confidence)))
    adjusted = holm_counting_untestable([r[-1].p_value for r in raw])
    levels = multiplicity.holm_levels([r[-1].p_value for r in raw], alpha, count_nan=True)
    return tuple(
        Interaction(metric=m, activation=a, baseline=s1.baseline, first=s1.name,
                    second=s2.name, diff_first=d1, diff_second=d2, test=t, p_holm=p,
                    significant=bool(p < alpha), ci_holm=_welch_interval(t, level),
                    ci_holm_confidence=1.0 - level,
                    first_level=s1.level, second_level=s2.level)
        for (m, a, s1, s2, d1, d2, t), p, level in zip(raw, adjusted, levels)
    )


def _welch_interval(test, level):
    """estimate +- t_{1 - level/2, df} se: Welch's interval at Holm's level."""
    if not (math.isfinite(level) and math.isfinite(test.se)):
        return (math.nan, math.nan)
    half = float(_st.t.ppf(1.0 - level / 2, test.df)) * test.se
    return (test.estimate - half, test.estimate + half)
