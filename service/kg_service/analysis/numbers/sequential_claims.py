"""A paper's claims run sequentially (issue 32 §2, last sentence): in a
sequential sweep each claim is decided by its own group-sequential test at
the sweep's looks, and labelled by the one rule, `claims.label`.

Over the seeds a sequential sweep stopped at, the fixed-design test
(`claims.label_all`) says "significant" too often and its mean is biased
by the stopping (issue 30 §7), so a sequential sweep's claims never take
it. Instead, for each claim:

- its per-seed numbers (`claims.Evidence`) are cut at each look's seed
  count (look k holds seeds 0..n_k - 1, as the sweep trained them),
  oriented so that positive is the claimed direction, and run through
  `sequential.sequential_test` with the sweep's spending function and
  `n_max`: the equivalence margin and the futility rule (non-binding,
  conditional power; `sequential_estimates`) both at the claim's
  smallest effect. The claim stops at its own first decision; seeds the
  sweep trained after it (for its other comparisons) are not used: a
  second test after the stop would spend alpha the design never had.
- alpha is split over the paper's m claims by **Bonferroni**, alpha / m
  each, not Holm: Holm's step-down passes a rejected claim's alpha on to
  the others, which for group-sequential tests needs the graphical
  recycling of Maurer & Bretz (2013, Stat. Biopharm. Res. 5:311) with
  each claim's boundaries recomputed at the passed-on level; Bonferroni
  keeps the family-wise error at alpha at every look with each claim's
  design fixed in advance, and it is what the sweep's own comparisons do
  (`sequential.compare_looks`). Power and the seeds needed use alpha / m
  too, as the fixed design's.
- the label: its decision as the verdict (`decisions.decided_elsewhere`):
  better -> reproduced; worse -> contradicted; equivalent -> contradicted
  (equivalent within +-smallest effect). A **futility stop is "not
  tested"**: it stops when the chance of reaching the final boundary at
  the smallest effect, even with every seed of the budget, is below 0.1
  (`sequential_estimates.CONDITIONAL_POWER_FLOOR`), far below the 80 %
  power that "not tested" asks of the seeds; an "inconclusive" would
  claim the seeds could have shown the effect. Where the futility stop
  came instead from the repeated interval lying inside +-smallest effect,
  the data exclude the smallest effect: equivalent, contradicted. A claim
  that ends undecided is "not tested" when the paired t-test's power at
  the smallest effect with the seeds it used (its last look's sd, alpha /
  m) is below the target, else inconclusive, as the fixed rule says. The
  ceiling/floor and "could not run" cases are the rule's, unchanged.
- the estimate is the median-unbiased one under the stagewise ordering
  (`Sequential.adjusted`), its deciding interval the repeated confidence
  interval at the stopping look (coverage >= 1 - alpha / m at every look
  at once); the naive mean is kept as `naive_estimate`, labelled so.

Pure; words in `kg_service.analysis.words.claim_wording`.
"""

import math

from kg_service.analysis.numbers import claims as rule
from kg_service.analysis.numbers import decisions
from kg_service.analysis.numbers import sequential


def cut(evidence, counts):
    """The claim's per-seed numbers at each look: those of seeds < n_k,
    oriented so that positive is the claimed direction."""
    sign = 1.0 if evidence.claim.direction == rule.GREATER else -1.0
    return [[sign * d for s, d in zip(evidence.seeds, evidence.diffs) if s < n]
            for n in counts]


def _verdict(test, smallest_effect):
    """The sequential decision as a `decisions.Verdict`, and the detail of
    a futility stop whose smallest effect is out of reach (() otherwise)."""
    outcome = test.decision
    if outcome == sequential.FUTILITY:
        low, high = test.interval
        if -smallest_effect < low and high < smallest_effect:
            outcome = sequential.EQUIVALENT  # the repeated interval excludes it
        else:
            last = test.looks[-1]
            return (decisions.decided_elsewhere(None, smallest_effect),
                    (smallest_effect, last.index + 1, last.n))
    return decisions.decided_elsewhere(outcome, smallest_effect), ()


def label_one(evidence, counts, n_max, alpha, spending, power):
    """One claim's `claims.Label` from its sequential test at `counts` (the
    sweep's looks) out of `n_max` seeds at two-sided `alpha` (the claim's
    share of the family)."""
    c = evidence.claim
    no_test = rule.untestable(evidence)
    test = None
    if not no_test:
        test = sequential.sequential_test(
            cut(evidence, counts), n_max, alpha, spending, margin=c.smallest_effect,
            futility=sequential.Futility(c.smallest_effect))
        if not test.looks:
            no_test = "no look held 2 seeds with the claim's numbers"
    if test is None or not test.looks:
        word, why, detail = rule.label(c, decisions.decided_elsewhere(None), estimate=math.nan,
                                       power=math.nan, target=power, seeds=0, needed=None,
                                       no_test=no_test)
        return rule.Label(claim=c, label=word, why=why, estimate=math.nan,
                          interval=(math.nan, math.nan), confidence=1.0 - alpha,
                          power=math.nan, seeds=len(evidence.diffs), needed=None,
                          target=power, p_holm=math.nan, p_equivalence_holm=math.nan,
                          detail=detail, spending=spending)
    last = test.looks[-1]
    sign = 1.0 if c.direction == rule.GREATER else -1.0
    verdict, out_of_reach = _verdict(test, c.smallest_effect)
    pw = rule.power_at(last.n, c.smallest_effect, last.sd, alpha)
    needed = rule.seeds_for(c.smallest_effect, last.sd, alpha, power)
    word, why, detail = rule.label(
        c, verdict, estimate=sign * test.adjusted, power=pw, target=power, seeds=last.n,
        needed=needed, hit=rule.bound_hit(c, evidence.sides, evidence.bounds),
        out_of_reach=out_of_reach)
    low, high = (sign * x for x in test.interval)
    return rule.Label(claim=c, label=word, why=why, estimate=sign * test.adjusted,
                      interval=(min(low, high), max(low, high)), confidence=1.0 - alpha,
                      power=pw, seeds=last.n, needed=needed, target=power,
                      p_holm=math.nan, p_equivalence_holm=math.nan, detail=detail,
                      spending=spending, look=last.index + 1, looks=len(counts),
                      naive_estimate=sign * test.naive_mean)


def label_all(evidence, counts, n_max, spending="obrien_fleming", power=0.8):
    """Each claim's `claims.Label` from its sequential test at the looks
    `counts` (seeds trained at each look taken) out of `n_max`, Bonferroni
    over the claims (the first claim's alpha is the family's, as in
    `claims.label_all`)."""
    evidence = list(evidence)
    if not evidence:
        return ()
    alpha = evidence[0].claim.alpha / len(evidence)
    return tuple(label_one(e, tuple(counts), n_max, alpha, spending, power) for e in evidence)

