"""keras_gelu.stacking: a stacked layer is M plain layers, member by member.

Every layer kind the vectorized trainer may meet is checked against M
independently initialized plain copies, forward and after a weight round
trip, so a change inside a keras_gelu layer that the stacked form does not
follow fails here.
"""

import keras
import numpy as np
import pytest

import keras_gelu
from keras_gelu import stacking
from tests.keras_gelu import references as ref

M, BATCH = 3, 5

CASES = [
    ("Dense", lambda: keras.layers.Dense(6, activation=keras_gelu.gelu), (4,)),
    ("Dense-no-bias", lambda: keras.layers.Dense(6, use_bias=False), (4,)),
    # Two middle axes: member_matmul's TensorFlow path moves members to the front.
    ("Dense-4d", lambda: keras.layers.Dense(6, activation="relu"), (2, 3, 4)),
    ("GLU", lambda: keras_gelu.GLU(5, bias_initializer="random_normal"), (4,)),
    ("GEGLU-tanh", lambda: keras_gelu.GEGLU(5, approximate="tanh"), (4,)),
    ("SwiGLU-no-bias", lambda: keras_gelu.SwiGLU(5, use_bias=False), (4,)),
    ("GLU-split", lambda: keras_gelu.GLU(), (6,)),
    ("GLU-split-axis1", lambda: keras_gelu.GLU(axis=1), (4, 3)),
    ("GELU", lambda: keras_gelu.GELU(approximate="sigmoid"), (4,)),
    ("leaky-scalar", lambda: keras_gelu.LearnableLeakyReLU(), (4,)),
    ("leaky-scalar-3d", lambda: keras_gelu.LearnableLeakyReLU(), (2, 4)),
    ("leaky-per-channel", lambda: keras_gelu.LearnableLeakyReLU(per_channel=True), (2, 4)),
    ("leaky-shared-axes", lambda: keras_gelu.LearnableLeakyReLU(shared_axes=[1]), (2, 4)),
    ("FFN-gelu", lambda: keras_gelu.FeedForward(8, activation="gelu"), (4,)),
    ("FFN-geglu-matched", lambda: keras_gelu.FeedForward(12, activation="geglu", match_params=True, output_dim=3), (4,)),
    ("FFN-learnable", lambda: keras_gelu.FeedForward(8, activation="learnable_leaky_relu"), (4,)),
    ("FFN-3d", lambda: keras_gelu.FeedForward(8, activation="swiglu"), (2, 4)),
]


def _plain_copies(make, shape):
    rng = np.random.default_rng(0)
    plain = []
    for m in range(M):
        keras.utils.set_random_seed(m)
        layer = make()
        layer.build((None,) + shape)
        # Slopes start equal: move them so a mix-up of members would show.
        for v in layer.weights:
            v.assign(rng.normal(scale=0.5, size=v.shape).astype("float32"))
        plain.append(layer)
    return plain


@pytest.mark.parametrize("make, shape", [(m, s) for _, m, s in CASES], ids=[n for n, _, _ in CASES])
def test_stacked_layer_equals_each_plain_member(make, shape):
    plain = _plain_copies(make, shape)
    x = np.random.default_rng(1).normal(size=(BATCH, M) + shape).astype("float32")
    stacked = stacking.stack(plain[0], M)
    stacked(x)
    stacking.stack_weights(stacked, plain)
    y = ref.numpy(stacked(x))
    for m, layer in enumerate(plain):
        np.testing.assert_allclose(
            y[:, m], ref.numpy(layer(x[:, m])), rtol=1e-5, atol=1e-6
        )


@pytest.mark.parametrize("make, shape", [(m, s) for _, m, s in CASES], ids=[n for n, _, _ in CASES])
def test_unstack_weights_returns_each_member_to_its_plain_layer(make, shape):
    plain = _plain_copies(make, shape)
    stacked = stacking.stack(plain[0], M)
    stacked(np.zeros((BATCH, M) + shape, "float32"))  # the shapes above: compiled once (JAX)
    stacking.stack_weights(stacked, plain)
    before = [[ref.numpy(v) for v in layer.weights] for layer in plain]
    for v in stacked.weights:
        v.assign(ref.numpy(v) * 2.0)
    stacking.unstack_weights(stacked, plain)
    for m, layer in enumerate(plain):
        for old, new in zip(before[m], layer.weights):
            np.testing.assert_allclose(ref.numpy(new), old * 2.0, rtol=1e-6)


def test_stacking_a_layer_with_unknown_weights_raises():
    layer = keras.layers.Conv1D(2, 3)
    layer.build((None, 8, 1))
    with pytest.raises(ValueError, match="no stacked form for Conv1D"):
        stacking.stack(layer, M)


def test_mismatched_architectures_are_refused():
    plain = _plain_copies(lambda: keras.layers.Dense(6), (4,))
    other = _plain_copies(lambda: keras.layers.Dense(7), (4,))
    stacked = stacking.stack(plain[0], M)
    stacked(np.zeros((BATCH, M, 4), "float32"))
    with pytest.raises(ValueError, match="does not hold"):
        stacking.stack_weights(stacked, other)


# Members of different activations, one architecture (issue 20: activations x
# seeds in one stack): member m applies its own layer's activation.
MIXED = [
    ("FFN-plain", ["relu", "gelu", "gelu", "swish"], 8),
    ("FFN-gated", ["glu", "bilinear", "reglu", "geglu", "swiglu"], 12),
]


@pytest.mark.parametrize("activations, width", [(a, w) for _, a, w in MIXED],
                         ids=[n for n, _, _ in MIXED])
def test_a_mixed_activation_stack_equals_each_plain_member(activations, width):
    members = len(activations)
    rng = np.random.default_rng(0)
    plain = []
    for m, name in enumerate(activations):
        keras.utils.set_random_seed(m)
        layer = keras_gelu.FeedForward(width, activation=name, match_params=True)
        layer.build((None, 4))
        plain.append(layer)
    x = rng.normal(size=(BATCH, members, 4)).astype("float32")
    stacked = stacking.stack(plain, members)
    stacked(x)
    stacking.stack_weights(stacked, plain)
    y = ref.numpy(stacked(x))
    for m, layer in enumerate(plain):
        np.testing.assert_allclose(
            y[:, m], ref.numpy(layer(x[:, m])), rtol=1e-5, atol=1e-6, err_msg=activations[m]
        )


def test_a_stack_refuses_members_that_differ_in_more_than_their_activation():
    plain = [keras_gelu.FeedForward(12, activation=a, match_params=True) for a in ("relu", "geglu")]
    for layer in plain:
        layer.build((None, 4))
    with pytest.raises(ValueError, match="differ in more than their activation"):
        stacking.stack(plain, 2)
