"""The models benchmarks/bench_language_model.py times, and how.

keras-hub's GPT2Backbone and kg-train's language model built at one size,
the variants the benchmark sets beside them (einsum attention, a fused
query-key-value projection, GPT-2's initializers, keras_gelu's kernels
traced with their half-precision casts around them as before), and how
a row is compiled and timed. `bench_ffn_fusion.py` uses `casts_around`.
"""

import contextlib
import time

import keras
import numpy as np


def gpt2(layers, heads, width, ffn, context, vocabulary):
    import keras_hub

    backbone = keras_hub.models.GPT2Backbone(
        vocabulary_size=vocabulary, num_layers=layers, num_heads=heads,
        hidden_dim=width, intermediate_dim=ffn, max_sequence_length=context,
        dropout=0.0,
    )
    tokens = keras.Input((None,), dtype="int32", name="token_ids")
    hidden = backbone({"token_ids": tokens, "padding_mask": keras.ops.ones_like(tokens)})
    logits = backbone.token_embedding(hidden, reverse=True)
    return keras.Model(tokens, logits)


def kg_model(activation, layers, heads, width, ffn, context, vocabulary):
    from kg_service.config.schema import ModelConfig
    from kg_service.tasks.language.corpus import Corpus
    from kg_service.tasks.language.model import build_language_model

    empty = np.zeros(0, np.uint8)
    corpus = Corpus("bench", empty, empty, empty, (0, 0, 0), "", "", context, vocabulary)
    cfg = ModelConfig(hidden_units=(ffn,) * layers, d_model=width, heads=heads)
    return build_language_model(cfg, activation, corpus)


def compiled(model, steps, jit_compile):
    model.compile(
        optimizer=keras.optimizers.AdamW(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        steps_per_execution=steps,
        jit_compile=jit_compile,
    )
    return model


def tokens_per_second(model, x, y, batch):
    start = time.perf_counter()
    model.fit(x, y, batch_size=batch, epochs=1, shuffle=False, verbose=0)
    return x.size / (time.perf_counter() - start)


class EinsumAttention(keras.layers.MultiHeadAttention):
    """Keras' `MultiHeadAttention` on its einsum path (scaled query, scores,
    masked softmax, weighted values), not `ops.dot_product_attention`: the
    fused kernel's share of the step (issue 20 §2). Overriding
    `_compute_attention` makes `call` build the causal mask explicitly."""

    def _compute_attention(self, query, key, value, attention_mask=None, training=None,
                           return_attention_scores=False, **kwargs):
        out, _ = super()._compute_attention(query, key, value, attention_mask, training, True)
        return out, None


def with_attention(model, cls):
    """`model` with every attention layer a `cls` (the same weights, copied)."""

    def clone(layer):
        kind = cls if isinstance(layer, keras.layers.MultiHeadAttention) else type(layer)
        return kind.from_config(layer.get_config())

    copy = keras.models.clone_model(model, clone_function=clone)
    copy.set_weights(model.get_weights())
    return copy


def fused_qkv(model):
    """`model` with every attention layer a `lm_layers.FusedSelfAttention`
    (query, key and value in one matmul; the same weights, copied)."""
    from kg_service.tasks.language.lm_layers import FusedSelfAttention

    return with_attention(model, FusedSelfAttention)


def gpt2_initialized(model, seed=0):
    """`model` with GPT-2's initializer family (issue 20 §2, a fair equal-loss
    row): every kernel and embedding drawn from N(0, 0.02), as keras-hub's
    GPT2Backbone draws its own (`RandomNormal(stddev=0.02)` for the dense
    kernels, the token and the position embeddings); biases stay zeros and
    LayerNorm scales ones, as in both models already."""
    rng = np.random.default_rng(seed)
    for weight in model.weights:
        if weight.path.rsplit("/", 1)[-1] in ("kernel", "embeddings"):
            weight.assign(rng.normal(0.0, 0.02, weight.shape).astype(weight.dtype))
    return model


CASTS_AROUND = "half-precision casts around the kernel"


@contextlib.contextmanager
def casts_around(enabled):
    """While a model is traced: keras_gelu's kernels get float32 from a
    cast of their own and are cast back after, as before issue 20 §3's
    round 9 (`fusion._in_float32` now casts inside the nested kernel)."""
    from keras_gelu.activations import activations

    elementwise = activations._elementwise
    if enabled:  # a plain function hides `computes_half_in_float32`
        activations._elementwise = lambda x, kernel: elementwise(x, lambda v: kernel(v))
    try:
        yield
    finally:
        activations._elementwise = elementwise
