import keras
import numpy as np
import pytest

from kg_service.config.schema import ModelConfig
from kg_service.tasks.classification.data import FeatureStats
from kg_service.errors import ServiceError
from kg_service.tasks.classification.models import build_model
from kg_service.tasks.classification.models import stack_weights
from kg_service.tasks.classification.models import unstack_weights

ACTIVATIONS = ["relu", "gelu", "geglu", "swiglu", "learnable_leaky_relu"]
BLOCKS = {
    "dense": ModelConfig(hidden_units=(8, 6), block="dense"),
    "feedforward": ModelConfig(
        hidden_units=(12, 6), block="feedforward", d_model=4, match_params=True
    ),
}
INPUT_DIM, N_CLASSES, MEMBERS = 3, 4, 3


def _inputs(batch=16):
    return (
        np.random.default_rng(0)
        .normal(size=(batch, INPUT_DIM))
        .astype("float32")
    )


def _plain_models(cfg, activation, seeds=range(MEMBERS), **kwargs):
    models = []
    for seed in seeds:
        keras.utils.set_random_seed(seed)
        models.append(
            build_model(cfg, activation, INPUT_DIM, N_CLASSES, **kwargs)
        )
    return models


def _stacked_prediction(stacked, x):
    tiled = np.repeat(x[:, None], stacked.input_shape[1], axis=1)
    return keras.ops.convert_to_numpy(stacked(tiled))


@pytest.mark.parametrize("block", sorted(BLOCKS))
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_plain_model_outputs_class_probabilities(activation, block):
    model = build_model(BLOCKS[block], activation, INPUT_DIM, N_CLASSES)
    probs = keras.ops.convert_to_numpy(model(_inputs()))
    assert model.input_shape == (None, INPUT_DIM)
    assert probs.shape == (16, N_CLASSES)
    assert np.all(probs >= 0)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-6)


@pytest.mark.parametrize("block", sorted(BLOCKS))
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_stacked_model_equals_its_plain_members_after_stack_weights(
    activation, block
):
    cfg = BLOCKS[block]
    plain = _plain_models(cfg, activation)
    stacked = build_model(
        cfg, activation, INPUT_DIM, N_CLASSES, members=MEMBERS
    )
    assert stacked.input_shape == (None, MEMBERS, INPUT_DIM)
    assert stacked.output_shape == (None, MEMBERS, N_CLASSES)
    stack_weights(stacked, plain)
    x = _inputs()
    got = _stacked_prediction(stacked, x)
    for m, model in enumerate(plain):
        want = keras.ops.convert_to_numpy(model(x))
        np.testing.assert_allclose(got[:, m], want, atol=1e-6)


def test_stacked_members_see_their_own_inputs():
    cfg = BLOCKS["dense"]
    plain = _plain_models(cfg, "gelu")
    stacked = build_model(cfg, "gelu", INPUT_DIM, N_CLASSES, members=MEMBERS)
    stack_weights(stacked, plain)
    x = (
        np.random.default_rng(1)
        .normal(size=(5, MEMBERS, INPUT_DIM))
        .astype("float32")
    )
    got = keras.ops.convert_to_numpy(stacked(x))
    for m, model in enumerate(plain):
        want = keras.ops.convert_to_numpy(model(x[:, m]))
        np.testing.assert_allclose(got[:, m], want, atol=1e-6)


@pytest.mark.parametrize("activation", ["geglu", "learnable_leaky_relu"])
def test_unstack_weights_copies_each_member_back_to_its_plain_model(activation):
    cfg = BLOCKS["feedforward"]
    stacked = build_model(
        cfg, activation, INPUT_DIM, N_CLASSES, members=MEMBERS
    )
    rng = np.random.default_rng(2)
    for variable in stacked.weights:
        # Scale 0.3: N(0, 1) weights give logits ~1e5 through the gated
        # blocks, where einsum vs matmul rounding alone moves softmax 2e-6.
        values = 0.3 * rng.normal(size=variable.shape)
        variable.assign(values.astype("float32"))
    plain = _plain_models(cfg, activation)
    unstack_weights(stacked, plain)
    x = _inputs()
    got = _stacked_prediction(stacked, x)
    for m, model in enumerate(plain):
        want = keras.ops.convert_to_numpy(model(x))
        np.testing.assert_allclose(got[:, m], want, atol=1e-6)


def test_learnable_slope_is_one_scalar_per_member():
    cfg = ModelConfig(hidden_units=(8,))
    plain = _plain_models(cfg, "learnable_leaky_relu")
    for m, model in enumerate(plain):
        model.get_layer("hidden_0_activation").slope.assign(0.1 * (m + 1))
    stacked = build_model(
        cfg, "learnable_leaky_relu", INPUT_DIM, N_CLASSES, members=MEMBERS
    )
    stack_weights(stacked, plain)
    slope = keras.ops.convert_to_numpy(
        stacked.get_layer("hidden_0_activation").slope
    )
    np.testing.assert_allclose(slope.ravel(), [0.1, 0.2, 0.3], rtol=1e-6)


def test_stack_weights_rejects_a_different_architecture():
    plain = _plain_models(BLOCKS["dense"], "relu")
    stacked = build_model(
        BLOCKS["dense"], "geglu", INPUT_DIM, N_CLASSES, members=MEMBERS
    )
    with pytest.raises(ValueError, match="does not hold"):
        stack_weights(stacked, plain)
    narrower = ModelConfig(hidden_units=(8,))
    wider = build_model(narrower, "relu", INPUT_DIM, N_CLASSES, members=MEMBERS)
    with pytest.raises(ValueError, match="not the same architecture"):
        stack_weights(wider, plain)


def test_dropout_adds_no_weights_so_members_still_line_up():
    cfg = ModelConfig(hidden_units=(8, 6), dropout=0.3)
    plain = _plain_models(cfg, "swiglu")
    stacked = build_model(cfg, "swiglu", INPUT_DIM, N_CLASSES, members=MEMBERS)
    stack_weights(stacked, plain)  # Raises if the weight lists differ.
    got = _stacked_prediction(stacked, _inputs())  # Inference: no dropout.
    want = keras.ops.convert_to_numpy(plain[1](_inputs()))
    np.testing.assert_allclose(got[:, 1], want, atol=1e-6)


def test_same_seed_builds_identical_initial_weights():
    a, b = _plain_models(BLOCKS["dense"], "gelu", seeds=(7, 7))
    (c,) = _plain_models(BLOCKS["dense"], "gelu", seeds=(8,))
    for wa, wb in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_array_equal(wa, wb)
    assert not np.array_equal(a.get_weights()[0], c.get_weights()[0])


def test_mixed_precision_model_outputs_float32_probabilities():
    model = build_model(
        BLOCKS["dense"], "gelu", INPUT_DIM, N_CLASSES, dtype="mixed_bfloat16"
    )
    assert model.get_layer("hidden_0").compute_dtype == "bfloat16"
    probs = model(_inputs())
    assert keras.backend.standardize_dtype(probs.dtype) == "float32"


def test_unknown_block_raises_service_error():
    with pytest.raises(ServiceError, match="feedforward"):
        build_model(ModelConfig(block="conv"), "relu", INPUT_DIM, N_CLASSES)


# --- Normalization: the model takes raw features. ------------------------


def _stats():
    # Feature 2 is constant in training: variance replaced by 1 (data.py).
    return FeatureStats(
        mean=np.array([3.0, -20.0, 7.0]), variance=np.array([4.0, 0.25, 1.0])
    )


def _raw_inputs(batch=16):
    # Raw units far from standardized, and the "constant" feature nonzero.
    rng = np.random.default_rng(3)
    return (rng.normal(size=(batch, INPUT_DIM)) * [2.0, 0.5, 1.0]
            + [3.0, -20.0, 9.0]).astype("float32")


@pytest.mark.parametrize("block", sorted(BLOCKS))
def test_normalized_model_on_raw_features_equals_the_bare_one_on_z_scores(
    block,
):
    cfg = BLOCKS[block]
    stats = _stats()
    (normalized,) = _plain_models(cfg, "gelu", seeds=(0,), normalization=stats)
    (bare,) = _plain_models(cfg, "gelu", seeds=(0,))
    assert len(normalized.weights) == len(bare.weights)  # constants only
    bare.set_weights(normalized.get_weights())
    raw = _raw_inputs()
    z = (raw.astype("float64") - stats.mean) / np.sqrt(stats.variance)
    got = keras.ops.convert_to_numpy(normalized(raw))
    want = keras.ops.convert_to_numpy(bare(z.astype("float32")))
    np.testing.assert_allclose(got, want, atol=1e-6)


@pytest.mark.parametrize("activation", ["geglu", "learnable_leaky_relu"])
def test_stacked_model_with_normalization_equals_its_plain_members(activation):
    cfg = BLOCKS["feedforward"]
    stats = _stats()
    plain = _plain_models(cfg, activation, normalization=stats)
    stacked = build_model(
        cfg,
        activation,
        INPUT_DIM,
        N_CLASSES,
        members=MEMBERS,
        normalization=stats,
    )
    stack_weights(stacked, plain)
    x = _raw_inputs()
    got = _stacked_prediction(stacked, x)
    for m, model in enumerate(plain):
        want = keras.ops.convert_to_numpy(model(x))
        np.testing.assert_allclose(got[:, m], want, atol=1e-6)


def test_saved_keras_file_keeps_the_normalization(tmp_path):
    (model,) = _plain_models(
        BLOCKS["dense"], "swiglu", seeds=(0,), normalization=_stats()
    )
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.get_layer("normalization") is not None
    x = _raw_inputs()
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(loaded(x)),
        keras.ops.convert_to_numpy(model(x)),
        atol=1e-7,
    )


def test_no_normalization_layer_without_statistics():
    model = build_model(BLOCKS["dense"], "relu", INPUT_DIM, N_CLASSES)
    assert not any(
        isinstance(layer, keras.layers.Normalization) for layer in model.layers
    )


def test_mixed_precision_normalizes_in_float32():
    model = build_model(
        BLOCKS["dense"],
        "gelu",
        INPUT_DIM,
        N_CLASSES,
        dtype="mixed_bfloat16",
        normalization=_stats(),
    )
    assert model.get_layer("normalization").compute_dtype == "float32"
    assert model.get_layer("hidden_0").compute_dtype == "bfloat16"


def test_every_catalog_block_and_optimizer_builds():
    # The names config validation accepts are the ones that work.
    from kg_service.config import catalog
    from kg_service.tasks.classification import models
    from kg_service.config.schema import TrainingConfig
    from kg_service.training.optimizers import make_optimizer

    assert set(models.BLOCKS) == set(catalog.BLOCKS)
    for name in catalog.BLOCKS:
        assert build_model(ModelConfig(block=name, hidden_units=(4,)), "gelu", 2, 2)
    for name in catalog.OPTIMIZERS:
        optimizer = make_optimizer(TrainingConfig(optimizer=name, learning_rate=0.1))
        assert float(optimizer.learning_rate) == pytest.approx(0.1)
