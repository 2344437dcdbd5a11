"""The statistics of a sweep, as numbers: one function per statistic.

Pure functions over plain sequences of floats (numpy and scipy only; no
Keras, no MLflow, no files, no sentences: `kg_service.analysis.words.wording`
phrases what they compute). Each is checked against scipy or a published
reference in the tests. `kg_service.analysis.numbers.comparisons` applies them to a
sweep's members; a new statistic (an equivalence test, a bootstrap
interval, a seed plan) is one more function here, or a small sibling
module by concern, and never needs the sweep's types.

Every paired test carries the statistics of `PAIRED_STATISTICS`, one
function each of the paired differences:

    =============  ==========================  ============================
    name           function                    wording.STATISTICS column
    =============  ==========================  ============================
    "p_wilcoxon"   `wilcoxon_p` (signed rank)  "Wilcoxon p", report
    "d_z"          `cohens_dz` (effect size)   "d_z", terminal and report
    =============  ==========================  ============================

Add a function and its entry here, and a `wording.Column` under the same
name in `wording.STATISTICS`: the new number then appears in summary.json,
the tracked metrics (`plain.flat_metrics`), the report's comparison table,
and the terminal table if its column says so.

Example:

>>> test = paired_test([1.0, 2.0, 3.0, 4.0, 5.0])
>>> round(test.p_t, 6), round(test.statistics["d_z"], 4)
(0.013236, 1.8974)
"""

import dataclasses
import math
import warnings

import numpy as np
from scipy import optimize as _optimize
from scipy import special as _sc
from scipy import stats as _st

ACCURACY = "test_accuracy"
LOSS = "test_loss"

# The range of a metric, by its name without the split prefix: intervals
# are clipped to it (an accuracy interval past 100% with 2 seeds says
# nothing more). Metrics not listed are unbounded.
_RANGES = {
    "accuracy": (0.0, 1.0),
    "loss": (0.0, math.inf),
    "perplexity": (1.0, math.inf),
    "entropy_norm": (0.0, 1.0),  # attention entropy / log t, per block: "entropy_norm.block0"
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
        short = cls(name).short
        bounds = _RANGES.get(short, _RANGES.get(short.split(".")[0], (-math.inf, math.inf)))
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
class PairedTest:
    """Mean paired difference (activation - reference) of one metric.

    `p_value` is the one the decision uses: the paired t-test's, except
    when the differences are constant and non-zero (t is infinite), where
    it is the Wilcoxon p-value; `test` names which. `statistics` holds
    every `PAIRED_STATISTICS` entry (NaN when n < 2).

    Degenerate cases, told by the numbers: n < 2 (p NaN); constant
    differences, zero or not (std_diff == 0, `degenerate`): the t-test and
    its interval are undefined (p_t, ci_low, ci_high NaN; never a
    zero-width interval with p = 0), and the decision uses the exact
    Wilcoxon p-value (test == "Wilcoxon"; 1 when every difference is zero).

    `dz_low`, `dz_high`: the interval of d_z at the test's confidence, by
    inverting the noncentral t (`dz_interval`); NaN when n < 2 or the
    differences are constant. `diffs`: the paired differences themselves
    (seed order), for the statistics that need more than their summary.
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
    dz_low: float = math.nan
    dz_high: float = math.nan
    diffs: tuple = ()

    @property
    def degenerate(self):
        """The differences are constant: no spread, no t-test, no interval."""
        return self.n >= 2 and self.std_diff == 0.0



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
    half = t_multiplier(n, confidence) * sd / math.sqrt(n)
    low, high = bounds
    return Estimate(n=n, mean=mean, std=sd, ci_low=max(low, mean - half),
                    ci_high=min(high, mean + half))


def t_multiplier(n, confidence=0.95):
    """t_{(1+c)/2, n-1}: the half-width of a t interval in standard errors.

    >>> round(t_multiplier(10), 4)
    2.2622
    """
    return float(_st.t.ppf(0.5 + confidence / 2, n - 1))


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


def constant(d):
    """Whether the differences `d` are all equal, on the tie grid (`_TIE_GRID`)."""
    return _constant(d)


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
    n - 1 degrees of freedom, and its confidence interval of the mean;
    d_z with its noncentral-t interval.

    Degenerate inputs give numbers instead of warnings: n < 2 -> p NaN;
    constant differences (all zero, or all equal and non-zero) -> the
    t-test is undefined: t = 0 or +-inf, p_t and the interval NaN, and
    the decision on the exact Wilcoxon p-value (1 for all zeros, 2/2^n
    for n equal non-zero differences).

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
            diffs=tuple(float(v) for v in d),
        )
    statistics = {name: float(f(d)) for name, f in PAIRED_STATISTICS.items()}
    est = estimate(d, confidence)
    if _constant(d):
        # A zero-width interval with p = 0 would claim certainty that n
        # equal numbers cannot give: the spread is unknown, not zero.
        zero = _snap(d)[0] == 0.0
        mean = 0.0 if zero else est.mean
        return PairedTest(
            metric=metric, n=n, seeds=seeds, mean_diff=mean, std_diff=0.0, ci_low=nan,
            ci_high=nan, t_statistic=0.0 if zero else math.copysign(math.inf, mean),
            p_t=nan, p_value=wilcoxon_p(d), test="Wilcoxon", statistics=statistics,
            diffs=tuple(float(v) for v in d),
        )
    t = est.mean / (est.std / math.sqrt(n))
    p_t = float(2.0 * _st.t.sf(abs(t), n - 1))
    dz_low, dz_high = dz_interval(d, confidence)
    return PairedTest(
        metric=metric, n=n, seeds=seeds, mean_diff=est.mean, std_diff=est.std,
        ci_low=est.ci_low, ci_high=est.ci_high, t_statistic=t, p_t=p_t, p_value=p_t,
        test="paired t", statistics=statistics, dz_low=dz_low, dz_high=dz_high,
        diffs=tuple(float(v) for v in d),
    )


def dz_interval(d, confidence=0.95):
    """The interval of Cohen's d_z by inverting the noncentral t.

    t = d_z sqrt(n) follows a noncentral t with n - 1 degrees of freedom
    and noncentrality delta sqrt(n); the bounds are the deltas whose
    distribution puts the observed t at its (1 +- c)/2 quantiles
    (Steiger & Fouladi 1997; Cumming 2012). (NaN, NaN) for n < 2 or
    constant differences.

    >>> [round(v, 3) for v in dz_interval([1.0, 2.0, 3.0, 4.0, 5.0])]
    [0.333, 3.407]
    """
    d = np.asarray(d, dtype=float)
    n = int(d.size)
    if n < 2 or _constant(d):
        return math.nan, math.nan
    df, root_n = n - 1, math.sqrt(n)
    t = float(np.mean(d) / np.std(d, ddof=1) * root_n)
    tail = (1.0 - confidence) / 2.0

    def solve(target):
        # cdf(t; nc) falls as nc grows, from 1 to 0. Walk out from nc = t in
        # growing steps to bracket the root: scipy's nct.cdf gives NaN far
        # in the tail (nc -8 at t 8, df 4), where the root never lies.
        # scipy.special's nctdtr is what nct.cdf returns, bit for bit, without
        # its ~50x dearer argument checks: ~30 calls an interval, two
        # intervals a comparison (issue 17).
        f = lambda nc: float(_sc.nctdtr(df, nc, t)) - target  # noqa: E731
        direction = -1.0 if f(t) < 0 else 1.0
        near, step = t, 0.5
        far = near + direction * step
        while f(far) * direction > 0:
            near, step = far, step * 2
            far = near + direction * step
        return _optimize.brentq(f, min(near, far), max(near, far), xtol=1e-10)

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            return solve(1.0 - tail) / root_n, solve(tail) / root_n
        except ValueError:  # scipy's nct.cdf gave NaN inside the bracket
            return math.nan, math.nan


def t_interval(d, confidence):
    """mean(d) +- t_{(1+c)/2, n-1} sd/sqrt(n); (NaN, NaN) when n < 2 or the
    differences are constant (the interval is undefined, not zero-wide).

    >>> [round(v, 4) for v in t_interval([1.0, 2.0, 3.0, 4.0, 5.0], 0.90)]
    [1.4926, 4.5074]
    """
    d = np.asarray(d, dtype=float)
    if d.size < 2 or _constant(d) or not 0.0 < confidence < 1.0:
        return math.nan, math.nan
    e = estimate(d, confidence)
    return e.ci_low, e.ci_high


def tost_p(d, margin):
    """Two one-sided tests (Schuirmann 1987) of |mean(d)| < margin.

    p = max(p_lower, p_upper): p_lower of H0 mean <= -margin, p_upper of
    H0 mean >= +margin, each a one-sided t-test. Equivalence at level
    alpha exactly when the 1 - 2 alpha t-interval lies inside (-margin,
    +margin). Constant differences have no t-test: then each side is the
    exact one-sided Wilcoxon signed-rank test of d +- margin (1/2^n when
    every difference is inside the margin). NaN for n < 2 or no margin.

    >>> round(tost_p([0.1, -0.1, 0.2, 0.0, 0.05], 0.5), 6)
    0.000422
    """
    d = np.asarray(d, dtype=float)
    if d.size < 2 or margin is None or not math.isfinite(margin) or margin <= 0:
        return math.nan
    if _constant(d):
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            low = float(_st.wilcoxon(_snap(d + margin), alternative="greater").pvalue) \
                if np.any(_snap(d + margin) != 0) else 1.0
            high = float(_st.wilcoxon(_snap(d - margin), alternative="less").pvalue) \
                if np.any(_snap(d - margin) != 0) else 1.0
        return max(low, high)
    n = d.size
    se = float(np.std(d, ddof=1)) / math.sqrt(n)
    mean = float(np.mean(d))
    p_lower = float(_st.t.sf((mean + margin) / se, n - 1))
    p_upper = float(_st.t.cdf((mean - margin) / se, n - 1))
    return max(p_lower, p_upper)


def wilcoxon_floor(alpha):
    """The fewest pairs at which a two-sided Wilcoxon signed-rank test can
    give p < alpha: its smallest p at n pairs is 2/2^n (every sign alike),
    0.25 at n = 3, 0.0625 at n = 5, 0.03125 at n = 6.

    >>> wilcoxon_floor(0.05)
    6
    """
    n = 1
    while 2.0 / 2**n >= alpha:
        n += 1
    return n


# --- Failures: a diverged member is a result. ------------------------------------


def failure_p(failed, total, failed_reference, total_reference):
    """Two-sided Fisher exact p-value that two failure rates are equal.

    The 2x2 table [[failed, total - failed], [failed_reference,
    total_reference - failed_reference]]: members that diverged and that
    did not, for an activation and for the reference. 1 when neither
    failed; NaN when either total is 0.

    >>> round(failure_p(4, 6, 0, 6), 4)
    0.0606
    """
    if total < 1 or total_reference < 1:
        return math.nan
    if failed == 0 and failed_reference == 0:
        return 1.0
    table = [[failed, total - failed], [failed_reference, total_reference - failed_reference]]
    return float(_st.fisher_exact(table).pvalue)
