"""`kg serve`'s fast path (kg_service/serving/fast_path.py) against MLflow's
scoring app, in this process, called as uvicorn calls an ASGI app.

The reference is the guard without the fast path in front of MLflow's own
app (`scoring_server.init`, what `mlflow models serve` runs) for the same
registered model: every answer the fast path gives must be that app's,
byte for byte, and every request it does not take must reach that app.
A real `kg serve` process serves through it in test_kg.py.
"""

import asyncio
import json
import threading

import numpy as np
import pytest

from kg_service.serving import fast_path
from kg_service.serving import scoring_app
from tests.service.serving import small_classifier

FEATURES, CLASSES = small_classifier.FEATURES, small_classifier.CLASSES
MAX_BYTES = 8 * 10**6


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A keras_gelu classifier registered as kg-train registers it (no
    training: the served path does not care what the weights are),
    loaded back as `kg serve` loads it."""
    import mlflow

    root = tmp_path_factory.mktemp("fast-path")
    uri, _, version = small_classifier.register(root, "fast-gelu")
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    return mlflow.pyfunc.load_model(f"models:/fast-gelu/{version}")


class Counted:
    """An ASGI app that counts the requests that reach it."""

    def __init__(self, app):
        self.app, self.calls = app, 0

    async def __call__(self, scope, receive, send):
        self.calls += 1
        await self.app(scope, receive, send)


@pytest.fixture(scope="module")
def apps(model):
    """`(fast, plain, inner)`: the guard with the fast path, the guard
    without it (every request to MLflow's app), and that app, counted."""
    from mlflow.pyfunc import scoring_server

    inner = Counted(scoring_server.init(model))
    path = fast_path.FastPath.of(model)
    assert path is not None
    names = small_classifier.FEATURE_NAMES
    fast = scoring_app.Guard(inner, MAX_BYTES, FEATURES, fast=path, timeout=60, feature_names=names)
    plain = scoring_app.Guard(inner, MAX_BYTES, FEATURES, feature_names=names)
    return fast, plain, inner


def scope(body, content_type="application/json"):
    return {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": "/invocations", "raw_path": b"/invocations",
        "query_string": b"", "root_path": "", "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
        "headers": [(b"content-type", content_type.encode()),
                    (b"content-length", str(len(body)).encode())],
    }  # fmt: skip


async def call(app, body, content_type="application/json"):
    """`(status, headers, body)` of one POST /invocations through `app`."""
    body = body.encode() if isinstance(body, str) else body
    sent, answered = [], asyncio.Event()

    async def receive():
        if not sent:
            sent.append(True)
            return {"type": "http.request", "body": body, "more_body": False}
        await answered.wait()
        return {"type": "http.disconnect"}

    start, chunks = {}, []

    async def send(message):
        if message["type"] == "http.response.start":
            start.update(message)
        else:
            chunks.append(message.get("body", b""))

    await app(scope(body, content_type), receive, send)
    answered.set()
    return start["status"], dict(start["headers"]), b"".join(chunks)


def run(app, body, content_type="application/json"):
    return asyncio.run(call(app, body, content_type))


def rows(n, seed=0):
    return np.random.default_rng(seed).normal(size=(n, FEATURES)).round(4).astype("float32")


@pytest.mark.parametrize(
    "body",
    [
        json.dumps({"inputs": rows(1).tolist()}),
        json.dumps({"instances": rows(7, seed=1).tolist()}),
        json.dumps({"inputs": rows(1000, seed=2).tolist()}),  # over INLINE_BYTES: checked in a thread
        '{"inputs": [[1, -2], [0, 3e38]]}',  # ints, and float32's largest order
    ],
    ids=["batch-1", "instances-7", "batch-1000", "ints-and-3e38"],
)
def test_the_fast_path_answers_byte_for_byte_as_mlflows_app_without_calling_it(apps, body):
    fast, plain, inner = apps
    before = inner.calls
    got = run(fast, body)
    assert inner.calls == before  # answered by the fast path alone
    expected = run(plain, body)
    assert inner.calls == before + 1
    assert got[0] == expected[0] == 200
    assert got[2] == expected[2]
    assert got[1][b"content-type"] == expected[1][b"content-type"] == b"application/json"
    assert got[1][b"content-length"] == str(len(got[2])).encode()


@pytest.mark.parametrize(
    "body, content_type, status",
    [
        ('{"inputs": [[0.1, 0.2, 0.3]]}', "application/json", 400),  # wrong width
        ('{"inputs": [[NaN, 0.2]]}', "application/json", 400),
        ('{"inputs": [[0.1, 0.2], [-Infinity, 0.2]]}', "application/json", 400),
        ('{"inputs": [[1e39, 0.2]]}', "application/json", 400),  # inf as float32
        ('{"inputs": [0.1, 0.2]}', "application/json", 200),  # one row, unnested: the model takes it
        ('{"inputs": [[0.1, 0.2]], "params": {}}', "application/json", 200),
        ("x,y\n0.5,-0.2\n", "text/csv", 200),
    ],
    # Ragged rows: the guard's own 400 now (request_checks), before either app.
    ids=["wrong-width", "nan", "inf", "float32-overflow", "unnested",
         "params", "csv"],
)  # fmt: skip
def test_what_the_fast_path_does_not_take_gets_mlflows_answer(apps, body, content_type, status):
    fast, plain, inner = apps
    before = inner.calls
    got = run(fast, body, content_type)
    assert inner.calls == before + 1  # MLflow's app answered
    assert got[0] == status, got[2]
    assert got[2] == run(plain, body, content_type)[2]


def test_requests_in_flight_together_are_computed_in_one_call_each_with_its_own_rows(
    apps, model, monkeypatch
):
    fast, _, inner = apps
    python_model = fast.fast.python_model
    batches = []
    predict = python_model.predict

    def counted(context, x, params=None):
        batches.append(len(x))
        return predict(context, x, params)

    monkeypatch.setattr(python_model, "predict", counted)
    inputs = [rows(k % 5 + 1, seed=k) for k in range(24)]

    async def together():
        return await asyncio.gather(*(call(fast, json.dumps({"inputs": x.tolist()})) for x in inputs))

    before = inner.calls
    answers = asyncio.run(together())
    assert inner.calls == before
    assert sum(batches) == sum(len(x) for x in inputs)
    assert len(batches) < len(inputs)  # computed together, not one call each
    monkeypatch.undo()
    for x, (status, _, body) in zip(inputs, answers):
        assert status == 200
        np.testing.assert_allclose(json.loads(body)["predictions"], model.predict(x), atol=1e-6)


def test_a_model_error_is_mlflows_answer_to_every_request_of_the_call(apps, monkeypatch):
    from mlflow.exceptions import MlflowException
    from mlflow.protos.databricks_pb2 import INVALID_PARAMETER_VALUE

    fast, _, _ = apps
    python_model = fast.fast.python_model

    def broken(context, x, params=None):
        raise RuntimeError("the model broke")

    monkeypatch.setattr(python_model, "predict", broken)
    body = json.dumps({"inputs": rows(2).tolist()})

    async def two():
        return await asyncio.gather(call(fast, body), call(fast, body))

    for status, _, answer in asyncio.run(two()):
        assert status == 400
        error = json.loads(answer)
        assert error == {"error_code": "BAD_REQUEST", "message": fast_path.UNEXPECTED}
        assert "the model broke" not in answer.decode()  # as MLflow: no internals

    def refuses(context, x, params=None):
        raise MlflowException("bad model input: no.", error_code=INVALID_PARAMETER_VALUE)

    monkeypatch.setattr(python_model, "predict", refuses)
    status, _, answer = run(fast, body)
    assert status == 400
    assert json.loads(answer) == {
        "error_code": "INVALID_PARAMETER_VALUE", "message": "bad model input: no."
    }  # fmt: skip
    monkeypatch.undo()
    assert run(fast, body)[0] == 200  # and it answers on


def test_a_call_over_the_request_timeout_is_answered_504_as_mlflow_does(apps, monkeypatch):
    fast, _, _ = apps
    guard = scoring_app.Guard(fast.app, MAX_BYTES, FEATURES, fast=fast.fast, timeout=0.05)
    python_model = fast.fast.python_model
    release = threading.Event()
    predict = python_model.predict

    def stuck(context, x, params=None):
        release.wait(30)
        return predict(context, x, params)

    monkeypatch.setattr(python_model, "predict", stuck)

    async def timed_out():
        try:
            return await call(guard, json.dumps({"inputs": rows(1).tolist()}))
        finally:
            release.set()  # before asyncio.run waits for the model's thread

    status, _, answer = asyncio.run(timed_out())
    assert status == 504
    assert json.loads(answer) == {
        "error_code": "DEADLINE_EXCEEDED", "message": scoring_app.TIMED_OUT
    }  # fmt: skip


def test_only_kg_classifier_pyfuncs_with_a_float32_matrix_signature_take_it(model, tmp_path):
    import mlflow

    class Identity(mlflow.pyfunc.PythonModel):
        def predict(self, context, model_input, params=None):
            return model_input

    spec = mlflow.types.TensorSpec(np.dtype("float32"), (-1, FEATURES))
    signature = mlflow.models.ModelSignature(
        inputs=mlflow.types.Schema([spec]), outputs=mlflow.types.Schema([spec])
    )
    mlflow.pyfunc.save_model(
        str(tmp_path / "identity"), python_model=Identity(), signature=signature,
        pip_requirements=[],  # not inferred: that loads the model in a subprocess
    )  # fmt: skip
    identity = mlflow.pyfunc.load_model(str(tmp_path / "identity"))
    assert fast_path.FastPath.of(identity) is None  # rows not known independent
    assert fast_path.FastPath.of(model).features == FEATURES


@pytest.mark.parametrize(
    "named",
    [
        '{"dataframe_records": [{"y": -0.2, "x": 0.5}, {"x": 1.5, "y": 3}]}',
        '{"dataframe_split": {"columns": ["y", "x"], "data": [[-0.2, 0.5], [3, 1.5]]}}',
    ],
    ids=["records", "split"],
)
def test_named_columns_in_any_order_are_answered_as_the_models_order(apps, named):
    # Issue 30 §2: they were answered as if x = -0.2, y = 0.5.
    fast, plain, _ = apps
    expected = run(plain, '{"inputs": [[0.5, -0.2], [1.5, 3]]}')
    assert expected[0] == 200
    for app in (fast, plain):
        got = run(app, named)
        assert got[0] == 200 and got[2] == expected[2], got[2]
    swapped = run(plain, '{"inputs": [[-0.2, 0.5], [3, 1.5]]}')
    assert swapped[2] != expected[2]  # the order matters to this model


def test_an_output_that_is_not_finite_is_a_400_for_its_request_alone(apps, monkeypatch):
    # Issue 30 §3: 3e38 overflowed to {"predictions": [[NaN, NaN]]} with a
    # 200. Here the model's forward pass gives NaN for a row holding 3e38;
    # requests computed in the same call still get their answers.
    fast, _, _ = apps
    python_model = fast.fast.python_model
    forward = python_model.forward

    def overflowing(x):
        out = forward(x)
        out[np.abs(x).max(axis=1) > 1e38] = np.nan
        return out

    monkeypatch.setattr(python_model, "forward", overflowing)
    bad = '{"inputs": [[3e38, 0.5]]}'
    good = [json.dumps({"inputs": rows(2, seed=k).tolist()}) for k in range(6)]

    async def together():
        return await asyncio.gather(*(call(fast, body) for body in [good[0], bad, *good[1:]]))

    answers = asyncio.run(together())
    status, _, answer = answers[1]
    assert status == 400, answer
    error = json.loads(answer)
    assert error["error_code"] == "INVALID_PARAMETER_VALUE"
    assert "outside what the model can compute" in error["message"]
    assert b"predictions" not in answer
    assert [a[0] for a in answers[:1] + answers[2:]] == [200] * 6
    # MLflow's own app (every other request shape) answers it the same way.
    status, _, answer = run(fast, '{"dataframe_records": [{"x": 3e38, "y": 0.5}]}')
    assert status == 400 and "outside what the model can compute" in answer.decode()


def test_a_model_without_its_own_output_check_still_never_answers_nan(apps, monkeypatch):
    # A model registered before its pyfunc checked its output (issue 30 §3).
    fast, _, _ = apps
    python_model = fast.fast.python_model
    monkeypatch.setattr(python_model, "predict", lambda context, x, params=None: np.full((len(x), CLASSES), np.nan))
    status, _, answer = run(fast, '{"inputs": [[0.5, 0.2]]}')
    assert status == 400 and "outside what the model can compute" in answer.decode(), answer
