"""The registered pyfunc model: its signature, its answers for every batch
size and backend, under concurrency, and for bad input.

References are the Keras model's own `predict` (a different code path
from the served one) and, for bad input, the HTTP status MLflow's scoring
server gives an `INVALID_PARAMETER_VALUE` exception (400). The same model
code in a real `mlflow models serve` process, its 400s to bad input and
its clean log: sweep/test_end_to_end.py's served moons champion (one
server start for both, issue 17).
"""

import concurrent.futures
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tests.service.serving import small_classifier

FEATURES, CLASSES = small_classifier.FEATURES, small_classifier.CLASSES


@pytest.fixture(scope="module")
def registered(tmp_path_factory):
    """A keras_gelu model registered through `Tracker.register`, as kg-train does."""
    root = tmp_path_factory.mktemp("serving")
    uri, model, version = small_classifier.register(root, "serving-gelu")
    return {
        "uri": uri,
        "root": root,
        "model": model,
        "model_uri": f"models:/serving-gelu/{version}",
    }


def load_pyfunc(registered):
    import mlflow

    mlflow.set_tracking_uri(registered["uri"])
    return mlflow.pyfunc.load_model(registered["model_uri"])


def reference(registered, x):
    return registered["model"].predict(np.asarray(x, "float32"), verbose=0)


def test_logged_signature_declares_the_output_and_no_input_schema(registered):
    # An input schema is what made MLflow's server read named columns by
    # position (issue 30 §2); the pyfunc matches them to model_config's names.
    import mlflow

    mlflow.set_tracking_uri(registered["uri"])
    info = mlflow.models.get_model_info(registered["model_uri"])
    outputs = info.signature.outputs.to_dict()
    assert info.signature.inputs is None
    assert outputs == [{"type": "tensor", "tensor-spec": {"dtype": "float32", "shape": (-1, CLASSES)}}]
    assert info.signature._is_signature_from_type_hint is False
    names = list(small_classifier.FEATURE_NAMES)
    assert info.flavors["python_function"]["config"] == {"feature_names": names}
    assert info.metadata["feature_names"] == names


@pytest.mark.parametrize("rows", [1, 3, 64, 5000])
def test_pyfunc_answers_like_keras_predict_for_every_batch_size(registered, rows):
    # 5000 rows: more than one padded chunk (MAX_BATCH 4096).
    x = np.random.default_rng(rows).normal(size=(rows, FEATURES)).astype("float32")
    served = load_pyfunc(registered).predict(x)
    assert served.dtype == np.float32 and served.shape == (rows, CLASSES)
    np.testing.assert_allclose(served, reference(registered, x), atol=1e-5)


def test_the_compiled_graph_only_ever_sees_power_of_two_batches():
    # One XLA compilation per size class, never one per request size.
    from kg_service.tasks.classification import pyfunc as mlflow_model

    seen = []

    def run(x):
        seen.append(len(x))
        return x * 2

    forward = mlflow_model.padded(run)
    for rows in (0, 1, 2, 3, 5, 17, 100, 4096, 4097, 9000):
        x = np.arange(rows * FEATURES, dtype="float32").reshape(rows, FEATURES)
        np.testing.assert_array_equal(forward(x), x * 2)
    assert set(seen) <= {2**k for k in range(13)}, sorted(set(seen))


def test_pyfunc_takes_a_dataframe_as_well(registered):
    import pandas as pd

    x = np.random.default_rng(1).normal(size=(4, FEATURES)).astype("float32")
    served = load_pyfunc(registered).predict(pd.DataFrame(x))
    np.testing.assert_allclose(served, reference(registered, x), atol=1e-5)


def test_named_columns_are_matched_to_the_feature_names_in_any_order(registered):
    # As MLflow's server hands them over, with no input schema: records,
    # split and CSV as a DataFrame of the client's names; {name: values}
    # inputs as a dict; a headerless CSV's first row as the header.
    import pandas as pd

    x = np.random.default_rng(3).normal(size=(3, FEATURES)).astype("float64")
    want = reference(registered, x)
    model = load_pyfunc(registered)
    reversed_names = list(small_classifier.FEATURE_NAMES)[::-1]
    for named in (
        pd.DataFrame(x[:, ::-1], columns=reversed_names),
        {"y": x[:, 1], "x": x[:, 0]},
    ):
        np.testing.assert_allclose(model.predict(named), want, atol=1e-5)
    header = pd.DataFrame(x[1:], columns=[repr(float(v)) for v in x[0]])
    np.testing.assert_allclose(model.predict(header), want, atol=1e-5)
    twice = pd.DataFrame(x[1:], columns=["0.5", "0.5.1"])
    expected = reference(registered, np.concatenate([[[0.5, 0.5]], x[1:]]))
    np.testing.assert_allclose(model.predict(twice), expected, atol=1e-5)


@pytest.mark.parametrize(
    "columns, fragment",
    [
        (["x"], "'y' missing"),
        (["x", "y", "z"], "unknown column 'z'"),
        (["x", "yy"], "unknown column 'yy' (did you mean 'y'?)"),
        (["x", "x"], "'x' named twice"),
    ],
)
def test_a_missing_unknown_or_repeated_name_is_a_400_naming_the_features(
    registered, columns, fragment
):
    import pandas as pd
    from mlflow.exceptions import MlflowException

    frame = pd.DataFrame([[0.5] * len(columns)], columns=columns)
    with pytest.raises(MlflowException) as caught:
        load_pyfunc(registered).predict(frame)
    assert caught.value.get_http_status_code() == 400
    assert fragment in caught.value.message
    assert "this model's features are 'x', 'y'" in caught.value.message


def test_concurrent_requests_each_get_their_own_rows(registered):
    # The scoring server runs each request's predict in its own thread; the
    # model computes requests that wait together in one call.
    model = load_pyfunc(registered)
    rng = np.random.default_rng(2)
    inputs = [rng.normal(size=(int(n), FEATURES)).astype("float32") for n in rng.integers(1, 40, 96)]
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(model.predict, inputs))
    # Keras' predict once for all rows, cut back into the requests (each row
    # its own: one predict per request was ~12 s of CPU, issue 17).
    expected = np.split(reference(registered, np.concatenate(inputs)),
                        np.cumsum([len(x) for x in inputs])[:-1])
    for x, served, want in zip(inputs, answers, expected):
        assert served.shape == (len(x), CLASSES)
        np.testing.assert_allclose(served, want, atol=1e-5)


@pytest.mark.parametrize(
    "value, shown", [(np.nan, "nan"), (np.inf, "inf"), (-np.inf, "-inf")]
)
def test_non_finite_input_raises_invalid_parameter_value_naming_it(registered, value, shown):
    from mlflow.exceptions import MlflowException

    x = np.zeros((3, FEATURES), "float32")
    x[2, 1] = value
    with pytest.raises(MlflowException) as caught:
        load_pyfunc(registered).predict(x)
    assert caught.value.error_code == "INVALID_PARAMETER_VALUE"
    assert caught.value.get_http_status_code() == 400
    message = caught.value.message
    assert "finite" in message and f"got {shown} in row 2, column 1" in message


def test_model_is_usable_after_bad_input(registered):
    model = load_pyfunc(registered)
    with pytest.raises(Exception):
        model.predict(np.array([[np.nan, 0.2]], "float32"))
    x = np.array([[0.5, -0.2]], "float32")
    np.testing.assert_allclose(model.predict(x), reference(registered, x), atol=1e-5)


BACKENDS = [
    pytest.param(
        name,
        marks=pytest.mark.skipif(
            __import__("importlib").util.find_spec(module) is None,
            reason=f"{module} not installed",
        ),
    )
    for name, module in (("tensorflow", "tensorflow"), ("jax", "jax"), ("torch", "torch"))
]


@pytest.mark.parametrize("backend", BACKENDS)
def test_pyfunc_loads_in_a_fresh_process_on_every_backend(registered, backend, tmp_path):
    x = np.random.default_rng(3).normal(size=(5, FEATURES)).astype("float32")
    np.save(tmp_path / "x.npy", x)
    code = textwrap.dedent(
        f"""
        import sys, numpy as np, mlflow
        mlflow.set_tracking_uri({registered['uri']!r})
        model = mlflow.pyfunc.load_model({registered['model_uri']!r})
        x = np.load({str(tmp_path / 'x.npy')!r})
        out = np.concatenate([model.predict(x[:1]), model.predict(x[1:4]), model.predict(x[4:])])
        np.save({str(tmp_path / 'out.npy')!r}, out)
        print("keras_gelu loaded from", sys.modules["keras_gelu"].__file__)
        print("its names from", sys.modules["keras_gelu_names"].__file__)
        """
    )
    env = {**os.environ, "KERAS_BACKEND": backend}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # The model's own copy of keras_gelu (logged code path), not the checkout's.
    assert "/code/keras_gelu/" in done.stdout, done.stdout
    assert "/code/keras_gelu_names/" in done.stdout, done.stdout
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), reference(registered, x), atol=1e-5)


# What MLflow's scoring server hands the model for requests a skeptic sent
# `mlflow models serve` (the server the README prints beside kg serve):
# each was answered 200, cast or read by place, before these checks.
def _not_numbers():
    import pandas as pd

    return [
        (pd.DataFrame({"y": ["-0.2"], "x": ["0.5"]}), "not numbers (strings)"),
        (pd.DataFrame({"y": [True], "x": [False]}), "not numbers (booleans)"),
        (np.array([["0.5", "-0.2"]]), "not numbers (strings)"),
        (np.array([[False, True]]), "not numbers (booleans)"),
        ({"y": np.array(["-0.2"]), "x": np.array(["0.5"])}, "not numbers (strings)"),
        ({"y": np.array([[-0.2, 1.0]]), "x": np.array([[0.5, 0.0]])}, "one value per row"),
        ({"y": np.array([]), "x": np.array([])}, "the batch is empty"),
        (np.zeros((0, FEATURES)), "the batch is empty"),
        # A headerless CSV whose first row repeats a value: pandas reads
        # "0,0" as the header "0", "0.1", and 0.1 is a number too.
        (pd.DataFrame([[0.5, -0.2]], columns=["0", "0.1"]), "cannot be read back exactly"),
        # pandas' names for an unnamed frame's columns (to_json records).
        (pd.DataFrame([[0.5, -0.2]], columns=["0", "1"]), "names '0', '1'"),
        (pd.DataFrame([[-0.2, 0.5]], columns=["1", "0"]), "names '1', '0'"),
    ]


@pytest.mark.parametrize("index", range(11))
def test_input_that_is_not_a_matrix_of_numbers_is_a_400_never_a_cast(registered, index):
    from mlflow.exceptions import MlflowException

    given, fragment = _not_numbers()[index]
    with pytest.raises(MlflowException) as caught:
        load_pyfunc(registered).predict(given)
    assert caught.value.get_http_status_code() == 400
    assert fragment in caught.value.message, caught.value.message
