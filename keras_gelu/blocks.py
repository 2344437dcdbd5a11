"""Feed-forward blocks built from keras_gelu's layers."""

import keras

from keras_gelu import activations
from keras_gelu import layers
import keras_gelu_names as name_table
from keras_gelu.layers.arguments import check_units
from keras_gelu.layers.arguments import clone_initializer
from keras_gelu.serialization import register


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
    activation = activations.gated_name(activation) or activation
    key = name_table.lookup(activation) if isinstance(activation, str) else None
    if key is not None:
        entry = name_table.kind(key)
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

    With a gated activation (`"geglu"`, `"geglu_tanh"`, `"swiglu"`,
    `"reglu"`, `"glu"`, `"bilinear"`) the up projection is a fused
    value+gate `GLU` (kernel `[V | W]`), giving Shazeer's gated FFN
    (https://arxiv.org/abs/2002.05202): `((x V) * act(x W)) W2`. Weights
    stored as separate gate, up and down matrices (keras-hub's Gemma and
    Llama, Hugging Face) load with `set_gated_weights`.

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
        kernel_initializer, bias_initializer: For every projection; each
            projection gets its own clone (a seeded initializer gives the
            up projection `seed` and the down projection `seed + 1`).
        **kwargs: Base layer keyword arguments.

    Masks pass through unchanged (`supports_masking`).

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
        check_units(hidden_dim, "FeedForward", arg="hidden_dim")
        check_units(
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
            activation = name_table.lookup(activation) or activation
        self.hidden_dim = hidden_dim
        self.activation = activation
        self.output_dim = output_dim
        self.dropout = float(dropout)
        self.use_bias = use_bias
        self.match_params = match_params
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)

        self.supports_masking = True
        self.is_gated = (
            isinstance(activation, str)
            and name_table.lookup(activation) in name_table.names("gated")
        )
        self.inner_dim = (
            matched_hidden_dim(hidden_dim)
            if (match_params and self.is_gated)
            else hidden_dim
        )
        self.hidden_layers = projection_layers(
            self.inner_dim,
            activation if isinstance(activation, str) else activations.get(activation),
            name="up_proj",
            dtype=self.dtype_policy,
            **self._dense_kwargs(seed_offset=0),
        )
        self.dropout_layer = keras.layers.Dropout(
            self.dropout, dtype=self.dtype_policy, name="dropout"
        )
        self.down_proj = None

    def _dense_kwargs(self, seed_offset):
        return dict(
            use_bias=self.use_bias,
            kernel_initializer=clone_initializer(
                self.kernel_initializer, seed_offset
            ),
            bias_initializer=clone_initializer(
                self.bias_initializer, seed_offset
            ),
        )

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
            out_dim,
            dtype=self.dtype_policy,
            name="down_proj",
            **self._dense_kwargs(seed_offset=1),
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

    def set_gated_weights(
        self,
        gate_kernel,
        up_kernel,
        down_kernel,
        gate_bias=None,
        up_bias=None,
        down_bias=None,
    ):
        """Loads a gated FFN stored as separate gate, up and down matrices.

        `out = (act(x @ gate_kernel) * (x @ up_kernel)) @ down_kernel`, the
        layout of keras-hub's Gemma (`ffw_gating`, `ffw_gating_2`,
        `ffw_linear`) and Llama (`feedforward_gate_dense`,
        `feedforward_intermediate_dense`, `feedforward_output_dense`)
        decoder blocks and of Hugging Face's `gate_proj`, `up_proj`,
        `down_proj` (transpose PyTorch `nn.Linear` weights first). Build
        the block with the matching activation (`"geglu_tanh"` for Gemma,
        `"swiglu"` for Llama), `hidden_dim` = the intermediate width and
        `use_bias` as the source has it.

        Args:
            gate_kernel, up_kernel: `(input_dim, hidden)` arrays.
            down_kernel: `(hidden, output_dim)` array.
            gate_bias, up_bias, down_bias: `(hidden,)`, `(hidden,)`,
                `(output_dim,)` arrays, with `use_bias=True` only.

        Raises:
            ValueError: if the activation is not gated, or a shape or a
                bias does not fit.

        Example:

        >>> import numpy as np, keras_gelu
        >>> ffn = keras_gelu.FeedForward(8, activation="swiglu", use_bias=False)
        >>> gate, up, down = np.ones((4, 8)), np.ones((4, 8)), np.ones((8, 4))
        >>> ffn.set_gated_weights(gate, up, down)
        """
        if not self.is_gated:
            raise ValueError(
                f"keras_gelu: set_gated_weights needs a gated activation "
                f"({', '.join(name_table.names('gated'))}); this FeedForward has "
                f"activation={self.activation!r}."
            )
        down_kernel = keras.ops.convert_to_numpy(down_kernel)
        if not self.built:
            input_dim = keras.ops.convert_to_numpy(gate_kernel).shape[0]
            if self.output_dim is None and down_kernel.shape[-1] != input_dim:
                raise ValueError(
                    f"keras_gelu: FeedForward(output_dim=None) keeps the input "
                    f"width {input_dim}, but down_kernel has shape "
                    f"{down_kernel.shape}. Pass output_dim={down_kernel.shape[-1]}."
                )
            self.build((None, input_dim))
        (glu,) = self.hidden_layers
        glu.set_value_gate_weights(up_kernel, gate_kernel, up_bias, gate_bias)
        down = [down_kernel] + (
            [keras.ops.convert_to_numpy(down_bias)] if down_bias is not None else []
        )
        expected = [tuple(w.shape) for w in self.down_proj.weights]
        if [tuple(w.shape) for w in down] != expected:
            raise ValueError(
                f"keras_gelu: FeedForward's down projection has weights of "
                f"shapes {expected}; received {[tuple(w.shape) for w in down]}."
            )
        self.down_proj.set_weights(down)

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
