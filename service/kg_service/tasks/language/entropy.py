"""Attention entropy per layer, normalised by log(t), as "ReLU's Revival".

Row i of a causal attention matrix (query position i, 0-based) spreads
its weight over t = i + 1 keys, so its entropy lies in [0, log t]; the
raw entropy of late queries is larger only because they see more keys.
Divided by log t, each row's entropy is in [0, 1] (1 = uniform over what
it may see) and rows, heads and layers are comparable. The first row
(t = 1, entropy 0 of 0) is left out. Per head: the mean over the other
rows and the batch; per layer: the mean over its heads.

The share of heads "in the top quarter" is taken of this normalised
entropy against its fixed maximum 1 ([0.75, 1]), not against the
member's own highest head, which always puts at least one head there.

Pure numpy: no Keras, no MLflow.
"""

import numpy as np

QUARTERS = 4


def normalised_row_entropy(scores):
    """`[batch, heads, queries - 1]`: each causal row's entropy over
    log t (t = query index + 1), rows 1.. (row 0 has t = 1).

    Args:
        scores: `[batch, heads, t, t]` causal attention probabilities
            (row i sums to 1 over keys 0..i; the rest 0).

    Example:

    >>> uniform = np.tril(np.ones((3, 3))) / np.arange(1, 4)[:, None]
    >>> normalised_row_entropy(uniform[None, None]).round(6).tolist()
    [[[1.0, 1.0]]]
    """
    p = np.asarray(scores, dtype=np.float64)
    terms = np.where(p > 0, -p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    rows = terms.sum(axis=-1)[..., 1:]
    t = np.arange(2, p.shape[-2] + 1, dtype=np.float64)
    return rows / np.log(t)


def normalised_head_entropy(scores):
    """`[heads]`: each head's normalised entropy, the mean over its rows
    (1..) and the batch."""
    return normalised_row_entropy(scores).mean(axis=(0, 2))


def layer_entropy(scores):
    """A layer's normalised attention entropy: the mean over its heads."""
    return float(normalised_head_entropy(scores).mean())


def top_quarter_shares(head_entropies):
    """The share of heads in each quarter of [0, 1] of the normalised
    entropy: [0, .25), [.25, .5), [.5, .75), [.75, 1].

    Example:

    >>> top_quarter_shares([0.1, 0.3, 0.8, 1.0]).tolist()
    [0.25, 0.25, 0.0, 0.5]
    """
    h = np.asarray(head_entropies, dtype=np.float64).ravel()
    index = np.clip((h * QUARTERS).astype(int), 0, QUARTERS - 1)
    return np.bincount(index, minlength=QUARTERS) / len(h)
