"""The ASGI app `kg serve` runs under uvicorn: MLflow's scoring server,
behind a guard for what that server gets wrong.

`mlflow.pyfunc.scoring_server.init(model)` is the app `mlflow models
serve` runs (same routes, parsing, schema checks and answers). Measured
against it (MLflow 3.17, a kg-train model), and mended here:

- no Content-Type header: its `content_type.split` raises, a 500 with a
  traceback in the log, and the connection is reset -> 415 naming the
  types it takes;
- no size limit: a 9.6 MB request of 400,000 rows was read, computed and
  answered with 17 MB, and an invalid 10 MB one was echoed back whole in
  the error -> a body over KG_SERVE_MAX_REQUEST_BYTES is answered 413
  (its Content-Length is checked before it is read; a chunked body is
  cut off at the limit);
- error messages that echo the request: cut to 2,000 characters;
- an empty batch (`{"inputs": []}`) was a 400 saying "an input of type
  <class 'list'> was found" -> the same 400, saying the batch is empty
  (TF Serving also answers 400 to an empty `instances` list: "No values
  in 'instances' array");
- CSV bodies: its parser asks a tensor signature for pandas column types
  and fails (400 "TensorSpec only supports numpy types") for every CSV
  -> the guard reads the CSV (header row) into the JSON `dataframe_split`
  format, which it parses.

Everything else (wrong width, strings, NaN/inf: 400 from the schema check
or the model's own `checked_input`) is MLflow's answer, unchanged.
"""

import io
import json
import os

import mlflow.pyfunc
from mlflow.pyfunc import scoring_server

MODEL_PATH_ENV = "KG_SERVE_MODEL_PATH"  # as kg_service.serving sets them
MAX_BYTES_ENV = "KG_SERVE_MAX_REQUEST_BYTES"
MESSAGE_LIMIT = 2000
DRAIN_FACTOR = 16  # an oversized body is read and dropped up to 16x the limit


class Guard:
    """ASGI middleware in front of MLflow's app, for POST /invocations."""

    def __init__(self, app, max_bytes, features=None):
        self.app = app
        self.max_bytes = max_bytes
        self.features = features

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"] != "/invocations":
            return await self.app(scope, receive, send)
        headers = dict(scope["headers"])
        content_type = headers.get(b"content-type", b"").decode("latin-1").strip()
        if not content_type:
            return await _answer(
                send,
                415,
                "no Content-Type header; send application/json ({\"inputs\": "
                "[[...], ...]}) or text/csv (a header row, then one row per example).",
            )
        length = headers.get(b"content-length")
        declared = int(length) if length is not None and length.isdigit() else None
        body = bytearray()
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            more = message.get("more_body", False)
            if size <= self.max_bytes and (declared or 0) <= self.max_bytes:
                body += chunk
            elif size > DRAIN_FACTOR * self.max_bytes:
                break  # a client that will not stop: answer and close
        # An oversized body is read and dropped, not left unread: a client
        # still sending when the server answers and closes gets a connection
        # reset, not the 413.
        if size > self.max_bytes or (declared or 0) > self.max_bytes:
            return await _answer(send, 413, self._too_large(declared or size))
        body = bytes(body)
        if content_type.split(";")[0].strip().lower() == "text/csv":
            body, problem = _csv_as_json(body)
            if problem:
                return await _answer(send, 400, problem)
            scope = {**scope, "headers": _replace_content_type(scope["headers"])}

        replayed = []

        async def replay():
            # The body once; then what the client does next (a disconnect).
            if replayed:
                return await receive()
            replayed.append(True)
            return {"type": "http.request", "body": body, "more_body": False}

        started = {}

        async def mended(message):
            if message["type"] == "http.response.start":
                if message["status"] < 400:
                    return await send(message)
                started.update(message)
                started["body"] = b""
                return None
            if not started:
                return await send(message)
            started["body"] += message.get("body", b"")
            if message.get("more_body"):
                return None
            text = self._mend(started["status"], started["body"], body)
            headers = [
                (k, v) for k, v in started["headers"] if k.lower() != b"content-length"
            ] + [(b"content-length", str(len(text)).encode())]
            await send({"type": "http.response.start", "status": started["status"], "headers": headers})
            await send({"type": "http.response.body", "body": text})

        await self.app(scope, replay, mended)

    def _too_large(self, size):
        return (
            f"request body of {size} bytes is over this server's limit of "
            f"{self.max_bytes} bytes; send fewer rows per request (or start "
            f"kg serve with a larger --max-request-mb)."
        )

    def _mend(self, status, answer, request):
        """An error answer with its message cut to MESSAGE_LIMIT and an empty
        batch said to be one."""
        try:
            error = json.loads(answer)
        except ValueError:
            return _cut(answer.decode("utf-8", "replace")).encode()
        if not isinstance(error, dict) or not isinstance(error.get("message"), str):
            return answer
        if status == 400 and _is_empty_batch(request):
            error["message"] = (
                "bad model input: the batch is empty; send at least one row"
                + (f" of {self.features} features" if self.features else "")
                + ', e.g. {"inputs": [[...]]}.'
            )
        error["message"] = _cut(error["message"])
        return json.dumps(error).encode()


def _cut(text):
    if len(text) <= MESSAGE_LIMIT:
        return text
    return f"{text[:MESSAGE_LIMIT]}... ({len(text) - MESSAGE_LIMIT} more characters cut)"


def _is_empty_batch(request):
    try:
        data = json.loads(request)
    except ValueError:
        return False
    if not isinstance(data, dict):
        return False
    for key in ("inputs", "instances", "dataframe_records"):
        if data.get(key) == []:
            return True
    split = data.get("dataframe_split")
    return isinstance(split, dict) and split.get("data") == []


def csv_rows(text):
    """The rows of a CSV text (a header row, then one row per example) as a
    DataFrame, read without the model's signature: MLflow's own CSV reader
    asks a tensor signature for pandas column types and fails.

    Raises:
        ValueError: naming what is wrong with the CSV.
    """
    import warnings

    import pandas as pd

    try:
        # A row longer than the header: pandas would take its first field
        # as the row's index (or, index_col=False, drop the rest with a
        # warning); either way the wrong features. An error here.
        with warnings.catch_warnings():
            warnings.simplefilter("error", pd.errors.ParserWarning)
            frame = pd.read_csv(
                io.StringIO(text) if isinstance(text, str) else io.BytesIO(text),
                index_col=False,
            )
    except Exception as error:  # pandas raises many kinds for bad CSV
        raise ValueError(
            f"cannot read it as CSV ({type(error).__name__}: {error}); expected a "
            f"header row, then one row of numbers per example."
        ) from None
    if frame.empty:
        raise ValueError(
            "the CSV has no data rows: its first line is read as the header "
            "(column names), then one row of numbers per example."
        )
    return frame


def _csv_as_json(body):
    """A CSV body as `dataframe_split` JSON, or a problem."""
    try:
        frame = csv_rows(body)
    except ValueError as error:
        return None, f"CSV body: {error}"
    split = frame.to_json(orient="split", index=False).encode()
    return b'{"dataframe_split": ' + split + b"}", None


def _replace_content_type(headers):
    return [(k, v) for k, v in headers if k.lower() != b"content-type"] + [
        (b"content-type", b"application/json")
    ]


async def _answer(send, status, message):
    # MLflow's own error body: {"error_code": ..., "message": ...}.
    body = json.dumps({"error_code": "BAD_REQUEST", "message": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _features(model):
    schema = model.metadata.get_input_schema()
    try:
        return int(schema.inputs[0].shape[-1])
    except (AttributeError, IndexError, TypeError):
        return None


def build(model_path, max_bytes):
    model = mlflow.pyfunc.load_model(model_path)
    return Guard(scoring_server.init(model), max_bytes, _features(model))


if MODEL_PATH_ENV in os.environ:  # in the server process
    app = build(os.environ[MODEL_PATH_ENV], int(os.environ[MAX_BYTES_ENV]))
