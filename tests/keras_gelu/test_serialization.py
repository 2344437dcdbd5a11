"""Saving and loading: configs, .keras files in fresh processes, SavedModel.

The .keras checks are batched: one functional model holding every public
function and layer, one Sequential and one subclassed model are saved
once; the current backend reloads all three in this process and must
reproduce the outputs bit for bit, one fresh process of the next backend
in the cycle loads them to ~1e-6. That process also checks that the name
table's file loads alone without Keras, and the keras_gelu-first import
order; this process is the keras-first one (fresh_loads.py). Every
backend's fresh-process load is checked by the previous backend's suite.
"""

import inspect
import os

import keras
import numpy as np
import pytest
from keras import ops

import keras_gelu
from tests.keras_gelu import conftest
from tests.keras_gelu import custom_models
from tests.keras_gelu import fresh_loads
from tests.keras_gelu import layer_harness
from tests.keras_gelu import references as ref

# Every public layer class; each test that means "all of them" uses this.
PUBLIC_LAYERS = (
    keras_gelu.GELU,
    keras_gelu.GLU,
    keras_gelu.GEGLU,
    keras_gelu.SwiGLU,
    keras_gelu.ReGLU,
    keras_gelu.Bilinear,
    keras_gelu.LearnableLeakyReLU,
    keras_gelu.FeedForward,
)

BACKENDS = ("tensorflow", "jax", "torch")
X = np.random.default_rng(5).normal(size=(3, 5, 8)).astype(np.float32)

# Every public function, as a Dense activation (label, function).
ELEMENTWISE_FUNCTIONS = [
    ("gelu", keras_gelu.gelu),
    ("gelu_tanh", keras_gelu.gelu_tanh),
    ("gelu_sigmoid", keras_gelu.gelu_sigmoid),
    ("quick_gelu", keras_gelu.quick_gelu),
    ("relu", keras_gelu.relu),
    ("leaky_relu", keras_gelu.leaky_relu),
    ("silu", keras_gelu.silu),
    ("swish", keras_gelu.swish),
    ("mish", keras_gelu.mish),
    ("elu", keras_gelu.elu),
]
GATED_FUNCTIONS = [(name, getattr(keras_gelu, name)) for name in ref.GATED]


def every_layer():
    """One of each layer, in non-default configurations where it matters."""
    return [
        keras_gelu.GELU(),
        keras_gelu.GELU(approximate="tanh"),
        keras_gelu.GELU(approximate="sigmoid"),
        keras_gelu.GLU(4, bias_initializer="random_normal"),
        keras_gelu.GLU(
            4, activation="gelu_tanh", bias_initializer="random_normal"
        ),
        keras_gelu.GLU(),
        keras_gelu.GEGLU(4, bias_initializer="random_normal"),
        keras_gelu.GEGLU(4, approximate="sigmoid", use_bias=False),
        keras_gelu.SwiGLU(4, bias_initializer="random_normal"),
        keras_gelu.ReGLU(4, bias_initializer="random_normal"),
        keras_gelu.Bilinear(4, bias_initializer="random_normal"),
        keras_gelu.LearnableLeakyReLU(),
        keras_gelu.LearnableLeakyReLU(per_channel=True),
        keras_gelu.LearnableLeakyReLU(shared_axes=[1]),
        keras_gelu.LearnableLeakyReLU(
            initial_slope=0.3, slope_constraint="non_neg"
        ),
        keras_gelu.FeedForward(16, activation="geglu", match_params=True),
        keras_gelu.FeedForward(
            16,
            activation="gelu",
            output_dim=5,
            dropout=0.1,
            bias_initializer="random_normal",
        ),
        keras_gelu.FeedForward(
            16, activation="learnable_leaky_relu", use_bias=False
        ),
        keras_gelu.FeedForward(16, activation=keras_gelu.quick_gelu),
    ]


def randomize_slopes(model, seed=0):
    """Move every learnable slope off its initial value, so that loading
    the initial value instead of the saved one would show."""
    rng = np.random.default_rng(seed)
    for v in model.weights:
        if v.path.endswith("slope"):
            v.assign(rng.uniform(0.05, 0.5, size=v.shape).astype(np.float32))


def build_functional():
    inputs = keras.Input((5, 8))
    dense = dict(bias_initializer="random_normal")
    outputs = [
        keras.layers.Dense(6, activation=fn, name=f"dense_{label}", **dense)(
            inputs
        )
        for label, fn in ELEMENTWISE_FUNCTIONS
    ]
    # A gated function as a GLU's activation means its gate.
    outputs += [
        keras_gelu.GLU(activation=fn, name=f"split_{label}")(
            keras.layers.Dense(8, name=f"dense_{label}", **dense)(inputs)
        )
        for label, fn in GATED_FUNCTIONS
    ]
    trunk = keras.layers.Dense(8, name="trunk", **dense)(inputs)
    outputs += [layer(trunk) for layer in every_layer()]
    model = keras.Model(inputs, keras.layers.Concatenate()(outputs))
    randomize_slopes(model)
    return model


def build_sequential():
    model = keras.Sequential(
        [
            keras.Input((5, 8)),
            keras.layers.Dense(16, activation=keras_gelu.gelu_tanh),
            keras_gelu.GEGLU(
                8, approximate="sigmoid", bias_initializer="random_normal"
            ),
            keras_gelu.LearnableLeakyReLU(shared_axes=[1]),
            keras_gelu.FeedForward(12, activation="reglu", output_dim=6),
            keras_gelu.GLU(),
            keras_gelu.GELU(),
            keras.layers.Dense(8),
            keras_gelu.SwiGLU(),
        ]
    )
    randomize_slopes(model, seed=1)
    return model


def build_subclassed():
    model = custom_models.GatedResidualModel()
    model(X)
    randomize_slopes(model, seed=2)
    return model


def outputs_of(model):
    return ops.convert_to_numpy(model(X, training=False))


# --- get_config / from_config. ------------------------------------------------

CONFIG_CASES = [
    ("GELU-tanh", lambda: keras_gelu.GELU(approximate=True), (2, 8)),
    ("GELU-mixed", lambda: keras_gelu.GELU(dtype="mixed_bfloat16"), (2, 8)),
    (
        "GLU",
        lambda: keras_gelu.GLU(
            3,
            activation="tanh",
            use_bias=False,
            kernel_initializer="he_normal",
            kernel_regularizer="l2",
            kernel_constraint="max_norm",
        ),
        (2, 8),
    ),
    (
        "GLU-bias",
        lambda: keras_gelu.GLU(
            3,
            activation=keras_gelu.mish,
            bias_initializer="random_normal",
            bias_regularizer=keras.regularizers.L1(0.01),
            bias_constraint="non_neg",
        ),
        (2, 8),
    ),
    ("GLU-split", lambda: keras_gelu.GLU(axis=1), (2, 6, 3)),
    ("GEGLU", lambda: keras_gelu.GEGLU(4, approximate="sigmoid"), (2, 8)),
    ("GEGLU-split", lambda: keras_gelu.GEGLU(approximate="tanh"), (2, 8)),
    ("SwiGLU", lambda: keras_gelu.SwiGLU(4, use_bias=False), (2, 8)),
    ("ReGLU", lambda: keras_gelu.ReGLU(4), (2, 8)),
    ("Bilinear", lambda: keras_gelu.Bilinear(4), (2, 8)),
    (
        "LearnableLeakyReLU",
        lambda: keras_gelu.LearnableLeakyReLU(
            initial_slope=0.2,
            per_channel=True,
            slope_regularizer="l2",
            slope_constraint="non_neg",
        ),
        (2, 8),
    ),
    (
        "LearnableLeakyReLU-shared",
        lambda: keras_gelu.LearnableLeakyReLU(shared_axes=2),
        (2, 4, 3),
    ),
    (
        "FeedForward",
        lambda: keras_gelu.FeedForward(
            16,
            activation="swiglu",
            output_dim=6,
            dropout=0.1,
            use_bias=False,
            match_params=True,
            kernel_initializer="he_uniform",
            bias_initializer="ones",
        ),
        (2, 8),
    ),
    (
        "FeedForward-callable",
        lambda: keras_gelu.FeedForward(16, activation=keras_gelu.gelu_tanh),
        (2, 8),
    ),
    (
        "FeedForward-keras-name",
        lambda: keras_gelu.FeedForward(16, activation="tanh"),
        (2, 8),
    ),
    (
        "FeedForward-learnable",
        lambda: keras_gelu.FeedForward(16, activation="learnable_leaky_relu"),
        (2, 8),
    ),
]


def _copy_and_compare(original, restored, shape):
    x = np.random.default_rng(9).normal(size=shape).astype(np.float32)
    original(x)
    restored(x)
    randomize_slopes(original)
    restored.set_weights(original.get_weights())
    np.testing.assert_array_equal(
        ops.convert_to_numpy(restored(x, training=False)),
        ops.convert_to_numpy(original(x, training=False)),
    )


@pytest.mark.parametrize(
    "make, shape",
    [(m, s) for _, m, s in CONFIG_CASES],
    ids=[n for n, _, _ in CONFIG_CASES],
)
def test_layer_from_config_is_indistinguishable_from_original(make, shape):
    # Keras's round trips (from_config, serialize/deserialize) check the
    # configs and attributes; the weights copied over give equal outputs.
    layer = make()
    restored = layer_harness.round_trip(layer)
    serialized = keras.saving.serialize_keras_object(layer)
    assert serialized["registered_name"] == f"keras_gelu>{type(layer).__name__}"
    assert type(restored) is type(layer)
    _copy_and_compare(layer, restored, shape)


@pytest.mark.parametrize("cls", PUBLIC_LAYERS)
def test_get_config_holds_every_init_argument(cls):
    layer = cls(8) if cls is keras_gelu.FeedForward else cls()
    params = inspect.signature(cls.__init__).parameters
    wanted = {
        n
        for n, p in params.items()
        if n != "self" and p.kind == p.POSITIONAL_OR_KEYWORD
    }
    assert wanted <= set(layer.get_config())


@pytest.mark.parametrize(
    "label, fn",
    ELEMENTWISE_FUNCTIONS + GATED_FUNCTIONS,
    ids=[n for n, _ in ELEMENTWISE_FUNCTIONS + GATED_FUNCTIONS],
)
def test_dense_activation_config_round_trip_keeps_the_function(label, fn):
    layer = keras.layers.Dense(8, activation=fn)
    restored = keras.layers.Dense.from_config(layer.get_config())
    assert restored.activation is fn


# --- .keras files in fresh processes. -----------------------------------------


MODELS = ["functional", "sequential", "subclassed"]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """Saves the three models, reloads them here and loads them in a fresh
    process for each other backend (fresh_loads.py: those processes also
    check the name table alone and both import orders).

    Returns ({model name: outputs here}, {backend: ({name: outputs
    there}, facts)}), or the process's output where loading failed; this
    backend's facts are None (no fresh process).
    """
    keras.utils.set_random_seed(42)
    directory = tmp_path_factory.mktemp("keras_files")
    expected = {}
    for name, build in [
        ("functional", build_functional),
        ("sequential", build_sequential),
        ("subclassed", build_subclassed),
    ]:
        model = build()
        expected[name] = outputs_of(model)
        model.save(str(directory / f"{name}.keras"))
    np.save(directory / "inputs.npy", X)
    loaded = fresh_loads.load_everywhere(directory, BACKENDS, ref.BACKEND)
    # This backend's fresh-process load is the other suites' check (their
    # processes load on it); here the files reload in this process.
    loaded[ref.BACKEND] = (
        {
            name: outputs_of(keras.saving.load_model(str(directory / f"{name}.keras")))
            for name in MODELS
        },
        None,
    )
    return expected, loaded


def _loaded(saved, backend, facts=False):
    expected, loaded = saved
    result = loaded[backend]
    assert isinstance(
        result, tuple
    ), f"loading under {backend} failed:\n{result}"
    return result[1] if facts else (expected, result[0])


def test_functional_model_holds_every_public_function_and_layer():
    model = build_functional()
    classes = {type(layer) for layer in model.layers}
    for cls in PUBLIC_LAYERS:
        assert cls in classes
    activations = {getattr(layer, "activation", None) for layer in model.layers}
    for _, fn in ELEMENTWISE_FUNCTIONS:
        assert fn in activations
    # A gated function is not an elementwise Dense activation (it halves
    # the width): each appears as the gate of a GLU.
    for label, _ in GATED_FUNCTIONS:
        assert keras_gelu.activations.gate_function(label) in activations


@pytest.mark.parametrize("name", MODELS)
def test_keras_file_reloads_bit_identical_on_its_own_backend(saved, name):
    expected, loaded = _loaded(saved, ref.BACKEND)
    assert np.array_equal(loaded[name], expected[name])


def test_over_the_three_suites_every_backend_loads_fresh_after_either_import_order():
    # What moving this backend's own load into this process, and one fresh
    # process per suite, rest on: each suite starts a fresh process of the
    # next backend in the cycle, so over the three suites every backend
    # loads in a fresh process once (keras_gelu imported first, the name
    # table alone before it) and every backend's files load under another
    # backend once; the keras-first order is each suite's own process's.
    fresh = [fresh_loads.others(own, list(BACKENDS))[0] for own in BACKENDS]
    assert sorted(fresh) == sorted(BACKENDS)
    assert all(loader != saver for saver, loader in zip(BACKENDS, fresh))
    assert conftest.KERAS_FIRST


@pytest.mark.parametrize("backend", fresh_loads.others(ref.BACKEND, list(BACKENDS))[:1])
@pytest.mark.parametrize("name", MODELS)
def test_keras_file_loads_under_other_backend_with_same_outputs(
    saved, name, backend
):
    expected, loaded = _loaded(saved, backend)
    np.testing.assert_allclose(
        loaded[name], expected[name], rtol=1e-6, atol=1e-6
    )


def test_loaded_outputs_are_not_trivially_equal(saved):
    # Guards the checks above: different models give different numbers,
    # and the slopes were moved off their initial values before saving.
    expected, _ = saved
    assert expected["functional"].shape[-1] > 100
    assert np.std(expected["functional"]) > 0.1
    fresh = build_functional()
    assert not np.allclose(outputs_of(fresh), expected["functional"])


def test_name_table_file_loads_alone_without_keras(saved):
    # kg-train validates configs against the name table without paying for
    # Keras (issue 16): `import keras_gelu_names` imports nothing else.
    # Checked in the first other backend's fresh process, before it
    # imports keras_gelu.
    first = fresh_loads.others(ref.BACKEND, list(BACKENDS))[0]
    facts = _loaded(saved, first, facts=True)
    assert facts["first"] == "keras_gelu"
    assert facts["imported_with_the_table"] == []
    assert facts["table_names"] == facts["names"] == keras_gelu.names()


@pytest.mark.parametrize("first", ["keras_gelu", "keras"])
def test_saved_model_loads_after_import_keras_gelu_in_either_order(saved, tmp_path, first):
    # Issue 16: a lazy package face broke the keras_gelu-first order. The
    # fresh process imports keras_gelu first; this process imported keras
    # first (conftest.py). Every file loaded with the outputs above (the
    # tests above), here the Sequential's first layers by name.
    model = build_sequential()
    names = [model.layers[0].activation.__name__, type(model.layers[1]).__name__]
    assert names == ["gelu_tanh", "GEGLU"]
    if first == "keras_gelu":
        backend = fresh_loads.others(ref.BACKEND, list(BACKENDS))[0]
        assert _loaded(saved, backend, facts=True)["first"] == "keras_gelu"
        assert _loaded(saved, backend, facts=True)["sequential_layers"] == names
    else:
        assert conftest.KERAS_FIRST
        model.save(str(tmp_path / "sequential.keras"))
        loaded = keras.saving.load_model(str(tmp_path / "sequential.keras"))
        assert [loaded.layers[0].activation.__name__, type(loaded.layers[1]).__name__] == names


# --- SavedModel export (TensorFlow). ------------------------------------------


def _xla_compiled_functions(path):
    from tensorflow.core.protobuf import saved_model_pb2

    saved_model = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        saved_model.ParseFromString(f.read())
    found = []
    for meta_graph in saved_model.meta_graphs:
        graph = meta_graph.graph_def
        nodes = list(graph.node)
        for function in graph.library.function:
            nodes += function.node_def
            if function.attr["_XlaMustCompile"].b:
                found.append(function.signature.name)
        found += [n.name for n in nodes if n.attr["_XlaMustCompile"].b]
    return found


@ref.tf_only("SavedModel export")
def test_saved_model_export_without_fusion_reloads_with_same_outputs(tmp_path):
    import tensorflow as tf

    model = build_sequential()
    expected = outputs_of(model)
    path = str(tmp_path / "exported")
    with keras_gelu.xla_fusion(False):
        model.export(path, format="tf_saved_model", verbose=False)
    # Plain TensorFlow ops only: any TF Serving build can run it.
    assert _xla_compiled_functions(path) == []
    reloaded = tf.saved_model.load(path)
    np.testing.assert_allclose(
        reloaded.serve(tf.constant(X)).numpy(), expected, rtol=1e-6, atol=1e-6
    )


@ref.tf_only("SavedModel export")
def test_saved_model_export_with_fusion_holds_xla_kernels(tmp_path):
    # The contrast to the test above: the fusion flag is what decides.
    model = keras.Sequential(
        [keras.Input((8,)), keras.layers.Dense(4, activation=keras_gelu.gelu)]
    )
    path = str(tmp_path / "exported")
    with keras_gelu.xla_fusion(True):
        model.export(path, format="tf_saved_model", verbose=False)
    assert _xla_compiled_functions(path)
