"""The served pyfunc's call path, without a registered model: combining
concurrent requests (`Combined`) and the direct TensorFlow call
(`direct_call`). Pure and quick: no training, no server."""

import concurrent.futures
import threading

import numpy as np
import pytest

from kg_service.tasks.classification import pyfunc


def test_combined_gives_each_of_many_concurrent_callers_its_own_rows():
    calls = []
    gate = threading.Event()

    def forward(x):
        calls.append(len(x))
        gate.wait(0.05)  # long enough for the other callers to queue up
        return x * 2.0

    combined = pyfunc.Combined(forward)
    rng = np.random.default_rng(0)
    inputs = [rng.normal(size=(int(n), 3)).astype("float32") for n in rng.integers(1, 9, 64)]
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(combined, inputs))
    for x, y in zip(inputs, answers):
        np.testing.assert_array_equal(y, x * 2.0)
    assert sum(calls) == sum(len(x) for x in inputs)
    assert len(calls) < len(inputs)  # waiting requests were computed together
    assert not combined.busy and not combined.queue


def test_combined_raises_a_failed_call_in_every_request_of_it_and_keeps_working():
    started, release = threading.Event(), threading.Event()

    def forward(x):
        if not started.is_set():
            started.set()
            release.wait(5)
            return x
        if (x < 0).any():
            raise ValueError("negative")
        return x

    combined = pyfunc.Combined(forward)
    first = np.zeros((1, 2), "float32")
    bad, good = -np.ones((1, 2), "float32"), np.ones((1, 2), "float32")
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        leader = pool.submit(combined, first)
        started.wait(5)
        queued = [pool.submit(combined, bad), pool.submit(combined, good)]
        while len(combined.queue) < 2:  # both queued behind the running call
            threading.Event().wait(0.001)
        release.set()
        np.testing.assert_array_equal(leader.result(5), first)
        for future in queued:  # computed together: both get the error
            with pytest.raises(ValueError, match="negative"):
                future.result(5)
    np.testing.assert_array_equal(combined(good), good)


def test_direct_call_answers_as_the_public_call_and_falls_back_without_the_private_one():
    import tensorflow as tf
    weights = tf.Variable([[1.0, -2.0], [0.5, 3.0]])
    spec = tf.TensorSpec([None, 2], tf.float32)
    function = tf.function(lambda x: tf.nn.softmax(x @ weights), input_signature=[spec])
    concrete = function.get_concrete_function()
    probe = np.zeros((1, 2), "float32")
    call = pyfunc.direct_call(concrete, probe)
    assert "_executed_call" in call.__qualname__  # TensorFlow has the op call: it is used
    x = np.random.default_rng(1).normal(size=(5, 2)).astype("float32")
    np.testing.assert_array_equal(call(tf.constant(x)).numpy(), concrete(tf.constant(x)).numpy())
    weights.assign([[0.0, 1.0], [1.0, 0.0]])  # the captured variable, read at each call
    np.testing.assert_array_equal(call(tf.constant(x)).numpy(), concrete(tf.constant(x)).numpy())

    class Public:  # a ConcreteFunction-like object without `_call_flat`
        captured_inputs = ()

        def __call__(self, x):
            return concrete(x)

    public = Public()
    assert pyfunc.direct_call(public, probe) is public


def test_direct_call_outlives_the_function_object_and_keeps_each_fallback():
    import gc

    import tensorflow as tf

    weights = tf.Variable([[1.0, -2.0], [0.5, 3.0]])
    spec = tf.TensorSpec([None, 2], tf.float32)
    x = np.random.default_rng(2).normal(size=(4, 2)).astype("float32")
    expected = x @ weights.numpy()
    probe = np.zeros((1, 2), "float32")
    # Nothing but the call holds the concrete function: were it collected,
    # TensorFlow would drop its op ("... is neither a type of a primitive
    # operation nor a name of a function registered").
    call = pyfunc.direct_call(
        tf.function(lambda v: v @ weights, input_signature=[spec]).get_concrete_function(), probe
    )
    gc.collect()
    np.testing.assert_allclose(call(tf.constant(x)).numpy(), expected, rtol=1e-6)

    # A structured output (a SavedModel signature's dict) comes back as the
    # public call gives it.
    concrete = tf.function(lambda v: {"out": v @ weights}, input_signature=[spec]).get_concrete_function()
    call = pyfunc.direct_call(concrete, probe)
    assert "_executed_call" in call.__qualname__
    np.testing.assert_allclose(call(tf.constant(x))["out"].numpy(), expected, rtol=1e-6)

    class Flat:  # `_call_flat` but no `_inference_function`: the flat call
        captured_inputs = concrete.captured_inputs

        def __call__(self, v):
            return concrete(v)

        def _call_flat(self, args, captured):
            return concrete._call_flat(args, captured)

    flat = Flat()
    call = pyfunc.direct_call(flat, probe)
    assert "_flat_call" in call.__qualname__
    np.testing.assert_allclose(call(tf.constant(x))["out"].numpy(), expected, rtol=1e-6)


def test_an_output_that_is_not_finite_is_refused_with_a_400_naming_why():
    # Issue 30 §3: the pyfunc runs in `mlflow models serve` too, so the
    # check is the model's own: never {"predictions": [[NaN, NaN]]} with 200.
    out = np.array([[0.2, 0.8], [np.nan, np.nan], [0.5, np.inf]], "float32")
    with pytest.raises(pyfunc.MlflowException) as caught:
        pyfunc.checked_output(out)
    assert caught.value.get_http_status_code() == 400
    assert "row 1 and 1 more" in caught.value.message
    assert "outside what the model can compute" in caught.value.message
    finite = out[:1]
    assert pyfunc.checked_output(finite) is finite


def test_the_language_model_refuses_logits_that_are_not_finite():
    from kg_service.tasks.language import pyfunc as language

    def forward(batch):
        logits = np.zeros(batch.shape + (256,), "float32")
        logits[1] = np.nan  # the second prompt's forward pass overflowed
        return logits

    with pytest.raises(language.MlflowException) as caught:
        language.generate(forward, [[104, 105], [120]], context=8, new_tokens=2)
    assert caught.value.get_http_status_code() == 400
    assert "prompt 1" in caught.value.message
    continuations, logprobs = language.generate(
        lambda b: np.zeros(b.shape + (256,), "float32"), [[104]], context=8, new_tokens=1
    )
    assert np.isfinite(logprobs).all() and len(continuations[0]) == 1


def test_named_columns_need_names_and_rows_without_labels():
    import pandas as pd
    from mlflow.exceptions import MlflowException

    rows = [[0.5, -0.2], [1.0, 2.0]]
    # A model logged without feature names takes unnamed rows only.
    assert pyfunc.in_model_order(pd.DataFrame(rows), None).tolist() == rows
    with pytest.raises(MlflowException, match="declares no feature names"):
        pyfunc.in_model_order(pd.DataFrame(rows, columns=["y", "x"]), None)
    # pandas reads a CSV row longer than its header with its first value
    # as the row's label: the other values would be taken as x, y.
    labelled = pd.DataFrame([[-0.2, 9.0]], columns=["x", "y"], index=[0.5])
    with pytest.raises(MlflowException, match="rows carry labels"):
        pyfunc.in_model_order(labelled, ("x", "y"))
    with pytest.raises(MlflowException, match="one value per row"):
        pyfunc.in_model_order({"x": [1.0, 2.0], "y": [3.0]}, ("x", "y"))


@pytest.mark.parametrize(
    "config, names",
    [
        ({"feature_names": ["x", "y"]}, ("x", "y")),
        (None, None),  # a model logged before issue 30 §2
        ({"feature_names": ["x"]}, None),  # not one per feature
        ({"feature_names": ["x", "x"]}, None),
    ],
)
def test_feature_names_are_the_model_configs_one_per_feature(config, names):
    assert pyfunc.feature_names(config, 2) == names
