"""Comparisons that hold with few runs: bootstrap and distribution-level statistics.

Numbers only (numpy), like `kg_service.analysis.numbers.stats`; every resampling
is seeded, so a report reads the same each time it is rebuilt.

- `bootstrap_interval`: the percentile bootstrap interval of the mean
  paired difference, resampling seeds (each seed's pair stays together):
  no normality assumed, beside the t-interval (Efron & Tibshirani 1993).
- `probability_of_improvement`: P(X > Y) + P(X = Y)/2 over every pair of
  runs, the Mann-Whitney U over n m (Agarwal et al. 2021, rliable).
- `aso_epsilon`: almost stochastic order (del Barrio et al. 2018; Dror et
  al. 2019), the upper bound epsilon_min of the violation ratio as
  deepsig's `aso` computes it (the tests check it against deepsig),
  vectorised over its 1000 bootstrap iterations: deepsig's loop takes
  seconds a pair, too slow for a report of 8 activations
  (benchmarks/aso_speed.py prints the ratio).
- `rank_first`: how often each activation has the best mean when the
  seeds are resampled: the uncertainty of "the winner".

Example:

>>> probability_of_improvement([3.0, 4.0], [1.0, 3.0])
0.875
"""

import math

import numpy as np
from scipy import stats as _st

from kg_service.analysis.numbers import stats

RESAMPLES = 10_000
ASO_RESAMPLES = 1_000  # deepsig's default
SEED = 18  # any fixed seed: a rebuilt report reads the same


def bootstrap_interval(d, confidence=0.95, resamples=RESAMPLES, seed=SEED):
    """Percentile bootstrap interval of mean(d), resampling the pairs.

    (NaN, NaN) for fewer than 2 pairs or constant differences (every
    resample has the same mean: no interval, as for the t-test).

    >>> [round(v, 2) for v in bootstrap_interval([1.0, 2.0, 3.0, 4.0, 5.0])]
    [1.8, 4.2]
    """
    d = np.asarray(d, dtype=float)
    n = d.size
    if n < 2 or stats.constant(d):
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, n, size=(resamples, n))].mean(axis=1)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return float(low), float(high)


def probability_of_improvement(x, y, higher_is_better=True):
    """P(X > Y) + P(X = Y)/2 for a run X of `x` and a run Y of `y`.

    Over all n m pairs of runs, so it equals scipy's Mann-Whitney U of x
    against y over n m. Lower-is-better metrics count X < Y as an
    improvement. NaN if either is empty.
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if not (x.size and y.size):
        return math.nan
    if not higher_is_better:
        x, y = -x, -y
    diff = x[:, None] - y[None, :]
    return float(np.mean((diff > 0) + 0.5 * (diff == 0)))


def _quantiles(scores, t):
    """The empirical quantile function at t, as deepsig builds it: the
    ceil(n t)-th smallest score. `scores` may be a batch (rows)."""
    scores = np.sort(np.asarray(scores, dtype=float), axis=-1)
    n = scores.shape[-1]
    index = np.clip(np.ceil(n * t).astype(int) - 1, 0, n - 1)
    return scores[..., index]


def violation_ratio(a, b, dt=0.005):
    """epsilon_W2 of Dror et al. (2019): the share of the squared Wasserstein
    distance between the score distributions where A's quantile lies below
    B's. 0: A stochastically dominates B; 1: B dominates A; 0.5 when the
    distributions are equal (deepsig's convention). Batched over rows."""
    t = np.arange(dt, 1.0, dt)
    f, g = _quantiles(a, t), _quantiles(b, t)
    diff = g - f
    total = np.sum(diff ** 2 * dt, axis=-1)
    violated = np.where(f >= g, 0.0, diff)[..., 1:]  # deepsig leaves out t = dt
    part = np.sum(violated ** 2 * dt, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total == 0, 0.5, part / np.where(total == 0, 1.0, total))


def aso_epsilon(a, b, confidence=0.95, comparisons=1, resamples=ASO_RESAMPLES, dt=0.005,
                seed=SEED, higher_is_better=True):
    """epsilon_min of almost stochastic order: is A better than B?

    The violation ratio minus its bootstrap standard error times
    z at the Bonferroni confidence 1 - (1 - confidence) / `comparisons`,
    clipped to [0, 1]. (deepsig adds (1 - confidence) / comparisons to the
    confidence instead, which is Bonferroni's level only for 2 comparisons
    or fewer: 0.957, not 0.993, for 7 at 0.95; issue 30 §9.) Below 0.5: A is almost stochastically larger
    (better) than B; the smaller, the closer to A always winning; near 1:
    B dominates. The scores need not be paired. NaN if either is empty.
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if not (a.size and b.size):
        return math.nan
    if not higher_is_better:
        a, b = -a, -b
    confidence = 1.0 - (1.0 - confidence) / max(1, int(comparisons))  # Bonferroni
    ratio = float(violation_ratio(a, b, dt))
    rng = np.random.default_rng(seed)
    boot_a = _quantiles(a, rng.uniform(0, 1, (resamples, a.size)))
    boot_b = _quantiles(b, rng.uniform(0, 1, (resamples, b.size)))
    samples = violation_ratio(boot_a, boot_b, dt)
    const = math.sqrt(a.size * b.size / (a.size + b.size))
    sigma = float(np.std(const * (samples - ratio)))
    return float(np.clip(ratio - sigma / const * _st.norm.ppf(1.0 - confidence), 0.0, 1.0))


def rank_first(table, higher_is_better=True, resamples=RESAMPLES, seed=SEED):
    """P(each activation has the best mean), resampling the seeds.

    Args:
        table: {activation: {seed: value}}; only the seeds every
            activation has are used, resampled together (a seed's runs
            stay together, as in the paired tests).

    Ties for first share the resample equally. {} when fewer than 2
    activations or fewer than 2 common seeds.
    """
    names = list(table)
    seeds = sorted(set.intersection(*(set(v) for v in table.values()))) if names else []
    if len(names) < 2 or len(seeds) < 2:
        return {}
    values = np.array([[table[a][s] for a in names] for s in seeds], dtype=float)
    if not higher_is_better:
        values = -values
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(seeds), size=(resamples, len(seeds)))].mean(axis=1)
    best = means == means.max(axis=1, keepdims=True)
    shares = best / best.sum(axis=1, keepdims=True)
    return {a: float(p) for a, p in zip(names, shares.mean(axis=0))}
