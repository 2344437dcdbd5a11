"""Each refusal of `kg serve`'s request guard, with no server process:
`request_checks` called directly, and the guard (`scoring_app.Guard`) called
as the ASGI app uvicorn calls, in front of MLflow's real scoring app
serving a real (identity) pyfunc model.

References: what JSON, HTTP and the issue say a request is (RFC 9110
statuses; the protections of issue 15: deep JSON -> 400, a wide CSV refused
from its header, 413 from Content-Length alone, 408 for a body that stops,
bad requests never stop the server), and for checked values an independent
predicate written here, never the code under test.
"""

import asyncio
import json
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kg_service.serving import model_input
from kg_service.serving import request_checks as checks
from kg_service.serving import scoring_app

FEATURES = 2
IDENTITY = """\
import mlflow
import numpy as np


class Identity(mlflow.pyfunc.PythonModel):
    def predict(self, context, model_input: np.ndarray, params=None) -> np.ndarray:
        return model_input


mlflow.models.set_model(Identity())
"""


# --- request_checks, called directly. ----------------------------------------


def refusal(function, *args):
    with pytest.raises(checks.BadRequest) as error:
        function(*args)
    return str(error.value)


def test_invalid_json_is_refused_naming_where_and_never_echoing_the_body():
    message = refusal(checks.decode, b'{"inputs": [[0.5, -0.2]')
    assert "not valid JSON" in message and "line 1" in message
    assert "0.5" not in message and "-0.2" not in message


def test_a_body_that_is_not_utf8_is_refused():
    assert "not UTF-8" in refusal(checks.decode, b'{"inputs": [[\xff]]}')


@pytest.mark.parametrize("depth", [1_000, 100_000])
def test_json_nested_past_the_decoders_limit_is_a_bad_request_not_a_recursion_error(depth):
    body = '{"inputs": ' + "[" * depth + "]" * depth + "}"
    assert "nested too deeply" in refusal(checks.decode, body.encode())


@pytest.mark.parametrize("body, kind", [(b"[[0.5, 1.0]]", "list"), (b"3", "int"), (b'"x"', "str")])
def test_a_body_that_is_not_a_json_object_is_refused_naming_what_it_is(body, kind):
    assert f"got a {kind}" in refusal(checks.decode, body)


@pytest.mark.parametrize(
    "request_",
    [
        {"inputs": []},
        {"instances": []},
        {"dataframe_split": {"columns": ["a", "b"], "data": []}},
        {"dataframe_records": []},
    ],
)
def test_an_empty_batch_is_refused_in_every_format(request_):
    message = refusal(checks.check, request_, FEATURES)
    assert "batch is empty" in message and f"{FEATURES} features" in message


@pytest.mark.parametrize(
    "value, shown",
    [("1e3", 'a string ("1e3")'), (True, "a boolean (true)"), (None, "null"), ([1.0], "a list")],
)
def test_strings_booleans_nulls_and_deeper_rows_are_not_features(value, shown):
    request = {"inputs": [[0.5, 1.0], [0.25, value]]}
    message = refusal(checks.check, request, FEATURES)
    assert "row 1, column 1" in message and shown in message


def test_records_are_checked_as_rows_of_their_values():
    request = {"dataframe_records": [{"a": 0.5, "b": 1}, {"a": "x", "b": 2}]}
    assert "row 1, column 0" in refusal(checks.check, request, FEATURES)


def test_an_unknown_param_names_the_known_ones_and_the_closest():
    message = refusal(checks.check, {"inputs": [[0.5, 1.0]], "params": {"temprature": 1}}, FEATURES, ("temperature", "top_k"))
    assert "unknown 'temprature' (did you mean 'temperature'?)" in message
    assert "this model takes 'temperature', 'top_k'" in message
    no_params = refusal(checks.check, {"inputs": [[0.5, 1.0]], "params": {"k": 1}}, FEATURES)
    assert "this model takes no params" in no_params


@pytest.mark.parametrize("params", [[1, 2], "k=1", {"k": [[1]]}, {"k": {"a": 1}}])
def test_params_that_are_not_a_dictionary_of_values_are_refused(params):
    assert "params" in refusal(checks.check, {"inputs": [[0.5, 1.0]], "params": params}, FEATURES, ("k",))


@pytest.mark.parametrize(
    "request_",
    [
        {"inputs": [[0.5, -1]]},
        {"inputs": [0.5, -1]},
        {"inputs": {"x": [[0.5, -1]]}},
        {"instances": [[0.5, -1e30], [2, 3]]},
        {"dataframe_split": {"columns": ["a", "b"], "data": [[0.5, -1]]}},
        {"dataframe_records": [{"a": 0.5, "b": -1}]},
        {"inputs": [[0.5, -1]], "params": {"k": [1, 2]}},
    ],
)
def test_a_well_formed_request_passes_in_every_format(request_):
    assert checks.check(request_, FEATURES, ("k",)) is None


def test_a_language_models_prompts_are_not_checked_as_numbers():
    assert checks.check({"inputs": ["the cat", "a dog"]}, None) is None
    assert "batch is empty" in refusal(checks.check, {"inputs": []}, None)


def is_number(value):
    # What JSON numbers decode to; bool is a subclass of int, and not one.
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def refused_by_reference(rows):
    # A non-number anywhere, or rows that are not all numbers or all lists
    # of one length.
    shapes = {len(row) if isinstance(row, list) else None for row in rows}
    return len(shapes) > 1 or any(
        not is_number(value) for row in rows for value in (row if isinstance(row, list) else [row])
    )


json_values = st.one_of(
    st.integers(), st.floats(allow_nan=False), st.booleans(), st.none(), st.text(max_size=3),
    st.lists(st.integers(), max_size=2),
)  # fmt: skip
rows = st.lists(st.one_of(json_values, st.lists(json_values, max_size=4)), max_size=8)


@settings(max_examples=100, deadline=None)
@given(rows)
def test_check_numbers_refuses_exactly_the_rows_holding_a_non_number(rows):
    rows = json.loads(json.dumps(rows))  # as the server decodes them
    if refused_by_reference(rows):
        refusal(checks.check_numbers, rows)
    else:
        assert checks.check_numbers(rows) is None


def test_a_wrong_csv_width_is_refused_from_the_header_without_reading_a_row():
    # 30,000 columns took pandas 24 s (issue 15); the rows here are not
    # even CSV (an unclosed quote), so refusing them means none was read.
    header = ",".join(f"x{k}" for k in range(30_000))
    body = (header + '\n"unclosed, 1, 2\n').encode()
    converted, problem = model_input.csv_as_json(body, FEATURES)
    assert converted is None
    assert "the header row has 30000 columns; this model takes 2 features" in problem


# --- The guard, called as uvicorn calls it (ASGI). ---------------------------


@pytest.fixture(scope="module")
def mlflow_app(tmp_path_factory):
    """MLflow's own scoring app serving a real pyfunc model that returns its
    input, with the float32 [-1, 2] signature kg-train's models have."""
    import mlflow
    from mlflow.pyfunc import scoring_server

    root = tmp_path_factory.mktemp("guard")
    code = root / "identity.py"
    code.write_text(IDENTITY)
    spec = mlflow.types.TensorSpec(np.dtype("float32"), (-1, FEATURES))
    schema = mlflow.types.Schema([spec])
    with warnings.catch_warnings():
        # No input example, deliberately (as for kg-train's models).
        warnings.filterwarnings("ignore", message=".*input example was not provided")
        mlflow.pyfunc.save_model(
            str(root / "model"),
            python_model=str(code),
            signature=mlflow.models.ModelSignature(inputs=schema, outputs=schema),
            pip_requirements=["mlflow"],
        )
    return scoring_server.init(mlflow.pyfunc.load_model(str(root / "model")))


def guard(app, **kwargs):
    kwargs = {"max_bytes": 1_000_000, "client_timeout": 5.0, **kwargs}
    return scoring_app.Guard(app, kwargs.pop("max_bytes"), FEATURES, **kwargs)


def call(app, body=b"", *, method="POST", path="/invocations", headers=None, receive=None):
    """One request through `app`: `(status, headers, decoded JSON body)`."""
    headers = {"content-type": "application/json", **(headers or {})}
    if body is not None and "content-length" not in headers:
        headers["content-length"] = str(len(body))
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
        "method": method, "scheme": "http", "path": path, "raw_path": path.encode(),
        "query_string": b"", "root_path": "", "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
        "headers": [(k.encode(), v.encode()) for k, v in headers.items() if v is not None],
    }  # fmt: skip
    answer = {"body": b""}

    async def whole_body():
        if not answer.get("read"):
            answer["read"] = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # the client waits for its answer

    async def send(message):
        if message["type"] == "http.response.start":
            answer["status"], answer["headers"] = message["status"], dict(message["headers"])
        else:
            answer["body"] += message.get("body", b"")

    async def run():
        task = asyncio.create_task(app(scope, receive or whole_body, send))
        await asyncio.wait_for(task, 60)

    asyncio.run(run())
    return answer["status"], answer["headers"], json.loads(answer["body"])


def json_body(request):
    return json.dumps(request).encode()


def padded(body, size):
    """The same JSON, with spaces up to `size` bytes: over INLINE_BYTES it is
    checked in a thread instead of on the event loop (CSV always is)."""
    return body[:-1] + b" " * max(size - len(body), 0) + body[-1:]


SIZES = {"inline": 0, "in a thread": scoring_app.INLINE_BYTES + 1}


def refused(status, headers, answer, expected):
    assert status == expected
    assert headers[b"content-type"] == b"application/json"
    assert set(answer) == {"error_code", "message"}
    return answer["message"]


@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES.keys())
def test_guard_answers_deep_json_400_before_mlflow_decodes_it(mlflow_app, size):
    depth = 100_000
    body = padded(b'{"inputs": ' + b"[" * depth + b"]" * depth + b"}", size)
    message = refused(*call(guard(mlflow_app), body), 400)
    assert "nested too deeply" in message


@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES.keys())
def test_guard_refuses_strings_and_unknown_params_that_mlflow_would_take(mlflow_app, size):
    strings = padded(json_body({"inputs": [[0.5, "1e3"]]}), size)
    assert "a string" in refused(*call(guard(mlflow_app), strings), 400)
    params = padded(json_body({"inputs": [[0.5, 1.0]], "params": {"k": 1}}), size)
    assert "unknown 'k'" in refused(*call(guard(mlflow_app), params), 400)


@pytest.mark.parametrize("columns", [5, 30_000])
def test_guard_refuses_a_wrong_csv_width_from_the_header(mlflow_app, columns):
    body = (",".join(f"x{k}" for k in range(columns)) + '\n"unclosed\n').encode()
    answer = call(guard(mlflow_app), body, headers={"content-type": "text/csv"})
    assert f"the header row has {columns} columns" in refused(*answer, 400)


def test_guard_answers_413_from_content_length_alone_and_reads_no_body(mlflow_app):
    async def never_read():
        raise AssertionError("the guard read the body of an oversized request")

    status, _, answer = call(
        guard(mlflow_app, max_bytes=1000), None,
        headers={"content-length": "999999999999"}, receive=never_read,
    )  # fmt: skip
    assert "999999999999 bytes is over this server's limit of 1000" in refused(status, _, answer, 413)


def test_guard_answers_413_once_a_body_without_length_passes_the_limit(mlflow_app):
    parts = iter([b"x" * 600, b"x" * 600, b"never asked for"])

    async def chunked():
        return {"type": "http.request", "body": next(parts), "more_body": True}

    status, headers, answer = call(
        guard(mlflow_app, max_bytes=1000), None, headers={"content-length": None}, receive=chunked
    )
    assert "over 1200 bytes" in refused(status, headers, answer, 413)
    assert next(parts) == b"never asked for"


def test_guard_answers_408_and_closes_when_the_body_stops_arriving(mlflow_app):
    sent = []

    async def half_then_silence():
        if not sent:
            sent.append(True)
            return {"type": "http.request", "body": b'{"inputs": [[0.5,', "more_body": True}
        await asyncio.Event().wait()  # the rest never comes

    status, headers, answer = call(
        guard(mlflow_app, client_timeout=0.05), None,
        headers={"content-length": "40"}, receive=half_then_silence,
    )  # fmt: skip
    assert "stopped arriving" in refused(status, headers, answer, 408)
    assert headers[b"connection"] == b"close"


@pytest.mark.parametrize(
    "content_type, method, status",
    [(None, "POST", 415), ("text/plain", "POST", 415), ("application/json; charset=latin-1", "POST", 415),
     ("application/json", "GET", 405)],
)  # fmt: skip
def test_guard_refuses_media_types_and_methods_mlflow_would_answer_wrongly(
    mlflow_app, content_type, method, status
):
    body = json_body({"inputs": [[0.5, 1.0]]})
    answer = call(guard(mlflow_app), body, method=method, headers={"content-type": content_type})
    refused(*answer, status)


def test_guard_keeps_answering_after_each_refusal(mlflow_app):
    app = guard(mlflow_app, max_bytes=100_000)
    bad = [
        b'{"inputs": [[0.5, -0.2]',
        b'{"inputs": ' + b"[" * 5000 + b"]" * 5000 + b"}",
        json_body({"inputs": [[True, False]]}),
        json_body({"inputs": []}),
        json_body({"inputs": [[0.5, 1.0, 2.0]]}),  # MLflow's own schema check
    ]
    for body in bad:
        status, _, answer = call(app, body)
        assert 400 <= status < 500 and set(answer) == {"error_code", "message"}
    rows = [[0.5, -0.25], [1e3, 7.0]]
    status, _, answer = call(app, json_body({"inputs": rows}), headers={"content-type": "APPLICATION/JSON"})
    assert (status, answer) == (200, {"predictions": rows})


def test_guard_passes_a_csv_body_to_mlflow_as_json_rows(mlflow_app):
    # No header: this model declares no feature names to match one to.
    status, _, answer = call(guard(mlflow_app), b"0.5,-0.25\n1000,7\n", headers={"content-type": "text/csv"})
    assert (status, answer) == (200, {"predictions": [[0.5, -0.25], [1000.0, 7.0]]})


# --- Issue 30: names, typos, odd bodies, tokens, redirects. ------------------------


def test_a_key_typo_is_refused_naming_every_accepted_key():
    # MLflow answered {"input": ...} with words about tensor signatures.
    message = refusal(checks.check, {"input": [[0.5, -0.2]]}, FEATURES)
    assert '"input" (did you mean "inputs"?)' in message
    for key in ("inputs", "instances", "dataframe_split", "dataframe_records", "params"):
        assert key in message
    assert "it holds none" in refusal(checks.check, {"params": {}}, FEATURES)
    both = refusal(checks.check, {"inputs": [[1, 2]], "instances": [[1, 2]]}, FEATURES)
    assert "it holds inputs, instances" in both
    # An unknown key beside a good one was dropped silently.
    assert '"extra"' in refusal(checks.check, {"inputs": [[1, 2]], "extra": 1}, FEATURES)


@pytest.mark.parametrize(
    "body, says",
    [
        (b'{"inputs": [[' + b"1" * 5000 + b", 2]]}", "too long to read"),  # a ValueError, not JSONDecodeError
        (b'{"inputs": [[1, 2]], "inputs": [[3, 4]]}', '"inputs" twice'),
        (b"", "not valid JSON"),
        (b"\xff\xfe{", "not UTF-8"),
    ],
    ids=["5000-digit-int", "duplicate-key", "empty", "utf-16"],
)
def test_odd_json_bodies_are_bad_requests_not_errors(body, says):
    assert says in refusal(checks.decode, body)


def test_a_utf8_bom_before_json_is_read_as_json():
    assert checks.decode(b"\xef\xbb\xbf" + b'{"inputs": [[1, 2]]}') == {"inputs": [[1, 2]]}


def test_an_integer_beyond_float64_is_refused_naming_it():
    request = checks.decode(b'{"inputs": [[1' + b"0" * 400 + b', 2]]}')
    assert "a number of 401 digits" in refusal(checks.check, request, FEATURES)
    assert checks.check({"inputs": [[10**300, 2]]}, FEATURES) is None


NAMES = ("x", "y")


def test_named_columns_are_put_in_the_models_order_in_every_named_format():
    from kg_service.serving import columns

    records = {"dataframe_records": [{"y": -0.2, "x": 0.5}, {"x": 1, "y": 2}], "params": {"k": 1}}
    assert columns.positional(records, NAMES) == {"inputs": [[0.5, -0.2], [1, 2]], "params": {"k": 1}}
    split = {"dataframe_split": {"columns": ["y", "x"], "data": [[-0.2, 0.5]]}}
    assert columns.positional(split, NAMES) == {"inputs": [[0.5, -0.2]]}
    unnamed = {"dataframe_split": {"data": [[0.5, -0.2]]}}
    assert columns.positional(unnamed, NAMES) == {"inputs": [[0.5, -0.2]]}
    plain = {"inputs": [[0.5, -0.2]]}
    assert columns.positional(plain, NAMES) is plain


@pytest.mark.parametrize(
    "request_, says",
    [
        ({"dataframe_records": [{"x": 0.5}]}, "'y' missing"),
        ({"dataframe_records": [{"x": 0.5, "y": 1, "z": 2}]}, "unknown 'z'"),
        ({"dataframe_records": [{"x": 0.5, "yy": 1}]}, "unknown 'yy' (did you mean 'y'?)"),
        ({"dataframe_records": [{"x": 0.5, "y": 1}, {"y": 1, "X": 2}]}, "record 1: unknown 'X'"),
        ({"dataframe_split": {"columns": ["x", "x"], "data": [[1, 2]]}}, "'x' named twice"),
        ({"dataframe_split": {"columns": ["a", "b"], "data": [[1, 2]]}}, "unknown 'a', 'b'"),
        ({"dataframe_split": {"columns": ["x", "y"], "data": [[1, 2, 3]]}}, "row 0 does not have"),
        ({"dataframe_records": [[1, 2]]}, "list of {name: value} records"),
    ],
)
def test_a_missing_unknown_or_repeated_name_is_refused_naming_the_features(request_, says):
    from kg_service.serving import columns

    message = refusal(columns.positional, request_, NAMES)
    assert says in message, message
    if "records" not in says and "row 0" not in says:
        assert "this model's features are 'x', 'y'" in message


def test_a_model_without_feature_names_takes_no_named_columns():
    from kg_service.serving import columns

    message = refusal(columns.positional, {"dataframe_records": [{"y": 1, "x": 2}]}, None)
    assert "declares no feature names" in message and '{"inputs"' in message


@pytest.mark.parametrize(
    "body, expected",
    [
        (b"0.5,-0.2\n1,2\n", [[0.5, -0.2], [1, 2]]),  # no header: the first row is data
        (b"y,x\n-0.2,0.5\n2,1\n", [[0.5, -0.2], [1, 2]]),  # a header: matched by name
        (b"x,y\r0.5,-0.2\r1,2\r", [[0.5, -0.2], [1, 2]]),  # CR-only line ends (a 500)
        (b"x,y\r\n0.5,-0.2\r\n", [[0.5, -0.2]]),
        (b"\xef\xbb\xbfx,y\n0.5,-0.2\n", [[0.5, -0.2]]),  # a BOM
        (b'"x","y"\n0.5,-0.2\n\n', [[0.5, -0.2]]),
    ],
    ids=["no-header", "header-y-x", "cr-only", "crlf", "bom", "quoted-header"],
)
def test_csv_rows_reach_the_model_in_its_order_with_or_without_a_header(body, expected):
    converted, problem = model_input.csv_as_json(body, FEATURES, NAMES)
    assert problem is None
    assert json.loads(converted) == {"inputs": expected}


@pytest.mark.parametrize(
    "body, says",
    [
        (b"x,y\n0.5,-0.2\nabc,1\n", "line 3, column 'x': 'abc' is not a number"),
        (b"x,y\n0.5,-0.2\n1,abc\n", "line 3, column 'y': 'abc' is not a number"),
        (b"0.5,-0.2\n1,\n", "line 2, column 1: an empty value is not a number"),
        (b"x,z\n1,2\n", "unknown 'z'"),
        (b"x,y\n1,2,3\n", "line 2 has 3 values"),
        (b"x,y\n", "no data rows"),
        (b"", "no data rows"),
        (b'x,y\n"1,2\n', "cannot read it as CSV"),
        (b"x,y\n1_0,2\n", "'1_0' is not a number"),
        (b"\xff\xfe,\n", "not UTF-8"),
    ],
)
def test_a_bad_csv_value_is_named_by_its_line_and_column(body, says):
    converted, problem = model_input.csv_as_json(body, FEATURES, NAMES)
    assert converted is None and says in problem, problem


def test_a_csv_header_for_a_model_without_names_is_refused():
    _, problem = model_input.csv_as_json(b"a,b\n1,2\n", FEATURES, None)
    assert "declares no feature names" in problem
    converted, problem = model_input.csv_as_json(b"1,2\n", FEATURES, None)
    assert json.loads(converted) == {"inputs": [[1, 2]]}


odd_text = st.text(alphabet=st.sampled_from(list('{}[]",:0123456789.eE-+ \n\r\tNaInfityx\\u\ufeff')), max_size=60)


@settings(max_examples=150, deadline=None)
@given(st.one_of(odd_text.map(str.encode), st.binary(max_size=40)), st.sampled_from(["application/json", "text/csv"]))
def test_no_body_makes_the_guards_parsers_raise(mlflow_app, body, media_type):
    # Every body is answered: refused with a message, or passed on; never
    # an exception (a 500 with a traceback, issue 30 §10).
    app = guard(mlflow_app, feature_names=NAMES)
    converted, problem, _ = app._checked(media_type, body)
    assert (converted is None) != (problem is None) or media_type == "application/json"


def test_guard_matches_named_records_to_the_models_features(mlflow_app):
    # The identity model answers what it was given: the order is visible.
    app = guard(mlflow_app, feature_names=NAMES)
    records = json_body({"dataframe_records": [{"y": -0.25, "x": 0.5}]})
    assert call(app, records)[::2] == (200, {"predictions": [[0.5, -0.25]]})
    split = json_body({"dataframe_split": {"columns": ["y", "x"], "data": [[-0.25, 0.5]]}})
    assert call(app, split)[::2] == (200, {"predictions": [[0.5, -0.25]]})
    csv = call(app, b"y,x\n-0.25,0.5\n", headers={"content-type": "text/csv"})
    assert csv[::2] == (200, {"predictions": [[0.5, -0.25]]})
    missing = call(app, json_body({"dataframe_records": [{"y": 1}]}))
    assert "'x' missing; this model's features are 'x', 'y'" in refused(*missing, 400)


def test_a_non_ascii_token_matches_as_utf8_bytes(mlflow_app):
    token = "pässwörd-✓"
    app = guard(mlflow_app, token=token)
    body = json_body({"inputs": [[0.5, 1.0]]})
    status, _, _ = call_raw(app, body, [(b"authorization", f"Bearer {token}".encode())])
    assert status == 200
    status, _, _ = call_raw(app, body, [(b"authorization", "Bearer pässwörd-x".encode())])
    assert status == 401


def call_raw(app, body, extra_headers, path="/invocations", method="POST"):
    """As `call`, with raw header bytes (a UTF-8 header value)."""
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
        "method": method, "scheme": "http", "path": path, "raw_path": path.encode(),
        "query_string": b"", "root_path": "", "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
        "headers": [(b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()), *extra_headers],
    }  # fmt: skip
    answer = {"body": b""}

    async def receive():
        if not answer.get("read"):
            answer["read"] = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()

    async def send(message):
        if message["type"] == "http.response.start":
            answer["status"], answer["headers"] = message["status"], dict(message["headers"])
        else:
            answer["body"] += message.get("body", b"")

    asyncio.run(asyncio.wait_for(app(scope, receive, send), 60))
    return answer["status"], answer["headers"], answer["body"]


def test_a_redirect_never_names_the_clients_host(mlflow_app):
    status, headers, _ = call_raw(
        guard(mlflow_app), b"", [(b"host", b"evil.example")], path="/ping/", method="GET"
    )
    assert status == 307
    assert headers[b"location"] == b"/ping"


json_trees = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(10**400), 10**400), st.floats(),
              st.text(max_size=4), st.sampled_from(["x", "y", "inputs"])),
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.sampled_from(["x", "y", "columns", "data", "z"]), inner, max_size=3)),
    max_leaves=12,
)  # fmt: skip
requests_ = st.dictionaries(st.sampled_from([*checks.KEYS, "input"]), json_trees, max_size=3)


@settings(max_examples=120, deadline=None)
@given(requests_)
def test_no_json_request_gets_a_500_or_a_200_with_nan(mlflow_app, request_):
    # Through the guard and MLflow's real app (an identity model: it
    # answers what it was given, NaN included): issue 30 §3, §10.
    body = json.dumps(request_).encode()
    status, _, answer = call_raw(guard(mlflow_app, feature_names=NAMES), body, [])
    assert status < 500, answer[:300]
    if status == 200:
        assert b"NaN" not in answer and b"Infinity" not in answer, answer[:300]


# --- Named columns as a dict, and rows of one width (a skeptic's probes) -----
# `{"inputs": {"x": [...], "y": [...]}}` passed unchecked: strings and
# booleans were cast and answered 200, `[[a, b]]` in one column became two
# rows, and an empty batch was answered with no predictions.


@pytest.mark.parametrize(
    "request_, says",
    [
        ({"inputs": {"y": ["-0.2"], "x": ["0.5"]}}, 'column "y", row 0 is a string ("-0.2")'),
        ({"inputs": {"y": "-0.2", "x": "0.5"}}, 'column "y", row 0 is a string ("-0.2")'),
        ({"instances": {"y": [True], "x": [False]}}, 'column "y", row 0 is a boolean (true)'),
        ({"inputs": {"y": [[-0.2, 1]], "x": [[0.5, 0]]}}, 'column "y", row 0 is a list'),
        ({"inputs": {"y": [None], "x": [0.5]}}, 'column "y", row 0 is null'),
        ({"inputs": {"y": [1, 2], "x": [0.5]}}, "different numbers of rows (y 2, x 1)"),
        ({"inputs": {"y": [], "x": []}}, "batch is empty"),
        ({"inputs": {"x": [[[[0.5]]]] * 1, "y": [1]}}, 'column "x", row 0 is a list'),
    ],
)
def test_named_columns_in_a_dict_hold_one_json_number_per_row(request_, says):
    message = refusal(checks.check, request_, FEATURES)
    assert says in message, message
    if "empty" not in says:
        assert "one JSON number per row" in message or "numbers of rows" in message


@pytest.mark.parametrize(
    "rows, says",
    [
        ([[0.5, -0.2], [0.1]], "row 1 has 1 value, row 0 has 2"),
        ([[0.5, -0.2], [0.1, 0.2, 0.3]], "row 1 has 3 values, row 0 has 2"),
        ([[0.5, -0.2], 0.3], "row 1 is a number, row 0 a list"),
        ([0.3, [0.5, -0.2]], "row 1 is a list, row 0 a number"),
    ],
)
def test_rows_of_different_widths_are_refused_naming_the_first_that_differs(rows, says):
    message = refusal(checks.check, {"inputs": rows}, FEATURES)
    assert says in message, message


def test_named_columns_in_a_dict_and_named_instances_are_put_in_the_models_order():
    from kg_service.serving import columns

    for request_, rows in [
        ({"inputs": {"y": [-0.2, 2], "x": [0.5, 1]}}, [[0.5, -0.2], [1, 2]]),
        ({"inputs": {"y": -0.2, "x": 0.5}}, [[0.5, -0.2]]),  # one row, as MLflow reads it
        ({"instances": [{"y": -0.2, "x": 0.5}, {"x": 1, "y": 2}]}, [[0.5, -0.2], [1, 2]]),
    ]:
        assert checks.check(request_, FEATURES) is None
        assert columns.positional(request_, NAMES) == {"inputs": rows}
    message = refusal(columns.positional, {"inputs": {"x": [0.5], "why": [1]}}, NAMES)
    assert "unknown 'why'" in message and "this model's features are 'x', 'y'" in message
    message = refusal(columns.positional, {"instances": [{"x": 0.5, "y": 1}, {"x": 1}]}, NAMES)
    assert "instances: record 1" in message and "'y' missing" in message
    message = refusal(columns.positional, {"inputs": {"y": [1], "x": [2]}}, None)
    assert "declares no feature names" in message
    assert "row 0, column 1" in refusal(checks.check, {"instances": [{"x": 0.5, "y": "1"}]}, FEATURES)


@pytest.mark.parametrize("text, kind", [("[[0.5, -0.2]]\n", "json"), (' {"inputs": [[1, 2]]}', "json"),
                                        ("0.5,-0.2\n", "csv"), ("x,y\n0.5,-0.2\n", "csv")])
def test_kg_predict_reads_stdin_starting_with_a_bracket_as_json(monkeypatch, text, kind):
    # A JSON array on stdin was read as a CSV ("the CSV header: unknown
    # '[[0.5'"): as JSON it gets JSON's words ("must be a JSON dictionary").
    import io
    import sys

    from kg_service.serving import predict

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    assert predict._read("-", 1 << 20) == (kind, text)


@pytest.mark.parametrize("encoding", ["gzip", "deflate, gzip", "br"])
def test_guard_refuses_a_compressed_body_naming_the_encoding(mlflow_app, encoding):
    # A gzip body was read as text: "the body is not valid JSON (not UTF-8 text)".
    import gzip

    body = gzip.compress(json_body({"inputs": [[0.5, 1.0]]}))
    message = refused(*call(guard(mlflow_app), body, headers={"content-encoding": encoding}), 415)
    assert f"Content-Encoding {encoding!r}" in message and "uncompressed" in message


def test_guard_takes_an_identity_content_encoding(mlflow_app):
    body = json_body({"inputs": [[0.5, 1.0]]})
    status, _, answer = call(guard(mlflow_app), body, headers={"content-encoding": "identity"})
    assert status == 200 and answer == {"predictions": [[0.5, 1.0]]}
