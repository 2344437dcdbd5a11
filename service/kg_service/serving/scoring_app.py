"""The ASGI app `kg serve` runs under uvicorn: MLflow's scoring server,
behind a guard for what that server gets wrong.

`mlflow.pyfunc.scoring_server.init(model)` is the app `mlflow models
serve` runs (same routes, parsing, schema checks and answers). Measured
against it (MLflow 3.17, a kg-train model), and mended here:

- no Content-Type header: its `content_type.split` raises, a 500 with a
  traceback in the log, and the connection is reset -> 415 naming the
  types it takes; `APPLICATION/JSON` was a 415 too (media types are
  case-insensitive, RFC 9110 8.3.1) -> read as application/json;
- no size limit: a 9.6 MB request of 400,000 rows was read, computed and
  answered with 17 MB -> a body over KG_SERVE_MAX_REQUEST_BYTES is
  answered 413 from its Content-Length alone, before it is read (a
  chunked body: once it passes the limit); uvicorn drops the rest;
- no timeouts for slow clients: 50 half-sent headers stayed open > 65 s,
  a body declared and never sent held its request forever -> headers
  must arrive within KG_SERVE_CLIENT_TIMEOUT seconds (`ClientTimeouts`),
  and a body's next part too (408, connection closed);
- bad JSON (nested 1,000+ deep: a 500 from its decoder's RecursionError;
  invalid: the body echoed in the 400; strings, booleans: cast and
  answered 200; unknown `params`: ignored) -> `request_checks`, the same
  check `kg predict` makes;
- error messages that echo the request: MLflow's "Failed to predict data
  '<the input>'" prefix dropped, and every message cut to 2,000 characters;
- CSV bodies: its parser asks a tensor signature for pandas column types
  and fails (400 "TensorSpec only supports numpy types") for every CSV
  -> the guard reads the CSV (header row) into JSON, which it parses;
  a header of the wrong width is refused before any row is read (30,000
  columns took 24 s to refuse, and stalled /ping: CSV, and JSON over
  INLINE_BYTES, is parsed in a thread) a first row of numbers is data, a
  header is matched by name (`columns.csv_matrix`, issue 30 §17);
- errors in four shapes (its JSON, its plain-text 415s and 504, FastAPI's
  {"detail": ...}) -> every 4xx/5xx is {"error_code": ..., "message": ...}
  (`answers`);
- named columns (records, `dataframe_split.columns`) taken by position
  (issue 30 §2) -> matched to the model's feature names and sent on as
  `{"inputs": rows}` in its order (`columns.positional`); a 200 holding
  NaN (issue 30 §3) -> a 400; a redirect's Location built from the
  client's Host header -> relative (`answers.mended`);
- /docs, /redoc, /openapi.json and /version open to all -> 404 unless
  KG_SERVE_EXPOSE_DOCS; with KG_SERVE_TOKEN_FILE, every route but /ping
  and /health needs `Authorization: Bearer <token>` (else 401).

Everything else (wrong width, NaN/inf: 400 from the schema check or the
model's own `checked_input`) is MLflow's answer, unchanged.

A JSON matrix of finite numbers for one of kg's classifier pyfuncs does
not go through MLflow's app: `fast_path` answers it as that app would, at
a fraction of its cost (docs/benchmarks.md, "Serving, round 8").
"""

import asyncio
import hmac
import json
import os

import h11
import mlflow.pyfunc
from mlflow.exceptions import MlflowException
from mlflow.pyfunc import scoring_server
from uvicorn.protocols.http.h11_impl import H11Protocol

from kg_service.serving import answers
from kg_service.serving import columns
from kg_service.serving import fast_path
from kg_service.serving import model_input
from kg_service.serving import request_checks

MODEL_PATH_ENV = "KG_SERVE_MODEL_PATH"  # as kg_service.serving.server sets them
MAX_BYTES_ENV = "KG_SERVE_MAX_REQUEST_BYTES"
CLIENT_TIMEOUT_ENV = "KG_SERVE_CLIENT_TIMEOUT"
TOKEN_FILE_ENV = "KG_SERVE_TOKEN_FILE"
EXPOSE_DOCS_ENV = "KG_SERVE_EXPOSE_DOCS"
DEFAULT_CLIENT_TIMEOUT = 10.0
# A JSON body up to this size is checked on the event loop: decoding and
# checking it costs about what a thread hop does (256 rows of 2, 4.8 KB:
# 66 us; a hop: 140-180 us on 2 busy cores, `benchmarks/bench_serving.py
# --guard`), and 16 KB holds /ping back for 2.8 ms at most (load average
# 11). Larger bodies, and CSV (pandas: 6.4 ms for 12 KB), go to a thread:
# 30,000 CSV columns took 24 s to refuse, stalling /ping (issue 15).
INLINE_BYTES = 16 * 1024
# MLflow messages that quote the whole input before saying what is wrong.
ECHOING = ("Failed to predict data '", "Failed to enforce schema of data '")
MEDIA_TYPES = ("application/json", "text/csv")
OPEN_PATHS = ("/ping", "/health")  # a load balancer's probes need no token
DOCS_PATHS = ("/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json", "/version")
# MLflow's answer when a request outlives MLFLOW_SCORING_SERVER_REQUEST_TIMEOUT.
TIMED_OUT = "Request processing time exceeded limit"


class Guard:
    """ASGI middleware in front of MLflow's app."""

    def __init__(
        self,
        app,
        max_bytes,
        features=None,
        *,
        param_names=(),
        token=None,
        expose_docs=False,
        client_timeout=DEFAULT_CLIENT_TIMEOUT,
        fast=None,
        timeout=None,
        feature_names=None,
    ):
        """`fast`: a `fast_path.FastPath` for the requests it takes (None:
        MLflow's app answers every request); `timeout`: seconds a request
        may take on it (MLflow's MLFLOW_SCORING_SERVER_REQUEST_TIMEOUT);
        `feature_names`: the model's, which named columns are matched to
        (`columns`; None: the model takes unnamed rows only)."""
        self.app = app
        self.max_bytes = max_bytes
        self.features = features
        self.param_names = tuple(param_names)
        self.token = token
        self.expose_docs = expose_docs
        self.client_timeout = client_timeout
        self.fast = fast
        self.timeout = timeout
        self.feature_names = feature_names

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope["path"]
        if self.token is not None and path not in OPEN_PATHS:
            problem = self._unauthorized(dict(scope["headers"]).get(b"authorization"))
            if problem:
                return await answers.answer(send, 401, problem, _challenge(problem))
        if path in DOCS_PATHS and not self.expose_docs:
            return await answers.answer(
                send, 404, f"{path} is off; start kg serve with --expose-docs to serve it."
            )
        if path == "/invocations":
            if scope["method"] == "POST":
                return await self._invocations(scope, receive, send)
            return await answers.answer(
                send,
                405,
                f"{scope['method']} /invocations: predictions are POSTed, e.g. "
                f"curl -X POST .../invocations -H 'Content-Type: application/json' "
                f"-d '{request_checks.EXAMPLE}'.",
                [(b"allow", b"POST")],
            )
        # FastAPI's 404 and 405 ({"detail": ...}) in our shape.
        return await self.app(scope, receive, answers.mended(send, self._mend))

    def _unauthorized(self, header):
        scheme, _, given = (header or b"").partition(b" ")
        if not header or scheme.lower() != b"bearer":
            return "no bearer token; send the header Authorization: Bearer <token>."
        # Bytes against the token's UTF-8 bytes (a header is bytes; decoded
        # as latin-1 and encoded as UTF-8, a non-ASCII token never matched:
        # issue 30 §16). Constant time: how much of a guess matches does
        # not show.
        if not hmac.compare_digest(given.strip(b" \t"), self.token.encode("utf-8")):
            return "the bearer token is not this server's."
        return None

    async def _invocations(self, scope, receive, send):
        headers = dict(scope["headers"])
        media_type, problem = _media_type(headers.get(b"content-type"))
        if problem is None:
            problem = _encoding_problem(headers.get(b"content-encoding"))
        if problem:
            return await answers.answer(send, 415, problem)
        length = headers.get(b"content-length")
        declared = int(length) if length is not None and length.isdigit() else None
        if declared is not None and declared > self.max_bytes:
            # Answered unread; uvicorn drops the body as it comes (the
            # connection stays usable), or closes it at the client timeout.
            return await answers.answer(send, 413, self._too_large(declared))
        chunks, size, more = [], 0, True
        while more:
            try:
                message = await _within(receive, self.client_timeout)
            except asyncio.TimeoutError:
                return await answers.answer(
                    send,
                    408,
                    f"the request body stopped arriving: nothing for "
                    f"{self.client_timeout:g} s; send it whole, at once.",
                    [(b"connection", b"close")],
                )
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            chunks.append(chunk)
            size += len(chunk)
            more = message.get("more_body", False)
            if size > self.max_bytes:
                return await answers.answer(send, 413, self._too_large(f"over {size}"))
        body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        if size <= INLINE_BYTES and media_type == "application/json":
            body, problem, rows = self._checked(media_type, body)
        else:
            body, problem, rows = await asyncio.to_thread(self._checked, media_type, body)
        if problem:
            return await answers.answer(send, 400, problem)
        if rows is not None:
            return await self._fast_answer(send, rows)
        # MLflow compares media types case-sensitively, and reads CSV wrong.
        scope = {**scope, "headers": _replace_content_type(scope["headers"])}

        replayed = []

        async def replay():
            # The body once; then what the client does next (a disconnect).
            if replayed:
                return await receive()
            replayed.append(True)
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, answers.mended(send, self._mend, check_finite=True))

    def _checked(self, media_type, body):
        """`(body, problem, rows)`: a CSV body as JSON; a JSON body as it
        came, and its rows as the fast path's matrix where it takes them
        (else None)."""
        if media_type == "text/csv":
            return (*model_input.csv_as_json(body, self.features, self.feature_names), None)
        try:
            request = request_checks.decode(body)
            request_checks.check(request, self.features, self.param_names)
            if self.features is not None:
                named = columns.positional(request, self.feature_names)
                if named is not request:  # in the model's column order
                    request, body = named, json.dumps(named).encode()
        except request_checks.BadRequest as error:
            return body, f"bad model input: {error}", None
        return body, None, self.fast.matrix(request) if self.fast else None

    async def _fast_answer(self, send, rows):
        try:
            answer = await _within(lambda: self.fast.predict(rows), self.timeout)
        except asyncio.TimeoutError:
            return await answers.answer(send, 504, TIMED_OUT)
        except MlflowException as error:  # with its code, as MLflow's app answers it
            return await answers.answer(
                send, error.get_http_status_code(), answers.cut(error.message), code=error.error_code
            )
        await send(
            {"type": "http.response.start", "status": 200, "headers": answers.json_headers(answer)}
        )
        await send({"type": "http.response.body", "body": answer})

    def _too_large(self, size):
        return (
            f"request body of {size} bytes is over this server's limit of "
            f"{self.max_bytes} bytes; send fewer rows per request (or start "
            f"kg serve with a larger --max-request-mb)."
        )

    def _mend(self, status, answer):
        """Any error answer as {"error_code": ..., "message": ...}, its
        message without the echoed input and cut to MESSAGE_LIMIT."""
        try:
            error = json.loads(answer)
        except ValueError:
            error = answer.decode("utf-8", "replace").strip()
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            code, message = error.get("error_code"), error["message"]
        elif isinstance(error, dict) and isinstance(error.get("detail"), str):
            code, message = None, error["detail"]  # FastAPI's
        else:
            code, message = None, error if isinstance(error, str) else json.dumps(error)
        if message.startswith(ECHOING) and "Error: " in message:
            # "Failed to predict data '<the whole input>'. Error: <why>"
            message = message.rsplit("Error: ", 1)[1].strip()
        return answers.error_body(code or answers.error_code(status), answers.cut(message))


def _encoding_problem(value):
    """Why a Content-Encoding is refused (None: none, or identity): a
    compressed body was read as text, "not valid JSON (not UTF-8 text)"."""
    shown = (value or b"").decode("latin-1").strip()
    if shown.lower() in ("", "identity"):
        return None
    return (
        f"Content-Encoding {shown[:40]!r}: compressed bodies are not taken; send "
        f"the body uncompressed (no Content-Encoding header)."
    )


def _media_type(header):
    """`(media type, problem)` from a Content-Type header value."""
    if not header:
        return None, (
            "no Content-Type header; send application/json ({\"inputs\": "
            "[[...], ...]}) or text/csv (a header row, then one row per example)."
        )
    value = header.decode("latin-1")
    media_type, *parameters = (part.strip() for part in value.split(";"))
    media_type = media_type.lower()
    if media_type not in MEDIA_TYPES:
        return None, (
            f"unsupported Content-Type: Got {value!r}; send application/json "
            f"({{\"inputs\": [[...], ...]}}) or text/csv (a header row, then one "
            f"row per example)."
        )
    for parameter in filter(None, parameters):
        name, _, given = parameter.partition("=")
        name, given = name.strip().lower(), given.strip().strip('"').lower()
        if name != "charset":
            return None, f"Content-Type {value!r}: unknown parameter {name!r}; only charset=utf-8 is taken."
        if given not in ("utf-8", "utf8"):
            return None, f"Content-Type {value!r}: the body must be UTF-8 (charset=utf-8)."
    return media_type, None


async def _within(receive, seconds):
    """`await receive()`, or asyncio.TimeoutError after `seconds`.
    asyncio.timeout (Python 3.11) costs 10 us a message; wait_for wraps
    the call in a task: 20-30 us."""
    if not hasattr(asyncio, "timeout"):  # Python 3.10
        return await asyncio.wait_for(receive(), seconds)
    async with asyncio.timeout(seconds):
        return await receive()


def _challenge(problem):
    # RFC 6750 3.1: no error attribute when no credentials were sent.
    if problem.startswith("no bearer"):
        return [(b"www-authenticate", b"Bearer")]
    return [(b"www-authenticate", b'Bearer error="invalid_token"')]


def _replace_content_type(headers):
    return [(k, v) for k, v in headers if k.lower() != b"content-type"] + [
        (b"content-type", b"application/json")
    ]


class ClientTimeouts(H11Protocol):
    """uvicorn's h11 protocol, with a deadline for a request's headers.

    uvicorn times out only an idle kept-alive connection, and any byte
    resets that clock: a client that sends half its headers holds the
    connection forever (50 of them stayed open > 65 s). Here the headers of
    each request must be complete within KG_SERVE_CLIENT_TIMEOUT seconds
    of the connection opening or the previous answer; else 408 and close.
    The body's deadline is the guard's. Chosen by `--http
    kg_service.serving.scoring_app:ClientTimeouts` (uvicorn imports the class).
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.header_timeout = float(os.environ.get(CLIENT_TIMEOUT_ENV, DEFAULT_CLIENT_TIMEOUT))
        self.header_deadline = None

    def connection_made(self, transport):
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc):
        self._disarm()
        super().connection_lost(exc)

    def handle_events(self):
        super().handle_events()
        if self.cycle is not None and not self.cycle.response_complete:
            self._disarm()  # a request is in: its headers came in time

    def on_response_complete(self):
        self._arm()  # before super(): it may read a pipelined request
        super().on_response_complete()

    def _arm(self):
        self._disarm()
        self.header_deadline = self.loop.call_later(self.header_timeout, self._headers_late)

    def _disarm(self):
        if self.header_deadline is not None:
            self.header_deadline.cancel()
            self.header_deadline = None

    def _headers_late(self):
        self.header_deadline = None
        if self.transport.is_closing():
            return
        if self.conn.their_state is h11.IDLE and self.conn.trailing_data[0]:
            # Part of a request's headers came: say why it is cut off. (A
            # body still owed after an answer, a 413, is just closed.)
            body = answers.error_body(
                "BAD_REQUEST",
                f"the request headers did not arrive within {self.header_timeout:g} s.",
            )
            head = b"HTTP/1.1 408 Request Timeout\r\nconnection: close\r\n"
            head += b"".join(k + b": " + v + b"\r\n" for k, v in answers.json_headers(body))
            self.transport.write(head + b"\r\n" + body)
        self.transport.close()


def build(model_path, max_bytes):
    from mlflow.environment_variables import MLFLOW_SCORING_SERVER_REQUEST_TIMEOUT  # MLflow: in the server process only

    model = mlflow.pyfunc.load_model(model_path)
    features, names = model_input.feature_count(model), model_input.feature_names(model)
    token_file = os.environ.get(TOKEN_FILE_ENV)
    return Guard(
        scoring_server.init(model),
        max_bytes,
        features,
        param_names=model_input.param_names(model),
        feature_names=names if names and len(names) == features else None,
        token=read_token(token_file) if token_file else None,
        expose_docs=os.environ.get(EXPOSE_DOCS_ENV) == "1",
        client_timeout=float(os.environ.get(CLIENT_TIMEOUT_ENV, DEFAULT_CLIENT_TIMEOUT)),
        fast=fast_path.FastPath.of(model),
        timeout=MLFLOW_SCORING_SERVER_REQUEST_TIMEOUT.get(),
    )


def read_token(path):
    """The bearer token in a file (its first line).

    Raises:
        ValueError: for a file that cannot be read or holds no token.
    """
    try:
        with open(path, encoding="utf-8") as file:
            token = file.readline().strip()
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"cannot be read: {error}") from None
    if not token:
        raise ValueError("holds no token (its first line is empty)")
    return token


if MODEL_PATH_ENV in os.environ:  # in the server process
    app = build(os.environ[MODEL_PATH_ENV], int(os.environ[MAX_BYTES_ENV]))
