"""keras_gelu.layers: GELU, the GLU family and LearnableLeakyReLU.

Gated layers are checked against a float64 numpy computation from the
layer's own fused kernel: its first `units` columns are the gate.
"""

import keras
import numpy as np
import pytest
from keras import ops

import keras_gelu
from tests.keras_gelu import references as ref

RNG = np.random.default_rng(7)
X = RNG.normal(size=(2, 3, 6)).astype(np.float32)
WIDE = (np.linspace(-12.0, 12.0, 2400).reshape(4, 100, 6)).astype(np.float32)
HALF_MAX = {"float16": 65504.0, "bfloat16": 3.0e38}


def weights_by_name(layer):
    """{'kernel': array, 'bias': array, ...} keyed by each variable's name."""
    return {
        v.path.split("/")[-1]: ref.f64(ops.convert_to_numpy(v))
        for v in layer.weights
    }


# --- GELU layer. --------------------------------------------------------------


@pytest.mark.parametrize(
    "approximate, reference",
    [
        ("none", ref.gelu),
        (False, ref.gelu),
        ("tanh", ref.gelu_tanh),
        (True, ref.gelu_tanh),
        ("sigmoid", ref.gelu_sigmoid),
    ],
)
def test_gelu_layer_computes_its_mode(approximate, reference):
    layer = keras_gelu.GELU(approximate=approximate)
    y = ref.numpy(layer(WIDE))
    assert y.shape == WIDE.shape
    np.testing.assert_allclose(y, reference(WIDE), rtol=2e-6, atol=1e-6)
    assert not layer.weights


def test_gelu_layer_default_mode_is_exact():
    x = np.array([[2.6989, -2.2704]], np.float32)  # where the modes differ most
    np.testing.assert_allclose(
        ref.numpy(keras_gelu.GELU()(x)), ref.gelu(x), rtol=1e-6
    )


def test_gelu_layer_unknown_mode_raises_value_error_with_valid_modes():
    with pytest.raises(ValueError) as info:
        keras_gelu.GELU(approximate="tahn")
    message = str(info.value)
    assert "'tahn'" in message and "sigmoid" in message
    assert 'Did you mean "tanh"?' in message


# --- Gated linear units. ------------------------------------------------------

GATED_LAYERS = [
    (
        "GLU",
        lambda: keras_gelu.GLU(4, bias_initializer="random_normal"),
        ref.sigmoid,
    ),
    (
        "GLU-gelu_tanh",
        lambda: keras_gelu.GLU(
            4, activation="gelu_tanh", bias_initializer="random_normal"
        ),
        ref.gelu_tanh,
    ),
    (
        "GLU-keras-tanh",
        lambda: keras_gelu.GLU(
            4, activation="tanh", bias_initializer="random_normal"
        ),
        np.tanh,
    ),
    (
        "GLU-callable",
        lambda: keras_gelu.GLU(
            4, activation=keras_gelu.mish, bias_initializer="random_normal"
        ),
        ref.mish,
    ),
    (
        "GLU-gated-name",
        lambda: keras_gelu.GLU(
            4, activation="swiglu", bias_initializer="random_normal"
        ),
        ref.silu,
    ),
    (
        "GEGLU",
        lambda: keras_gelu.GEGLU(4, bias_initializer="random_normal"),
        ref.gelu,
    ),
    (
        "GEGLU-tanh",
        lambda: keras_gelu.GEGLU(
            4, approximate="tanh", bias_initializer="random_normal"
        ),
        ref.gelu_tanh,
    ),
    (
        "GEGLU-True",
        lambda: keras_gelu.GEGLU(
            4, approximate=True, bias_initializer="random_normal"
        ),
        ref.gelu_tanh,
    ),
    (
        "GEGLU-sigmoid",
        lambda: keras_gelu.GEGLU(
            4, approximate="sigmoid", bias_initializer="random_normal"
        ),
        ref.gelu_sigmoid,
    ),
    (
        "SwiGLU",
        lambda: keras_gelu.SwiGLU(4, bias_initializer="random_normal"),
        ref.silu,
    ),
    (
        "ReGLU",
        lambda: keras_gelu.ReGLU(4, bias_initializer="random_normal"),
        ref.relu,
    ),
    (
        "Bilinear",
        lambda: keras_gelu.Bilinear(4, bias_initializer="random_normal"),
        ref.linear,
    ),
]


@pytest.mark.parametrize(
    "make, gate",
    [(m, g) for _, m, g in GATED_LAYERS],
    ids=[n for n, _, _ in GATED_LAYERS],
)
def test_gated_layer_is_gate_half_times_value_half_of_fused_kernel(make, gate):
    layer = make()
    y = ref.numpy(layer(X))
    w = weights_by_name(layer)
    assert w["kernel"].shape == (6, 8) and w["bias"].shape == (8,)
    projected = ref.f64(X) @ w["kernel"] + w["bias"]
    expected = projected[..., :4] * gate(projected[..., 4:])
    assert y.shape == (2, 3, 4)
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-6)


def test_gated_layer_without_bias_has_only_the_fused_kernel():
    layer = keras_gelu.SwiGLU(5, use_bias=False)
    y = ref.numpy(layer(X))
    w = weights_by_name(layer)
    assert list(w) == ["kernel"] and w["kernel"].shape == (6, 10)
    projected = ref.f64(X) @ w["kernel"]
    np.testing.assert_allclose(
        y,
        projected[..., :5] * ref.silu(projected[..., 5:]),
        rtol=1e-5,
        atol=1e-6,
    )


@pytest.mark.parametrize(
    "cls, gate",
    [
        (keras_gelu.GLU, ref.sigmoid),
        (keras_gelu.GEGLU, ref.gelu),
        (keras_gelu.SwiGLU, ref.silu),
        (keras_gelu.ReGLU, ref.relu),
        (keras_gelu.Bilinear, ref.linear),
    ],
)
def test_gated_layer_without_units_splits_its_input(cls, gate):
    layer = cls()
    y = ref.numpy(layer(X))
    assert not layer.weights
    np.testing.assert_allclose(
        y, ref.f64(X[..., :3]) * gate(X[..., 3:]), rtol=1e-6, atol=1e-7
    )


def test_glu_without_units_splits_the_given_axis():
    x = RNG.normal(size=(2, 4, 5)).astype(np.float32)
    y = ref.numpy(keras_gelu.GLU(axis=1)(x))
    np.testing.assert_allclose(
        y, ref.f64(x[:, :2]) * ref.sigmoid(x[:, 2:]), rtol=1e-6, atol=1e-7
    )
    assert keras_gelu.GLU(axis=1).compute_output_shape((2, 4, 5)) == (2, 2, 5)


@pytest.mark.parametrize(
    "cls", [keras_gelu.GLU, keras_gelu.GEGLU, keras_gelu.Bilinear]
)
def test_gated_layer_without_units_rejects_odd_size(cls):
    with pytest.raises(ValueError, match="odd size 7"):
        cls()(ops.ones((2, 7)))
    with pytest.raises(ValueError, match="odd size 5"):
        cls()(keras.Input((3, 5)))


def test_gated_layer_output_shape_with_unknown_dims():
    inputs = keras.Input((None, 6))
    outputs = keras_gelu.GEGLU(4)(inputs)
    assert tuple(outputs.shape) == (None, None, 4)
    model = keras.Model(inputs, outputs)
    assert model(np.ones((3, 7, 6), np.float32)).shape == (3, 7, 4)
    assert keras_gelu.GLU(4).compute_output_shape((None, 3, 7)) == (None, 3, 4)
    assert keras_gelu.GLU().compute_output_shape((2, 6)) == (2, 3)


@pytest.mark.parametrize(
    "cls",
    [
        keras_gelu.GLU,
        keras_gelu.GEGLU,
        keras_gelu.SwiGLU,
        keras_gelu.ReGLU,
        keras_gelu.Bilinear,
    ],
)
@pytest.mark.parametrize("units", [0, -3, 2.5, True, "4"])
def test_gated_layer_rejects_bad_units(cls, units):
    with pytest.raises(ValueError) as info:
        cls(units)
    message = str(info.value)
    assert repr(units) in message and "positive integer" in message
    assert cls.__name__ in message


def test_glu_unknown_activation_raises_value_error_with_closest():
    with pytest.raises(ValueError) as info:
        keras_gelu.GLU(4, activation="gleu")
    message = str(info.value)
    assert (
        "'gleu'" in message and "geglu" in message and "Did you mean" in message
    )


def test_geglu_unknown_approximation_raises_value_error():
    with pytest.raises(ValueError, match="'tnah'.*Did you mean \"tanh\""):
        keras_gelu.GEGLU(4, approximate="tnah")


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_gated_layer_mixed_policy_computes_in_half_keeps_float32_weights(
    policy,
):
    layer = keras_gelu.GEGLU(4, dtype=policy, bias_initializer="random_normal")
    y = layer(X)
    compute = policy.split("_")[1]
    assert keras.backend.standardize_dtype(y.dtype) == compute
    assert all(
        keras.backend.standardize_dtype(v.dtype) == "float32"
        for v in layer.weights
    )
    w = weights_by_name(layer)
    projected = ref.f64(X) @ w["kernel"] + w["bias"]
    expected = projected[..., :4] * ref.gelu(projected[..., 4:])
    np.testing.assert_allclose(ref.numpy(y), expected, rtol=3e-2, atol=3e-2)


def test_gated_layer_follows_global_mixed_policy():
    keras.config.set_dtype_policy("mixed_bfloat16")
    layer = keras_gelu.SwiGLU(4)
    y = layer(X)
    assert keras.backend.standardize_dtype(y.dtype) == "bfloat16"
    assert keras.backend.standardize_dtype(layer.weights[0].dtype) == "float32"
    assert np.all(np.isfinite(ref.numpy(y)))


# --- GELU layer in half precision and mixed policies. -------------------------


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("mode", ["none", "tanh", "sigmoid"])
def test_gelu_layer_mixed_policy_output_dtype_and_finite_at_extremes(
    dtype, mode
):
    big = HALF_MAX[dtype]
    values = np.array(
        [[-big, -1e4, -12.0, -1.0, 0.0, 1.0, 12.0, 1e4, big, np.nan]],
        np.float32,
    )
    layer = keras_gelu.GELU(approximate=mode, dtype=f"mixed_{dtype}")
    y = layer(values)
    assert keras.backend.standardize_dtype(y.dtype) == dtype
    y = ref.numpy(y)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(values))
    assert np.all(np.isfinite(y[~np.isnan(values)]))
    # GELU(x) = x for large x and 0 for large -x in every mode.
    assert y[0, 8] == ref.numpy(ops.cast(big, dtype)) and y[0, 0] == 0


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_gelu_layer_follows_global_mixed_policy(policy):
    keras.config.set_dtype_policy(policy)
    layer = keras_gelu.GELU()
    assert layer.compute_dtype == policy.split("_")[1]
    y = layer(WIDE)
    assert keras.backend.standardize_dtype(y.dtype) == layer.compute_dtype
    np.testing.assert_allclose(
        ref.numpy(y), ref.gelu(WIDE), rtol=1e-2, atol=1e-2
    )


def test_global_policy_is_restored_between_tests():
    # Runs after the tests above set mixed policies: the conftest resets.
    assert keras.config.dtype_policy().name == "float32"


# --- LearnableLeakyReLU. ------------------------------------------------------


def test_learnable_leaky_relu_starts_at_slope_one_hundredth():
    layer = keras_gelu.LearnableLeakyReLU()
    y = ref.numpy(layer(WIDE))
    np.testing.assert_allclose(y, ref.leaky_relu(WIDE, 0.01), rtol=1e-6)
    (slope,) = layer.weights
    assert slope.shape == () and slope.trainable
    assert ops.convert_to_numpy(slope) == pytest.approx(0.01)


@pytest.mark.parametrize(
    "kwargs, slope_shape",
    [
        ({}, ()),
        ({"per_channel": True}, (3,)),
        ({"shared_axes": [1, 2]}, (1, 1, 3)),
        ({"shared_axes": 1}, (1, 5, 3)),
        ({"shared_axes": [1, 2, 3]}, (1, 1, 1)),
    ],
)
def test_learnable_leaky_relu_slope_shapes_broadcast_like_numpy(
    kwargs, slope_shape
):
    x = RNG.normal(size=(2, 4, 5, 3)).astype(np.float32)
    layer = keras_gelu.LearnableLeakyReLU(**kwargs)
    layer.build(x.shape)
    assert tuple(layer.slope.shape) == slope_shape
    slopes = RNG.uniform(0.05, 0.5, size=slope_shape).astype(np.float32)
    layer.slope.assign(slopes)
    y = ref.numpy(layer(x))
    np.testing.assert_allclose(
        y, np.where(x >= 0, x, slopes * ref.f64(x)), rtol=1e-6
    )


@pytest.mark.parametrize(
    "kwargs, slope_shape", [({}, ()), ({"per_channel": True}, (8,))]
)
def test_learnable_leaky_relu_accepts_unknown_dims(kwargs, slope_shape):
    inputs = keras.Input((None, 8))
    layer = keras_gelu.LearnableLeakyReLU(**kwargs)
    model = keras.Model(inputs, layer(inputs))
    assert tuple(layer.slope.shape) == slope_shape
    for length in (5, 9):
        x = RNG.normal(size=(2, length, 8)).astype(np.float32)
        np.testing.assert_allclose(
            ref.numpy(model(x)), ref.leaky_relu(x, 0.01), rtol=1e-6
        )


def test_learnable_leaky_relu_shared_unknown_axis_is_accepted():
    layer = keras_gelu.LearnableLeakyReLU(shared_axes=[1])
    layer(keras.Input((None, 8)))
    assert tuple(layer.slope.shape) == (1, 8)


def test_learnable_leaky_relu_unshared_unknown_axis_raises_value_error():
    with pytest.raises(ValueError, match="known size"):
        keras_gelu.LearnableLeakyReLU(shared_axes=[2])(keras.Input((None, 8)))
    with pytest.raises(ValueError, match="known last axis"):
        keras_gelu.LearnableLeakyReLU(per_channel=True)(keras.Input((8, None)))


def _fit_slope(layer, target_slopes, steps=30):
    x = np.random.default_rng(3).normal(size=(256, 3)).astype(np.float32)
    y = np.where(x >= 0, x, np.asarray(target_slopes, np.float32) * x)
    model = keras.Sequential([keras.Input((3,)), layer])
    model.compile(optimizer=keras.optimizers.SGD(0.5), loss="mse")
    model.fit(x, y, batch_size=64, epochs=steps // 4, shuffle=False, verbose=0)
    return ops.convert_to_numpy(layer.slope)


def test_learnable_leaky_relu_slope_is_learned():
    slope = _fit_slope(keras_gelu.LearnableLeakyReLU(), 0.3)
    assert slope == pytest.approx(0.3, abs=0.03)  # from 0.01


def test_learnable_leaky_relu_per_channel_slopes_are_learned_independently():
    targets = [0.05, 0.3, 0.6]
    slope = _fit_slope(keras_gelu.LearnableLeakyReLU(per_channel=True), targets)
    np.testing.assert_allclose(slope, targets, atol=0.05)


def test_learnable_leaky_relu_non_neg_constraint_keeps_slope_non_negative():
    # The data pull the slope to -0.5: unconstrained it goes there ...
    assert _fit_slope(keras_gelu.LearnableLeakyReLU(), -0.5) < -0.3
    # ... with the constraint it stops at 0.
    slope = _fit_slope(
        keras_gelu.LearnableLeakyReLU(slope_constraint="non_neg"), -0.5
    )
    assert slope == pytest.approx(0.0, abs=1e-7) and slope >= 0


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_learnable_leaky_relu_mixed_policy_keeps_half_output_and_float32_slope(
    dtype,
):
    big = HALF_MAX[dtype]
    values = np.array([[-big, -1.0, 0.0, 1.0, big, np.nan]], np.float32)
    layer = keras_gelu.LearnableLeakyReLU(dtype=f"mixed_{dtype}")
    y = layer(values)
    assert keras.backend.standardize_dtype(y.dtype) == dtype
    assert keras.backend.standardize_dtype(layer.slope.dtype) == "float32"
    y = ref.numpy(y)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(values))
    assert np.all(np.isfinite(y[~np.isnan(values)]))
    np.testing.assert_allclose(y[0, 1:4], [-0.01, 0.0, 1.0], rtol=1e-2)


@pytest.mark.parametrize(
    "kwargs, given",
    [
        ({"shared_axes": 0}, "shared_axes=0"),
        ({"shared_axes": [-1]}, "shared_axes=[-1]"),
        ({"shared_axes": [1, 0]}, "shared_axes=[1, 0]"),
        ({"shared_axes": "1"}, "shared_axes='1'"),
        ({"shared_axes": True}, "shared_axes=True"),
    ],
)
def test_learnable_leaky_relu_bad_shared_axes_raise_value_error(kwargs, given):
    with pytest.raises(ValueError) as info:
        keras_gelu.LearnableLeakyReLU(**kwargs)
    message = str(info.value)
    assert given in message and ">= 1" in message


def test_learnable_leaky_relu_out_of_range_shared_axes_raise_value_error():
    with pytest.raises(ValueError) as info:
        keras_gelu.LearnableLeakyReLU(shared_axes=[3])(ops.ones((2, 3, 4)))
    message = str(info.value)
    assert "[3]" in message and "(2, 3, 4)" in message and "1..2" in message


def test_learnable_leaky_relu_per_channel_and_shared_axes_together_raise():
    with pytest.raises(ValueError, match="not both"):
        keras_gelu.LearnableLeakyReLU(per_channel=True, shared_axes=[1])


@pytest.mark.parametrize("slope", ["0.1", None, True])
def test_learnable_leaky_relu_non_numeric_initial_slope_raises(slope):
    with pytest.raises(ValueError, match=f"received {slope!r}"):
        keras_gelu.LearnableLeakyReLU(initial_slope=slope)


# --- Keras idioms: masking, initializers, arguments that must not be ignored.


@pytest.mark.parametrize(
    "make",
    [
        lambda: keras_gelu.GLU(4),
        lambda: keras_gelu.GEGLU(4),
        lambda: keras_gelu.SwiGLU(4),
        lambda: keras_gelu.ReGLU(4),
        lambda: keras_gelu.Bilinear(4),
        lambda: keras_gelu.GLU(),
        lambda: keras_gelu.FeedForward(8, activation="geglu"),
        lambda: keras_gelu.FeedForward(8, activation="gelu"),
    ],
)
def test_gated_layers_and_ffn_pass_an_embedding_mask_through(make):
    tokens = np.array([[3, 5, 0, 0], [7, 0, 0, 0]])
    inputs = keras.Input((None,), dtype="int32")
    x = keras.layers.Embedding(10, 6, mask_zero=True)(inputs)
    x = make()(x)
    # A masked average: wrong if the mask were dropped on the way.
    pooled = keras.layers.GlobalAveragePooling1D()(x)
    model = keras.Model(inputs, [x, pooled])
    hidden, mean = (ref.numpy(t) for t in model(tokens))
    lengths = (tokens != 0).sum(axis=1)
    expected = np.stack(
        [hidden[i, : lengths[i]].mean(axis=0) for i in range(len(tokens))]
    )
    np.testing.assert_allclose(mean, expected, rtol=1e-5, atol=1e-6)
    assert not np.allclose(mean, hidden.mean(axis=1), atol=1e-4)


def test_glu_does_not_share_the_initializer_object_given():
    init = keras.initializers.GlorotUniform(seed=3)
    layer = keras_gelu.SwiGLU(4, kernel_initializer=init)
    layer.build((None, 4))
    assert layer.value_gate_proj.kernel_initializer is not init
    expected = keras.initializers.GlorotUniform(seed=3)((4, 8))
    np.testing.assert_array_equal(
        ref.numpy(layer.value_gate_proj.kernel), ref.numpy(expected)
    )


@pytest.mark.parametrize("cls", [keras_gelu.SwiGLU, keras_gelu.GEGLU, keras_gelu.ReGLU, keras_gelu.Bilinear])
def test_named_gated_layer_refuses_another_activation(cls):
    with pytest.raises(ValueError, match="fixes its gate") as info:
        cls(4, activation="sigmoid")
    assert "GLU(units" in str(info.value)


def test_named_gated_layer_accepts_its_own_gate_spelled_any_way():
    assert keras_gelu.SwiGLU(4, activation="swish").activation is keras_gelu.silu
    assert keras_gelu.SwiGLU(4, activation=keras_gelu.swiglu).activation is keras_gelu.silu


@pytest.mark.parametrize("name", [" geglu", "GeGLU", "geglu\n", "GEGLU_TANH", "geglu-tanh"])
def test_gated_names_are_cleaned_once_and_work_at_call_time(name):
    ffn = keras_gelu.FeedForward(8, activation=name)
    assert ffn.is_gated
    y = ffn(np.ones((2, 4), "float32"))
    assert tuple(y.shape) == (2, 4)
    glu = keras_gelu.GLU(4, activation=name)
    assert glu.activation in (keras_gelu.gelu, keras_gelu.gelu_tanh)


@pytest.mark.parametrize(
    "make",
    [
        lambda fn: keras.layers.Dense(8, activation=fn),
        lambda fn: keras.layers.Activation(fn),
        lambda fn: keras.layers.EinsumDense("ab,bc->ac", 8, activation=fn),
    ],
    ids=["Dense", "Activation", "EinsumDense"],
)
@pytest.mark.parametrize("fn", [keras_gelu.geglu, keras_gelu.swiglu, keras_gelu.glu])
def test_gated_function_as_elementwise_layer_activation_raises_not_wrong_shape(make, fn):
    model = keras.Sequential([keras.Input((6,)), make(fn), keras.layers.Dense(3)])
    with pytest.raises(ValueError, match="is a gated unit") as info:
        model.predict(np.ones((2, 6), "float32"), verbose=0)
    assert "keras_gelu.GLU" in str(info.value) and "FeedForward" in str(info.value)


def test_gated_function_called_directly_in_a_custom_layer_still_works():
    class Halves(keras.layers.Layer):
        def __init__(self):
            super().__init__()
            self.activation = keras_gelu.geglu

        def call(self, x):
            return self.activation(x)

    y = Halves()(np.ones((2, 6), "float32"))
    assert tuple(y.shape) == (2, 3)


@pytest.mark.parametrize(
    "make",
    [
        lambda: keras_gelu.GLU(axis=1),
        lambda: keras_gelu.GEGLU(axis=1),
        lambda: keras_gelu.SwiGLU(axis=1),
        lambda: keras_gelu.ReGLU(axis=1),
        lambda: keras_gelu.Bilinear(axis=1),
        lambda: keras_gelu.GLU(axis=-2),
    ],
)
def test_split_along_the_masked_time_axis_splits_the_mask_for_an_lstm(make):
    # Issue 15: GLU(axis=1) after Masking returned (None, 2, 3) with the
    # old (None, 4) mask, and the LSTM after it failed ("Cannot unstack 4
    # tensors..."). Output step i pairs input steps i and i + 2: valid
    # only where both are.
    x = np.random.default_rng(0).normal(size=(3, 4, 3)).astype("float32")
    x[0, 3] = 0.0  # masked: step 1 of the output
    x[1, 0] = 0.0  # masked: step 0 of the output
    x[2, 1:3] = 0.0  # masked: steps 1 and 0
    steps = np.any(x != 0.0, axis=-1)
    expected_mask = steps[:, :2] & steps[:, 2:]
    gated, lstm = make(), keras.layers.LSTM(5, return_sequences=True)
    inputs = keras.Input((4, 3))
    model = keras.Model(inputs, lstm(gated(keras.layers.Masking(0.0)(inputs))))
    y = ref.numpy(model(x))
    assert y.shape == (3, 2, 5)
    mask = gated.compute_mask(x, keras.ops.convert_to_tensor(steps))
    np.testing.assert_array_equal(ref.numpy(mask), expected_mask)
    # The LSTM saw exactly that mask: run it alone with the expected one.
    alone = lstm(gated(x), mask=keras.ops.convert_to_tensor(expected_mask))
    np.testing.assert_allclose(y, ref.numpy(alone), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "make",
    [
        lambda: keras_gelu.GLU(axis=-1),
        lambda: keras_gelu.GLU(axis=2),
        lambda: keras_gelu.GEGLU(4),
        lambda: keras_gelu.FeedForward(8, activation="swiglu"),
    ],
)
def test_split_along_the_feature_axis_keeps_the_mask_for_an_lstm(make):
    x = np.random.default_rng(1).normal(size=(2, 4, 6)).astype("float32")
    x[0, 2:] = 0.0
    steps = np.any(x != 0.0, axis=-1)
    gated, lstm = make(), keras.layers.LSTM(5, return_sequences=True)
    inputs = keras.Input((4, 6))
    model = keras.Model(inputs, lstm(gated(keras.layers.Masking(0.0)(inputs))))
    y = ref.numpy(model(x))
    mask = gated.compute_mask(x, keras.ops.convert_to_tensor(steps))
    np.testing.assert_array_equal(ref.numpy(mask), steps)
    alone = lstm(gated(x), mask=keras.ops.convert_to_tensor(steps))
    np.testing.assert_allclose(y, ref.numpy(alone), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8", "bool"])
def test_learnable_leaky_relu_on_non_float_input_computes_in_its_compute_dtype(dtype):
    # Issue 30 §16: the slope was cast to the input's int dtype, 0.3 -> 0,
    # a silent ReLU. As keras.layers.LeakyReLU does on TensorFlow and JAX
    # (ops.leaky_relu converts an int tensor to float), the input is cast
    # to the compute dtype; on every backend (Keras' own PReLU and torch's
    # LeakyReLU refuse int input).
    x = np.array([[-2, 3, 0]]).astype(dtype)
    layer = keras_gelu.LearnableLeakyReLU(initial_slope=0.3)
    y = layer(ops.convert_to_tensor(x))
    assert keras.backend.standardize_dtype(y.dtype) == layer.compute_dtype
    expected = np.where(x.astype("float64") >= 0, x, 0.3 * x.astype("float64"))
    np.testing.assert_allclose(ops.convert_to_numpy(y), expected, rtol=1e-6)
    half = keras_gelu.LearnableLeakyReLU(initial_slope=0.3, dtype="mixed_float16")
    assert keras.backend.standardize_dtype(half(ops.convert_to_tensor(x)).dtype) == "float16"


@pytest.mark.parametrize("slope", [float("nan"), float("inf"), -float("inf"), 10**400])
def test_learnable_leaky_relu_refuses_a_non_finite_initial_slope(slope):
    with pytest.raises(ValueError, match="finite"):
        keras_gelu.LearnableLeakyReLU(initial_slope=slope)
