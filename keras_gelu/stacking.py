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

import functools

import keras
import numpy as np
from keras import ops

from keras_gelu import activations
from keras_gelu import blocks
from keras_gelu import layers as kg_layers
from keras_gelu.member_ops import apply_per_member
from keras_gelu.member_ops import member_matmul
from keras_gelu.member_ops import member_runs
from keras_gelu.serialization import register


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
        activation: A callable or Keras name applied to the output, or a
            list of M of them, member m's (`apply_per_member`): members
            of different activations in one stack.
        use_bias: Whether each member has a bias.
        **kwargs: Base layer keyword arguments (`name`, `dtype`).
    """

    def __init__(self, members, units, activation=None, use_bias=True, **kwargs):
        super().__init__(**kwargs)
        self.members = members
        self.units = units
        if isinstance(activation, (list, tuple)):
            self.activations = [keras.activations.get(a) for a in activation]
            self.activation = None
        else:
            self.activation = keras.activations.get(activation)
            self.activations = [self.activation] * members
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
        return apply_per_member(x, self.activations)

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


@register
class StackedGates(keras.layers.Layer):
    """M gated units' splits, member m's with its own gate.

    `activations.gated(x[:, m], gates[m], axis)` for every member m (value
    half times `gate(gate half)`), through `apply_per_member`: the stacked
    form of GLUs that differ only in their gate (GLU, Bilinear, ReGLU,
    GEGLU, SwiGLU over one fused projection). No weights.

    Args:
        gates: M gate functions (or names), member m's.
        axis: The split axis of the stacked input (one right of the plain
            layer's, for a non-negative one).
    """

    def __init__(self, gates, axis=-1, **kwargs):
        super().__init__(**kwargs)
        self.gates = [activations.get(g) for g in gates]
        self.axis = axis
        self.supports_masking = True
        # One function object per distinct gate: a run of members is one call.
        split = {
            id(g): functools.partial(activations.gated, gate=g, axis=axis) for g in self.gates
        }
        self._per_member = [split[id(g)] for g in self.gates]

    def call(self, inputs):
        return apply_per_member(inputs, self._per_member)

    def compute_output_shape(self, input_shape):
        shape = list(input_shape)
        if shape[self.axis] is not None:
            shape[self.axis] //= 2
        return tuple(shape)

    def get_config(self):
        return {
            **super().get_config(),
            "gates": [keras.activations.serialize(g) for g in self.gates],
            "axis": self.axis,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["gates"] = [keras.activations.deserialize(g) for g in config["gates"]]
        return cls(**config)


def _same(layers, what, *keys):
    """Raises unless every member's layer has the first one's class, dtype
    policy and `keys` (what fixes its weights' shapes): members of one
    stack may differ in their activation, nothing else."""
    first = layers[0]

    def facts(layer):
        return (type(layer), layer.dtype_policy.name) + tuple(getattr(layer, k) for k in keys)

    for layer in layers[1:]:
        if facts(layer) != facts(first):
            raise ValueError(
                f"keras_gelu.stacking: the members' {what} layers differ in more "
                f"than their activation ({first.name}: {facts(first)}; "
                f"{layer.name}: {facts(layer)}): not one architecture."
            )


def _per_member(functions):
    """One function for all members, or the list of M when they differ."""
    return functions[0] if len(member_runs(functions)) == 1 else list(functions)


def _stack_dense(layers, members):
    _same(layers, "Dense", "units", "use_bias")
    layer = layers[0]
    return StackedDense(
        members,
        layer.units,
        activation=_per_member([l.activation for l in layers]),
        use_bias=layer.use_bias,
        name=layer.name,
        dtype=layer.dtype_policy,
    )


def _stack_glu(layers, members):
    _same(layers, "GLU", "units", "use_bias", "axis")
    layer = layers[0]
    gates = [l.activation for l in layers]
    if layer.units is None:  # no weights: split, one axis further right
        config = layer.get_config()
        if config["axis"] >= 1:
            config["axis"] += 1
        if len(member_runs(gates)) == 1:
            return type(layer).from_config(config)
        return StackedGates(gates, axis=config["axis"], name=layer.name,
                            dtype=layer.dtype_policy)
    # The fused [value | gate] projection per member, then the same split.
    split = (
        kg_layers.GLU(activation=layer.activation, dtype=layer.dtype_policy)
        if len(member_runs(gates)) == 1
        else StackedGates(gates, dtype=layer.dtype_policy)
    )
    return keras.Sequential(
        [
            StackedDense(
                members,
                2 * layer.units,
                use_bias=layer.use_bias,
                name="value_gate_proj",
                dtype=layer.dtype_policy,
            ),
            split,
        ],
        name=layer.name,
    )


def _stack_leaky(layers, members):
    configs = [{k: v for k, v in l.get_config().items() if k != "name"} for l in layers]
    if any(c != configs[0] for c in configs[1:]):
        raise ValueError(
            "keras_gelu.stacking: the members' LearnableLeakyReLU layers differ "
            "in their configs; only stateless activations may differ in a stack."
        )
    layer = layers[0]
    return StackedLearnableLeakyReLU(
        members, layer.get_config(), name=layer.name, dtype=layer.dtype_policy
    )


def _stack_feedforward(layers, members):
    # FeedForward.call's order: hidden layers, dropout, down projection.
    if any(layer.down_proj is None for layer in layers):
        raise ValueError(
            "keras_gelu.stacking: build the FeedForward (call it once) "
            "before stacking it: its down projection's width comes from "
            "its input."
        )
    sublayers = [[*l.hidden_layers, l.dropout_layer, l.down_proj] for l in layers]
    if len({len(s) for s in sublayers}) != 1:
        raise ValueError(
            "keras_gelu.stacking: the members' FeedForward blocks have "
            "different sub-layers (a plain, a gated or a learnable "
            "activation's): not one architecture."
        )
    return keras.Sequential(
        [stack(list(parts), members) for parts in zip(*sublayers)], name=layers[0].name
    )


def _stack_activation(layers, members):
    layer = layers[0]
    return StackedActivation(
        [l.activation for l in layers], name=layer.name, dtype=layer.dtype_policy
    )


@register
class StackedActivation(keras.layers.Layer):
    """`keras.layers.Activation` with member m's function on member m
    (`apply_per_member`); no weights."""

    def __init__(self, functions, **kwargs):
        super().__init__(**kwargs)
        self.functions = [keras.activations.get(f) for f in functions]
        self.supports_masking = True

    def call(self, inputs):
        return apply_per_member(inputs, self.functions)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {
            **super().get_config(),
            "functions": [keras.activations.serialize(f) for f in self.functions],
        }


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

    Members may differ in a stateless activation (issue 20: activations x
    seeds in one stack): pass `layer` as a list of M layers, member m's,
    of one architecture (the same weights' shapes), e.g. the FFNs of a
    ReLU, a GELU and a Swish model, or of GLU, ReGLU and SwiGLU ones at
    one width. Member m then applies its own layer's activation
    (`apply_per_member`).

    Args:
        layer: A Keras or keras_gelu layer (built, for FeedForward), or a
            list of `members` such layers, one per member.
        members: Positive int M.

    Returns:
        A `keras.layers.Layer`.

    Raises:
        ValueError: for a layer with weights that has no stacked form, or
            member layers that differ in more than their activation.
    """
    layers = list(layer) if isinstance(layer, (list, tuple)) else [layer] * members
    if len(layers) != members:
        raise ValueError(
            f"keras_gelu.stacking: {len(layers)} member layers for {members} members."
        )
    first = layers[0]
    for cls in type(first).__mro__:
        stacker = _STACKERS.get(cls)
        if stacker is not None:
            return stacker(layers, members)
    if first.weights:
        raise ValueError(
            f"keras_gelu.stacking: no stacked form for {type(first).__name__} "
            f"(it has weights). Stackable layers with weights: "
            f"{', '.join(sorted(c.__name__ for c in _STACKERS))}."
        )
    config = first.get_config()
    differing = [
        l for l in layers[1:]
        if type(l) is not type(first) or {**l.get_config(), "name": config["name"]} != config
    ]
    if not differing:
        return type(first).from_config(config)
    if isinstance(first, keras.layers.Activation) and all(
        type(l) is type(first) for l in layers
    ):
        return _stack_activation(layers, members)
    raise ValueError(
        f"keras_gelu.stacking: the members' {type(first).__name__} layers "
        f"({first.name}) differ in their configs; only an activation may differ."
    )


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
