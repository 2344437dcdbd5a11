"""M independent copies of a layer, as one layer: for vectorized ensembles.

Training M seeds of a small network one after another pays the per-step
overhead M times; stacked, the M members share one step. `stack(layer,
members)` returns a layer that computes `layer` for M independent members
on an input `(batch, M, ...)`, member m on `x[:, m]`, with every weight
given a leading M axis. Its weights line up index by index with
`layer.weights`, so `stack_weights` / `unstack_weights` copy M plain
layers (or models) into the stacked one and back.

keras_gelu owns this because it owns its layers' internals (FeedForward's
sub-layers and their order, LearnableLeakyReLU's slope shapes): a change
there changes the stacked form here, and `tests/keras_gelu/test_stacking.py`
checks every layer against M plain copies.

Example:

>>> import keras, numpy as np, keras_gelu
>>> from keras_gelu import stacking
>>> plain = [keras_gelu.FeedForward(8, activation="geglu") for _ in range(3)]
>>> x = np.ones((2, 3, 4), "float32")
>>> _ = [layer(x[:, m]) for m, layer in enumerate(plain)]
>>> stacked = stacking.stack(plain[0], members=3)
>>> _ = stacked(x)
>>> stacking.stack_weights(stacked, plain)
"""

import keras
import numpy as np
from keras import ops

from keras_gelu import blocks
from keras_gelu import layers as kg_layers
from keras_gelu.serialization import register


def member_matmul(x, kernel):
    """`x[:, m] @ kernel[m]` for every member m, in one op.

    Args:
        x: `(batch, M, ..., in)`.
        kernel: `(M, in, out)`.

    Returns:
        `(batch, M, ..., out)`.

    Why not `einsum("bm...i,mio->bm...o")`: TensorFlow 2.21 runs an
    einsum with an ellipsis far off its matmul. On TensorFlow the members go
    to the front, `(M, batch * ..., in)`, for one batched matmul with
    plain 2-D gradients, and back: an 8-member stacked language model's
    training step took 0.60x the time of the same model with a broadcast
    `x @ kernel[None]` (whose kernel gradient is a `(batch, M, in, out)`
    product summed over the batch) and 0.30x that with the ellipsis
    einsum (issue 20, `benchmarks/bench_language_model.py --step`,
    docs/benchmarks.md). Elsewhere the einsum spelled out (XLA makes one
    dot of it on JAX).
    """
    rank = len(x.shape)
    if rank >= 4 and keras.backend.backend() == "tensorflow":
        shape = ops.shape(x)
        members, width = kernel.shape[0], kernel.shape[-1]
        front = ops.transpose(x, (1, 0) + tuple(range(2, rank)))
        y = ops.matmul(ops.reshape(front, (members, -1, x.shape[-1])), kernel)
        y = ops.reshape(y, (members, shape[0]) + tuple(shape[2:-1]) + (width,))
        return ops.transpose(y, (1, 0) + tuple(range(2, rank)))
    middle = "cdefghjkl"[: rank - 3]
    return ops.einsum(f"bm{middle}i,mio->bm{middle}o", x, kernel)


# Registered: a saved stacked model loads without custom_objects (issue 15:
# Keras's run_layer_test round trip could not find these classes).
@register
class StackedDense(keras.layers.Layer):
    """M independent `Dense` layers: `y[b, m] = act(x[b, m] @ W[m] + c[m])`.

    Input `(batch, M, ..., in)`, output `(batch, M, ..., units)`. The kernel is
    `(M, in, units)`, the bias `(M, units)`; their initial values are
    placeholders for `stack_weights`.

    Args:
        members: Positive int M, the size of axis 1 of the input.
        units: Output width of every member.
        activation: A callable or Keras name applied to the output.
        use_bias: Whether each member has a bias.
        **kwargs: Base layer keyword arguments (`name`, `dtype`).
    """

    def __init__(self, members, units, activation=None, use_bias=True, **kwargs):
        super().__init__(**kwargs)
        self.members = members
        self.units = units
        self.activation = keras.activations.get(activation)
        self.use_bias = use_bias

    def build(self, input_shape):
        self.kernel = self.add_weight(
            name="kernel",
            shape=(self.members, input_shape[-1], self.units),
            # Zeros, not a random draw: placeholders, and on JAX every new
            # shape of a random initializer is one more XLA compile (~1 s
            # a shape on this CPU, issue 20).
            initializer="zeros",
        )
        self.bias = None
        if self.use_bias:
            self.bias = self.add_weight(
                name="bias", shape=(self.members, self.units), initializer="zeros"
            )

    def call(self, inputs):
        x = member_matmul(inputs, self.kernel)
        if self.bias is not None:
            middle = (1,) * (len(inputs.shape) - 3)
            x = x + ops.reshape(self.bias, (self.members,) + middle + (self.units,))
        return self.activation(x)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.units,)


@register
class StackedLearnableLeakyReLU(keras.layers.Layer):
    """M independent `LearnableLeakyReLU` layers of one config.

    Member m's slope has the plain layer's slope shape; the weight is
    `(M, *slope_shape)`.
    """

    def __init__(self, members, plain_config, **kwargs):
        super().__init__(**kwargs)
        self.members = members
        self.plain = kg_layers.LearnableLeakyReLU.from_config(plain_config)

    def build(self, input_shape):
        member_shape = (input_shape[0],) + tuple(input_shape[2:])
        self.slope_shape = self.plain.slope_shape(member_shape)
        self.slope = self.add_weight(
            name="slope",
            shape=(self.members,) + self.slope_shape,
            initializer=keras.initializers.Constant(self.plain.initial_slope),
            regularizer=self.plain.slope_regularizer,
            constraint=self.plain.slope_constraint,
        )

    def call(self, inputs):
        # A plain slope broadcasts against (batch, *rest) from the right;
        # put member m's on axis 1 with the same alignment.
        rest = len(inputs.shape) - 2
        shape = (self.members,) + (1,) * (rest - len(self.slope_shape))
        slope = ops.reshape(self.slope, shape + self.slope_shape)
        return kg_layers.leaky(inputs, slope)

    def compute_output_shape(self, input_shape):
        return input_shape


def _stack_dense(layer, members):
    return StackedDense(
        members,
        layer.units,
        activation=layer.activation,
        use_bias=layer.use_bias,
        name=layer.name,
        dtype=layer.dtype_policy,
    )


def _stack_glu(layer, members):
    if layer.units is None:  # no weights: split, one axis further right
        config = layer.get_config()
        if config["axis"] >= 1:
            config["axis"] += 1
        return type(layer).from_config(config)
    # The fused [value | gate] projection per member, then the same split.
    return keras.Sequential(
        [
            StackedDense(
                members,
                2 * layer.units,
                use_bias=layer.use_bias,
                name="value_gate_proj",
                dtype=layer.dtype_policy,
            ),
            kg_layers.GLU(activation=layer.activation, dtype=layer.dtype_policy),
        ],
        name=layer.name,
    )


def _stack_leaky(layer, members):
    return StackedLearnableLeakyReLU(
        members, layer.get_config(), name=layer.name, dtype=layer.dtype_policy
    )


def _stack_feedforward(layer, members):
    # FeedForward.call's order: hidden layers, dropout, down projection.
    sublayers = [*layer.hidden_layers, layer.dropout_layer, layer.down_proj]
    if layer.down_proj is None:
        raise ValueError(
            "keras_gelu.stacking: build the FeedForward (call it once) "
            "before stacking it: its down projection's width comes from "
            "its input."
        )
    return keras.Sequential(
        [stack(sublayer, members) for sublayer in sublayers], name=layer.name
    )


# One line per layer class with weights: class -> stacked form. Classes
# are matched along the MRO, so GEGLU and SwiGLU use GLU's line.
_STACKERS = {
    keras.layers.Dense: _stack_dense,
    kg_layers.GLU: _stack_glu,
    kg_layers.LearnableLeakyReLU: _stack_leaky,
    blocks.FeedForward: _stack_feedforward,
}


def stack(layer, members):
    """A layer computing `layer` for `members` independent members.

    Input `(batch, members, ...)` where `layer` takes `(batch, ...)`;
    member m's output is `layer` with member m's weights applied to
    `x[:, m]`. Layers without weights (activations, Dropout, Add,
    Normalization with given statistics...) are copied from their config:
    they act on every member alike. The stacked layer's weights are
    placeholders until `stack_weights`.

    Args:
        layer: A Keras or keras_gelu layer (built, for FeedForward).
        members: Positive int M.

    Returns:
        A `keras.layers.Layer`.

    Raises:
        ValueError: for a layer with weights that has no stacked form.
    """
    for cls in type(layer).__mro__:
        stacker = _STACKERS.get(cls)
        if stacker is not None:
            return stacker(layer, members)
    if layer.weights:
        raise ValueError(
            f"keras_gelu.stacking: no stacked form for {type(layer).__name__} "
            f"(it has weights). Stackable layers with weights: "
            f"{', '.join(sorted(c.__name__ for c in _STACKERS))}."
        )
    return type(layer).from_config(layer.get_config())


def _weight_pairs(stacked, plain):
    """Yields (stacked variable, [plain variables]) after checking shapes."""
    members = len(plain)
    plain_lists = [p.weights for p in plain]
    stacked_weights = stacked.weights
    if any(len(weights) != len(stacked_weights) for weights in plain_lists):
        raise ValueError(
            f"keras_gelu.stacking: the stacked layer has {len(stacked_weights)} "
            f"weights, the plain ones have "
            f"{sorted({len(w) for w in plain_lists})}: not the same architecture."
        )
    for i, variable in enumerate(stacked_weights):
        variables = [weights[i] for weights in plain_lists]
        shape = tuple(variables[0].shape)
        # Size-1 axes may differ (a scalar slope is (M, 1) in some stacks).
        expected = [d for d in shape if d != 1]
        if (
            any(tuple(v.shape) != shape for v in variables)
            or variable.shape[0] != members
            or [d for d in variable.shape[1:] if d != 1] != expected
        ):
            raise ValueError(
                f"keras_gelu.stacking: weight {i} ({variable.path}) has stacked "
                f"shape {tuple(variable.shape)}, which does not hold {members} "
                f"plain weights of shape {shape} ({variables[0].path})."
            )
        yield variable, variables


def stack_weights(stacked, plain):
    """Copies M plain layers' (or models') weights into the stacked one.

    Args:
        stacked: `stack(layer, M)`, or a model built from stacked layers.
        plain: A list of M layers or models of the same configuration.

    Raises:
        ValueError: if the weight lists or shapes do not line up.
    """
    for variable, variables in _weight_pairs(stacked, plain):
        values = np.stack([ops.convert_to_numpy(v) for v in variables])
        variable.assign(values.reshape(variable.shape))


def unstack_weights(stacked, plain):
    """Copies member m of the stacked layer (or model) back into `plain[m]`.

    Args and errors as for `stack_weights`.
    """
    for variable, variables in _weight_pairs(stacked, plain):
        values = ops.convert_to_numpy(variable)
        for m, target in enumerate(variables):
            target.assign(values[m].reshape(target.shape))
