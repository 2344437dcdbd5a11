"""The two layers of kg-train's language model that Keras does not have.

Everything else in the model is a Keras layer (`MultiHeadAttention`,
`LayerNormalization`, `Add`) or keras_gelu's (`FeedForward`). These two
follow keras-hub's `PositionEmbedding` and `ReversibleEmbedding` (same
behaviour, same reverse-projection convention), written out here because
the service does not depend on keras-hub.

This file must stay importable with only keras: the registered language
model carries a copy of it (an MLflow code path) and imports it before
loading the `.keras` file in a serving process.
"""

import keras
from keras import ops

# How MultiHeadAttention.call reads a tensor's mask (on JAX it is not an
# attribute of the array); Keras 3.15 has no public alias for it.
from keras.src.backend import get_keras_mask


@keras.saving.register_keras_serializable(package="kg_service")
class PositionEmbedding(keras.layers.Layer):
    """Adds a learned embedding of each position: `x + P[:t]`.

    Args:
        sequence_length: The longest sequence (rows of P).
        initializer: For P; keras-hub's default is glorot_uniform.

    Input shape `(batch, t, d)` with `t <= sequence_length`; output the same.
    """

    def __init__(self, sequence_length, initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        self.sequence_length = int(sequence_length)
        self.initializer = keras.initializers.get(initializer)
        self.supports_masking = True

    def build(self, input_shape):
        self.position_embeddings = self.add_weight(
            name="embeddings",
            shape=(self.sequence_length, input_shape[-1]),
            initializer=self.initializer,
        )

    def call(self, inputs):
        # A gather, not a slice: JAX's SavedModel export traces the length
        # as a symbolic dimension, and a slice's bound check cannot compare it.
        positions = ops.take(
            ops.convert_to_tensor(self.position_embeddings, dtype=inputs.dtype),
            ops.arange(ops.shape(inputs)[1]),
            axis=0,
        )
        return inputs + positions[None]

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {
            **super().get_config(),
            "sequence_length": self.sequence_length,
            "initializer": keras.initializers.serialize(self.initializer),
        }


@keras.saving.register_keras_serializable(package="kg_service")
class ReversibleEmbedding(keras.layers.Embedding):
    """An `Embedding` that can also project back onto the vocabulary.

    `layer(ids)` embeds; `layer(x, reverse=True)` returns the logits
    `x @ E^T`, so the input and output embeddings are one matrix (tied),
    as in GPT-2 and keras-hub's `ReversibleEmbedding`.
    """

    def call(self, inputs, reverse=False):
        if reverse:
            kernel = ops.transpose(ops.convert_to_tensor(self.embeddings, dtype=inputs.dtype))
            return ops.matmul(inputs, kernel)
        return super().call(inputs)

    def compute_output_shape(self, input_shape, reverse=False):
        if reverse:
            return tuple(input_shape[:-1]) + (self.input_dim,)
        return super().compute_output_shape(input_shape)

    def compute_output_spec(self, inputs, reverse=False):
        shape = self.compute_output_shape(inputs.shape, reverse=reverse)
        dtype = self.compute_dtype
        return keras.KerasTensor(shape, dtype=dtype)


@keras.saving.register_keras_serializable(package="kg_service")
class FusedSelfAttention(keras.layers.MultiHeadAttention):
    """Keras' `MultiHeadAttention` whose causal self-attention projects
    query, key and value in one matmul (issue 20 §2).

    `layer(x, x, use_causal_mask=True)` computes

        [q | k | v] = x @ [Wq | Wk | Wv] + [bq | bk | bv]
        y = softmax(q k^T / sqrt(K) + causal) v @ Wo + bo

    as two 2-D matmuls around the same `ops.dot_product_attention(...,
    is_causal=True)` call that MultiHeadAttention makes, instead of four
    EinsumDense layers. Not built by `model.py`: measured with
    `benchmarks/bench_language_model.py` (its fused QKV row), it was 0.88x
    to 1.04x MultiHeadAttention's step on TensorFlow but 1.07x and 1.17x
    on JAX (docs/benchmarks.md, issue 20 §2), so the model keeps Keras'
    layer; switching is one line in `model.py`. The weights are
    MultiHeadAttention's own (the same variables, names, shapes and order),
    so a saved model, the stacked model (`stacked.py` matches
    MultiHeadAttention along the MRO) and the attention-entropy probe read
    them unchanged. Every other call (cross-attention, a mask, dropout in
    training, `return_attention_scores=True`, a gate, a sliding window,
    quantized kernels) is MultiHeadAttention's own path.

    Args: as `keras.layers.MultiHeadAttention`.

    Example:

    >>> layer = FusedSelfAttention(num_heads=2, key_dim=4)
    >>> x = np.ones((1, 3, 8), "float32")
    >>> layer(x, x, use_causal_mask=True).shape
    (1, 3, 8)
    """

    def call(self, query, value, key=None, query_mask=None, value_mask=None, key_mask=None,
             attention_mask=None, return_attention_scores=False, training=None,
             use_causal_mask=False):
        if self._fusable(query, value, key, query_mask, value_mask, key_mask, attention_mask,
                         return_attention_scores, training, use_causal_mask):
            return self._fused_causal(query)
        return super().call(
            query, value, key=key, query_mask=query_mask, value_mask=value_mask,
            key_mask=key_mask, attention_mask=attention_mask,
            return_attention_scores=return_attention_scores, training=training,
            use_causal_mask=use_causal_mask,
        )

    def _fusable(self, query, value, key, query_mask, value_mask, key_mask, attention_mask,
                 return_attention_scores, training, use_causal_mask):
        return (
            use_causal_mask
            and value is query
            and (key is None or key is query)
            and query_mask is None and value_mask is None and key_mask is None
            and attention_mask is None
            and get_keras_mask(query) is None
            and not return_attention_scores
            and (self.dropout == 0 or not training)
            and not self._use_gate
            and self._sliding_window is None
            and len(query.shape) == 3
            and self.query_dense.quantization_mode is None
        )

    def _fused_causal(self, x):
        projections = (self.query_dense, self.key_dense, self.value_dense)
        d = x.shape[-1]
        widths = [self.num_heads * self.key_dim] * 2 + [self.num_heads * self.value_dim]
        kernel = ops.concatenate(
            [ops.reshape(p.kernel, (d, w)) for p, w in zip(projections, widths)], axis=-1
        )
        shape = ops.shape(x)
        # 2-D matmuls, (batch * t, d) @ (d, n): TensorFlow runs a 3-D @ 2-D
        # matmul as a broadcast batched one (1.8x this layer's step time).
        y = ops.matmul(ops.reshape(x, (-1, d)), ops.cast(kernel, x.dtype))
        if self.use_bias:
            bias = ops.concatenate([ops.reshape(p.bias, (w,)) for p, w in zip(projections, widths)])
            y = y + ops.cast(bias, y.dtype)
        q, k, v = ops.split(y, [widths[0], widths[0] + widths[1]], axis=-1)
        rows = (shape[0], shape[1], self.num_heads)
        out = ops.dot_product_attention(
            ops.reshape(q, rows + (self.key_dim,)),
            ops.reshape(k, rows + (self.key_dim,)),
            ops.reshape(v, rows + (self.value_dim,)),
            scale=self._inverse_sqrt_key_dim,
            is_causal=True,
            flash_attention=self._flash_attention,
        )
        kernel = ops.reshape(self.output_dense.kernel, (widths[2], d))
        y = ops.matmul(ops.reshape(out, (-1, widths[2])), ops.cast(kernel, out.dtype))
        if self.use_bias:
            y = y + ops.cast(self.output_dense.bias, y.dtype)
        return ops.reshape(y, (shape[0], shape[1], d))
