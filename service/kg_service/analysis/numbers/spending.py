"""Alpha spending and group-sequential boundaries: numbers only.

Lan & DeMets (1983) spend a two-sided alpha over the information fraction
t_k = n_k / n_max with a spending function alpha(t); look k's boundary c_k
is the z for which the chance, under no difference, of first crossing at
look k is alpha(t_k) - alpha(t_{k-1}). The crossing chances come from the
joint normal law of the looks' z statistics, integrated recursively on a
grid (Armitage, McPherson & Rowe 1969; Jennison & Turnbull 2000, "Group
Sequential Methods", ch. 19). `t_levels` carries a design over to paired
t-tests, whose sd is estimated. `kg_service.analysis.numbers.sequential` decides
looks with these.

Example:

>>> [round(c, 3) for c in boundaries([0.2, 0.4, 0.6, 0.8, 1.0])]
[4.877, 3.357, 2.68, 2.29, 2.031]
"""

import math

import numpy as np
from scipy import optimize
from scipy import special
from scipy import stats as _st

ALPHA = 0.05
# Grid points per look for the recursive integration (odd: Simpson's rule).
# 401 reproduces Jennison & Turnbull's three-decimal tables (see the tests).
_GRID = 401
_Z_RANGE = 8.0  # a look without a boundary integrates z over +-8


def obrien_fleming(t, alpha=ALPHA):
    """O'Brien-Fleming-type spending (Lan & DeMets 1983), two-sided.

    Each side spends alpha/2 by the one-sided function 2 - 2 Phi(z_{1-a/2}
    / sqrt(t)) at a = alpha/2, so alpha(t) = 4 - 4 Phi(z_{1-alpha/4} /
    sqrt(t)), alpha(1) = alpha: the form of DeMets & Lan (1994), gsDesign's
    sfLDOF and rpact's asOF, whose published boundaries the tests check.

    >>> round(float(obrien_fleming(0.5)), 5)
    0.00305
    """
    t = np.asarray(t, dtype=float)
    with np.errstate(divide="ignore"):
        side = 2.0 * _st.norm.sf(_st.norm.isf(alpha / 4) / np.sqrt(np.maximum(t, 1e-300)))
    return np.where(t > 0, 2.0 * side, 0.0)


def pocock(t, alpha=ALPHA):
    """Pocock-type spending (Lan & DeMets 1983): alpha ln(1 + (e - 1) t).

    >>> round(float(pocock(0.5)), 5)
    0.03101
    """
    t = np.asarray(t, dtype=float)
    return alpha * np.log1p((math.e - 1.0) * t)


SPENDING = {"obrien_fleming": obrien_fleming, "pocock": pocock}


# --- The joint law of the looks' z statistics, integrated on a grid. ---------


def _simpson(n):
    w = np.ones(n)
    w[1:-1:2], w[2:-1:2] = 4.0, 2.0
    return w / 3.0


class Paths:
    """The sub-density of the score S_k = Z_k sqrt(t_k) over the paths that
    crossed no boundary yet, as grid points and their masses (density x
    Simpson weight x step). Increments of S are independent N(0, dt).

    Under a drift theta (E Z at t = 1; S increments N(theta dt, dt)) the
    sub-density is this one times the likelihood ratio exp(theta S -
    theta^2 t / 2) (`kg_service.analysis.numbers.sequential_estimates`
    reads it so, for any theta, from the one recursion).

    Args:
        grid: points per look (odd: Simpson's rule).
    """

    def __init__(self, grid=_GRID):
        self.points, self.masses, self.t = np.zeros(1), np.ones(1), 0.0
        self.grid = grid

    def exit_chance(self, t, c):
        """P(|Z| >= c at information t, no crossing before)."""
        sd = math.sqrt(t - self.t)
        b = c * math.sqrt(t)
        return float(np.sum(self.masses * (
            special.ndtr((self.points - b) / sd) + special.ndtr((-b - self.points) / sd)
        )))

    def advance(self, t, c):
        """Moves on to information t, keeping the paths with |Z| < c."""
        sd = math.sqrt(t - self.t)
        b = math.sqrt(t) * min(c, _Z_RANGE)
        points = np.linspace(-b, b, self.grid)
        gaps = (points[:, None] - self.points[None, :]) / sd
        density = np.exp(-0.5 * gaps**2) @ self.masses / (sd * math.sqrt(2 * math.pi))
        self.points = points
        self.masses = density * _simpson(self.grid) * (points[1] - points[0])
        self.t = t


def crossing_chances(boundaries, fractions):
    """P(first |Z_k| >= c_k at look k) under no difference, per look.

    Args:
        boundaries: z boundaries c_1..c_K (inf: no test at that look).
        fractions: information fractions 0 < t_1 < ... < t_K.

    >>> round(sum(crossing_chances([1.96] * 5, [0.2, 0.4, 0.6, 0.8, 1.0])), 3)
    0.142
    """
    paths, out = Paths(), []
    for c, t in zip(boundaries, fractions):
        out.append(paths.exit_chance(t, c) if math.isfinite(c) else 0.0)
        paths.advance(t, c)
    return out


def boundaries(fractions, alpha=ALPHA, spending="obrien_fleming"):
    """Two-sided z boundaries c_1..c_K that spend `alpha` by `spending`.

    Look k's boundary makes the chance, under no difference, of first
    crossing there equal alpha(t_k) - alpha(t_{k-1}); inf when that is 0.

    Args:
        fractions: information fractions 0 < t_1 < ... < t_K <= 1
            (n_k / n_max).
        alpha: the two-sided error spent by t = 1.
        spending: a name in `SPENDING`.

    Raises:
        ValueError: fractions not increasing in (0, 1], alpha not in (0, 1),
            an unknown spending name.

    >>> [round(c, 3) for c in boundaries([0.5, 1.0])]
    [2.963, 1.969]
    """
    t = np.asarray(fractions, dtype=float)
    if t.size == 0 or t[0] <= 0 or t[-1] > 1 + 1e-12 or np.any(np.diff(t) <= 0):
        raise ValueError(f"information fractions must increase in (0, 1], got {list(t)}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if spending not in SPENDING:
        raise ValueError(f"spending must be one of {sorted(SPENDING)}, got {spending!r}")
    spent = np.diff(np.concatenate([[0.0], SPENDING[spending](t, alpha)]))
    paths, out = Paths(), []
    for tk, target in zip(t, spent):
        c = math.inf
        if target > 1e-15:
            c = optimize.brentq(lambda c: paths.exit_chance(tk, c) - target, 0.0, 40.0,
                                xtol=1e-9)
        out.append(c)
        paths.advance(tk, c)
    return out


def constant_boundaries(fractions, alpha=ALPHA, shape="pocock"):
    """The classical designs' boundaries, for equally informative looks:
    Pocock (1977) c_k = C, O'Brien & Fleming (1979) c_k = C sqrt(t_K / t_k),
    with C such that the chance of any crossing is `alpha`."""
    t = np.asarray(fractions, dtype=float)
    form = np.ones_like(t) if shape == "pocock" else np.sqrt(t[-1] / t)
    scale = optimize.brentq(
        lambda C: sum(crossing_chances(C * form, t)) - alpha, 1.0, 10.0, xtol=1e-9
    )
    return list(scale * form)


# Simulated null paths of the t statistics (`t_levels`): the calibration's
# own Monte Carlo error on a look's crossing chance is about
# sqrt(0.05 * 0.95 / 200_000) = 0.0005.
_PATHS = 200_000
_FEW = 20


def t_levels(counts, spent, z_levels, two_sided=True, seed=0):
    """Each look's nominal p level for paired t-tests that spends `spent`.

    The z boundaries assume a known sd. With the sd estimated from the
    same seeds at every look, the t statistics of the looks are more
    alike than z's in their tails, and the plain nominal levels
    2 (1 - Phi(c_k)) reject a true null a little more often than alpha
    (0.054 for Pocock spending at 4, 8, ..., 40 seeds; measured in the
    tests). The joint law of the t statistics under no difference does
    not depend on the sd, so it is simulated once per design (normal
    differences, a fixed seed: the same design every time): each look's
    level is the p below which the paths still running cross with the
    chance that look may spend.

    Args:
        counts: paired seeds at each look, increasing, the first >= 2.
        spent: the error each look may spend (alpha(t_k) - alpha(t_{k-1})).
        z_levels: each look's level from its z boundary, kept where the
            look spends less than `_FEW` paths' worth (an O'Brien-Fleming
            first look: about 1e-6), too few to place a quantile; t and z
            differ little there, and the error it spends is negligible.
        two_sided: the two-sided t-test's p; else the lower one-sided p
            (a TOST side, by symmetry either).
        seed: the simulation's seed.
    """
    rng = np.random.default_rng(seed)
    total = np.zeros(_PATHS)
    squares = np.zeros(_PATHS)
    running = np.ones(_PATHS, dtype=bool)
    levels, before = [], 0
    for n, target, z_level in zip(counts, spent, z_levels):
        added = n - before
        # The added seeds' sum, and their sum of squares from it and an
        # independent chi-square: no n_max x paths array.
        block = rng.standard_normal(_PATHS) * math.sqrt(added)
        total += block
        squares += block**2 / added + (rng.chisquare(added - 1, _PATHS) if added > 1 else 0.0)
        before = n
        mean = total / n
        sd = np.sqrt(np.maximum(squares - n * mean**2, 0.0) / (n - 1))
        # Ordered by the t statistic itself (p is monotone in it): the
        # level is the p of the critical t.
        t = mean / (sd / math.sqrt(n)) * (1.0 if two_sided else -1.0)
        extreme = np.abs(t) if two_sided else t
        alive = extreme[running]
        k = int(round(target * _PATHS))
        if k < _FEW:
            tail = z_level / 2.0 if two_sided else z_level
            critical = float(_st.t.isf(tail, n - 1)) if tail > 0 else math.inf
        elif k >= alive.size:
            critical = -math.inf
        else:
            top = np.partition(alive, alive.size - k - 1)[alive.size - k - 1:]
            critical = float(0.5 * (top[0] + np.min(top[1:])))
        tail = _st.t.sf(critical, n - 1)
        levels.append(float(2.0 * tail if two_sided else tail))
        running &= ~(extreme >= critical)
    return tuple(levels)
