"""Feed-forward blocks built from keras_gelu's layers."""

import keras

from keras_gelu import activations
from keras_gelu import layers
from keras_gelu.activations import register


def projection_layers(units, activation, name="proj", dtype=None, **dense_kwargs):
    """Returns the layers of one activated projection to `units` features.

    One mechanism for every kind of activation in the name table:

    - elementwise (`gelu`, `relu`...): `[Dense(units, activation=f)]`;
    - gated (`geglu`, `swiglu`...): `[GLU(units, activation=gate)]`, one
      fused gate+value projection;
    - layer (`learnable_leaky_relu`): `[Dense(units), LearnableLeakyReLU()]`.

    Args:
        units: Positive int, the output width.
        activation: A name from `keras_gelu.names()`, a Keras name, or a
            callable (treated as elementwise).
        name: Name of the projection layer; an activation layer gets
            `name + "_activation"`.
        dtype: Dtype policy for the layers.
        **dense_kwargs: Passed to the projection (`use_bias`,
            `kernel_initializer`...).

    Returns:
        A list of one or two layers, applied in order.
    """
    entry = "elementwise"
    activation = activations.gated_name(activation) or activation
    if isinstance(activation, str) and activation.lower().replace("-", "_") in (
        activations.ACTIVATIONS
    ):
        key = activations.standardize_name(activation)
        entry = activations.kind(key)
        if entry == "gated":
            return [
                layers.GLU(
                    units,
                    activation=activations.gate_function(key),
                    name=name,
                    dtype=dtype,
                    **dense_kwargs,
                )
            ]
        if entry == "layer":
            return [
                keras.layers.Dense(units, name=name, dtype=dtype, **dense_kwargs),
                getattr(layers, activations.ACTIVATIONS[key][1])(
                    name=f"{name}_activation", dtype=dtype
                ),
            ]
    return [
        keras.layers.Dense(
            units,
            activation=activations.get(activation),
            name=name,
            dtype=dtype,
            **dense_kwargs,
        )
    ]


def matched_hidden_dim(hidden_dim):
    """Hidden width of a gated FFN with the parameters of a plain one.

    A gated FFN has three d x h matrices instead of two, so h shrinks to
    2/3, rounded to a multiple of 8 (Shazeer 2020: 3072 -> 2048).
    """
    return max(8, int(round(hidden_dim * 2 / 3 / 8)) * 8)


@register
class FeedForward(keras.layers.Layer):
    """Transformer feed-forward block: `down(dropout(act(up(x))))`.

    With a gated activation (`"geglu"`, `"swiglu"`, `"reglu"`, `"glu"`,
    `"bilinear"`) the up projection is a fused gate+value `GLU`, giving
    Shazeer's gated FFN: `(act(x W) * x V) W2`.

    Args:
        hidden_dim: Positive int, the hidden width.
        activation: Any name in `keras_gelu.names()`, a Keras activation
            name or a callable. Default `"gelu"` (exact).
        output_dim: Output width; `None` keeps the input width.
        dropout: Dropout rate on the hidden activations, in [0, 1).
        use_bias: Whether the projections have biases.
        match_params: If True and the activation is gated, use
            `matched_hidden_dim(hidden_dim)` (2/3, multiple of 8) so the
            block has the weight-matrix parameters of a plain FFN.
        kernel_initializer, bias_initializer: For every projection.
        **kwargs: Base layer keyword arguments.

    Raises:
        ValueError: for a non-positive `hidden_dim`/`output_dim`, a dropout
            rate outside [0, 1) or an unknown activation name.

    Example:

    >>> import keras, keras_gelu
    >>> ffn = keras_gelu.FeedForward(64, activation="swiglu", match_params=True)
    >>> ffn(keras.ops.ones((2, 16))).shape
    (2, 16)
    """

    def __init__(
        self,
        hidden_dim,
        activation="gelu",
        output_dim=None,
        dropout=0.0,
        use_bias=True,
        match_params=False,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        layers._check_units(hidden_dim, "FeedForward", arg="hidden_dim")
        layers._check_units(
            output_dim, "FeedForward", allow_none=True, arg="output_dim"
        )
        if isinstance(dropout, bool) or not (
            isinstance(dropout, (int, float)) and 0 <= dropout < 1
        ):
            raise ValueError(
                "keras_gelu: FeedForward expects `dropout` in [0, 1); "
                f"received dropout={dropout!r}."
            )
        activation = activations.gated_name(activation) or activation
        if isinstance(activation, str):
            activations.get(activation)  # Unknown names fail here, early.
        self.hidden_dim = hidden_dim
        self.activation = activation
        self.output_dim = output_dim
        self.dropout = float(dropout)
        self.use_bias = use_bias
        self.match_params = match_params
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)

        self.is_gated = isinstance(activation, str) and (
            activation.lower().replace("-", "_") in activations.ACTIVATIONS
            and activations.kind(activation) == "gated"
        )
        self.inner_dim = (
            matched_hidden_dim(hidden_dim)
            if (match_params and self.is_gated)
            else hidden_dim
        )
        dense_kwargs = dict(
            use_bias=use_bias,
            kernel_initializer=kernel_initializer,
            bias_initializer=bias_initializer,
        )
        self.hidden_layers = projection_layers(
            self.inner_dim,
            activation if isinstance(activation, str) else activations.get(activation),
            name="up_proj",
            dtype=self.dtype_policy,
            **dense_kwargs,
        )
        self.dropout_layer = keras.layers.Dropout(
            self.dropout, dtype=self.dtype_policy, name="dropout"
        )
        self._dense_kwargs = dense_kwargs
        self.down_proj = None

    def build(self, input_shape):
        shape = tuple(input_shape)
        for layer in self.hidden_layers:
            layer.build(shape)
            shape = layer.compute_output_shape(shape)
        out_dim = self.output_dim or input_shape[-1]
        if out_dim is None:
            raise ValueError(
                "keras_gelu: FeedForward(output_dim=None) keeps the input "
                f"width, but the input shape {tuple(input_shape)} has an "
                "unknown last axis. Pass output_dim."
            )
        self.down_proj = keras.layers.Dense(
            out_dim, dtype=self.dtype_policy, name="down_proj", **self._dense_kwargs
        )
        self.down_proj.build(shape)

    def call(self, inputs, training=None):
        x = inputs
        for layer in self.hidden_layers:
            x = layer(x)
        x = self.dropout_layer(x, training=training)
        return self.down_proj(x)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.output_dim or input_shape[-1],)

    def get_config(self):
        activation = self.activation
        if not isinstance(activation, str):
            activation = keras.activations.serialize(activations.get(activation))
        return {
            **super().get_config(),
            "hidden_dim": self.hidden_dim,
            "activation": activation,
            "output_dim": self.output_dim,
            "dropout": self.dropout,
            "use_bias": self.use_bias,
            "match_params": self.match_params,
            "kernel_initializer": keras.initializers.serialize(
                self.kernel_initializer
            ),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("activation"), dict):
            config["activation"] = keras.activations.deserialize(
                config["activation"]
            )
        return cls(**config)
