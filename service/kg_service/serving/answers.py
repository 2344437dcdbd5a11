"""What `kg serve`'s guard sends back: one JSON error shape, and the
checks every answer of MLflow's app passes on its way out.

Every 4xx/5xx is `{"error_code": ..., "message": ...}` (MLflow's own
shape). On the way out of MLflow's app (`mended`):

- an error answer in any other shape (its plain-text 415s and 504,
  FastAPI's `{"detail": ...}`) is rewritten in that shape;
- a redirect's `Location` is made relative: Starlette builds it from the
  client's Host header, which a client chooses (issue 30 §16);
- a 200 whose JSON holds NaN or an infinity (`{"predictions": [[NaN,
  NaN]]}`, not even JSON) becomes a 400 saying the input is outside what
  the model can compute (issue 30 §3): never a 200 with NaN.
"""

import json
import urllib.parse

ERROR_CODES = {  # MLflow's error codes (mlflow.protos.databricks_pb2), by HTTP status
    401: "UNAUTHENTICATED",
    404: "ENDPOINT_NOT_FOUND",
    500: "INTERNAL_ERROR",
    503: "TEMPORARILY_UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
MESSAGE_LIMIT = 2000
NOT_FINITE = (
    "bad model input: the model's output is not a finite number (NaN or "
    "infinite) for this input: the input is outside what the model can "
    "compute (e.g. features far beyond the training data's range); send "
    "features of the training data's order of magnitude."
)
NOT_FINITE_CODE = "INVALID_PARAMETER_VALUE"  # as the pyfuncs raise it: HTTP 400


def error_code(status):
    return ERROR_CODES.get(status, "BAD_REQUEST" if status < 500 else "INTERNAL_ERROR")


def error_body(code, message):
    return json.dumps({"error_code": code, "message": message}).encode()


def json_headers(body):
    return [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]


def cut(text):
    if len(text) <= MESSAGE_LIMIT:
        return text
    return f"{text[:MESSAGE_LIMIT]}... ({len(text) - MESSAGE_LIMIT} more characters cut)"


async def answer(send, status, message, headers=(), code=None):
    """Sends an error answer in MLflow's shape."""
    body = error_body(code or error_code(status), message)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [*headers, *json_headers(body)],
        }
    )
    await send({"type": "http.response.body", "body": body})


def finite_json(body):
    """True when a JSON answer holds no NaN or infinity (Python's encoder
    writes them as NaN/Infinity; a number past float64, 1e999, reads back
    as inf)."""

    def refuse(constant):
        raise ValueError(constant)

    try:
        json.loads(body, parse_constant=refuse, parse_float=_finite_float)
    except ValueError:
        return False
    except RecursionError:  # not ours to judge: the model's own answer
        return True
    return True


def _finite_float(text):
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(text)
    return value


def mended(send, mend, *, check_finite=False):
    """`send`, with an error answer's body rewritten by `mend(status, body)`,
    a redirect's Location made relative, and (with `check_finite`) a 200
    JSON answer holding NaN or infinity turned into a 400."""
    started = {}

    async def wrapped(message):
        if message["type"] == "http.response.start":
            status = message["status"]
            if 300 <= status < 400:
                message = {**message, "headers": _relative_location(message.get("headers", []))}
            if status < 400 and not (check_finite and status == 200):
                return await send(message)
            started.update(message, body=b"")
            return None
        if not started:
            return await send(message)
        started["body"] += message.get("body", b"")
        if message.get("more_body"):
            return None
        status, body = started["status"], started["body"]
        headers = started.get("headers", [])
        if status == 200:
            if finite_json(body):
                await send({k: v for k, v in started.items() if k != "body"})
                return await send({"type": "http.response.body", "body": body})
            status, text = 400, error_body(NOT_FINITE_CODE, NOT_FINITE)
        else:
            text = mend(status, body)
        kept = [(k, v) for k, v in headers if k.lower() not in (b"content-length", b"content-type")]
        await send(
            {"type": "http.response.start", "status": status, "headers": kept + json_headers(text)}
        )
        await send({"type": "http.response.body", "body": text})

    return wrapped


def _relative_location(headers):
    """A Location header as its path and query only: never the client's
    Host echoed back."""
    fixed = []
    for key, value in headers:
        if key.lower() == b"location":
            parts = urllib.parse.urlsplit(value.decode("latin-1"))
            path = parts.path if parts.path.startswith("/") else "/" + parts.path
            path = "/" + path.lstrip("/")  # never //host (a scheme-relative URL)
            value = (path + (f"?{parts.query}" if parts.query else "")).encode("latin-1")
        fixed.append((key, value))
    return fixed
