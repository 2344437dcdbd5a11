"""After a sequential comparison stops: its futility rule, its repeated
confidence interval and its bias-adjusted estimate. Numbers only.

Futility, non-binding, by conditional power (stochastic curtailment;
Lan, Simon & Halperin 1982; Jennison & Turnbull 2000, "Group Sequential
Methods", ch. 10). At a look before the last, with z = mean / (sd /
sqrt(n)) at information fraction t = n / n_max, the chance of crossing
the final boundary c (|Z| >= c at n_max seeds) if the true difference were
the smallest effect of interest delta, in either direction, is

    CP(+-theta) = Phi((-c + z sqrt(t) +- theta (1 - t)) / sqrt(1 - t))
                  + Phi((-c - z sqrt(t) -+ theta (1 - t)) / sqrt(1 - t)),

theta = delta sqrt(n_max) / sd (the drift of the z statistic at n_max,
with the look's sd plugged in; the B-value form of Lan & Wittes 1988).
When both directions' chance is below `CONDITIONAL_POWER_FLOOR` the
comparison stops for futility: the smallest effect is out of reach. That
rule stops a comparison with too few seeds for its smallest effect; one
with plenty, whose data already exclude the smallest effect, stops too when
the look's repeated confidence interval (below) lies inside +-delta
(Jennison & Turnbull 2000, ch. 9.3): if the true difference is delta or
more, that happens with chance at most alpha / 2. Two
choices lean towards continuing: c is the final boundary of the looks so
far plus one at n_max (later interim looks would raise it), and a crossing
at a later interim look is not counted apart. Power lost to the rule is at
most the floor times the chance of a futility stop (a stopped path had
less than the floor's chance left), plus alpha / 2 for the interval
part. Non-binding: the efficacy boundaries
are computed without it (`spending.boundaries`), so the chance of a false
difference stays at alpha whether or not a futility stop is obeyed.

Repeated confidence intervals (Jennison & Turnbull 2000, ch. 9): at look
k, mean +- t_{n-1}(1 - alpha_k / 2) sd / sqrt(n) at the look's calibrated
two-sided level alpha_k (`sequential.Design.nominal_alpha`). They hold the
true difference at every look at once with probability >= 1 - alpha, so
the interval at the stopping look is valid whatever the stopping rule
(efficacy, equivalence, futility, obeyed or not); it excludes 0 exactly
when the look's t-test rejects.

Bias-adjusted estimate: median-unbiased under the stagewise ordering
(Jennison & Turnbull 2000, ch. 8.4; Tsiatis, Rosner & Mehta 1984). The
outcome (k*, z*) is ordered above every outcome that stopped for a
difference at a look before k* in the positive direction, and above the
outcomes at look k* with a smaller z. The estimate is the theta at which
P_theta(outcome >= (k*, z*)) = 1/2, computed from the efficacy design's
recursive integration (`spending.Paths`), under any theta by the
likelihood ratio exp(theta S - theta^2 t / 2), the sd plugged in. The
ordering is the efficacy design's sample space (the futility and
equivalence stops, non-binding, are not in it). A comparison stopped
early for a difference overstates it; the naive mean keeps that bias.

Example:

>>> round(float(conditional_power(0.0, 0.5, 2.8, 1.96)), 3)
0.214
>>> [round(float(x), 3) for x in repeated_interval(0.5, 1.0, 20, 0.05)]
[0.032, 0.968]
"""

import functools
import math

import numpy as np
from scipy import special
from scipy import stats as _st

from kg_service.analysis.numbers.spending import Paths
from kg_service.analysis.numbers.spending import boundaries

# Stop for futility when the chance left to reach the smallest effect is
# below this (Jennison & Turnbull 2000, ch. 10 discuss 0.1 to 0.2).
CONDITIONAL_POWER_FLOOR = 0.10
# No futility stop on fewer seeds: the sd of 2 or 3 differences (1 or 2 df)
# is off by a factor of 3 too often to plug into a conditional power.
FUTILITY_MIN_SEEDS = 4
# Grid points per look of the estimate's integration: three decimals of a
# probability are plenty for a median (the boundaries use 401).
_GRID = 201
_BISECTIONS = 32  # of a bracket 16 wide: 4e-9 in theta


# --- Futility by conditional power. --------------------------------------------


def conditional_power(z, fraction, theta, final_boundary):
    """P(|Z| >= c at n_max | z at information `fraction`) under drift
    `theta`, elementwise; 0 or 1 at fraction 1 (nothing left to see)."""
    z, t, theta = (np.asarray(v, dtype=float) for v in (z, fraction, theta))
    rest = np.sqrt(np.maximum(1.0 - t, 0.0))
    score = z * np.sqrt(t) + theta * (1.0 - t)
    c = final_boundary
    with np.errstate(divide="ignore", invalid="ignore"):
        cp = special.ndtr((score - c) / rest) + special.ndtr((-c - score) / rest)
    return np.where(rest > 0, cp, (np.abs(score) >= c).astype(float))


@functools.lru_cache(maxsize=256)
def final_boundary(fractions, alpha, spending):
    """The z boundary at n_max of the looks so far plus one at n_max (the
    spending design's last boundary, were no other look taken)."""
    extended = tuple(fractions) + ((1.0,) if fractions[-1] < 1.0 else ())
    return boundaries(extended, alpha, spending)[-1]


def reach(mean, sd, n, n_max, smallest_effect, final_z, level):
    """(conditional power at +-`smallest_effect`, the larger of the two
    directions; whether the repeated interval at `level` lies inside
    +-smallest_effect), elementwise: what `futile` reads."""
    mean, sd, n = (np.asarray(v, dtype=float) for v in (mean, sd, n))
    with np.errstate(divide="ignore", invalid="ignore"):
        z = mean / (sd / np.sqrt(n))
        theta = smallest_effect * math.sqrt(n_max) / sd
        t = n / n_max
        cp = np.maximum(conditional_power(z, t, theta, final_z),
                        conditional_power(z, t, -theta, final_z))
        low, high = repeated_interval(mean, sd, n, level)
    return cp, (low > -smallest_effect) & (high < smallest_effect)


def futile(mean, sd, n, n_max, smallest_effect, final_z, level,
           floor=CONDITIONAL_POWER_FLOOR):
    """Whether a look stops for futility, elementwise: before the last
    look (FUTILITY_MIN_SEEDS <= n < n_max), the conditional power at +-`smallest_effect` (in the
    metric's units) below `floor`, or the repeated interval at the look's
    two-sided `level` inside +-smallest_effect. Constant differences (sd
    0) are futile when their mean is inside +-smallest_effect."""
    mean, sd, n = (np.asarray(v, dtype=float) for v in (mean, sd, n))
    cp, excluded = reach(mean, sd, n, n_max, smallest_effect, final_z, level)
    out = np.where(sd > 0, (cp < floor) | excluded, np.abs(mean) < smallest_effect)
    return out & (n < n_max) & (n >= FUTILITY_MIN_SEEDS)


# --- Repeated confidence intervals. ---------------------------------------------


def repeated_interval(mean, sd, n, level):
    """The repeated confidence interval at a look with two-sided nominal
    level `level` (Jennison & Turnbull 2000, ch. 9), elementwise: (low,
    high) in the differences' units."""
    mean, sd, n = (np.asarray(v, dtype=float) for v in (mean, sd, n))
    half = _st.t.isf(np.asarray(level) / 2.0, np.maximum(n - 1.0, 1.0)) * sd / np.sqrt(n)
    return mean - half, mean + half


# --- The median-unbiased estimate under the stagewise ordering. -----------------


@functools.lru_cache(maxsize=64)
def _states(z_boundaries, fractions):
    """The efficacy design's continuing paths before each look, under no
    difference: (points, masses, t) entering look k."""
    paths, out = Paths(_GRID), []
    for c, t in zip(z_boundaries, fractions):
        out.append((paths.points, paths.masses, paths.t))
        paths.advance(t, c)
    return tuple(out)


def _above(theta, states, z_boundaries, fractions, k, z):
    """P_theta(outcome >= (k, z) in the stagewise ordering), elementwise
    over theta and z (arrays of one shape)."""
    total = np.zeros_like(theta)
    for j in range(k + 1):
        points, masses, before = states[j]
        t = fractions[j]
        sd = math.sqrt(t - before)
        weight = masses * np.exp(theta[:, None] * points - theta[:, None] ** 2 * before / 2)
        edge = (z if j == k else np.full_like(theta, z_boundaries[j])) * math.sqrt(t)
        with np.errstate(invalid="ignore"):
            tail = special.ndtr((points - edge[:, None] + theta[:, None] * (t - before)) / sd)
        total += np.sum(weight * np.nan_to_num(tail), axis=1)
    return total


def stagewise_median(z_boundaries, fractions, k, z):
    """The median-unbiased drift theta (E Z at n_max) of outcomes that
    stopped at look `k` (0-based) with statistic `z`, elementwise over z.

    Args:
        z_boundaries: the efficacy design's two-sided z boundaries.
        fractions: the looks' information fractions n_j / n_max.
        k: the stopping look.
        z: the z (or t) statistic there.
    """
    z_boundaries, fractions = tuple(z_boundaries), tuple(fractions)
    states = _states(z_boundaries, fractions)
    z = np.atleast_1d(np.asarray(z, dtype=float))
    naive = z / math.sqrt(fractions[k])
    low, high = naive - 8.0, naive + 8.0
    for _ in range(_BISECTIONS):  # P_theta(above) increases with theta
        mid = 0.5 * (low + high)
        up = _above(mid, states, z_boundaries, fractions, k, z) >= 0.5
        low, high = np.where(up, low, mid), np.where(up, mid, high)
    return 0.5 * (low + high)


def adjusted_mean(mean, sd, n, n_max, z_boundaries, fractions, k):
    """The median-unbiased mean difference (the metric's units) of a
    comparison stopped at look `k` with these mean, sd and n, elementwise;
    the mean itself where sd is 0 (nothing to adjust by)."""
    mean, sd, n = (np.asarray(v, dtype=float) for v in (mean, sd, n))
    positive = np.where(sd > 0, sd, 1.0)
    theta = stagewise_median(z_boundaries, fractions, k,
                             mean / (positive / np.sqrt(n))).reshape(mean.shape)
    out = np.where(sd > 0, theta * positive / math.sqrt(n_max), mean)
    return out if out.ndim else float(out)
