"""The network every activation is trained in, and its member-stacked twin.

`build_model` writes the architecture once, from keras_gelu's own layers
(`keras_gelu.projection_layers`, `keras_gelu.FeedForward`), mapping
`(batch, features)` to class probabilities `(batch, classes)`.

`stack_model(model, M)` is the same network for M independent members at
once, `(batch, M, features) -> (batch, M, classes)`: every layer replaced
by its stacked form from `keras_gelu.stacking` (every weight with a
leading M axis, a kernel `(M, in, out)` applied with an einsum). On a CPU
a step of 10 stacked members costs about twice a step of one model: the
per-step overhead is shared. The stacked forms of keras_gelu's layers are
keras_gelu's to define and test; nothing here re-creates their insides.
`stack_weights`/`unstack_weights` copy M plain models into the stacked
one and back, index by index.
"""

import keras
import numpy as np

import keras_gelu
from keras_gelu.stacking import stack_weights  # noqa: F401 -- re-exported
from keras_gelu.stacking import unstack_weights  # noqa: F401 -- re-exported
from kg_service.config import catalog
from kg_service.errors import ServiceError


# --- The architecture, written once. -------------------------------------


def _apply(layers, x):
    for layer in layers:
        x = layer(x)
    return x


def _dense_block(x, model_cfg, activation, dtype):
    for i, width in enumerate(model_cfg.hidden_units):
        layers = keras_gelu.projection_layers(
            width, activation, name=f"hidden_{i}", dtype=dtype
        )
        x = _apply(layers, x)
        if model_cfg.dropout > 0:
            x = keras.layers.Dropout(
                model_cfg.dropout, name=f"hidden_{i}_dropout", dtype=dtype
            )(x)
    return x


def _feedforward_block(x, model_cfg, activation, dtype):
    x = keras.layers.Dense(model_cfg.d_model, name="stem", dtype=dtype)(x)
    for i, width in enumerate(model_cfg.hidden_units):
        ffn = keras_gelu.FeedForward(
            width,
            activation=activation,
            output_dim=model_cfg.d_model,
            dropout=model_cfg.dropout,
            match_params=model_cfg.match_params,
            name=f"ffn_{i}",
            dtype=dtype,
        )
        x = keras.layers.Add(name=f"residual_{i}", dtype=dtype)([x, ffn(x)])
    return x


# model.block -> the function writing its hidden layers, `_<name>_block`,
# for every block name in `kg_service.config.catalog.BLOCKS`.
BLOCKS = {name: globals()[f"_{name}_block"] for name in catalog.BLOCKS}


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
        model_cfg: A `kg_service.config.schema.ModelConfig`.
        activation: A name from `keras_gelu.names()`.
        input_dim: Number of input features F.
        n_classes: Number of classes C.
        members: `None` for the plain model `(batch, F) -> (batch, C)`;
            an int M for M independent copies stacked in one model,
            `(batch, M, F) -> (batch, M, C)` (`stack_model`), whose weights
            come from M plain models via `stack_weights`.
        dtype: Dtype policy of the layers; `None` for the global policy.
            Under a mixed policy the normalization and the softmax head
            run in float32.
        name: Model name.
        normalization: `None` (inputs used as they come), or the training
            split's `kg_service.tasks.classification.data.FeatureStats` (`mean`, `variance`, each
            `[F]`; a zero variance must already be replaced, e.g. by 1).

    Returns:
        An uncompiled `keras.Model` that outputs class probabilities.

    Raises:
        ServiceError: for an unknown `model_cfg.block`.

    Example:

    >>> from kg_service.config.schema import ModelConfig
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
    inputs = keras.Input((input_dim,), name="features")
    x = _standardized(inputs, normalization, dtype)
    x = block(x, model_cfg, activation, dtype)
    outputs = keras.layers.Dense(
        n_classes,
        activation="softmax",
        name="head",
        dtype=_float32_if_mixed(dtype),
    )(x)
    model = keras.Model(inputs, outputs, name=name)
    return model if members is None else stack_model(model, members)


def _standardized(x, normalization, dtype):
    """`x`, z-scored by the training split's statistics if there are any."""
    if normalization is None:
        return x
    # float32 under mixed precision: raw digits pixels (0..16) minus
    # their mean would lose bits in bfloat16 before the first layer.
    return keras.layers.Normalization(
        mean=np.asarray(normalization.mean, "float64").tolist(),
        variance=np.asarray(normalization.variance, "float64").tolist(),
        name="normalization",
        dtype=_float32_if_mixed(dtype),
    )(x)


def stack_model(model, members, name=None, normalizations=None):
    """The functional `model` for `members` independent members at once.

    Every layer is replaced by `keras_gelu.stacking.stack(layer, members)`
    and the graph is rebuilt on an input `(batch, members, ...)`; layers
    without weights (Normalization with constant statistics, Dropout, Add)
    act on every member alike. Weights are placeholders until
    `stack_weights`.

    Args:
        model: A built functional `keras.Model` with one input, or a list
            of M of them, member m's, of one architecture that may differ
            in their activation (ReLU, GELU and Swish MLPs of one width;
            or GLU, ReGLU and SwiGLU ones): member m then computes model m
            (issue 20: activations x seeds in one stack).
        members: Positive int M.
        name: Name of the stacked model (default: `<name>_x<M>`).
        normalizations: Optional M `FeatureStats`, member m's training
            split's (members trained on different splits, issue 19): the
            input Normalization then standardizes `x[:, m]` with member m's
            statistics, as member m's plain model does.

    Returns:
        A `keras.Model` mapping `(batch, M, ...)` to `(batch, M, ...)`.

    Raises:
        ValueError: for models that differ in more than their activation
            (other layers, widths, or an activation with weights of its
            own, e.g. learnable_leaky_relu beside relu).
    """
    models = list(model) if isinstance(model, (list, tuple)) else [model]
    if len(models) not in (1, members):
        raise ValueError(f"{len(models)} plain models for {members} members.")
    names = [[layer.name for layer in m.layers] for m in models]
    if any(n != names[0] for n in names):
        raise ValueError(
            "the members' models do not have the same layers "
            f"({names[0]} and {next(n for n in names if n != names[0])}): not one architecture."
        )
    by_name = {
        layers[0].name: list(layers) if len(models) > 1 else layers[0]
        for layers in zip(*[m.layers for m in models])
    }
    first = models[0]
    inputs = keras.Input(
        (members,) + tuple(first.input_shape[1:]), name=first.layers[0].name
    )

    def clone(layer):
        if normalizations is not None and isinstance(layer, keras.layers.Normalization):
            return _member_normalization(layer, normalizations)
        return keras_gelu.stacking.stack(by_name[layer.name], members)

    stacked = keras.models.clone_model(first, input_tensors=inputs, clone_function=clone)
    # Rewrapped with the bare tensors: clone_model's lists would make
    # every call warn about the input structure.
    return keras.Model(
        inputs, stacked.outputs[0], name=name or f"{first.name}_x{members}"
    )


def _member_normalization(layer, normalizations):
    """`layer` (a Normalization with given statistics) over `(batch, M, F)`,
    member m standardized with `normalizations[m]`: the statistics become
    `(M, F)` arrays and both axes are kept (Keras broadcasts them)."""
    return keras.layers.Normalization(
        axis=(-2, -1),
        mean=np.stack([np.asarray(n.mean, "float64") for n in normalizations]).tolist(),
        variance=np.stack([np.asarray(n.variance, "float64") for n in normalizations]).tolist(),
        name=layer.name,
        dtype=layer.dtype_policy,
    )


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
