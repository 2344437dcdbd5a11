"""What "ReLU's Revival" measures in a language model, read off its layers.

The attention probe (each layer's causal attention scores on a fixed
validation batch, for a plain model or every member of a stacked one),
the attention entropy per layer and head (`entropy.py`'s normalised row
entropy) with its quarters, and the slope of every learnable leaky ReLU.
`train.py` records them after each epoch, per member.

Importing this module imports Keras.
"""

import keras
import numpy as np

import keras_gelu
from kg_service.tasks.language.stacked import StackedSelfAttention

# The first validation windows, the same for every member and epoch, that
# the attention entropy is averaged over (data.eval_windows sets how many
# windows the validation loss uses; the test split is evaluated whole).
ENTROPY_BATCH = 8
QUARTERS = 4


def attention_probe(model):
    """`tokens -> [scores of block 0, ...]`, each `[batch, heads, t, t]`
    (a stacked model's: `[batch, members, heads, t, t]`).

    Calls each block's attention layer on its own normalized input with
    `return_attention_scores=True`: the same weights and the same causal
    softmax as the model's forward pass.
    """
    attentions = [
        layer for layer in model.layers
        if isinstance(layer, (keras.layers.MultiHeadAttention, StackedSelfAttention))
    ]
    inputs = [layer.input[0] if isinstance(layer.input, list) else layer.input
              for layer in attentions]
    feeder = keras.Model(model.inputs, inputs)

    def probe(tokens):
        hidden = feeder.predict_on_batch(tokens)
        if not isinstance(hidden, (list, tuple)):
            hidden = [hidden]
        return [
            keras.ops.convert_to_numpy(
                layer(h, h, use_causal_mask=True, return_attention_scores=True)[1]
            )
            for layer, h in zip(attentions, hidden)
        ]

    return probe


class _AttentionScores(keras.layers.Layer):
    # The scores alone, as one output: a functional model cannot take the
    # second output of a layer's extra call (Keras 3.15: "not connected").
    def __init__(self, attention, **kwargs):
        super().__init__(**kwargs)
        self.attention = attention

    def call(self, hidden):
        return self.attention(hidden, hidden, use_causal_mask=True, return_attention_scores=True)[1]

    def compute_output_spec(self, hidden):
        return self.attention.compute_output_spec(
            hidden, use_causal_mask=True, return_attention_scores=True)[1]


def stacked_attention_probe(stacked):
    """`attention_probe` of a stacked model, each `[batch, members, heads,
    t, t]`, as one compiled model (`predict_on_batch`): called eagerly, as
    `attention_probe` does, every op is one more XLA compile on JAX."""
    attentions = [layer for layer in stacked.layers if isinstance(layer, StackedSelfAttention)]
    scores = []
    for layer in attentions:
        h = layer.input[0] if isinstance(layer.input, (list, tuple)) else layer.input
        scores.append(_AttentionScores(layer)(h))
    model = keras.Model(stacked.inputs, scores)

    def probe(tokens):
        scores = model.predict_on_batch(tokens)
        if not isinstance(scores, (list, tuple)):  # one block: one array
            scores = [scores]
        return [np.asarray(s) for s in scores]

    return probe


def attention_entropy(scores):
    """Shannon entropy (nats) of each head's attention rows.

    Args:
        scores: `[batch, heads, queries, keys]` attention probabilities
            (each row sums to 1 over the keys it may see; masked keys 0).

    Returns:
        `[heads]`: each head's entropy, averaged over queries and batch.
        0 log 0 counts as 0.

    Example:

    >>> import math
    >>> uniform = np.full((1, 1, 1, 4), 0.25)
    >>> round(float(attention_entropy(uniform)[0]), 6) == round(math.log(4), 6)
    True
    """
    p = np.asarray(scores, dtype=np.float64)
    terms = np.where(p > 0, -p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return terms.sum(axis=-1).mean(axis=(0, 2))


def entropy_quarters(entropies):
    """The share of heads in each quarter of [0, max entropy].

    As "ReLU's Revival": max is the highest head entropy observed (over
    all layers and heads of the model); quarters [0, max/4), [max/4,
    max/2), [max/2, 3max/4), [3max/4, max].

    Example:

    >>> entropy_quarters([0.1, 1.0, 2.0, 4.0]).tolist()
    [0.25, 0.25, 0.25, 0.25]
    """
    h = np.asarray(entropies, dtype=np.float64).ravel()
    top = h.max()
    if not top > 0:
        return np.eye(QUARTERS)[0]
    index = np.minimum((h / top * QUARTERS).astype(int), QUARTERS - 1)
    return np.bincount(index, minlength=QUARTERS) / len(h)


def leaky_slopes(model):
    """`{block index: slope}` of every LearnableLeakyReLU in the FFNs."""
    slopes = {}
    for layer in model.layers:
        if not isinstance(layer, keras_gelu.FeedForward):
            continue
        block = int(layer.name.split("_")[1])
        for weight in layer.weights:
            if "alpha" in weight.path or "slope" in weight.path:
                slopes[block] = float(np.mean(keras.ops.convert_to_numpy(weight)))
    return slopes
