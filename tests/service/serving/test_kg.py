"""`kg` end to end: one tiny real sweep (`kg train`) in a sqlite store, a
real `kg serve` process on a free loopback port, `kg predict`, `kg models`,
and the server's answers to bad requests.

The reference for every prediction is the registered model loaded in this
process with `mlflow.pyfunc.load_model`; for bad requests, the statuses of
HTTP (413 too large, 415 unsupported media type, 400 bad input) and that
the server answers a good request afterwards.
"""

import http.client
import io
import json
import os
import shlex
import signal
import socket
import subprocess
import time

import numpy as np
import pytest
from click.testing import CliRunner

from kg_service.cli import main as kg
from tests.service import servers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
MODEL = "models:/tiny-gelu@champion"
FEATURES = 2
KG = os.path.join(servers.VENV_BIN, "kg")


@pytest.fixture(scope="module")
def sweep(tiny_sweep, tmp_path_factory):
    """One gelu member of configs/tiny.yaml, trained by `kg train`: the
    session's shared sweep (tests/service/shared_sweep.py), which other
    modules read too; "logs" is this module's own folder."""
    return {"cwd": tiny_sweep.cwd, "uri": tiny_sweep.uri, "saved_model": tiny_sweep.saved_model,
            "stdout": tiny_sweep.stdout, "logs": tmp_path_factory.mktemp("kg")}  # fmt: skip


def printed_serve_command(stdout):
    """The words of the `Serve:` line `kg train` printed."""
    (line,) = [l for l in stdout.splitlines() if l.startswith("Serve:")]
    return shlex.split(line[len("Serve:"):])


@pytest.fixture(scope="module")
def local(sweep):
    """The registered model, loaded here: the reference."""
    import mlflow

    mlflow.set_tracking_uri(sweep["uri"])
    mlflow.set_registry_uri(sweep["uri"])
    return mlflow.pyfunc.load_model(MODEL)


@pytest.fixture(scope="module")
def server(sweep):
    """`kg serve MODEL --tracking-uri URI` as the shared sweep printed it
    (its `Serve:` line, run by cli/test_run_output.py before: one kg serve
    process less, issue 17), on a free loopback port; stopped with SIGTERM."""
    port = servers.free_port()
    log_path = sweep["logs"] / "kg-serve.log"
    words = printed_serve_command(sweep["stdout"])
    assert os.path.basename(words[0]) == "kg" and words[1:] == ["serve", MODEL, "--tracking-uri",
                                                                 sweep["uri"]], words
    env = servers.server_env()
    env.pop("MLFLOW_TRACKING_URI", None)
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            # A short client timeout: the slow-client tests wait for it.
            [*words, "--port", str(port), "--client-timeout", "3"], cwd=sweep["cwd"], env=env,
            stdout=log, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
    try:
        servers.wait_for_http(f"http://127.0.0.1:{port}/ping", process, 300, log_path)
        yield {"port": port, "process": process, "log": log_path}
    finally:
        servers.stop(process)


def post(port, body, content_type="application/json"):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    headers = {} if content_type is None else {"Content-Type": content_type}
    try:
        connection.request("POST", "/invocations", body, headers)
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def rows(n=5, seed=0):
    return np.random.default_rng(seed).normal(size=(n, FEATURES)).round(4).astype("float32")


# --- The help teaches the workflow. ---------------------------------------------


@pytest.mark.parametrize("command", [[], ["serve"], ["predict"], ["models"], ["train"]])
def test_help_of_kg_and_each_command_shows_a_runnable_example(command):
    result = CliRunner().invoke(kg.main, [*command, "--help"], prog_name="kg")
    assert result.exit_code == 0, result.output
    assert "Examples:" in result.output or "workflow" in result.output
    assert "configs/" in result.output or "models:/" in result.output


def test_kg_train_is_the_kg_train_command_object():
    from kg_service.cli import train as cli

    assert kg.main.commands["train"] is cli.main


# --- Served = local, in every request format; kg predict the same. -----------


def test_served_predictions_equal_the_locally_loaded_model_in_every_format(server, local):
    x = rows()
    expected = local.predict(x)
    bodies = {
        "inputs": json.dumps({"inputs": x.tolist()}),
        "instances": json.dumps({"instances": x.tolist()}),
        "dataframe_split": json.dumps({"dataframe_split": {"columns": ["x", "y"], "data": x.tolist()}}),
    }
    for name, body in bodies.items():
        status, answer = post(server["port"], body)
        assert status == 200, (name, answer)
        np.testing.assert_allclose(json.loads(answer)["predictions"], expected, atol=1e-6, err_msg=name)
    csv = "x,y\n" + "\n".join(f"{a},{b}" for a, b in x.tolist())
    status, answer = post(server["port"], csv, "text/csv")
    assert status == 200, answer
    np.testing.assert_allclose(json.loads(answer)["predictions"], expected, atol=1e-6)


def test_the_printed_serve_command_answers_a_csv_request(server):
    # `kg train`'s `Serve:` line named plain `mlflow models serve`, which
    # answers any CSV request with a stack trace in the body (issue 15);
    # the line itself is read in cli/test_run_output.py.
    status, answer = post(server["port"], "x,y\n0.5,-0.2\n", "text/csv")
    assert status == 200, answer
    assert "predictions" in answer and "Traceback" not in answer, answer


def run_kg(*args, input=None):
    return CliRunner().invoke(kg.main, [str(a) for a in args], input=input, prog_name="kg")


@pytest.mark.parametrize("kind", ["csv", "json", "npy", "stdin-json", "stdin-csv"])
def test_kg_predict_prints_the_served_predictions(sweep, server, local, tmp_path, kind):
    x = rows(7, seed=1)
    expected = local.predict(x)
    csv = "x,y\n" + "\n".join(f"{a},{b}" for a, b in x.tolist()) + "\n"
    request = json.dumps({"inputs": x.tolist()})
    stdin = None
    if kind == "csv":
        (tmp_path / "x.csv").write_text(csv)
        source = tmp_path / "x.csv"
    elif kind == "json":
        (tmp_path / "x.json").write_text(request)
        source = tmp_path / "x.json"
    elif kind == "npy":
        np.save(tmp_path / "x.npy", x)
        source = tmp_path / "x.npy"
    else:
        source, stdin = "-", request if kind == "stdin-json" else csv
    result = run_kg(
        "predict", MODEL, "--input", source, "--format", "json", "--tracking-uri", sweep["uri"],
        input=stdin,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    printed = np.asarray(json.loads(result.stdout)["predictions"])
    np.testing.assert_allclose(printed, expected, atol=1e-6)
    _, served = post(server["port"], request)
    np.testing.assert_allclose(printed, json.loads(served)["predictions"], atol=1e-6)


def test_kg_predict_csv_output_has_the_class_names_as_header(sweep, tmp_path, local):
    x = rows(3)
    np.save(tmp_path / "x.npy", x)
    result = run_kg("predict", MODEL, "--input", tmp_path / "x.npy", "--tracking-uri", sweep["uri"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().splitlines()
    assert lines[0] == "upper moon,lower moon"
    printed = np.loadtxt(io.StringIO("\n".join(lines[1:])), delimiter=",")
    np.testing.assert_allclose(printed, local.predict(x), atol=1e-6)


def test_kg_predict_on_the_savedmodel_folder_matches_the_registered_model(sweep, tmp_path, local):
    x = rows(4, seed=2)
    np.save(tmp_path / "x.npy", x)
    result = run_kg("predict", sweep["saved_model"], "--input", tmp_path / "x.npy", "--format", "json")
    assert result.exit_code == 0, result.output
    np.testing.assert_allclose(json.loads(result.stdout)["predictions"], local.predict(x), atol=1e-5)


def test_the_savedmodel_wrapper_pins_what_serving_it_needs_without_inferring(sweep, tmp_path, local):
    # Explicit requirements: MLflow infers none, so it starts no process
    # to load the model (it did, ~7 CPU s per `kg serve`/`kg predict`).
    import mlflow
    import tensorflow as tf

    from kg_service.serving import model_folder

    target = model_folder._wrap_saved_model(sweep["saved_model"].resolve(), tmp_path / "model")
    pinned = (tmp_path / "model" / "requirements.txt").read_text().split()
    assert f"tensorflow=={tf.__version__}" in pinned and f"numpy=={np.__version__}" in pinned
    assert any(line.startswith("mlflow") for line in pinned)
    x = rows(3, seed=5)
    np.testing.assert_allclose(mlflow.pyfunc.load_model(target).predict(x), local.predict(x), atol=1e-5)


def test_the_savedmodel_signatures_are_read_from_the_file_as_tensorflow_reads_them(sweep):
    # `kg serve`/`kg predict` of a SavedModel read its signature without
    # TensorFlow (serving/saved_model_proto.py); TensorFlow's own reading
    # is the reference.
    import tensorflow as tf

    from kg_service.serving import saved_model_proto

    loaded = tf.saved_model.load(str(sweep["saved_model"]))
    expected = {
        name: ({k: v.shape.as_list() for k, v in f.structured_input_signature[1].items()},
               {k: v.shape.as_list() for k, v in f.structured_outputs.items()})
        for name, f in loaded.signatures.items()
    }  # fmt: skip
    assert saved_model_proto.signatures(sweep["saved_model"]) == expected
    assert expected["serving_default"] == ({"features": [None, FEATURES]}, {"output_0": [None, 2]})


def test_a_savedmodel_without_serving_default_or_unreadable_exits_2_naming_it(tmp_path):
    import tensorflow as tf

    module = tf.Module()
    module.double = tf.function(lambda x: 2 * x, input_signature=[tf.TensorSpec([None, 2])])
    tf.saved_model.save(module, str(tmp_path / "plain"), signatures={"double": module.double})
    assert list(tf.saved_model.load(str(tmp_path / "plain")).signatures) == ["double"]
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "saved_model.pb").write_bytes(b"\x0a\xff\xff\xff\x0f")
    np.save(tmp_path / "x.npy", rows(2))
    for folder, says in (("plain", "has no serving_default signature (it has ['double'])"),
                         ("broken", "saved_model.pb cannot be read")):
        result = run_kg("predict", tmp_path / folder, "--input", tmp_path / "x.npy")
        assert result.exit_code == 2, result.output
        assert says in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr


# --- kg models. --------------------------------------------------------------------


def test_kg_models_lists_version_alias_activation_seed_metrics_and_savedmodel(sweep):
    import mlflow

    result = run_kg("models", "--format", "json", "--tracking-uri", sweep["uri"])
    assert result.exit_code == 0, result.output
    (listed,) = json.loads(result.stdout)
    client = mlflow.MlflowClient(sweep["uri"], registry_uri=sweep["uri"])
    version = client.get_model_version_by_alias("tiny-gelu", "champion")
    assert listed["name"] == "tiny-gelu" and listed["version"] == int(version.version)
    assert listed["aliases"] == ["champion"]
    assert listed["activation"] == "gelu" and listed["seed"] == int(version.tags["seed"])
    assert listed["val_accuracy"] == pytest.approx(float(version.tags["val_accuracy"]))
    assert listed["saved_model"] == str(sweep["saved_model"].resolve())
    table = run_kg("models", "--tracking-uri", sweep["uri"])
    assert table.exit_code == 0
    assert "tiny-gelu" in table.stdout and "@champion" in table.stdout


# --- Mistakes: exit 2, one line. ------------------------------------------------------


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["models", "tiny-gelo"], "Did you mean 'tiny-gelu'?"),
        (["predict", "models:/nope@champion", "--input", "{x}"], "models:/nope@champion: not found"),
        (["predict", MODEL, "--input", "{missing}"], "cannot be read"),
        (["predict", MODEL, "--input", "{txt}"], "expected .csv, .json or .npy"),
        (["predict", MODEL, "--input", "{wide}"], "expected rows of 2 features each"),
        (["predict", "{folder}", "--input", "{x}"], "neither an MLflow model folder"),
        (["serve", "no/such/folder"], "no such file or folder"),
        (["models", "--tracking-uri", " "], "--tracking-uri: got an empty string"),
        # Issue 15: the same checks as the server's, no traceback.
        (["predict", MODEL, "--input", "{empty}"], "the batch is empty"),
        (["predict", MODEL, "--input", "{empty_json}"], "the batch is empty"),
        (["predict", MODEL, "--input", "{deep}"], "nested too deeply"),
        (["predict", MODEL, "--input", "{strings}"], "row 0, column 1 is a string"),
        (["predict", MODEL, "--input", "{params}"], "params: unknown 'temperature'"),
        (["predict", MODEL, "--input", "{bools}"], "holds bool values"),
        (["serve", "models:/tiny-gelo@champion"], "not found. Did you mean models:/tiny-gelu@champion?"),
        # Issue 30 §15, §18, §3: refused before anything loads or is copied.
        (["predict", MODEL, "--input", "{npz}"], "is a .npz archive; expected one array"),
        (["predict", "http://127.0.0.1:9/model", "--input", "{x}"], "a http: URI is not a model source"),
        (["serve", "https://example.com/m"], "a https: URI is not a model source"),
        (["predict", "file://{folder}", "--input", "{x}"], "neither an MLflow model folder"),
        (["predict", "model:/tiny-gelu/1", "--input", "{x}"], "Did you mean models:/?"),
        (["predict", "{dangling}", "--input", "{x}"], "is a link to nothing"),
        (["predict", MODEL, "--input", "{x_csv}", "--max-input-mb", "0.00001"], "over the input limit of 10 bytes"),
        (["predict", MODEL, "--input", "{typo}"], '"input" (did you mean "inputs"?)'),
        (["predict", MODEL, "--input", "{huge}"], "outside what the model can compute"),
        (["predict", MODEL, "--input", "{y_z}"], "unknown 'z'; this model's features are 'x', 'y'"),
        (["predict", MODEL, "--input", "{cr_bad}"], "line 3, column 'y': 'abc' is not a number"),
        (["serve", MODEL, "--token-file", "{missing}"], "--token-file"),
    ],
)
def test_mistakes_exit_2_with_one_line(sweep, tmp_path, args, fragment):
    np.save(tmp_path / "x.npy", rows(2))
    np.save(tmp_path / "wide.npy", np.zeros((2, 3), "float32"))
    np.save(tmp_path / "empty.npy", np.zeros((0, FEATURES), "float32"))
    np.save(tmp_path / "bools.npy", np.ones((1, FEATURES), bool))
    (tmp_path / "x.txt").write_text("1,2")
    (tmp_path / "empty.json").write_text('{"inputs": []}')
    (tmp_path / "deep.json").write_text('{"inputs": ' + "[" * 100_000 + "]" * 100_000 + "}")
    (tmp_path / "strings.json").write_text('{"inputs": [[0.5, "1e3"]]}')
    (tmp_path / "params.json").write_text('{"inputs": [[0.5, 1]], "params": {"temperature": 1}}')
    with open(tmp_path / "npz.npy", "wb") as file:  # an .npz archive named .npy
        np.savez(file, x=rows(2))
    (tmp_path / "dangling").mkdir()
    (tmp_path / "dangling" / "MLmodel").write_text("flavors: {}\n")
    (tmp_path / "dangling" / "weights").symlink_to(tmp_path / "nowhere")
    (tmp_path / "x.csv").write_text("x,y\n0.5,-0.2\n")
    (tmp_path / "typo.json").write_text('{"input": [[0.5, -0.2]]}')
    (tmp_path / "huge.json").write_text('{"inputs": [[3e38, 3e38]]}')
    (tmp_path / "y_z.csv").write_text("y,z\n0.5,-0.2\n")
    (tmp_path / "cr_bad.csv").write_bytes(b"x,y\r0.5,-0.2\r1,abc\r")
    paths = {
        "x": tmp_path / "x.npy", "wide": tmp_path / "wide.npy", "txt": tmp_path / "x.txt",
        "missing": tmp_path / "missing.csv", "folder": tmp_path,
        "empty": tmp_path / "empty.npy", "bools": tmp_path / "bools.npy",
        "empty_json": tmp_path / "empty.json", "deep": tmp_path / "deep.json",
        "strings": tmp_path / "strings.json", "params": tmp_path / "params.json",
        "npz": tmp_path / "npz.npy", "dangling": tmp_path / "dangling",
        "x_csv": tmp_path / "x.csv", "typo": tmp_path / "typo.json", "huge": tmp_path / "huge.json",
        "y_z": tmp_path / "y_z.csv", "cr_bad": tmp_path / "cr_bad.csv",
    }  # fmt: skip
    args = [a.format(**paths) for a in args]
    if "--tracking-uri" not in args:
        args += ["--tracking-uri", sweep["uri"]]
    result = run_kg(*args)
    assert result.exit_code == 2, result.output
    assert fragment in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.output


# --- Bad requests against the real server: a 4xx, then it answers again. -------


TEN_MB = json.dumps({"inputs": [[0.1234567, 0.7654321]] * 420_000})


@pytest.mark.parametrize(
    "body, content_type, status, fragment",
    [
        ('{"inputs": [[0.1, 0.2, 0.3]]}', "application/json", 400, "expected rows of 2 features each"),
        ('{"inputs": [["a", 0.2]]}', "application/json", 400, 'row 0, column 0 is a string ("a")'),
        ('{"inputs": [[NaN, 0.2]]}', "application/json", 400, "got nan in row 0, column 0"),
        ('{"inputs": [[0.1, 0.2], [-Infinity, 0.2]]}', "application/json", 400, "got -inf in row 1, column 0"),
        ('{"inputs": []}', "application/json", 400, "the batch is empty"),
        ('{"instances": []}', "application/json", 400, "the batch is empty"),
        ('{"dataframe_split": {"columns": ["x", "y"], "data": []}}', "application/json", 400, "the batch is empty"),
        ('{"inputs": [[0.5, -0.2]', "application/json", 400, "valid JSON"),
        ('[[0.5, -0.2]]', "application/json", 400, "must be a JSON dictionary"),
        ("x,y\n", "text/csv", 400, "no data rows"),
        ("x,y\n0.5,-0.2,3\n", "text/csv", 400, "line 2 has 3 values; every row has 2"),
        (TEN_MB, "application/json", 413, "over this server's limit of 8000000 bytes"),
        ("{" + "x" * 5_000_000, "application/json", 400, "not valid JSON (Expecting property name"),
        ('{"inputs": [[0.5, -0.2]]}', "text/plain", 415, "Got 'text/plain'"),
        ('{"inputs": [[0.5, -0.2]]}', None, 415, "no Content-Type header"),
        # Issue 15: what MLflow's server answered 500, 200 or with the body.
        ('{"inputs": ' + "[" * 100_000 + "]" * 100_000 + "}", "application/json", 400, "nested too deeply"),
        ('{"inputs": ' + "[" * 3_000_000 + "]" * 3_000_000 + "}", "application/json", 400, "nested too deeply"),
        ('{"inputs": [[0.5, 1]], "params": {"a": ' + "[" * 5000 + "]" * 5000 + "}}", "application/json", 400, "nested too deeply"),
        ('{"inputs": [[0.5, 1]], "params": {"temperature": 0.5}}', "application/json", 400, "params: unknown 'temperature'; this model takes no params"),
        ('{"inputs": [[0.5, "1e3"]]}', "application/json", 400, "row 0, column 1 is a string"),
        ('{"inputs": [[true, false]]}', "application/json", 400, "row 0, column 0 is a boolean"),
        ('{"inputs": ' + "[[[0.5]]]" + "}", "application/json", 400, "row 0, column 0 is a list"),
        ("x,y\n0.5,inf\n", "text/csv", 400, "got inf in row 0, column 1"),
        (",".join(f"c{k}" for k in range(30_000)) + "\n" + ",".join(["0.5"] * 30_000) + "\n", "text/csv", 400, "the header row has 30000 columns; this model takes 2 features"),
        ("x,y\nabc,0.5\n", "text/csv", 400, "line 2, column 'x': 'abc' is not a number"),
        ('{"inputs": [[0.5, -0.2]]}', "application/json; charset=latin-1", 415, "must be UTF-8"),
        ('{"inputs": [[0.5, -0.2]]}', "application/json; version=2", 415, "unknown parameter 'version'"),
        # Issue 30: NaN answered 200 (§3), 500s (§10), a key typo (§18), names (§2).
        ('{"inputs": [[3e38, 3e38]]}', "application/json", 400, "outside what the model can compute"),
        ('{"dataframe_records": [{"x": 3e38, "y": 3e38}]}', "application/json", 400, "outside what the model can compute"),
        ("x,y\n3e38,3e38\n", "text/csv", 400, "outside what the model can compute"),
        ('{"inputs": [[1' + "0" * 5000 + ', 2]]}', "application/json", 400, "too long to read"),
        ("x,y\r0.5,-0.2\r1,abc\r", "text/csv", 400, "line 3, column 'y': 'abc' is not a number"),
        ('{"input": [[0.5, -0.2]]}', "application/json", 400, '"input" (did you mean "inputs"?)'),
        ('{"dataframe_records": [{"y": -0.2, "z": 0.5}]}', "application/json", 400, "unknown 'z'; this model's features are 'x', 'y'"),
    ],
    ids=[
        "wrong-width", "strings", "nan", "inf", "empty-inputs", "empty-instances",
        "empty-dataframe", "invalid-json", "a-list", "csv-header-only", "csv-row-too-long", "10MB",
        "5MB-invalid-json", "text-plain", "no-content-type",
        "100k-deep", "3M-deep", "deep-params", "unknown-params", "number-as-string", "booleans",
        "rows-nested-deeper", "csv-inf", "csv-30000-columns", "csv-text", "charset-latin-1",
        "unknown-media-parameter", "3e38-nan", "3e38-records", "3e38-csv", "5000-digits",
        "csv-cr-only-bad", "key-typo", "unknown-name",
    ],
)  # fmt: skip
def test_bad_request_is_a_4xx_with_a_clear_message_and_the_server_answers_on(
    server, local, body, content_type, status, fragment
):
    got, answer = post(server["port"], body, content_type)
    assert got == status, answer[:500]
    assert len(answer) < 5000, answer[:500]  # never the request echoed back
    error = json.loads(answer)  # one JSON shape for every error
    assert set(error) == {"error_code", "message"}, error
    message = error["message"]
    assert fragment in message, message
    assert body[:30] not in message  # not even a short one
    assert "Traceback" not in answer
    x = rows(2)
    got, answer = post(server["port"], json.dumps({"inputs": x.tolist()}))
    assert got == 200
    np.testing.assert_allclose(json.loads(answer)["predictions"], local.predict(x), atol=1e-6)


def test_named_columns_are_matched_by_name_served_and_in_kg_predict(sweep, server, local, tmp_path):
    # Issue 30 §2, §17: answered as if x = -0.2, y = 0.5; a CSV without a
    # header lost its first row.
    x = np.array([[0.5, -0.2], [1.0, 2.0]], "float32")
    expected = local.predict(x)
    assert not np.allclose(expected, local.predict(x[:, ::-1]), atol=1e-4)  # order matters
    requests = {
        "records": (json.dumps({"dataframe_records": [{"y": -0.2, "x": 0.5}, {"y": 2, "x": 1}]}), "application/json"),
        "split": (json.dumps({"dataframe_split": {"columns": ["y", "x"], "data": [[-0.2, 0.5], [2, 1]]}}), "application/json"),
        "csv-y-x": ("y,x\n-0.2,0.5\n2,1\n", "text/csv"),
        "csv-no-header": ("0.5,-0.2\n1,2\n", "text/csv"),
        "csv-cr-only": ("x,y\r0.5,-0.2\r1,2\r", "text/csv"),
    }  # fmt: skip
    for name, (body, content_type) in requests.items():
        status, answer = post(server["port"], body, content_type)
        assert status == 200, (name, answer)
        np.testing.assert_allclose(json.loads(answer)["predictions"], expected, atol=1e-6, err_msg=name)
        suffix = "json" if content_type == "application/json" else "csv"
        (tmp_path / f"{name}.{suffix}").write_text(body)
        result = run_kg("predict", MODEL, "--input", tmp_path / f"{name}.{suffix}", "--format", "json",
                        "--tracking-uri", sweep["uri"])  # fmt: skip
        assert result.exit_code == 0, (name, result.output)
        np.testing.assert_allclose(json.loads(result.stdout)["predictions"], expected, atol=1e-6, err_msg=name)


def test_kg_serve_on_a_busy_port_exits_2_before_loading_the_model(sweep):
    # Issue 30 §19: it loaded the model for 20 s, then exited 3.
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = run_kg("serve", MODEL, "--port", port, "--tracking-uri", sweep["uri"])
    assert result.exit_code == 2, result.output
    assert f"--port {port}: cannot listen there" in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


@pytest.mark.parametrize("host, warned", [("0.0.0.0", True), ("::", True), ("127.0.0.1", False), ("localhost", False)])
def test_kg_serve_warns_on_a_bind_beyond_loopback_without_a_token(tmp_path, host, warned):
    # Issue 30 §16; the missing model then stops it (exit 2), nothing loads.
    result = run_kg("serve", tmp_path / "no-model", "--host", host)
    assert result.exit_code == 2
    assert ("serves beyond this machine with no --token-file" in result.stderr) is warned, result.stderr


def test_a_savedmodel_whose_signature_is_not_one_float32_matrix_is_refused_saying_so(tmp_path):
    # Issue 30 §15: two inputs were an unpacking traceback.
    import tensorflow as tf

    def saved(name, function, *specs):
        module = tf.Module()
        # autograph=False: it reads a lambda's source, and several share a line here.
        module.f = tf.function(function, input_signature=list(specs), autograph=False)
        tf.saved_model.save(module, str(tmp_path / name), signatures={"serving_default": module.f})
        return tmp_path / name

    matrix = tf.TensorSpec([None, 2], tf.float32)
    cases = {
        "two inputs": (saved("two", lambda a, b: {"o": a + b}, matrix, matrix), "2 inputs"),
        "unknown width": (saved("width", lambda a: {"o": a}, tf.TensorSpec([None, None], tf.float32)), "shape [-1, -1]"),
        "two outputs": (saved("outs", lambda a: {"o": a, "p": a}, matrix), "2 outputs"),
        "strings": (saved("text", lambda a: {"o": tf.strings.length(a)}, tf.TensorSpec([None, 2], tf.string)), "input 'a' is string"),
        "scalar": (saved("scalar", lambda a: {"o": a * 2}, tf.TensorSpec([], tf.float32)), "shape []"),
    }  # fmt: skip
    np.save(tmp_path / "x.npy", rows(2))
    for case, (folder, says) in cases.items():
        result = run_kg("predict", folder, "--input", tmp_path / "x.npy")
        assert result.exit_code == 2, (case, result.output)
        assert says in result.stderr and "one float32 [batch, features] input" in result.stderr, (case, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_kg_predict_refuses_an_input_that_never_ends_without_reading_it_whole(sweep, tmp_path):
    # Issue 30 §15: /dev/zero (or a 2 GB sparse file) was read whole.
    endless = tmp_path / "endless.csv"
    endless.symlink_to("/dev/zero")
    sparse = tmp_path / "sparse.json"
    with open(sparse, "wb") as f:
        f.truncate(2 * 10**9)  # no disk used
    for source in (endless, sparse):
        result = run_kg("predict", MODEL, "--input", source, "--tracking-uri", sweep["uri"])
        assert result.exit_code == 2, result.output
        assert "over the input limit of 64000000 bytes" in result.stderr, result.stderr


def request(port, method, path, body=None, headers=None):
    """`(status, headers, body)` of one request to the server."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        connection.request(method, path, body, headers or {})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read().decode()
    finally:
        connection.close()


@pytest.mark.parametrize(
    "content_type", ["APPLICATION/JSON", "application/json; charset=utf-8", "Application/Json;Charset=UTF-8"]
)
def test_media_types_are_case_insensitive_and_take_a_charset(server, local, content_type):
    # RFC 9110 8.3.1: type, subtype and parameter names are case-insensitive.
    x = rows(2)
    got, answer = post(server["port"], json.dumps({"inputs": x.tolist()}), content_type)
    assert got == 200, answer
    np.testing.assert_allclose(json.loads(answer)["predictions"], local.predict(x), atol=1e-6)


@pytest.mark.parametrize(
    "method, path, status",
    [("GET", "/invocations", 405), ("PUT", "/invocations", 405), ("GET", "/nope", 404),
     ("POST", "/ping", 405), ("GET", "/docs", 404), ("GET", "/openapi.json", 404),
     ("GET", "/redoc", 404), ("GET", "/version", 404)],
)  # fmt: skip
def test_every_error_is_one_json_shape_and_docs_are_off(server, method, path, status):
    got, headers, answer = request(server["port"], method, path)
    assert got == status, answer
    assert headers["content-type"] == "application/json"
    error = json.loads(answer)
    assert set(error) == {"error_code", "message"} and error["message"], error
    if path == "/invocations":
        assert headers["allow"] == "POST" and "POST" in error["message"]


def _connect(port):
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    return sock


def _read_until_closed(sock):
    """All the server sends until it closes the connection (a socket timeout
    of 60 s, far past the server's 3 s client timeout, fails the test)."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def test_half_sent_headers_are_cut_off_with_408(server, local):
    sockets = [_connect(server["port"]) for _ in range(20)]
    try:
        for sock in sockets:
            sock.sendall(b"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Ty")
        for sock in sockets:
            answer = _read_until_closed(sock)
            assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
            assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["error_code"] == "BAD_REQUEST"
    finally:
        for sock in sockets:
            sock.close()
    x = rows(2)
    got, answer = post(server["port"], json.dumps({"inputs": x.tolist()}))
    assert got == 200, answer


def test_a_silent_connection_is_closed(server):
    with _connect(server["port"]) as sock:
        assert _read_until_closed(sock) == b""


def test_a_body_that_stops_arriving_is_answered_408(server):
    with _connect(server["port"]) as sock:
        sock.sendall(
            b"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100\r\n\r\n{\"inputs\": [[0.5,"
        )
        answer = _read_until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
    assert b"stopped arriving" in answer


def test_an_oversized_content_length_is_answered_413_before_the_body(server):
    with _connect(server["port"]) as sock:
        sock.sendall(
            b"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 999999999999\r\n\r\n{}"
        )
        response = http.client.HTTPResponse(sock)
        response.begin()  # the body never comes: this is the answer to the header
        assert response.status == 413
        assert "999999999999 bytes is over" in json.loads(response.read())["message"]
        assert _read_until_closed(sock) == b""  # then closed at the client timeout


def test_kg_predict_casts_a_float64_npy_as_the_server_casts_json(sweep, tmp_path, local):
    x = rows(3).astype("float64")  # numpy's default
    np.save(tmp_path / "x.npy", x)
    result = run_kg("predict", MODEL, "--input", tmp_path / "x.npy", "--format", "json",
                    "--tracking-uri", sweep["uri"])  # fmt: skip
    assert result.exit_code == 0, result.output
    expected = local.predict(x.astype("float32"))
    np.testing.assert_allclose(json.loads(result.stdout)["predictions"], expected, atol=1e-6)


@pytest.fixture(scope="module")
def guarded_workers(sweep, tmp_path_factory):
    """`kg serve` of the sweep's SavedModel folder with `--workers 2`,
    `--expose-docs` and a token file (KG_SERVE_TOKEN_FILE, the option's
    environment variable), started as a user starts it: TensorFlow's log
    level the model file's default. One server for the token test and the
    process-group test (issue 17: each started its own); the token guard
    is the app's, whatever the model, and here every worker holds it. The
    process-group test stops it; the fixture stops what is left."""
    token = "s3cret-token-for-the-test"
    token_path = tmp_path_factory.mktemp("token") / "token"
    token_path.write_text(token + "\n")
    port = servers.free_port()
    log_path = sweep["logs"] / "kg-serve-savedmodel.log"
    env = {**servers.server_env(), "KG_SERVE_TOKEN_FILE": str(token_path)}
    for name in ("MLFLOW_TRACKING_URI", "TF_CPP_MIN_LOG_LEVEL"):
        env.pop(name, None)
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [KG, "serve", str(sweep["saved_model"]), "--port", str(port), "--workers", "2",
             "--expose-docs"],
            cwd=sweep["cwd"], env=env, stdout=log, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
    try:
        servers.wait_for_http(f"http://127.0.0.1:{port}/ping", process, 300, log_path)
        yield {"port": port, "process": process, "log": log_path, "token": token}
    finally:
        servers.stop(process)


def _authorized(server):
    return {"Content-Type": "application/json", "Authorization": f"Bearer {server['token']}"}


def test_kg_serve_with_a_token_file_requires_the_bearer_token(guarded_workers, local):
    server, port = guarded_workers, guarded_workers["port"]
    token = server["token"]
    x = rows(2)
    body = json.dumps({"inputs": x.tolist()})
    json_type = {"Content-Type": "application/json"}
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": token}):
        for method, path in (("POST", "/invocations"), ("GET", "/docs"), ("GET", "/version")):
            got, answer_headers, answer = request(port, method, path, body, {**json_type, **headers})
            assert got == 401, (headers, path, answer)
            assert answer_headers["www-authenticate"].startswith("Bearer"), answer_headers
            assert json.loads(answer)["error_code"] == "UNAUTHENTICATED"
    got, _, answer = request(port, "POST", "/invocations", body, _authorized(server))
    assert got == 200, answer
    np.testing.assert_allclose(json.loads(answer)["predictions"], local.predict(x), atol=1e-5)
    for path in ("/ping", "/health"):  # probes need no token
        assert request(port, "GET", path)[0] == 200
    assert request(port, "GET", "/docs", None, _authorized(server))[0] == 200  # --expose-docs


def test_server_log_has_no_traceback_after_the_bad_requests(server):
    # Runs after the bad-request tests (file order).
    log = server["log"].read_text(errors="replace")
    assert "Traceback" not in log, log[-3000:]
    assert " 500 " not in log


# --- Start-up and shutdown. ----------------------------------------------------------


def test_kg_serve_prints_the_url_once_ping_answers(server):
    deadline = time.monotonic() + 30
    while "kg serve:" not in server["log"].read_text() and time.monotonic() < deadline:
        time.sleep(0.2)
    log = server["log"].read_text()
    url = f"http://127.0.0.1:{server['port']}"
    assert log.count(f"at {url} ") == 1, log[-2000:]
    assert log.index("GET /ping") < log.index(f"at {url} ")


def test_kg_serve_of_a_savedmodel_with_workers_stops_its_whole_process_group(guarded_workers, local):
    # The server of the token test, which runs first (file order); this
    # test stops it.
    port, process, log_path = guarded_workers["port"], guarded_workers["process"], guarded_workers["log"]
    log = log_path.read_text(errors="replace")
    assert "CloudPickle" not in log  # a models-from-code wrapper, nothing pickled
    if not os.path.exists("/proc/driver/nvidia/version"):
        assert "cuInit" not in log
    x = rows(3)
    got, _, answer = request(port, "POST", "/invocations", json.dumps({"inputs": x.tolist()}),
                             _authorized(guarded_workers))  # fmt: skip
    assert got == 200, answer
    np.testing.assert_allclose(json.loads(answer)["predictions"], local.predict(x), atol=1e-5)
    group = _server_group(process.pid)
    assert len(_members(group)) >= 3  # uvicorn's supervisor and 2 workers
    # A group of its own in kg's session: a session of its own made the
    # scheduler's autogroups delay every wakeup (issue 20 §5).
    assert group != os.getpgid(process.pid)
    assert {os.getsid(p) for p in _members(group)} == {os.getsid(process.pid)}
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0
    assert _members(group) == []


def _server_group(kg_pid):
    """The process group of kg's uvicorn child (a group of its own)."""
    for _ in range(50):
        children = [p for p, parent, _ in _processes() if parent == kg_pid]
        if children:
            return os.getpgid(children[0])
        time.sleep(0.1)
    raise AssertionError("kg serve has no child process")


def _members(group):
    return [p for p, _, g in _processes() if g == group]


def _processes():
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":  # a zombie has exited
                found.append((int(entry), int(fields[1]), int(fields[2])))
    return found
