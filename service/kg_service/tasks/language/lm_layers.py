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
