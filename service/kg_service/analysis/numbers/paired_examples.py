"""Per-example paired tests on the test split (issue 19): McNemar's test.

The across-seed test (`stats.paired_test`, `decisions.decide`) asks whether
the activations differ over the training randomness a seed varies
(`vary`: initial weights, batch order, data split): its unit is a trained
member. McNemar's test asks a narrower question: for two trained models,
are the test examples that one gets right and the other wrong more often
one way than the other? Its unit is a test example; its uncertainty is
the sampling of the test examples only, the trained models taken as they
are. A reader needs both: a split whose 400 test points give a binomial SE
near 1 pp can hide or fake a difference that the seeds alone do not show.

Two activations' members of one seed share the split (the split seed is
the member's, whatever the activation: `config.derived.source_seeds`), so
they pair example by example. Per seed: the discordant counts b (the
activation right, the reference wrong) and c (the reverse), and McNemar's
p. Over the seeds: the pooled counts' McNemar p (every seed's test
examples together; with the split varied, different examples per seed),
and Fisher's combination of the per-seed p-values (independent seeds).
Holm-adjusted over the activations compared with the baseline, as the
across-seed verdicts are. Numbers only; `variance_report` words them.
"""

import dataclasses
import math

import numpy as np
from scipy import stats as _st

from kg_service.analysis.numbers import multiplicity

# Below this many discordant pairs the exact binomial test, else the
# continuity-corrected chi-square: statsmodels' advice for `mcnemar`
# ("exact=True ... for small samples"), the usual cut at 25.
EXACT_BELOW = 25


def mcnemar_p(b, c, exact=None):
    """Two-sided McNemar p-value from the discordant counts b and c.

    Exact: the binomial test of b successes in b + c trials at 1/2,
    min(1, 2 P(X <= min(b, c))). Else: chi-square with 1 degree of freedom
    of (|b - c| - 1)^2 / (b + c) (Edwards' continuity correction). As
    `statsmodels.stats.contingency_tables.mcnemar(..., exact, correction=True)`.

    Args:
        b, c: non-negative discordant counts.
        exact: True / False, or None: exact when b + c < `EXACT_BELOW`.

    Returns:
        The p-value; 1.0 when b + c == 0 (no discordant example: no
        evidence either way).

    >>> round(mcnemar_p(1, 9), 4)
    0.0215
    """
    n = int(b) + int(c)
    if n == 0:
        return 1.0
    if exact is None:
        exact = n < EXACT_BELOW
    if exact:
        return float(min(1.0, 2.0 * _st.binom.cdf(min(b, c), n, 0.5)))
    statistic = (abs(int(b) - int(c)) - 1.0) ** 2 / n
    return float(_st.chi2.sf(statistic, 1))


def discordant(correct, reference_correct):
    """(b, c): examples `correct` only, examples `reference_correct` only.

    Args:
        correct, reference_correct: bool arrays over the same test
            examples, in the same order.

    >>> discordant(np.array([1, 1, 0, 0], bool), np.array([1, 0, 1, 1], bool))
    (1, 2)
    """
    a = np.asarray(correct, dtype=bool)
    r = np.asarray(reference_correct, dtype=bool)
    if a.shape != r.shape:
        raise ValueError(f"not the same test examples: {a.shape} vs {r.shape}")
    return int(np.sum(a & ~r)), int(np.sum(~a & r))


@dataclasses.dataclass(frozen=True)
class SeedPair:
    """One seed's two members on their shared test split."""

    seed: int
    n: int  # test examples
    b: int  # the activation right, the reference wrong
    c: int  # the reference right, the activation wrong
    p_value: float  # McNemar, exact below EXACT_BELOW discordant pairs


@dataclasses.dataclass(frozen=True)
class ExampleTest:
    """McNemar's test of one activation against the reference, by seed and pooled.

    `p_pooled`: McNemar on the summed b and c (exact below `EXACT_BELOW`);
    `p_fisher`: Fisher's combination of the per-seed p-values (chi-square
    with 2k degrees of freedom; conservative for discrete p-values);
    `p_pooled_holm`: `p_pooled` Holm-adjusted over the activations
    compared with the same reference (NaN for none compared).
    """

    activation: str
    reference: str
    seeds: tuple  # SeedPair, seed order
    b: int
    c: int
    p_pooled: float
    p_fisher: float
    p_pooled_holm: float = math.nan
    unpaired: int = 0  # seeds of either member without predictions, or other examples

    @property
    def n(self):
        return sum(s.n for s in self.seeds)

    @property
    def difference(self):
        """(b - c) / n: the pooled accuracy difference, activation - reference."""
        return (self.b - self.c) / self.n if self.n else math.nan


def example_test(members, reference_members, activation, reference):
    """McNemar's test of `activation` against `reference`, paired by seed.

    Args:
        members, reference_members: `{seed: MemberResult}`; a member's
            `test_correct` is its per-example correctness (None: not kept).

    Returns:
        An `ExampleTest` (no seeds when no seed has both members' predictions
        on the same number of examples).
    """
    pairs, unpaired = [], 0
    for seed in sorted(set(members) | set(reference_members)):
        a = getattr(members.get(seed), "test_correct", None)
        r = getattr(reference_members.get(seed), "test_correct", None)
        if a is None or r is None or len(a) != len(r):
            unpaired += 1
            continue
        b, c = discordant(a, r)
        pairs.append(SeedPair(seed=seed, n=len(a), b=b, c=c, p_value=mcnemar_p(b, c)))
    b, c = sum(p.b for p in pairs), sum(p.c for p in pairs)
    fisher = (float(_st.combine_pvalues([p.p_value for p in pairs], method="fisher").pvalue)
              if pairs else math.nan)
    return ExampleTest(
        activation=activation, reference=reference, seeds=tuple(pairs), b=b, c=c,
        p_pooled=mcnemar_p(b, c) if pairs else math.nan, p_fisher=fisher,
        unpaired=unpaired,
    )


def example_tests(results, baseline):
    """Every activation's `ExampleTest` against `baseline`, Holm over them.

    Args:
        results: `MemberResult`s (diverged ones are left out).
        baseline: the reference activation.

    Returns:
        A tuple of `ExampleTest`, activations in first-seen order; empty
        when no member kept its test predictions (a language model; a
        sweep rebuilt from the store).
    """
    by_act = {}
    for r in results:
        if getattr(r, "ok", True):
            by_act.setdefault(r.activation, {})[r.seed] = r
    if baseline not in by_act or not any(
        getattr(r, "test_correct", None) is not None for r in by_act[baseline].values()
    ):
        return ()
    tests = [example_test(members, by_act[baseline], a, baseline)
             for a, members in by_act.items() if a != baseline]
    adjusted = multiplicity.holm([t.p_pooled for t in tests])
    return tuple(dataclasses.replace(t, p_pooled_holm=float(p))
                 for t, p in zip(tests, adjusted))
