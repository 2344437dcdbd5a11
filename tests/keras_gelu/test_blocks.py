"""keras_gelu.blocks: FeedForward and the parameter-matched hidden width.

Parameter counts come from Shazeer 2020 (papers.md): T5-base, d_model 768,
d_ff 3072 for plain FFNs and 2048 for gated ones, 2*768*3072 = 3*768*2048.
"""

import keras
import numpy as np
import pytest
from keras import ops

import keras_gelu
from tests.keras_gelu import references as ref

X = np.random.default_rng(11).normal(size=(2, 3, 8)).astype(np.float32)
D_MODEL, D_FF, D_FF_GATED = 768, 3072, 2048


def projection_weights(block, role):
    """The (kernel, bias or None) of the projection named `role`."""
    found = {}
    for v in block.weights:
        parts = v.path.split("/")[1:]  # drop the block's own name
        if parts[0] == role and parts[-1] in ("kernel", "bias"):
            found[parts[-1]] = ref.f64(ops.convert_to_numpy(v))
    return found["kernel"], found.get("bias")


def manual_ffn(block, x, hidden):
    """down(hidden(up(x))) from the block's own weights, in float64."""
    up_kernel, up_bias = projection_weights(block, "up_proj")
    down_kernel, down_bias = projection_weights(block, "down_proj")
    h = ref.f64(x) @ up_kernel + (0 if up_bias is None else up_bias)
    out = hidden(h) @ down_kernel
    return out + (0 if down_bias is None else down_bias)


# --- Parameter matching. ------------------------------------------------------


def test_matched_hidden_dim_reproduces_shazeer_t5_base():
    assert keras_gelu.matched_hidden_dim(D_FF) == D_FF_GATED


def test_matched_hidden_dim_is_two_thirds_rounded_to_multiple_of_8():
    for hidden in range(12, 8200, 4):
        matched = keras_gelu.matched_hidden_dim(hidden)
        assert matched % 8 == 0, hidden
        assert abs(matched - 2 * hidden / 3) <= 4, hidden


def _built(block, d=D_MODEL):
    block.build((None, d))
    return block


def test_plain_ffn_parameter_count_without_bias():
    block = _built(
        keras_gelu.FeedForward(D_FF, activation="gelu", use_bias=False)
    )
    assert block.count_params() == 2 * D_MODEL * D_FF


@pytest.mark.parametrize("activation", sorted(ref.GATED))
def test_gated_ffn_match_params_has_plain_ffn_parameter_count(activation):
    block = _built(
        keras_gelu.FeedForward(
            D_FF, activation=activation, match_params=True, use_bias=False
        )
    )
    assert (
        block.count_params() == 2 * D_MODEL * D_FF == 3 * D_MODEL * D_FF_GATED
    )
    up_kernel, _ = projection_weights(block, "up_proj")
    down_kernel, _ = projection_weights(block, "down_proj")
    assert up_kernel.shape == (D_MODEL, 2 * D_FF_GATED)  # fused gate + value
    assert down_kernel.shape == (D_FF_GATED, D_MODEL)


def test_parameter_counts_with_bias():
    plain = _built(keras_gelu.FeedForward(D_FF, activation="relu"))
    assert (
        plain.count_params() == D_MODEL * D_FF + D_FF + D_FF * D_MODEL + D_MODEL
    )
    gated = _built(
        keras_gelu.FeedForward(D_FF, activation="swiglu", match_params=True)
    )
    assert gated.count_params() == (
        D_MODEL * 2 * D_FF_GATED
        + 2 * D_FF_GATED
        + D_FF_GATED * D_MODEL
        + D_MODEL
    )


def test_match_params_leaves_elementwise_ffn_unchanged():
    block = _built(
        keras_gelu.FeedForward(
            D_FF, activation="gelu", match_params=True, use_bias=False
        )
    )
    assert block.count_params() == 2 * D_MODEL * D_FF


def test_gated_ffn_without_match_params_keeps_hidden_width():
    block = _built(
        keras_gelu.FeedForward(D_FF, activation="geglu", use_bias=False)
    )
    assert block.count_params() == 3 * D_MODEL * D_FF


# --- The computation. ---------------------------------------------------------


@pytest.mark.parametrize(
    "activation, hidden",
    [
        ("gelu", ref.gelu),
        ("gelu_tanh", ref.gelu_tanh),
        ("quick_gelu", ref.gelu_sigmoid),
        ("relu", ref.relu),
        ("silu", ref.silu),
        ("tanh", np.tanh),  # a Keras name
        (keras_gelu.mish, ref.mish),  # a callable
    ],
    ids=[
        "gelu",
        "gelu_tanh",
        "quick_gelu",
        "relu",
        "silu",
        "keras-tanh",
        "callable-mish",
    ],
)
def test_plain_ffn_equals_manual_dense_computation(activation, hidden):
    block = keras_gelu.FeedForward(
        16, activation=activation, bias_initializer="random_normal"
    )
    y = ref.numpy(block(X))
    assert y.shape == X.shape
    np.testing.assert_allclose(
        y, manual_ffn(block, X, hidden), rtol=1e-5, atol=1e-6
    )


@pytest.mark.parametrize("activation", sorted(ref.GATED))
def test_gated_ffn_equals_manual_gated_computation(activation):
    block = keras_gelu.FeedForward(
        16,
        activation=activation,
        output_dim=5,
        bias_initializer="random_normal",
    )
    gate = ref.GATED[activation]
    y = ref.numpy(block(X))
    assert y.shape == (2, 3, 5)
    # The fused up projection: first 16 columns value, last 16 gate.
    expected = manual_ffn(block, X, lambda h: h[..., :16] * gate(h[..., 16:]))
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-6)


def test_learnable_leaky_relu_ffn_has_a_trainable_slope():
    block = keras_gelu.FeedForward(16, activation="learnable_leaky_relu")
    y = ref.numpy(block(X))
    slopes = [v for v in block.trainable_weights if v.path.endswith("slope")]
    assert len(slopes) == 1
    np.testing.assert_allclose(
        y,
        manual_ffn(block, X, lambda h: ref.leaky_relu(h, 0.01)),
        rtol=1e-5,
        atol=1e-6,
    )


def test_output_dim_sets_the_output_width():
    block = keras_gelu.FeedForward(12, activation="reglu", output_dim=3)
    assert block(X).shape == (2, 3, 3)
    assert block.compute_output_shape((None, 3, 8)) == (None, 3, 3)


def test_ffn_accepts_unknown_batch_and_sequence_dims():
    inputs = keras.Input((None, 8))
    model = keras.Model(
        inputs, keras_gelu.FeedForward(16, activation="swiglu")(inputs)
    )
    for length in (2, 5):
        assert model(np.ones((3, length, 8), np.float32)).shape == (
            3,
            length,
            8,
        )


def test_dropout_applies_only_in_training():
    block = keras_gelu.FeedForward(64, activation="gelu", dropout=0.5)
    inference = ref.numpy(block(X, training=False))
    np.testing.assert_allclose(
        inference, manual_ffn(block, X, ref.gelu), rtol=1e-5, atol=1e-6
    )
    np.testing.assert_array_equal(ref.numpy(block(X)), inference)
    training = ref.numpy(block(X, training=True))
    assert not np.allclose(training, inference, atol=1e-3)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_ffn_mixed_policy_computes_in_half_keeps_float32_weights(policy):
    block = keras_gelu.FeedForward(16, activation="geglu", dtype=policy)
    y = block(X)
    assert keras.backend.standardize_dtype(y.dtype) == policy.split("_")[1]
    assert all(
        keras.backend.standardize_dtype(v.dtype) == "float32"
        for v in block.weights
    )
    gate = ref.GATED["geglu"]
    expected = manual_ffn(block, X, lambda h: h[..., :16] * gate(h[..., 16:]))
    np.testing.assert_allclose(ref.numpy(y), expected, rtol=5e-2, atol=5e-2)


def test_ffn_follows_global_mixed_policy():
    keras.config.set_dtype_policy("mixed_float16")
    block = keras_gelu.FeedForward(16, activation="learnable_leaky_relu")
    y = block(X)
    assert keras.backend.standardize_dtype(y.dtype) == "float16"
    assert np.all(np.isfinite(ref.numpy(y)))


# --- Bad input. ---------------------------------------------------------------


@pytest.mark.parametrize("hidden_dim", [0, -8, 2.5, True, "16", None])
def test_ffn_rejects_bad_hidden_dim(hidden_dim):
    with pytest.raises(ValueError) as info:
        keras_gelu.FeedForward(hidden_dim)
    message = str(info.value)
    assert "hidden_dim" in message and repr(hidden_dim) in message
    assert "positive integer" in message


@pytest.mark.parametrize("output_dim", [0, -1, 1.5])
def test_ffn_rejects_bad_output_dim(output_dim):
    with pytest.raises(ValueError) as info:
        keras_gelu.FeedForward(8, output_dim=output_dim)
    message = str(info.value)
    assert "output_dim" in message and repr(output_dim) in message


@pytest.mark.parametrize("dropout", [-0.1, 1.0, 1.5, True, "0.1"])
def test_ffn_rejects_dropout_outside_unit_interval(dropout):
    with pytest.raises(ValueError) as info:
        keras_gelu.FeedForward(8, dropout=dropout)
    message = str(info.value)
    assert f"dropout={dropout!r}" in message and "[0, 1)" in message


@pytest.mark.parametrize(
    "activation, closest", [("swiglue", "swiglu"), ("gleu", "gelu")]
)
def test_ffn_unknown_activation_raises_value_error_with_closest(
    activation, closest
):
    with pytest.raises(ValueError) as info:
        keras_gelu.FeedForward(8, activation=activation)
    message = str(info.value)
    assert repr(activation) in message and "geglu" in message
    assert f'Did you mean "{closest}"?' in message


def test_projection_layers_build_one_mechanism_per_kind():
    (dense,) = keras_gelu.projection_layers(4, "gelu")
    assert isinstance(dense, keras.layers.Dense)
    (glu,) = keras_gelu.projection_layers(4, "geglu")
    assert isinstance(glu, keras_gelu.GLU) and glu.units == 4
    dense, slope = keras_gelu.projection_layers(
        4, "learnable_leaky_relu", name="p"
    )
    assert isinstance(dense, keras.layers.Dense)
    assert isinstance(slope, keras_gelu.LearnableLeakyReLU)
    assert slope.name == "p_activation"


def test_ffn_projections_get_their_own_initializer_streams():
    # A seeded initializer shared by every projection gave identical
    # kernels wherever shapes agreed (up and down of a square FFN).
    init = keras.initializers.GlorotUniform(seed=1)
    block = keras_gelu.FeedForward(8, activation="gelu", kernel_initializer=init)
    block.build((None, 8))
    up, down = (ref.numpy(layer.kernel) for layer in (block.hidden_layers[0], block.down_proj))
    assert up.shape == down.shape == (8, 8)
    assert not np.allclose(up, down)
    # Reproducible: the same config gives the same kernels.
    again = keras_gelu.FeedForward(
        8, activation="gelu", kernel_initializer=keras.initializers.GlorotUniform(seed=1)
    )
    again.build((None, 8))
    np.testing.assert_array_equal(ref.numpy(again.hidden_layers[0].kernel), up)
    np.testing.assert_array_equal(ref.numpy(again.down_proj.kernel), down)
