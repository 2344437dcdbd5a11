"""Holm's step-down procedure over a family of comparisons: the adjusted
p-values (`holm`) and the level each hypothesis is tested at
(`holm_levels`), so an interval at that level and the test's decision
never disagree. Pure; `decisions`, `comparisons`, `paired_examples` and
`study` control their families' error rate through it."""

import math


def holm_levels(p_values, alpha, count_nan=False):
    """The level each hypothesis is tested at by Holm's step-down procedure.

    Sorted ascending, the k-th p-value is tested at alpha / (m - k + 1)
    while every smaller one was rejected; from the first that is not,
    every later one keeps that step's level. So p < level exactly when
    `holm` gives an adjusted p < alpha, and a two-sided interval at
    1 - level excludes 0 exactly when the test rejects: the interval and
    the decision never disagree. NaN p-values get NaN and do not count
    in m, as in `holm`; with `count_nan` they count (ranked last, as p = 1),
    as in `analysis.numbers.study.holm_counting_untestable`.

    These intervals are Holm-consistent, not simultaneous: the Bonferroni
    level alpha / m (the first step's) is what covers every difference at
    once with probability 1 - alpha.

    >>> [round(v, 4) for v in holm_levels([0.01, 0.04, 0.03], 0.05)]
    [0.0167, 0.025, 0.025]
    """
    p = [float(v) for v in p_values]
    idx = sorted((i for i, v in enumerate(p) if not math.isnan(v)), key=lambda i: p[i])
    m = len(p) if count_nan else len(idx)
    out = [math.nan] * len(p)
    stopped = None
    for rank, i in enumerate(idx):
        level = alpha / (m - rank)
        if stopped is None and not p[i] < level:
            stopped = level
        out[i] = level if stopped is None else stopped
    return out


def holm(p_values):
    """Holm's step-down adjustment of a family of p-values.

    Sorted ascending p_(1..m): adj_(i) = max_{j<=i} min(1, (m - j + 1) p_(j)).
    NaN entries are left NaN and not counted in m.

    >>> [round(p, 6) for p in holm([0.01, 0.04, 0.03])]
    [0.03, 0.06, 0.06]
    """
    p = [float(v) for v in p_values]
    idx = [i for i, v in enumerate(p) if not math.isnan(v)]
    m = len(idx)
    out = [math.nan] * len(p)
    running = 0.0
    for rank, i in enumerate(sorted(idx, key=lambda i: p[i])):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out
