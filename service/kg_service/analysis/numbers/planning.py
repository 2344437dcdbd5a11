"""How many seeds a comparison needs: power of the paired t-test and of TOST.

Numbers only (numpy and scipy), like `kg_service.analysis.numbers.stats`. A paired
comparison over n seeds is a one-sample test of the n differences, so its
power is the one-sample t-test's (statsmodels' `TTestPower`, which the
tests check against). From a pilot sweep's differences (mean, sd) the plan
gives, for each comparison, the seeds needed to show

- a difference (superiority): a two-sided paired t-test at the observed
  d_z, with power `power` at level `alpha`;
- equivalence within +-margin: TOST (two one-sided t-tests at `alpha`)
  with power `power`, if the true difference is the observed mean and the
  sd the observed sd. A mean outside the margin cannot be shown
  equivalent (the plan is None).

The observed d_z of a small pilot is noisy and biased away from 0, so
these counts are rough (the docs say so); they say whether a decision is
a matter of 10 or 1000 seeds.

Example:

>>> superiority_seeds(0.5, alpha=0.05, power=0.8)
34
"""

import dataclasses
import math
from typing import Optional

import numpy as np
from scipy import integrate as _integrate
from scipy import special as _sc
from scipy import stats as _st

from kg_service.analysis.numbers import stats

MAX_SEEDS = 100_000  # beyond: "not with any seed budget"


@dataclasses.dataclass(frozen=True)
class SeedPlan:
    """Seeds needed to decide one comparison; None: no finite count will."""

    n: int  # the pairs the pilot had
    superiority: Optional[int]  # to show the observed difference
    equivalence: Optional[int]  # to show |difference| < margin
    alpha: float
    power: float
    margin: float  # NaN: none

    @property
    def decide(self):
        """The fewer of the two: what deciding either way would take."""
        counts = [c for c in (self.superiority, self.equivalence) if c is not None]
        return min(counts) if counts else None


def t_power(n, d_z, alpha=0.05):
    """Power of the two-sided one-sample (paired) t-test with n pairs at
    effect size d_z: P(|T| > t_{1-alpha/2, n-1}), T ~ nct(n-1, d_z sqrt(n)).

    >>> round(t_power(10, 1.0), 4)
    0.8031
    """
    if n < 2:
        return 0.0
    df, nc = n - 1, d_z * math.sqrt(n)
    crit = _st.t.ppf(1 - alpha / 2, df)
    return float(_st.nct.sf(crit, df, nc) + _st.nct.cdf(-crit, df, nc))


def _smallest(power_at, target):
    """The smallest n >= 2 with power_at(n) >= target (power grows with n)."""
    if power_at(2) >= target:
        return 2
    low, high = 2, 4
    while power_at(high) < target:
        low, high = high, high * 2
        if high > MAX_SEEDS:
            return None
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if power_at(mid) >= target else (mid, high)
    return high


def superiority_seeds(d_z, alpha=0.05, power=0.8):
    """Seeds (pairs) for a two-sided paired t-test to reach `power` at d_z.

    None when d_z is 0 or not finite (no number of seeds shows a
    difference of 0; a constant difference has no d_z to plan with).
    """
    if not math.isfinite(d_z) or d_z == 0:
        return None
    return _smallest(lambda n: t_power(n, abs(d_z), alpha), power)


def tost_power(n, mean, sd, margin, alpha=0.05):
    """Power of TOST at level alpha with n pairs, for true mean difference
    `mean` and sd `sd`: P(the 1 - 2 alpha t-interval lies in (-margin, margin)).

    Exact, by integrating over the sample sd (s^2 (n-1)/sd^2 ~ chi2(n-1)):
    given s, TOST rejects when the mean lies in
    (-margin + c s/sqrt(n), margin - c s/sqrt(n)), c = t_{1-alpha, n-1}.

    >>> round(tost_power(20, 0.0, 1.0, 0.8), 4)
    0.9283
    """
    if n < 2 or not (sd > 0) or not (margin > 0):
        return 0.0
    df = n - 1
    c = _sc.stdtrit(df, 1 - alpha)  # t.ppf(1 - alpha, df)
    root_n = math.sqrt(n)
    se = sd / root_n
    v_max = df * (margin * root_n / c / sd) ** 2  # beyond: the interval is too wide
    value, _ = _integrate.quad(_tost_integrand, 0.0, v_max, limit=200,
                               args=(df, mean, sd, margin, c, root_n, se,
                                     _sc.gammaln(df / 2.), (np.log(2) * df) / 2.))
    return float(min(max(value, 0.0), 1.0))


def _tost_integrand(v, df, mean, sd, margin, c, root_n, se, log_gamma, log_2):
    """P(TOST rejects | s^2 (n-1)/sd^2 = v) times chi2(df)'s density at v.

    Called ~200 times a power, so it calls scipy.special's functions
    directly: the same ones, in the same order, as `stats.norm.cdf` and
    `stats.chi2.pdf` (bit for bit the same number) without their argument
    checks, which cost ~50x the arithmetic (issue 17: 3.0 of glu-variants
    --smoke's 5.4 s of comparing).
    """
    s = sd * math.sqrt(v / df)
    half = margin - c * s / root_n
    p = _sc.ndtr((half - mean) / se) - _sc.ndtr((-half - mean) / se)
    if not v > 0:  # outside chi2's support: density 0
        return 0.0
    return max(p, 0.0) * np.exp(_sc.xlogy(df / 2. - 1, v) - v / 2. - log_gamma - log_2)


def equivalence_seeds(mean, sd, margin, alpha=0.05, power=0.8):
    """Seeds for TOST to show |difference| < margin with `power`, if the
    true mean difference is `mean` and its sd `sd`; None when |mean| >=
    margin (or no margin, or sd not positive)."""
    if margin is None or not (margin > 0) or not (sd > 0) or not abs(mean) < margin:
        return None
    return _smallest(lambda n: tost_power(n, mean, sd, margin, alpha), power)


def plan(diffs, *, margin=None, alpha=0.05, power=0.8, family=1):
    """The `SeedPlan` of one comparison from a pilot's paired differences.

    `family`: the comparisons decided together; each plan uses alpha /
    family (Holm's first and strictest step), so the counts hold for the
    whole family.
    """
    d = np.asarray(diffs, dtype=float)
    n = int(d.size)
    if n < 2 or stats.constant(d):  # float round-off is not a spread to plan with
        return plan_from(math.nan, math.nan, n, margin=margin, alpha=alpha, power=power,
                         family=family)
    return plan_from(float(np.mean(d)), float(np.std(d, ddof=1)), n, margin=margin,
                     alpha=alpha, power=power, family=family)


def plan_from(mean, sd, n, *, margin=None, alpha=0.05, power=0.8, family=1):
    """`plan` from the differences' mean, sd (ddof=1) and count: what a
    stored summary.json keeps of each comparison."""
    margin = math.nan if margin is None else float(margin)
    level = alpha / max(1, family)
    if n < 2 or not (sd > 0):  # NaN or a constant difference: nothing to plan with
        return SeedPlan(n=n, superiority=None, equivalence=None, alpha=level, power=power,
                        margin=margin)
    return SeedPlan(
        n=n,
        superiority=superiority_seeds(mean / sd, level, power),
        equivalence=(equivalence_seeds(mean, sd, margin, level, power)
                     if math.isfinite(margin) else None),
        alpha=level, power=power, margin=margin,
    )
