"""Three-way verdicts: what a family of paired tests decides.

Each comparison of a family (every activation against the baseline) is
better, worse, equivalent within a margin, or inconclusive; both kinds of
claim are Holm-adjusted over the family and each interval is taken at the
level Holm tests its comparison at, so an interval and its verdict never
disagree. Pure: the numbers come from `kg_service.analysis.numbers.stats`;
`kg_service.analysis.words.wording` phrases them.
"""

import dataclasses
import math

from kg_service.analysis.numbers import multiplicity
from kg_service.analysis.numbers import stats


BETTER, WORSE, EQUIVALENT, INCONCLUSIVE, UNTESTED = (
    "better", "worse", "equivalent", "inconclusive", "untested")


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What one comparison of a family decides, and the interval that decides it.

    `outcome`: BETTER or WORSE (the superiority test rejects, Holm over the
    family: `p_holm` < alpha), else EQUIVALENT (the TOST rejects, Holm over
    the family: `p_equivalence_holm` < alpha), else INCONCLUSIVE; UNTESTED
    below 2 pairs. Better and worse follow the metric's direction.

    `interval` is the one that decides: for better/worse the two-sided
    interval at 1 - `level` (Holm's level for this comparison,
    `multiplicity.holm_levels`), which excludes 0 exactly when the test rejects; for
    equivalent the 1 - 2 `level` interval (TOST's), inside +-margin exactly
    when the TOST rejects; for inconclusive the equivalence interval when a
    margin is set (it straddles a margin bound), else the superiority one.
    `superiority` and `equivalence` hold both (NaN when undefined:
    constant differences, which are decided by exact Wilcoxon tests and
    have no interval). `within_margin`: better or worse, but the
    equivalence interval lies inside the margin too (a real difference
    too small to matter).
    """

    outcome: str
    margin: float  # NaN: no margin, no equivalence test
    p_holm: float  # superiority, Holm-adjusted over the family
    p_equivalence: float  # TOST, unadjusted
    p_equivalence_holm: float  # TOST, Holm-adjusted over the family
    superiority: tuple  # (low, high) at 1 - superiority_level
    superiority_level: float
    equivalence: tuple  # (low, high) at 1 - 2 equivalence_level
    equivalence_level: float
    within_margin: bool = False

    @property
    def interval(self):
        if self.outcome == EQUIVALENT or (self.outcome == INCONCLUSIVE
                                          and math.isfinite(self.margin)):
            return self.equivalence
        return self.superiority

    @property
    def confidence(self):
        """The coverage of `interval`: 1 - level, or 1 - 2 level for TOST's."""
        if self.interval is self.equivalence:
            return 1.0 - 2.0 * self.equivalence_level
        return 1.0 - self.superiority_level


def decided_elsewhere(outcome, margin=None):
    """A `Verdict` that carries another design's decision (a sequential
    sweep's, made at its looks' levels) and none of this module's fixed-
    design numbers: over every seed of a sweep that stopped at a look, the
    fixed-design test says better/worse too often and its means are biased
    by the stopping (issue 30 §7). `outcome`: None or "" is INCONCLUSIVE."""
    nan, nan2 = math.nan, (math.nan, math.nan)
    return Verdict(outcome=outcome or INCONCLUSIVE,
                   margin=nan if margin is None else float(margin), p_holm=nan,
                   p_equivalence=nan, p_equivalence_holm=nan, superiority=nan2,
                   superiority_level=nan, equivalence=nan2, equivalence_level=nan)


def decide(tests, *, alpha=0.05, margin=None, higher_is_better=True):
    """Three-way verdicts for a family of `PairedTest`s (one `Verdict` each).

    Args:
        tests: the family, e.g. every activation vs the baseline; each
            test's `p_value` is its superiority p (paired t, or exact
            Wilcoxon for constant differences) and `diffs` its differences.
        alpha: the family-wise error rate of each kind of claim.
        margin: the equivalence margin in the metric's units (> 0), or
            None for no equivalence test (then never EQUIVALENT).
        higher_is_better: the metric's direction.

    Both kinds of claim are Holm-adjusted over the family, and each
    interval is taken at the level Holm tests its comparison at, so an
    interval and its verdict never disagree.

    >>> v, = decide([stats.paired_test([0.01, 0.02, 0.015, 0.012, 0.018])], margin=0.003)
    >>> v.outcome, round(v.p_holm, 5)
    ('better', 0.00124)
    """
    tests = list(tests)
    margin = math.nan if margin is None else float(margin)
    p_sup = [t.p_value if t.n >= 2 else math.nan for t in tests]
    p_eq = [stats.tost_p(t.diffs, margin) if math.isfinite(margin) else math.nan for t in tests]
    holm_sup, holm_eq = multiplicity.holm(p_sup), multiplicity.holm(p_eq)
    levels_sup, levels_eq = multiplicity.holm_levels(p_sup, alpha), multiplicity.holm_levels(p_eq, alpha)
    return tuple(
        verdict(t, p_holm=hs, p_equivalence=pe, p_equivalence_holm=he, level=ls,
                equivalence_level=le, margin=margin, alpha=alpha,
                higher_is_better=higher_is_better)
        for t, pe, hs, he, ls, le in zip(tests, p_eq, holm_sup, holm_eq, levels_sup, levels_eq)
    )


def verdict(test, *, p_holm, p_equivalence, p_equivalence_holm, level, equivalence_level,
            margin, alpha, higher_is_better):
    """The rule: one comparison's `Verdict` from its Holm-adjusted p-values
    and Holm's levels for it in its family. `decide` calls it for a sweep's
    family, `study.analyse` for a study's (untestable comparisons counted);
    every table and sentence words what it returns.

    BETTER or WORSE when the superiority test rejects (and the mean
    difference is not 0), else EQUIVALENT when the TOST rejects, else
    INCONCLUSIVE; UNTESTED below 2 pairs. A NaN p rejects nothing.
    """
    nan2 = (math.nan, math.nan)
    sup = stats.t_interval(test.diffs, 1.0 - level) if math.isfinite(level) else nan2
    eq = (stats.t_interval(test.diffs, 1.0 - 2.0 * equivalence_level)
          if math.isfinite(equivalence_level) else nan2)
    equivalent = bool(p_equivalence_holm < alpha)  # NaN -> False
    if test.n < 2:
        outcome = UNTESTED
    elif p_holm < alpha and test.mean_diff != 0:
        outcome = BETTER if (test.mean_diff > 0) == higher_is_better else WORSE
    elif equivalent:
        outcome = EQUIVALENT
    else:
        outcome = INCONCLUSIVE
    return Verdict(
        outcome=outcome, margin=math.nan if margin is None else float(margin), p_holm=p_holm,
        p_equivalence=p_equivalence, p_equivalence_holm=p_equivalence_holm, superiority=sup,
        superiority_level=level, equivalence=eq, equivalence_level=equivalence_level,
        within_margin=outcome in (BETTER, WORSE) and equivalent,
    )
