"""Sequential seeds: alpha spending, group-sequential boundaries, and the
decision at each look. Numbers only (`kg_service.analysis.wording`
phrases them).

A sequential sweep trains seeds in batches and looks at the paired
differences after each batch, at n_1 < n_2 < ... <= n_max seeds. Testing
every look at the fixed design's alpha inflates the false-positive rate
(five looks at 0.05 reject a true null 14 % of the time: Armitage,
McPherson & Rowe 1969). Lan & DeMets (1983) instead *spend* alpha over the
information fraction t_k = n_k / n_max with a spending function alpha(t):
the boundary c_k of the look is the z for which the chance, under no
difference, of first crossing at look k is alpha(t_k) - alpha(t_{k-1}).
The looks need not be planned: each boundary depends only on the looks so
far, so diverged members (fewer pairs) or a shorter last batch just give
other fractions. The crossing chances come from the joint normal law of
the z statistics, integrated recursively on a grid (Armitage, McPherson &
Rowe 1969; Jennison & Turnbull 2000, "Group Sequential Methods", ch. 19).

Two spending functions (two-sided, `SPENDING`):

    obrien_fleming  alpha(t) = 4 - 4 Phi(z_{1-alpha/4} / sqrt(t))
                    spends almost nothing early; the last look is close
                    to the fixed test (the default)
    pocock          alpha(t) = alpha ln(1 + (e - 1) t)
                    spends evenly; stops earlier, its last look is stricter

The differences' sd is estimated, so each look tests the paired t
statistic at a nominal level. Turning c_k into 2 (1 - Phi(c_k)) (the
"significance level" approach) lets a little too much through when the
first looks have few seeds; `t_levels` instead calibrates each look's
level on the simulated joint law of the t statistics, which does not
depend on the sd, so that the spending holds for t as it does for z.

The differences are oriented so that a positive one is better (activation
minus baseline, negated for a metric where lower is better). A look
decides a comparison *better* or *worse* when the two-sided paired
t-test's p is at most the look's nominal alpha; with an equivalence
margin m, *equivalent* when both one-sided tests of TOST (H0: mean <= -m,
H0: mean >= m; Schuirmann 1987) reject at the look's one-sided nominal
level. Each TOST side spends its own alpha with the same function (the
boundaries of a two-sided design at 2 alpha), so a fixed design (one
look) is the usual TOST at alpha, a (1 - 2 alpha) interval inside +-m.
A decided comparison stays decided; an undecided one after the last look
is inconclusive.

Example:

>>> design = plan((4, 8, 12), n_max=12)
>>> [round(float(a), 4) for a in design.nominal_alpha]
[0.0002, 0.012, 0.0449]
>>> look = decide_look([0.50, 0.51, 0.49, 0.50], design, 0)
>>> look.decision
'better'
"""

import dataclasses
import functools
import math
from typing import Optional

import numpy as np
from scipy import optimize
from scipy import special
from scipy import stats as _st

ALPHA = 0.05
# Decisions, as data (wording phrases them). The differences are oriented
# so that a positive one is better (`oriented`).
BETTER, WORSE, EQUIVALENT = "better", "worse", "equivalent"

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


class _Paths:
    """The sub-density of the score S_k = Z_k sqrt(t_k) over the paths that
    crossed no boundary yet, as grid points and their masses (density x
    Simpson weight x step). Increments of S are independent N(0, dt)."""

    def __init__(self):
        self.points, self.masses, self.t = np.zeros(1), np.ones(1), 0.0

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
        points = np.linspace(-b, b, _GRID)
        gaps = (points[:, None] - self.points[None, :]) / sd
        density = np.exp(-0.5 * gaps**2) @ self.masses / (sd * math.sqrt(2 * math.pi))
        self.points = points
        self.masses = density * _simpson(_GRID) * (points[1] - points[0])
        self.t = t


def crossing_chances(boundaries, fractions):
    """P(first |Z_k| >= c_k at look k) under no difference, per look.

    Args:
        boundaries: z boundaries c_1..c_K (inf: no test at that look).
        fractions: information fractions 0 < t_1 < ... < t_K.

    >>> round(sum(crossing_chances([1.96] * 5, [0.2, 0.4, 0.6, 0.8, 1.0])), 3)
    0.142
    """
    paths, out = _Paths(), []
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
    paths, out = _Paths(), []
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


# --- A sequential design, and the decision at a look. -----------------------


@dataclasses.dataclass(frozen=True)
class Design:
    """The looks of one comparison and what each may spend.

    `z` are the spending function's boundaries for z statistics (known
    sd); `nominal_alpha[k]` is the two-sided level of the paired t-test
    at look k, `equivalence_alpha[k]` the one-sided level of each TOST
    test, both calibrated to the t statistics (`t_levels`).
    """

    counts: tuple  # paired seeds at each look, n_1 < ... < n_K
    n_max: int
    alpha: float
    spending: str
    z: tuple  # efficacy boundaries, z scale
    nominal_alpha: tuple
    equivalence_alpha: tuple

    @property
    def fractions(self):
        return tuple(n / self.n_max for n in self.counts)


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


@functools.lru_cache(maxsize=256)  # a sweep asks again at every look, per comparison
def plan(counts, n_max, alpha=ALPHA, spending="obrien_fleming"):
    """The `Design` of looks at `counts` paired seeds out of `n_max`.

    Raises:
        ValueError: counts not increasing from >= 2 to <= n_max; as
            `boundaries`.

    >>> [round(a, 3) for a in plan((5, 10), 10).nominal_alpha]
    [0.003, 0.048]
    """
    counts = tuple(int(n) for n in counts)
    if not counts or counts[0] < 2 or counts[-1] > n_max or any(
        b <= a for a, b in zip(counts, counts[1:])
    ):
        raise ValueError(f"look counts must increase from >= 2 to <= {n_max}, got {counts}")
    fractions = [n / n_max for n in counts]
    z = boundaries(fractions, alpha, spending)
    cumulative = SPENDING[spending](np.asarray(fractions), alpha)
    spent = np.diff(np.concatenate([[0.0], cumulative]))
    # Each TOST side spends alpha by the same function, one-sided.
    side = SPENDING[spending](np.asarray(fractions), min(2 * alpha, 0.999)) / 2
    spent_side = np.diff(np.concatenate([[0.0], side]))
    return Design(
        counts=counts, n_max=int(n_max), alpha=alpha, spending=spending, z=tuple(z),
        nominal_alpha=t_levels(counts, spent, [2 * _st.norm.sf(c) for c in z]),
        equivalence_alpha=t_levels(
            counts, spent_side,
            [_st.norm.sf(c) for c in boundaries(fractions, min(2 * alpha, 0.999), spending)],
            two_sided=False,
        ),
    )


def look_tests(mean, sd, n, margin=None):
    """The paired t-test's two-sided p and TOST's p (the larger of its two
    one-sided p's; NaN without a margin), elementwise over arrays.

    Constant differences (sd 0) give p 0 (1 when they are all 0), and TOST
    p 0 when inside the margin, 1 outside it.
    """
    mean, sd, n = (np.asarray(v, dtype=float) for v in (mean, sd, n))
    df = np.maximum(n - 1.0, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        se = sd / np.sqrt(n)
        t = np.where(se > 0, mean / se, np.where(mean == 0, 0.0, np.copysign(np.inf, mean)))
        p = 2.0 * _st.t.sf(np.abs(t), df)
        if margin is None:
            return p, np.full_like(p, np.nan)
        above = np.where(se > 0, (mean + margin) / se, np.where(mean > -margin, np.inf, -np.inf))
        below = np.where(se > 0, (mean - margin) / se, np.where(mean < margin, -np.inf, np.inf))
        p_tost = np.maximum(_st.t.sf(above, df), _st.t.cdf(below, df))
    return np.where(n >= 2, p, np.nan), np.where(n >= 2, p_tost, np.nan)


def decisions(mean, sd, n, nominal_alpha, equivalence_alpha, margin=None):
    """BETTER / WORSE / EQUIVALENT / "" (undecided) at one look, elementwise,
    of oriented differences (positive is better).

    A difference (p <= nominal_alpha) comes first: a difference inside the
    margin that is significant is reported as a difference.
    """
    p, p_tost = look_tests(mean, sd, n, margin)
    mean = np.asarray(mean, dtype=float)
    out = np.full(p.shape, "", dtype=object)
    out[p_tost <= equivalence_alpha] = EQUIVALENT
    out[(p <= nominal_alpha) & (mean > 0)] = BETTER
    out[(p <= nominal_alpha) & (mean < 0)] = WORSE
    return out


@dataclasses.dataclass(frozen=True)
class Look:
    """One look at one comparison's paired differences."""

    index: int  # the sweep's look, 0-based
    n: int  # paired seeds with a finite difference
    mean_diff: float
    p_value: float  # paired t, two-sided
    p_tost: float  # NaN without a margin
    nominal_alpha: float
    equivalence_alpha: float
    decision: str  # BETTER, WORSE, EQUIVALENT or ""


def decide_look(diffs, design, k, margin=None):
    """The `Look` at design look `k` of the paired differences `diffs` (the
    finite differences of that look's seeds)."""
    d = np.asarray(diffs, dtype=float)
    n = d.size
    mean = float(np.mean(d)) if n else math.nan
    sd = float(np.std(d, ddof=1)) if n > 1 else math.nan
    p, p_tost = look_tests(mean, sd, n, margin)
    (decision,) = decisions([mean], [sd], [n], design.nominal_alpha[k],
                            design.equivalence_alpha[k], margin) if n > 1 else [""]
    return Look(
        index=k, n=n, mean_diff=mean, p_value=float(p), p_tost=float(p_tost),
        nominal_alpha=design.nominal_alpha[k],
        equivalence_alpha=design.equivalence_alpha[k], decision=decision,
    )


@dataclasses.dataclass(frozen=True)
class Sequential:
    """One comparison through its looks, stopped at the first decision."""

    looks: tuple  # Look, up to and including the deciding one
    design: Design
    decided_at: Optional[int]  # index of the deciding look; None: undecided
    decision: str  # of the deciding look; "" while undecided

    @property
    def decided(self):
        return self.decided_at is not None


def sequential_test(diffs_by_look, n_max, alpha=ALPHA, spending="obrien_fleming",
                    margin=None):
    """Runs the group-sequential test over the looks so far.

    Args:
        diffs_by_look: for each look taken, the finite paired differences
            of its seeds (each look's seeds include the earlier looks').
            Looks whose count did not grow (every new pair diverged) are
            merged into the one before.
        n_max: the most seeds the sweep may take (information fraction
            n_k / n_max).
        alpha: the two-sided error of a difference; each TOST side also
            spends `alpha`.
        spending: a name in `SPENDING`.
        margin: the equivalence margin, in the metric's units; None: no
            equivalence decision.

    Returns:
        A `Sequential`.

    Example:

    >>> result = sequential_test([[0.1, -0.1, 0.05, 0.0]] , 4, margin=0.5)
    >>> result.decision, result.decided_at
    ('equivalent', 0)
    """
    kept, at = [], []  # the looks that added pairs, and their index among all
    for index, d in enumerate(diffs_by_look):
        d = np.asarray(d, dtype=float)
        d = d[np.isfinite(d)]
        if d.size >= 2 and (not kept or d.size > kept[-1].size):
            kept.append(d)
            at.append(index)
    counts = [min(d.size, n_max) for d in kept]
    if not counts:
        return Sequential(looks=(), design=None, decided_at=None, decision="")
    design = plan(tuple(counts), n_max, alpha, spending)
    looks = []
    for k, d in enumerate(kept):
        look = dataclasses.replace(decide_look(d, design, k, margin), index=at[k])
        looks.append(look)
        if look.decision:
            return Sequential(tuple(looks), design, at[k], look.decision)
    return Sequential(tuple(looks), design, None, "")


# --- A sweep's comparisons, look by look. ----------------------------------


@dataclasses.dataclass(frozen=True)
class SweepLooks:
    """A sequential sweep's looks so far: each activation against the
    baseline, on the compared metric, paired by seed.

    `alpha` is each comparison's: the family's `family_alpha` divided by
    the number of comparisons (Bonferroni), so that the chance of any
    false difference in the sweep stays at `family_alpha`.
    """

    counts: tuple  # seeds trained at each look taken
    n_max: int
    metric: str
    higher_is_better: bool  # each Look's mean_diff is oriented: positive is better
    baseline: str
    family_alpha: float
    alpha: float
    spending: str
    margin: Optional[float]
    comparisons: tuple  # (activation, Sequential), config order
    design: Design  # the looks as planned (every pair finite): the levels shown

    @property
    def decided(self):
        return all(test.decided for _, test in self.comparisons)


def compare_looks(values, baseline, counts, n_max, *, metric="test_accuracy",
                  higher_is_better=True, alpha=ALPHA, spending="obrien_fleming",
                  margin=None):
    """Every activation against `baseline` through the looks at `counts`.

    Args:
        values: {(activation, seed): value of the compared metric}, the
            members that trained (a diverged one left out, or NaN). Look
            k's seeds are 0..counts[k]-1.
        baseline: the activation the others are compared with.
        counts: seeds trained at each look taken so far.
        n_max: the most seeds the sweep may take.
        metric, higher_is_better: the compared metric and its direction
            (the differences are oriented so that positive is better).
        alpha: the family's two-sided error (`SweepLooks`).
        spending, margin: as for `sequential_test`.

    Returns:
        A `SweepLooks`.
    """
    activations = list(dict.fromkeys(a for a, _ in values))
    others = [a for a in activations if a != baseline]
    per = alpha / max(len(others), 1)
    sign = 1.0 if higher_is_better else -1.0
    nan = math.nan

    def diffs(activation, n):
        return [
            sign * (values.get((activation, s), nan) - values.get((baseline, s), nan))
            for s in range(n)
        ]

    tests = tuple(
        (a, sequential_test([diffs(a, n) for n in counts], n_max, per, spending, margin))
        for a in others
    )
    return SweepLooks(
        counts=tuple(counts), n_max=n_max, metric=metric,
        higher_is_better=higher_is_better, baseline=baseline,
        family_alpha=alpha, alpha=per, spending=spending, margin=margin,
        comparisons=tests, design=plan(tuple(counts), n_max, per, spending),
    )


def _number(x):
    return None if x is None or not math.isfinite(x) else float(x)  # JSON has no NaN


def looks_summary(looks):
    """A `SweepLooks` as plain data (summary.json's "sequential" entry):
    looks, seeds, levels, each comparison's looks and decision."""
    return {
        "looks": len(looks.counts),
        "seeds_used": looks.counts[-1],
        "seeds_max": looks.n_max,
        "seeds_per_look": list(looks.counts),
        "spending": looks.spending,
        "family_alpha": looks.family_alpha,
        "alpha_per_comparison": looks.alpha,
        "margin": looks.margin,
        "nominal_alpha_per_look": list(looks.design.nominal_alpha),
        "equivalence_alpha_per_look": list(looks.design.equivalence_alpha),
        "decided": looks.decided,
        "comparisons": {
            activation: {
                "decision": test.decision or "inconclusive",
                "decided_at_look": None if test.decided_at is None else test.decided_at + 1,
                "looks": [
                    {"look": look.index + 1, "n": look.n,
                     "mean_diff_oriented": _number(look.mean_diff),
                     "p": _number(look.p_value), "p_tost": _number(look.p_tost),
                     "nominal_alpha": look.nominal_alpha,
                     "equivalence_alpha": look.equivalence_alpha, "decision": look.decision}
                    for look in test.looks
                ],
            }
            for activation, test in looks.comparisons
        },
    }


def looks_metrics(looks):
    """The numbers tracked on the sweep's run: looks taken, seeds used, and
    the look that decided each comparison (0: none did)."""
    metrics = {"sequential.looks": len(looks.counts), "sequential.seeds_used": looks.counts[-1]}
    for activation, test in looks.comparisons:
        decided = 0 if test.decided_at is None else test.decided_at + 1
        metrics[f"sequential.{activation}.decided_at_look"] = decided
    return metrics
