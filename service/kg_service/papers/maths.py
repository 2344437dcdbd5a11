"""docs/results.md's math: ranks, Spearman's rho, rank probabilities by
resampling seeds, the attention entropy per layer (the
numbers `page` shows; no words, no store).

`ranks`, `rank_agreement` and `rank_probabilities` are checked against
scipy and plain numpy in tests/service/papers/test_page.py.
"""

import dataclasses
import math

import numpy as np
from scipy import stats as _st

RESAMPLES = 10_000
SEED = 0
TOP_QUARTER = 0.75  # normalised entropy in [0.75, 1]: the fixed top quarter


def ranks(values, higher_is_better=False):
    """Rank of each value, 1 = best, ties sharing their mean rank
    (`scipy.stats.rankdata`, method "average").

    Example:

    >>> ranks([2.6, 2.5, 2.7]).tolist()
    [2.0, 1.0, 3.0]
    """
    v = np.asarray(values, dtype=np.float64)
    return _st.rankdata(-v if higher_is_better else v)


@dataclasses.dataclass(frozen=True)
class RankAgreement:
    """Ours against the paper, item by item in the table's order."""

    names: tuple
    ours: tuple  # ranks, 1 = best
    paper: tuple
    differences: tuple  # ours - paper, in `names`' order
    rho: float  # Spearman's rank correlation
    p_value: float  # its two-sided p (scipy's t approximation)


def rank_agreement(names, ours, paper, higher_is_better=False):
    """Spearman's rho between our values and the paper's, with both
    rankings and their differences in the order of `names`.

    `scipy.stats.spearmanr` computes rho and p: the Pearson correlation of
    the ranks, p from the t distribution with n - 2 degrees of freedom.
    """
    ours_r, paper_r = ranks(ours, higher_is_better), ranks(paper, higher_is_better)
    result = _st.spearmanr(ours, paper)
    return RankAgreement(
        names=tuple(names), ours=tuple(float(r) for r in ours_r),
        paper=tuple(float(r) for r in paper_r),
        differences=tuple(float(a - b) for a, b in zip(ours_r, paper_r)),
        rho=float(result.statistic), p_value=float(result.pvalue),
    )


def rank_probabilities(table, higher_is_better=False, paired=True, resamples=RESAMPLES,
                       seed=SEED):
    """P(each activation takes each rank), resampling the seeds.

    Args:
        table: {activation: {seed: value}}.
        paired: resample seed indices together for all activations (a
            seed's runs share their batch order; as
            `resampling.rank_first`), over the seeds every activation has;
            False: each activation's seeds on their own draw.

    Returns:
        {activation: [P(rank 1), ..., P(rank k)]}; ties take the best of
        their ranks ("min"). {} with fewer than 2 activations or 2 seeds.
    """
    names = list(table)
    if len(names) < 2:
        return {}
    rng = np.random.default_rng(seed)
    if paired:
        common = sorted(set.intersection(*(set(v) for v in table.values())))
        if len(common) < 2:
            return {}
        values = np.array([[table[a][s] for a in names] for s in common], dtype=np.float64)
        idx = rng.integers(0, len(common), size=(resamples, len(common)))
        means = values[idx].mean(axis=1)
    else:
        columns = []
        for a in names:
            v = np.array(list(table[a].values()), dtype=np.float64)
            if len(v) < 2:
                return {}
            columns.append(v[rng.integers(0, len(v), size=(resamples, len(v)))].mean(axis=1))
        means = np.stack(columns, axis=1)
    score = -means if higher_is_better else means
    r = _st.rankdata(score, axis=1, method="min")
    k = len(names)
    return {a: [float(np.mean(r[:, j] == rank)) for rank in range(1, k + 1)]
            for j, a in enumerate(names)}


def mean_sd(values):
    v = np.asarray(list(values), dtype=np.float64)
    return float(v.mean()), (float(v.std(ddof=1)) if len(v) > 1 else math.nan)


def layer_entropies(run, activation):
    """[blocks] of [values over seeds]: the final normalised attention
    entropy of each layer (`entropy_norm.block{i}`, tasks/language/entropy.py)."""
    out, i = [], 0
    while True:
        values = list(run.values(f"entropy_norm.block{i}").get(activation, {}).values())
        if not values:
            return out
        out.append(values)
        i += 1


def head_shares(run, activation):
    """Mean over seeds of the share of heads in the fixed top quarter
    [0.75, 1] of normalised entropy, and the seeds' head counts."""
    shares = list(run.values("entropy_norm_quarter4").get(activation, {}).values())
    return (float(np.mean(shares)) if shares else math.nan), len(shares)


def median_first(table, resamples=RESAMPLES, seed=SEED):
    """P(each activation has the lowest median), each one's seeds resampled."""
    rng = np.random.default_rng(seed)
    names = list(table)
    cols = []
    for a in names:
        v = np.array(list(table[a].values()), dtype=np.float64)
        cols.append(np.median(v[rng.integers(0, len(v), size=(resamples, len(v)))], axis=1))
    m = np.stack(cols, axis=1)
    best = m == m.min(axis=1, keepdims=True)
    shares = best / best.sum(axis=1, keepdims=True)
    return {a: float(p) for a, p in zip(names, shares.mean(axis=0))}
