"""A paper's claims, each with one label: reproduced, contradicted, not
tested or inconclusive (issue 32 §1).

A claim is declared in the config before anything trains
(`kg_service.config.claims`): what it compares, the metric, the claimed
direction, the smallest effect of interest (in the metric's units) and
alpha. Each claim is one signed number per seed:

- a pair [a, b]: a - b, paired by seed within one sweep;
- a contrast: mean(plus) - mean(minus) over the groups, per seed;
- an interaction [a, b] with a reference level r of the study's factor:
  (a - b at the other level) - (a - b at r), per seed that both levels'
  sweeps ran. Its sign comes from the declared reference, never from
  which sweep started first (issue 30 §4);
- a level change of one activation a with a reference level r: a at the
  other level - a at r, per seed both levels' sweeps ran (signed by r,
  as the interaction);
- a value against a constant c: a - c per seed (a one-sample t-test,
  which is the paired test's on these numbers).

`label_all` labels the claims of one paper: Holm over the claims for
both the superiority test and the TOST at +-smallest_effect (Lakens 2017),
each through `decisions.verdict`, then `label`, the one rule:

- reproduced: significant in the claimed direction;
- contradicted: significant in the opposite direction, or equivalent
  within +-smallest_effect (TOST);
- not tested: the test could not run; the metric sits at a ceiling or
  floor where the smallest effect cannot show; or the seeds run give
  power < `power` at the smallest effect (needs N seeds, ran M);
- inconclusive: otherwise.

Power is the two-sided paired t-test's at d = smallest_effect / sd (the
sd of the claim's per-seed numbers), at alpha / m for m claims (Holm's
strictest step, as `planning.plan` plans a family). Pure; words in
`kg_service.analysis.words.claim_wording`.

>>> c = Claim("gelu-beats-relu", "test_accuracy", GREATER, 0.003, 0.05, ("gelu",), ("relu",))
>>> e = pair_evidence(c, {"gelu": {0: .95, 1: .96, 2: .955}, "relu": {0: .94, 1: .95, 2: .944}})
>>> label_all([e])[0].label
'reproduced'
"""

import dataclasses
import math
from typing import Optional

import numpy as np

from kg_service.analysis.numbers import decisions
from kg_service.analysis.numbers import multiplicity
from kg_service.analysis.numbers import planning
from kg_service.analysis.numbers import stats

REPRODUCED, CONTRADICTED, NOT_TESTED, INCONCLUSIVE = (
    "reproduced", "contradicted", "not tested", "inconclusive")
GREATER, LESS = "greater", "less"
# Why a claim is not tested, or how it is contradicted (`Label.why`).
NO_TEST, CEILING, FLOOR, UNDERPOWERED = "no test", "ceiling", "floor", "underpowered"
# A sequential claim stopped for futility: its smallest effect out of reach.
OUT_OF_REACH = "out of reach"
OPPOSITE, EQUIVALENT = "opposite", "equivalent"


@dataclasses.dataclass(frozen=True)
class Claim:
    """A declared claim as numbers: a - b where a = mean(`plus`), b =
    mean(`minus`); `reference` (an interaction's reference level) and
    `level` (the factor level whose sweep a pair, contrast or constant
    claim is tested in) are None where they do not apply. The kind:
    `interaction`, `change` (a = b = one activation, at the other level
    and at the reference), `versus` (the constant b; `minus` is ()), else
    a pair or contrast."""

    name: str
    metric: str
    direction: str  # GREATER: a - b > 0 is claimed; LESS: a - b < 0
    smallest_effect: float  # > 0, in the metric's units
    alpha: float
    plus: tuple
    minus: tuple
    interaction: bool = False
    reference: object = None
    level: object = None
    change: bool = False
    versus: Optional[float] = None


@dataclasses.dataclass(frozen=True)
class Evidence:
    """One claim's per-seed numbers. `sides`: (mean of a, mean of b) for
    the ceiling/floor check, () where none applies; `missing`: why the
    numbers could not be gathered ("" when they were)."""

    claim: Claim
    diffs: tuple = ()
    seeds: tuple = ()
    sides: tuple = ()
    bounds: tuple = (-math.inf, math.inf)
    missing: str = ""


@dataclasses.dataclass(frozen=True)
class Label:
    """One claim's label and the numbers behind it.

    `interval` is the deciding one (`decisions.Verdict.interval`, at
    Holm's level for this claim) with coverage `confidence`; `power`:
    the paired t-test's at the smallest effect with the `seeds` run (the
    observed sd, alpha / m); `needed`: the seeds for the target power
    (None: no finite count, or no sd). `why`: for not tested NO_TEST,
    CEILING, FLOOR or UNDERPOWERED; for contradicted OPPOSITE or
    EQUIVALENT; else "". `detail`: the numbers `why` is said with (a
    bound's side, its mean and the bound; or the reason no test ran).

    A claim run sequentially (`sequential_claims`) has `spending` (its
    spending function; "" for the fixed design), `look` of `looks` (the
    look that decided it, or its last), `estimate` the median-unbiased
    one and `naive_estimate` the plain mean; `interval` is the repeated
    confidence interval and the Holm p's are NaN (Bonferroni there).
    """

    claim: Claim
    label: str
    why: str
    estimate: float
    interval: tuple
    confidence: float
    power: float
    seeds: int
    needed: Optional[int]
    target: float
    p_holm: float
    p_equivalence_holm: float
    detail: tuple = ()
    spending: str = ""
    look: int = 0
    looks: int = 0
    naive_estimate: float = math.nan

    @property
    def sequential(self):
        return bool(self.spending)


def power_at(n, smallest_effect, sd, alpha):
    """Power of the two-sided paired t-test with n seeds at a true effect
    `smallest_effect` and per-seed sd `sd` (statsmodels `TTestPower`);
    NaN without a positive finite sd."""
    if not (sd > 0) or not math.isfinite(sd):
        return math.nan
    return planning.t_power(n, smallest_effect / sd, alpha)


def seeds_for(smallest_effect, sd, alpha, power=0.8):
    """The fewest seeds (>= 2) giving `power` at the smallest effect; None
    without a positive sd or beyond `planning.MAX_SEEDS`."""
    if not (sd > 0) or not math.isfinite(sd):
        return None
    return planning.superiority_seeds(smallest_effect / sd, alpha, power)


def _mean(values):
    return float(np.mean(values)) if len(values) else math.nan


def _per_seed(table, plus, minus):
    """{seed: mean(plus) - mean(minus)} over the seeds every activation has
    (finite values only), and the two sides' means over those seeds."""
    names = (*plus, *minus)
    finite = {a: {s for s, v in table.get(a, {}).items() if math.isfinite(v)} for a in names}
    absent = [a for a in names if not finite[a]]
    if absent:
        return None, f"no runs of {', '.join(absent)} with the claim's metric"
    seeds = sorted(set.intersection(*finite.values()))
    a = {s: _mean([table[x][s] for x in plus]) for s in seeds}
    b = {s: _mean([table[x][s] for x in minus]) for s in seeds}
    return (a, b), ""


def pair_evidence(claim, table, bounds=None):
    """A pair's or contrast's `Evidence` from one sweep's {activation:
    {seed: value}} of the claim's metric."""
    bounds = bounds or stats.Metric.of(claim.metric).bounds
    sides, missing = _per_seed(table, claim.plus, claim.minus)
    if sides is None:
        return Evidence(claim, bounds=bounds, missing=missing)
    a, b = sides
    seeds = tuple(a)
    return Evidence(claim, diffs=tuple(a[s] - b[s] for s in seeds), seeds=seeds,
                    sides=(_mean(list(a.values())), _mean(list(b.values()))), bounds=bounds)


def _across_levels(claim, by_level, kind, value):
    """`Evidence` of (per-seed number at the other level) - (at
    `claim.reference`), over the seeds both levels ran, whatever the levels'
    order in {level: {activation: {seed: value}}}; `value(a, b)` makes a
    seed's number from the sides' means. `sides`: the numbers' means at
    the other level and at the reference."""
    bounds = stats.Metric.of(claim.metric).bounds
    others = [level for level in by_level if level != claim.reference]
    if claim.reference not in by_level or len(others) != 1:
        return Evidence(claim, bounds=bounds, missing=(
            f"{kind} needs one sweep at the reference level {claim.reference!r} "
            f"and one at another level; the study has levels "
            f"{', '.join(repr(v) for v in by_level) or 'none'}"))
    numbers = []
    for level in (claim.reference, others[0]):
        sides, missing = _per_seed(by_level[level], claim.plus, claim.minus)
        if sides is None:
            return Evidence(claim, bounds=bounds, missing=f"{missing} at level {level!r}")
        numbers.append({s: value(sides[0][s], sides[1][s]) for s in sides[0]})
    ref, other = numbers
    seeds = tuple(sorted(set(ref) & set(other)))
    return Evidence(claim, diffs=tuple(other[s] - ref[s] for s in seeds), seeds=seeds,
                    sides=(_mean([other[s] for s in seeds]), _mean([ref[s] for s in seeds])),
                    bounds=bounds)


def interaction_evidence(claim, by_level):
    """An interaction's `Evidence` from {level: {activation: {seed: value}}}
    of the claim's metric, one table per level of the study's factor: per
    seed, (a - b at the other level) - (a - b at `claim.reference`). The
    levels' order in `by_level` does not matter; no ceiling or floor
    applies to a difference of gaps (`sides` is ())."""
    e = _across_levels(claim, by_level, "an interaction", lambda a, b: a - b)
    return dataclasses.replace(e, sides=())


def change_evidence(claim, by_level):
    """A level change's `Evidence`: per seed, a at the other level - a at
    `claim.reference` (a = `claim.plus`, which is also `claim.minus`),
    whatever the levels' order; `sides`: (a's mean at the other level, at
    the reference), for the ceiling/floor check."""
    return _across_levels(claim, by_level, "a level change", lambda a, b: a)


def constant_evidence(claim, table, bounds=None):
    """A constant claim's `Evidence` from one sweep's {activation: {seed:
    value}}: per seed, a - `claim.versus`; `sides`: (a's mean, the
    constant)."""
    bounds = bounds or stats.Metric.of(claim.metric).bounds
    sides, missing = _per_seed(table, claim.plus, ())
    if sides is None:
        return Evidence(claim, bounds=bounds, missing=missing)
    a = sides[0]
    seeds = tuple(a)
    return Evidence(claim, diffs=tuple(a[s] - claim.versus for s in seeds), seeds=seeds,
                    sides=(_mean(list(a.values())), float(claim.versus)), bounds=bounds)


def bound_hit(claim, sides, bounds):
    """(CEILING or FLOOR, the side, its mean, the bound) where the claimed
    smallest effect cannot show within the metric's range, else None.

    Claimed a - b >= d (GREATER): impossible when b > upper - d (a cannot
    rise d above b) or a < lower + d; claimed a - b <= -d (LESS): when
    a > upper - d or b < lower + d."""
    if not sides:
        return None
    a, b = sides
    low, high = bounds
    d = claim.smallest_effect
    top, bottom = (b, a) if claim.direction == GREATER else (a, b)
    names = ("b", "a") if claim.direction == GREATER else ("a", "b")
    if top > high - d:
        return CEILING, names[0], top, high
    if bottom < low + d:
        return FLOOR, names[1], bottom, low
    return None


def untestable(evidence):
    """Why the paired test cannot run on this evidence, or ""."""
    n = len(evidence.diffs)
    if evidence.missing:
        return evidence.missing
    if n < 2:
        return f"{n} seed{'s' if n != 1 else ''} with the claim's numbers; a t-test needs 2"
    if stats.constant(np.asarray(evidence.diffs)):
        return f"the {n} per-seed differences are all {evidence.diffs[0]:+.4g}: no spread"
    return ""


def label(claim, verdict, *, estimate, power, target, seeds, needed, hit=None, no_test="",
          out_of_reach=()):
    """The one rule: a claim's label from its `decisions.Verdict` (made at
    Holm's levels over the paper's claims, higher = the claimed direction)
    and what could be tested. Returns (label, why, detail).

    A sequential claim plugs in here (`sequential_claims`): its verdict is
    the sequential design's (`decisions.decided_elsewhere`), its power and
    seeds those of its last look; `out_of_reach` (smallest effect, look,
    seeds) where it stopped for futility: not tested, as underpowered is.
    """
    if no_test:
        return NOT_TESTED, NO_TEST, (no_test,)
    if hit is not None:
        return NOT_TESTED, hit[0], hit[1:]
    if out_of_reach:
        return NOT_TESTED, OUT_OF_REACH, tuple(out_of_reach)
    if verdict.outcome == decisions.BETTER:
        return REPRODUCED, "", ()
    if verdict.outcome == decisions.WORSE:
        return CONTRADICTED, OPPOSITE, ()
    if verdict.outcome == decisions.EQUIVALENT:
        return CONTRADICTED, EQUIVALENT, ()
    if not power >= target:  # NaN power: nothing to plan with, not tested
        return NOT_TESTED, UNDERPOWERED, (needed, seeds)
    return INCONCLUSIVE, "", ()


def label_all(evidence, power=0.8):
    """Each claim's `Label`, Holm over the claims (one family: a paper's).

    Every claim's alpha must be the family's (the config checks it); the
    first claim's is used. Power and the seeds needed use alpha / m.
    """
    evidence = list(evidence)
    if not evidence:
        return ()
    alpha = evidence[0].claim.alpha
    level = alpha / len(evidence)
    tests = [stats.paired_test(e.diffs, e.claim.metric, e.seeds) for e in evidence]
    no_test = [untestable(e) for e in evidence]
    p_sup = [t.p_value if not why else math.nan for t, why in zip(tests, no_test)]
    p_eq = [stats.tost_p(e.diffs, e.claim.smallest_effect) if not why else math.nan
            for e, why in zip(evidence, no_test)]
    holm_sup, holm_eq = multiplicity.holm(p_sup), multiplicity.holm(p_eq)
    lv_sup = multiplicity.holm_levels(p_sup, alpha)
    lv_eq = multiplicity.holm_levels(p_eq, alpha)
    out = []
    for i, (e, t) in enumerate(zip(evidence, tests)):
        c = e.claim
        v = decisions.verdict(t, p_holm=holm_sup[i], p_equivalence=p_eq[i],
                              p_equivalence_holm=holm_eq[i], level=lv_sup[i],
                              equivalence_level=lv_eq[i], margin=c.smallest_effect,
                              alpha=alpha, higher_is_better=c.direction == GREATER)
        sd = t.std_diff if t.n >= 2 else math.nan
        pw = power_at(t.n, c.smallest_effect, sd, level)
        needed = seeds_for(c.smallest_effect, sd, level, power)
        word, why, detail = label(c, v, estimate=t.mean_diff, power=pw, target=power,
                                  seeds=t.n, needed=needed, no_test=no_test[i],
                                  hit=bound_hit(c, e.sides, e.bounds))
        out.append(Label(claim=c, label=word, why=why, estimate=t.mean_diff,
                         interval=v.interval, confidence=v.confidence, power=pw, seeds=t.n,
                         needed=needed, target=power, p_holm=holm_sup[i],
                         p_equivalence_holm=holm_eq[i], detail=detail))
    return tuple(out)


@dataclasses.dataclass(frozen=True)
class ClaimPlan:
    """`kg plan --config`'s numbers for one claim: the seeds for `power`
    at the smallest effect, from a pilot's per-seed sd (None: no pilot)."""

    claim: Claim
    sd: float
    pilot_seeds: int
    alpha: float  # alpha / m, the level planned at
    power: float
    needed: Optional[int]
    # Without a pilot: the seeds if the per-seed sd were the smallest
    # effect itself (d = 1) or twice it (d = 0.5).
    if_sd: tuple = ()


def plan_claims(claims, sds, power=0.8):
    """A `ClaimPlan` per claim; `sds`: {claim name: (sd, pilot seeds)}, a
    claim without one planned as None."""
    claims = list(claims)
    out = []
    for c in claims:
        sd, n = sds.get(c.name, (math.nan, 0))
        level = c.alpha / len(claims)
        d = c.smallest_effect
        out.append(ClaimPlan(claim=c, sd=sd, pilot_seeds=n, alpha=level, power=power,
                             needed=seeds_for(d, sd, level, power),
                             if_sd=tuple((k, seeds_for(d, k * d, level, power)) for k in (1, 2))))
    return tuple(out)


def evidence_sd(evidence):
    """(sd of the per-seed numbers, seeds) of a pilot's evidence; (NaN, n)
    below 2 seeds."""
    d = np.asarray(evidence.diffs, dtype=float)
    return (float(np.std(d, ddof=1)) if d.size >= 2 else math.nan), int(d.size)
