"""The GELU activation layer."""

import keras

from keras_gelu import activations
from keras_gelu.serialization import register


@register
class GELU(keras.layers.Layer):
    """GELU activation layer, `x * Phi(x)` in the chosen mode.

    Args:
        approximate: `"none"` (exact erf), `"tanh"` or `"sigmoid"`.
            Unknown modes raise a `ValueError` naming the valid ones.
        **kwargs: Base layer keyword arguments (`name`, `dtype`...).

    Example:

    >>> import keras, keras_gelu
    >>> layer = keras_gelu.GELU(approximate="tanh")
    >>> y = layer(keras.ops.ones((2, 3)))
    """

    def __init__(self, approximate="none", **kwargs):
        super().__init__(**kwargs)
        self.approximate = activations.standardize_approximate(approximate)
        self.supports_masking = True
        self.built = True

    def call(self, inputs):
        return activations.gelu(inputs, approximate=self.approximate)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "approximate": self.approximate}
