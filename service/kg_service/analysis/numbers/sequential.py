"""Sequential seeds: alpha spending, group-sequential boundaries, and the
decision at each look. Numbers only (`kg_service.analysis.words.wording`
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

Two spending functions (two-sided, `kg_service.analysis.numbers.spending`):

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

With a smallest effect of interest and `futility`, a look before the last
also stops a comparison for *futility* when the smallest effect is out of
reach (conditional power, non-binding: the efficacy levels ignore it;
`kg_service.analysis.numbers.sequential_estimates`). Every comparison ends
with its repeated confidence interval at the stopping look and its
median-unbiased estimate under the stagewise ordering, in place of the
naive mean (biased away from 0 after an early stop for a difference).

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
from scipy import stats as _st

from kg_service.analysis.numbers import sequential_estimates as estimates
from kg_service.analysis.numbers.spending import ALPHA
from kg_service.analysis.numbers.spending import SPENDING
from kg_service.analysis.numbers.spending import boundaries
from kg_service.analysis.numbers.spending import t_levels

# Decisions, as data (wording phrases them). The differences are oriented
# so that a positive one is better (see the module docstring).
BETTER, WORSE, EQUIVALENT = "better", "worse", "equivalent"
FUTILITY = "futility"  # stopped: the smallest effect of interest out of reach


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
    decision: str  # BETTER, WORSE, EQUIVALENT, FUTILITY or ""
    sd: float = math.nan  # of the differences
    # (low, high): the repeated confidence interval at this look, oriented.
    interval: tuple = (math.nan, math.nan)
    # With a futility rule: the conditional power at the smallest effect
    # (the larger direction's); NaN without one.
    conditional_power: float = math.nan


@dataclasses.dataclass(frozen=True)
class Futility:
    """A futility rule: stop when the `smallest_effect` (the metric's units,
    > 0) is out of reach (`sequential_estimates.futile`)."""

    smallest_effect: float
    floor: float = estimates.CONDITIONAL_POWER_FLOOR


def decide_look(diffs, design, k, margin=None, futility=None):
    """The `Look` at design look `k` of the paired differences `diffs` (the
    finite differences of that look's seeds); with a `Futility`, a look
    before n_max that decides nothing else may stop for futility."""
    d = np.asarray(diffs, dtype=float)
    n = d.size
    mean = float(np.mean(d)) if n else math.nan
    sd = float(np.std(d, ddof=1)) if n > 1 else math.nan
    p, p_tost = look_tests(mean, sd, n, margin)
    (decision,) = decisions([mean], [sd], [n], design.nominal_alpha[k],
                            design.equivalence_alpha[k], margin) if n > 1 else [""]
    cp = math.nan
    if futility is not None and n > 1:
        final = estimates.final_boundary(design.fractions[: k + 1], design.alpha,
                                         design.spending)
        args = (mean, sd, n, design.n_max, futility.smallest_effect, final,
                design.nominal_alpha[k])
        cp = float(estimates.reach(*args)[0])
        if not decision and estimates.futile(*args, futility.floor):
            decision = FUTILITY
    return Look(
        index=k, n=n, mean_diff=mean, p_value=float(p), p_tost=float(p_tost),
        nominal_alpha=design.nominal_alpha[k],
        equivalence_alpha=design.equivalence_alpha[k], decision=decision, sd=sd,
        interval=tuple(float(x) for x in estimates.repeated_interval(
            mean, sd, n, design.nominal_alpha[k])) if n > 1 else (math.nan, math.nan),
        conditional_power=cp,
    )


@dataclasses.dataclass(frozen=True)
class Sequential:
    """One comparison through its looks, stopped at the first decision."""

    looks: tuple  # Look, up to and including the deciding one
    design: Design
    decided_at: Optional[int]  # index of the deciding look; None: undecided
    decision: str  # of the deciding look; "" while undecided
    # The median-unbiased mean difference (oriented) at the last look
    # (`sequential_estimates.adjusted_mean`); NaN without looks.
    adjusted: float = math.nan

    @property
    def decided(self):
        return self.decided_at is not None

    @property
    def interval(self):
        """The repeated confidence interval at the last look (oriented)."""
        return self.looks[-1].interval if self.looks else (math.nan, math.nan)

    @property
    def naive_mean(self):
        """The last look's plain mean difference (oriented): biased after an
        early stop; shown, if at all, labelled as naive."""
        return self.looks[-1].mean_diff if self.looks else math.nan


def _ended(looks, design, decided_at, decision):
    last, k = looks[-1], len(looks) - 1
    adjusted = estimates.adjusted_mean(
        last.mean_diff, last.sd, last.n, design.n_max, design.z, design.fractions[: k + 1], k
    ) if last.n > 1 else math.nan
    return Sequential(tuple(looks), design, decided_at, decision, float(adjusted))


def sequential_test(diffs_by_look, n_max, alpha=ALPHA, spending="obrien_fleming",
                    margin=None, futility=None):
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
        futility: a `Futility`, or None: no futility stop.

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
        look = dataclasses.replace(decide_look(d, design, k, margin, futility), index=at[k])
        looks.append(look)
        if look.decision:
            return _ended(looks, design, at[k], look.decision)
    return _ended(looks, design, None, "")


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
    futility: Optional[Futility] = None

    @property
    def decided(self):
        return all(test.decided for _, test in self.comparisons)

    def outcomes(self):
        """{activation: better / worse / equivalent / ""}: each comparison's
        decision as a verdict's outcome; a futility stop is "" (inconclusive:
        the smallest effect was out of reach, which shows no equivalence)."""
        return {a: "" if test.decision == FUTILITY else test.decision
                for a, test in self.comparisons}


def member_looks(results, metric, baseline, counts, schedule, analysis):
    """`compare_looks` at `counts` from a sequential sweep's members
    (`MemberResult`s; a diverged member is left out, as in the comparison)
    on `metric` (a task's compared metric: its `name`, `higher_is_better`),
    at the `analysis` block's alpha and margin for that metric, with the
    `schedule`'s (`SequentialSeeds`) spending and futility rule."""
    values = {(r.activation, r.seed): float(getattr(r, metric.name)) for r in results if r.ok}
    return compare_looks(
        values, baseline, counts, schedule.max, metric=metric.name,
        higher_is_better=metric.higher_is_better, alpha=analysis.alpha,
        spending=schedule.spending, margin=analysis.margin_for(metric.name),
        futility=Futility(schedule.smallest_effect) if schedule.futility else None,
    )


def compare_looks(values, baseline, counts, n_max, *, metric="test_accuracy",
                  higher_is_better=True, alpha=ALPHA, spending="obrien_fleming",
                  margin=None, futility=None):
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
        spending, margin, futility: as for `sequential_test`.

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
        (a, sequential_test([diffs(a, n) for n in counts], n_max, per, spending, margin,
                            futility))
        for a in others
    )
    return SweepLooks(
        counts=tuple(counts), n_max=n_max, metric=metric,
        higher_is_better=higher_is_better, baseline=baseline,
        family_alpha=alpha, alpha=per, spending=spending, margin=margin,
        comparisons=tests, design=plan(tuple(counts), n_max, per, spending),
        futility=futility,
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
        "futility": None if looks.futility is None else dataclasses.asdict(looks.futility),
        "nominal_alpha_per_look": list(looks.design.nominal_alpha),
        "equivalence_alpha_per_look": list(looks.design.equivalence_alpha),
        "decided": looks.decided,
        "comparisons": {
            activation: {
                "decision": test.decision or "inconclusive",
                "decided_at_look": None if test.decided_at is None else test.decided_at + 1,
                # Oriented (positive is better), at the last look.
                "repeated_ci_oriented": [_number(x) for x in test.interval],
                "adjusted_mean_diff_oriented": _number(test.adjusted),
                "naive_mean_diff_oriented": _number(test.naive_mean),
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
