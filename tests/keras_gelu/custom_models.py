"""A subclassed model for the save/load tests.

It lives in its own module because a fresh process can only rebuild a
subclassed model whose class it can import: test_serialization.py puts
this directory on the subprocess's PYTHONPATH and imports it by name.
"""

import keras

import keras_gelu


@keras.saving.register_keras_serializable(package="keras_gelu_tests")
class GatedResidualModel(keras.Model):
    """x + FFN(GELU(x)), then a learnable leaky ReLU and a SwiGLU head."""

    def __init__(self, hidden_dim=16, activation="geglu", units=4, **kwargs):
        super().__init__(**kwargs)
        self.hidden_dim = hidden_dim
        self.activation = activation
        self.units = units
        self.pre_act = keras_gelu.GELU(approximate="tanh", name="pre_act")
        self.ffn = keras_gelu.FeedForward(
            hidden_dim,
            activation=activation,
            dropout=0.1,
            bias_initializer="random_normal",
            name="ffn",
        )
        self.slope = keras_gelu.LearnableLeakyReLU(
            per_channel=True, name="slope"
        )
        self.head = keras_gelu.SwiGLU(
            units, bias_initializer="random_normal", name="head"
        )

    def call(self, inputs, training=None):
        x = inputs + self.ffn(self.pre_act(inputs), training=training)
        return self.head(self.slope(x))

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "hidden_dim": self.hidden_dim,
            "activation": self.activation,
            "units": self.units,
        }
