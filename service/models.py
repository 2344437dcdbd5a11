"""The network every activation is trained in: one builder, two layer sets.

`build_model` writes the architecture once, over a small set of primitive
layers:

- `_PLAIN`: the model users get, from keras_gelu's own layers
  (`keras_gelu.projection_layers`, `keras_gelu.FeedForward`), mapping
  `(batch, features)` to class probabilities `(batch, classes)`;
- `_Stacked(members)`: the same network for M independent members at
  once, `(batch, M, features) -> (batch, M, classes)`, every weight with a
  leading M axis (a kernel is `(M, in, out)`, applied with
  `einsum("bmi,mio->bmo")`). On a CPU a step of 10 stacked members
  costs about twice a step of one model: the per-step overhead is shared.

Both layer sets create their weights in the same order, so
`stack_weights`/`unstack_weights` copy M plain models into the stacked
one and back, index by index. Both may start with the same
`keras.layers.Normalization` (constants, no weights: nothing to pair), so
the model takes raw features and standardizes them itself.
"""

import functools

import keras
import numpy as np
from keras import ops

import keras_gelu
from keras_gelu import activations as kg_activations
from service.errors import ServiceError

# --- Stacked primitives: keras.ops only, so every backend runs them. -------


class StackedDense(keras.layers.Layer):
    """M independent `Dense` layers: `y[b, m] = act(x[b, m] @ W[m] + c[m])`.

    Input `(batch, M, in)`, output `(batch, M, units)`. The kernel is
    `(M, in, units)`, the bias `(M, units)`; their initial values are
    placeholders for `stack_weights`.

    Args:
        members: Positive int M, the size of axis 1 of the input.
        units: Output width of every member.
        activation: A callable or Keras name applied to the output.
        **kwargs: Base layer keyword arguments (`name`, `dtype`).
    """

    def __init__(self, members, units, activation=None, **kwargs):
        super().__init__(**kwargs)
        self.members = members
        self.units = units
        self.activation = keras.activations.get(activation)

    def build(self, input_shape):
        self.kernel = self.add_weight(
            name="kernel",
            shape=(self.members, input_shape[-1], self.units),
            initializer="glorot_uniform",
        )
        self.bias = self.add_weight(
            name="bias", shape=(self.members, self.units), initializer="zeros"
        )

    def call(self, inputs):
        x = ops.einsum("bmi,mio->bmo", inputs, self.kernel) + self.bias
        return self.activation(x)


class _Plain:
    """The primitives of the model users get: keras_gelu's own layers."""

    def input_shape(self, input_dim):
        return (input_dim,)

    def projection(self, units, activation, name, dtype):
        return keras_gelu.projection_layers(
            units, activation, name=name, dtype=dtype
        )

    def dense(self, units, activation, name, dtype):
        return keras.layers.Dense(
            units, activation=activation, name=name, dtype=dtype
        )

    def feedforward(
        self,
        hidden_dim,
        activation,
        output_dim,
        dropout,
        match_params,
        name,
        dtype,
    ):
        return [
            keras_gelu.FeedForward(
                hidden_dim,
                activation=activation,
                output_dim=output_dim,
                dropout=dropout,
                match_params=match_params,
                name=name,
                dtype=dtype,
            )
        ]


class _Stacked:
    """The same primitives for M members, weights stacked on a leading axis.

    Each method returns the layers whose weights line up, in order and up
    to the leading M axis, with `_Plain`'s.
    """

    def __init__(self, members):
        self.members = members

    def input_shape(self, input_dim):
        return (self.members, input_dim)

    def projection(self, units, activation, name, dtype):
        # The three kinds of keras_gelu.projection_layers.
        kind = _activation_kind(activation)
        kwargs = dict(name=name, dtype=dtype)
        if kind == "gated":
            # GLU: one fused gate+value projection, then the split.
            gate = kg_activations.gate_function(activation)
            split = functools.partial(kg_activations.gated, gate=gate)
            return [
                StackedDense(
                    self.members, 2 * units, activation=split, **kwargs
                )
            ]
        if kind == "layer":
            # LearnableLeakyReLU's scalar slope, one per member: the slope
            # has shape (M, 1), shared over the feature axis.
            key = kg_activations.standardize_name(activation)
            layer_class = getattr(
                keras_gelu, kg_activations.ACTIVATIONS[key][1]
            )
            return [
                StackedDense(self.members, units, **kwargs),
                layer_class(
                    shared_axes=[2], name=f"{name}_activation", dtype=dtype
                ),
            ]
        return [
            StackedDense(
                self.members,
                units,
                activation=keras_gelu.get(activation),
                **kwargs,
            )
        ]

    def dense(self, units, activation, name, dtype):
        return StackedDense(
            self.members, units, activation=activation, name=name, dtype=dtype
        )

    def feedforward(
        self,
        hidden_dim,
        activation,
        output_dim,
        dropout,
        match_params,
        name,
        dtype,
    ):
        # keras_gelu.FeedForward's sublayers in its order: up, dropout, down.
        inner = hidden_dim
        if match_params and _activation_kind(activation) == "gated":
            inner = keras_gelu.matched_hidden_dim(hidden_dim)
        return [
            *self.projection(
                inner, activation, name=f"{name}_up_proj", dtype=dtype
            ),
            keras.layers.Dropout(dropout, name=f"{name}_dropout", dtype=dtype),
            StackedDense(
                self.members, output_dim, name=f"{name}_down_proj", dtype=dtype
            ),
        ]


_PLAIN = _Plain()


def _activation_kind(activation):
    if isinstance(activation, str):
        key = activation.strip().lower().replace("-", "_")
        if key in kg_activations.ACTIVATIONS:
            return kg_activations.kind(key)
    return "elementwise"


def _apply(layers, x):
    for layer in layers:
        x = layer(x)
    return x


# --- The architecture, written once. -------------------------------------


def _dense_block(prims, x, model_cfg, activation, dtype):
    for i, width in enumerate(model_cfg.hidden_units):
        layers = prims.projection(
            width, activation, name=f"hidden_{i}", dtype=dtype
        )
        x = _apply(layers, x)
        if model_cfg.dropout > 0:
            x = keras.layers.Dropout(
                model_cfg.dropout, name=f"hidden_{i}_dropout", dtype=dtype
            )(x)
    return x


def _feedforward_block(prims, x, model_cfg, activation, dtype):
    x = prims.dense(
        model_cfg.d_model, activation=None, name="stem", dtype=dtype
    )(x)
    for i, width in enumerate(model_cfg.hidden_units):
        layers = prims.feedforward(
            width,
            activation,
            output_dim=model_cfg.d_model,
            dropout=model_cfg.dropout,
            match_params=model_cfg.match_params,
            name=f"ffn_{i}",
            dtype=dtype,
        )
        x = keras.layers.Add(name=f"residual_{i}", dtype=dtype)(
            [x, _apply(layers, x)]
        )
    return x


# One line per block: model.block -> the hidden layers.
BLOCKS = {"dense": _dense_block, "feedforward": _feedforward_block}


def build_model(
    model_cfg,
    activation,
    input_dim,
    n_classes,
    members=None,
    dtype=None,
    name=None,
    normalization=None,
):
    """Builds the classifier of `model_cfg` with one activation.

    With `normalization`, the model starts with a
    `keras.layers.Normalization` holding those statistics as constants:
    `input -> (x - mean) / sqrt(variance) -> ...`, so it takes raw
    features; it has no weights, and every member of a stacked model uses
    the same statistics.
    `block: dense`: `input -> [projection(w, activation) (-> Dropout)] per
    width w in hidden_units -> Dense(n_classes, softmax)`.
    `block: feedforward`: `input -> Dense(d_model) -> [x + FeedForward(w,
    activation, output_dim=d_model)(x)] per width -> Dense(n_classes,
    softmax)`. The activated projection is `keras_gelu.projection_layers`:
    Dense(act) for elementwise activations, a fused GLU for gated ones,
    Dense + LearnableLeakyReLU for `learnable_leaky_relu`.

    Args:
        model_cfg: A `service.config.ModelConfig`.
        activation: A name from `keras_gelu.names()`.
        input_dim: Number of input features F.
        n_classes: Number of classes C.
        members: `None` for the plain model `(batch, F) -> (batch, C)`;
            an int M for M independent copies stacked in one model,
            `(batch, M, F) -> (batch, M, C)`, whose weights come from M
            plain models via `stack_weights`.
        dtype: Dtype policy of the layers; `None` for the global policy.
            Under a mixed policy the normalization and the softmax head
            run in float32.
        name: Model name.
        normalization: `None` (inputs used as they come), or the training
            split's `service.data.FeatureStats` (`mean`, `variance`, each
            `[F]`; a zero variance must already be replaced, e.g. by 1).

    Returns:
        An uncompiled `keras.Model` that outputs class probabilities.

    Raises:
        ServiceError: for an unknown `model_cfg.block`.

    Example:

    >>> from service.config import ModelConfig
    >>> model = build_model(ModelConfig(hidden_units=(8,)), "gelu", 2, 3)
    >>> model.output_shape
    (None, 3)
    """
    block = BLOCKS.get(model_cfg.block)
    if block is None:
        raise ServiceError(
            f"model.block: unknown block {model_cfg.block!r}; expected one of "
            f"{', '.join(sorted(BLOCKS))}."
        )
    prims = _PLAIN if members is None else _Stacked(members)
    inputs = keras.Input(prims.input_shape(input_dim), name="features")
    x = inputs
    if normalization is not None:
        # float32 under mixed precision: raw digits pixels (0..16) minus
        # their mean would lose bits in bfloat16 before the first layer.
        x = keras.layers.Normalization(
            mean=np.asarray(normalization.mean, "float64").tolist(),
            variance=np.asarray(normalization.variance, "float64").tolist(),
            name="normalization",
            dtype=_float32_if_mixed(dtype),
        )(x)
    x = block(prims, x, model_cfg, activation, dtype)
    outputs = prims.dense(
        n_classes,
        activation="softmax",
        name="head",
        dtype=_float32_if_mixed(dtype),
    )(x)
    return keras.Model(inputs, outputs, name=name)


def _float32_if_mixed(dtype):
    # Mixed precision: softmax probabilities (and the loss on them) in
    # float32, as the Keras mixed-precision guide recommends; the input
    # normalization too.
    policy = (
        keras.dtype_policies.get(dtype)
        if dtype
        else keras.config.dtype_policy()
    )
    if policy.compute_dtype != policy.variable_dtype:
        return "float32"
    return dtype


# --- Copying weights between M plain models and one stacked model. -------


def _weight_pairs(stacked_model, plain_models):
    """Yields (stacked variable, [plain variables]) after checking shapes."""
    members = len(plain_models)
    plain_lists = [model.weights for model in plain_models]
    stacked = stacked_model.weights
    if any(len(weights) != len(stacked) for weights in plain_lists):
        raise ValueError(
            f"stacked model has {len(stacked)} weights, plain models have "
            f"{sorted({len(w) for w in plain_lists})}: not the same architecture."
        )
    for i, variable in enumerate(stacked):
        plain = [weights[i] for weights in plain_lists]
        shape = tuple(plain[0].shape)
        # Size-1 axes may differ (a scalar slope is (M, 1) when stacked).
        expected = [d for d in shape if d != 1]
        if (
            any(tuple(v.shape) != shape for v in plain)
            or variable.shape[0] != members
            or [d for d in variable.shape[1:] if d != 1] != expected
        ):
            raise ValueError(
                f"weight {i} ({variable.path}): stacked shape "
                f"{tuple(variable.shape)} does not match {members} plain "
                f"weights of shape {shape} ({plain[0].path})."
            )
        yield variable, plain


def stack_weights(stacked_model, plain_models):
    """Copies M plain models' weights into a stacked model, member m <- model m.

    Args:
        stacked_model: `build_model(..., members=M)`.
        plain_models: M plain models of the same config and activation.

    Raises:
        ValueError: if the weight lists or shapes do not line up.
    """
    for variable, plain in _weight_pairs(stacked_model, plain_models):
        values = np.stack([keras.ops.convert_to_numpy(v) for v in plain])
        variable.assign(values.reshape(variable.shape))


def unstack_weights(stacked_model, plain_models):
    """Copies member m of a stacked model back into plain model m.

    Args and errors as for `stack_weights`.
    """
    for variable, plain in _weight_pairs(stacked_model, plain_models):
        values = keras.ops.convert_to_numpy(variable)
        for m, target in enumerate(plain):
            target.assign(values[m].reshape(target.shape))
