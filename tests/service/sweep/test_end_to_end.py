"""kg-train end to end: a tiny real sweep, a real sqlite MLflow store and
registry, real SavedModels, a real `mlflow models serve`, and a real
PostgreSQL-backed `mlflow server`."""

import json
import os
import subprocess
import sys
import textwrap
import urllib.error
import urllib.request

import numpy as np
import pytest

from tests.service import servers
from tests.service import in_process

# Small, but trained enough (~96 % test accuracy) that a served model fed
# the wrong units shows: one fed raw make_moons points while expecting
# standardized ones scored 69 %.
TINY = textwrap.dedent(
    """
    experiment: tiny
    activations: [relu, gelu]
    seeds: 2
    data: {dataset: moons, n_samples: 1000, noise: 0.2}
    model: {hidden_units: [8]}
    training: {epochs: 30, batch_size: 32, learning_rate: 0.01}
    registry: {model_name: "tiny-{activation}"}
    """
)

# For the runs of TINY whose checks hold at any size (a version number,
# a backend tag, where the artifacts go): its 30 epochs are for the
# accuracy the serving tests compare.
FEW_EPOCHS = ("--set", "training.epochs=2")

DIGITS = textwrap.dedent(
    """
    experiment: tiny-digits
    activations: [gelu]
    seeds: 1
    data: {dataset: digits, seed: 0, test_fraction: 0.2}
    model: {hidden_units: [64]}
    training: {epochs: 20, batch_size: 32}
    registry: {model_name: "digits-{activation}"}
    # The split fixed by data.seed (not varied per seed), so the test can
    # re-derive the held-out rows with scikit-learn's own split.
    vary: [init, order]
    """
)


def kg_train(cwd, *args, env=None):
    command = [os.path.join(servers.VENV_BIN, "kg-train"), *args, "--quiet"]
    base = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    return subprocess.run(
        command,
        cwd=cwd,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,
    )


def kg_train_here(cwd, *args):
    """`kg-train ARGS --quiet` in this process (click's runner), in `cwd`:
    for the sweeps whose checks are about the store, the registry and the
    exports, not the process (issue 17: a kg-train process pays
    TensorFlow's and MLflow's start-up). The JAX sweep below stays a
    process (a backend is chosen once per process); so do the sweeps of
    sweep/test_faults.py (they are signalled). test_smoke_configs.py's
    sweeps run here too (issue 30 §25)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(cwd)  # the default store, output_dir and export.dir are relative
        patch.delenv("MLFLOW_TRACKING_URI", raising=False)
        return in_process.kg_train(*args)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """One tiny sweep on MLflow's default store (sqlite:///mlflow.db in
    cwd: no --tracking-uri, MLFLOW_TRACKING_URI unset), trained in this
    process; click's result has its stdout and stderr apart."""
    cwd = tmp_path_factory.mktemp("sweep")
    (cwd / "tiny.yaml").write_text(TINY)
    result = kg_train_here(cwd, "--config", "tiny.yaml")
    assert result.exit_code == 0, (result.output + str(result.exception))[-3000:]
    return cwd, result, f"sqlite:///{cwd / 'mlflow.db'}"


@pytest.fixture(scope="module")
def digits_sweep(tmp_path_factory):
    """One small digits sweep (one activation, one seed) in its own store,
    trained in this process."""
    cwd = tmp_path_factory.mktemp("digits")
    (cwd / "digits.yaml").write_text(DIGITS)
    result = kg_train_here(cwd, "--config", "digits.yaml")
    assert result.exit_code == 0, (result.output + str(result.exception))[-3000:]
    assert (cwd / "mlflow.db").exists()
    return cwd, f"sqlite:///{cwd / 'mlflow.db'}"


def client(uri):
    import mlflow

    return mlflow.MlflowClient(uri, registry_uri=uri)


def test_sweep_uses_mlflow_default_sqlite_store_in_cwd(sweep):
    cwd, _, _ = sweep
    assert (cwd / "mlflow.db").exists()


def test_sweep_logs_one_parent_and_a_child_per_activation_and_seed(sweep):
    _, _, uri = sweep
    c = client(uri)
    experiment = c.get_experiment_by_name("tiny")
    runs = c.search_runs([experiment.experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 1
    assert sorted((r.data.tags["activation"], r.data.tags["seed"]) for r in children) == [
        ("gelu", "0"),
        ("gelu", "1"),
        ("relu", "0"),
        ("relu", "1"),
    ]
    parent = parents[0]
    assert all(r.data.tags["mlflow.parentRunId"] == parent.info.run_id for r in children)
    assert parent.info.status == "FINISHED"
    assert parent.data.tags["version.keras"]
    assert parent.data.tags["device.device"] in ("cpu", "gpu")
    child = children[0]
    assert {"test_accuracy", "test_loss", "val_accuracy", "val_loss", "loss", "accuracy"} <= set(
        child.data.metrics
    )
    assert child.data.params["training.epochs"] == "30"
    history = c.get_metric_history(child.info.run_id, "val_accuracy")
    assert sorted(m.step for m in history) == list(range(1, 31))


def test_sweep_registers_best_validation_seed_with_champion_alias(sweep):
    _, _, uri = sweep
    c = client(uri)
    for activation in ("relu", "gelu"):
        version = c.get_model_version_by_alias(f"tiny-{activation}", "champion")
        assert version.tags["activation"] == activation
        assert version.tags["dataset"] == "moons"
        # The champion is the member with the best validation accuracy.
        runs = c.search_runs(
            [c.get_experiment_by_name("tiny").experiment_id],
            f"tags.activation = '{activation}'",
        )
        best_val = max(r.data.metrics["final_val_accuracy"] for r in runs)
        assert float(version.tags["val_accuracy"]) == pytest.approx(best_val, abs=1e-6)
        assert activation in version.description


def test_the_registered_model_holds_the_members_own_keras_file(sweep, tmp_path):
    """The served model's .keras is the champion member's `member/` file,
    copied, not the model saved a second time (issue 17); the serving tests
    load it and query it."""
    import mlflow

    _, _, uri = sweep
    c = client(uri)
    version = c.get_model_version_by_alias("tiny-gelu", "champion")
    member = c.download_artifacts(version.run_id, "member/model.keras", str(tmp_path))
    assert version.source.startswith("models:/")  # MLflow 3: the logged model's id
    logged = c.get_logged_model(version.source.removeprefix("models:/"))
    served = mlflow.artifacts.download_artifacts(
        artifact_uri=f"{logged.artifact_location}/artifacts/model.keras",
        dst_path=str(tmp_path / "served"), tracking_uri=uri,
    )
    with open(member, "rb") as a, open(served, "rb") as b:
        assert a.read() == b.read()


def test_registered_model_says_what_it_takes_and_returns(sweep):
    import mlflow

    _, _, uri = sweep
    version = client(uri).get_model_version_by_alias("tiny-gelu", "champion")
    description = version.description
    assert description.startswith("Input: float32 [n, 2]")
    assert "make_moons returns them. Send them raw" in description
    assert "Output: float32 [n, 2] class probabilities" in description
    assert "0 = upper moon, 1 = lower moon" in description
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(uri)
    try:
        info = mlflow.models.get_model_info("models:/tiny-gelu@champion")
    finally:
        mlflow.set_tracking_uri(previous)
    assert info.metadata["feature_names"] == ["x", "y"]
    assert info.metadata["class_names"] == ["upper moon", "lower moon"]
    assert info.metadata["standardized_inside_model"] is True
    # No input schema: MLflow's server passes named columns on to the
    # pyfunc, which matches them to these names (issue 30 §2).
    assert info.signature.inputs is None
    assert info.flavors["python_function"]["config"] == {"feature_names": ["x", "y"]}
    (spec,) = info.signature.outputs.inputs
    assert tuple(spec.shape) == (-1, 2)


def test_sweep_exports_verified_saved_models_in_tf_serving_layout(sweep):
    cwd, _, uri = sweep
    c = client(uri)
    for activation in ("relu", "gelu"):
        version = c.get_model_version_by_alias(f"tiny-{activation}", "champion")
        path = cwd / "exports" / f"tiny-{activation}" / str(version.version)
        assert (path / "saved_model.pb").exists()
        assert version.tags["saved_model"] == str(path.resolve())
    assert not list((cwd / "exports").glob("*/.staging-*"))


def test_saved_model_loads_where_keras_gelu_cannot_be_imported(sweep, monkeypatch):
    """tf.saved_model.load with every keras_gelu module made unimportable
    (None in sys.modules: an import raises) in this process, which has
    TensorFlow loaded already: a fresh process for it paid TensorFlow's
    start-up again (~7 CPU s, issue 30 §25). A SavedModel's graph names
    TensorFlow ops only; nothing keras_gelu registered is consulted by
    tf.saved_model.load, which imports no Python module by name."""
    import tensorflow as tf

    cwd, _, _ = sweep
    for name in [m for m in sys.modules if m.split(".")[0] == "keras_gelu"]:
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(ImportError):
        import keras_gelu  # noqa: F401  (the block holds)
    model = tf.saved_model.load(str(cwd / "exports" / "tiny-gelu" / "1"))
    out = model.signatures["serving_default"](tf.constant(np.zeros((3, 2), "float32")))
    probs = next(iter(out.values())).numpy()
    assert probs.shape == (3, 2), probs.shape
    assert np.allclose(probs.sum(axis=1), 1.0, atol=1e-5)


def test_sweep_writes_report_and_prints_the_verdict(sweep):
    cwd, result, _ = sweep
    reports = list((cwd / "kg-output").glob("tiny-*/report.md"))
    assert len(reports) == 1
    folder = reports[0].parent
    assert (folder / "learning_curves.png").exists()
    assert (folder / "decision_boundaries.png").exists()
    assert "relu" in result.stdout and "gelu" in result.stdout
    assert "models:/tiny-gelu" in result.stdout
    assert "mlflow models serve" in result.stdout


def post(url, body, content_type="application/json"):
    """(status, JSON answer) of a POST to the server's /invocations."""
    request = urllib.request.Request(
        f"{url}/invocations", data=body.encode(), headers={"Content-Type": content_type}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def served_and_saved(cwd, uri, name, x, in_a_server=True, while_served=None):
    """Probabilities for raw rows `x` from `models:/<name>@champion` served by
    a fresh `mlflow models serve` (`in_a_server=False`: the same registered
    pyfunc model loaded in this process, fed `x` as the server's JSON
    parsing feeds it, float32), and from the champion's SavedModel.
    `while_served(url, x, served)` runs while the server is up."""
    import mlflow
    import tensorflow as tf

    model_uri = f"models:/{name}@champion"
    if in_a_server:
        with servers.model_server(model_uri, uri, str(cwd)) as url:
            status, answer = post(url, json.dumps({"inputs": x.tolist()}))
            assert status == 200, answer
            served = np.array(answer["predictions"])
            if while_served is not None:
                while_served(url, x, served)
    else:
        previous = mlflow.get_tracking_uri(), mlflow.get_registry_uri()
        mlflow.set_tracking_uri(uri)
        mlflow.set_registry_uri(uri)
        try:
            served = mlflow.pyfunc.load_model(model_uri).predict(np.asarray(x, "float32"))
        finally:
            mlflow.set_tracking_uri(previous[0])
            mlflow.set_registry_uri(previous[1])
    version = client(uri).get_model_version_by_alias(name, "champion")
    saved = tf.saved_model.load(str(cwd / "exports" / name / str(version.version)))
    out = saved.signatures["serving_default"](tf.constant(x, dtype=tf.float32))
    return served, next(iter(out.values())).numpy(), version


def reported_test_accuracy(cwd, experiment, version):
    """The champion's test accuracy: its registry tag, which a report of the
    sweep shows as the ★ (registered) seed's."""
    accuracy = float(version.tags["test_accuracy"])
    reports = (cwd / "kg-output").glob(f"{experiment}-2*/report.md")
    assert any(f"{100 * accuracy:.2f} ★" in r.read_text() for r in reports)
    return accuracy


def accuracy(probs, y):
    return float((np.argmax(probs, axis=1) == y).mean())


# Bad input to `mlflow models serve` and what its 400 says: the model's own
# checks (INVALID_PARAMETER_VALUE), and MLflow's parsing for the string.
BAD_INPUT = {
    '{"inputs": [[NaN, 0.2]]}': "got nan in row 0, column 0",
    '{"inputs": [[0.1, 0.2], [Infinity, 0.2]]}': "got inf in row 1, column 0",
    '{"inputs": [[1e39, 0.2]]}': "got inf in row 0, column 0",
    '{"inputs": [[0.1, 0.2, 0.3]]}': "expected rows of 2 features each",
    '{"inputs": [["a", 0.2]]}': "not numbers (strings)",
    # Answered 200 before (a skeptic's probes): cast, or read by place.
    '{"inputs": [["0.5", "-0.2"]]}': "not numbers (strings)",
    '{"dataframe_records": [{"y": true, "x": false}]}': "not numbers (booleans)",
    '{"inputs": {"y": ["-0.2"], "x": ["0.5"]}}': "not numbers (strings)",
    '{"inputs": {"y": [], "x": []}}': "the batch is empty",
    '{"inputs": {"y": [[-0.2, 1]], "x": [[0.5, 0]]}}': "one value per row",
    # pandas' names for an unnamed frame's columns: an extra row was made of them.
    '{"dataframe_records": [{"0": 0.5, "1": -0.2}]}': "names '0', '1'",
}


def bad_input_is_400_and_the_server_answers_on(url, x, served):
    """Each of BAD_INPUT is a 400 naming what is wrong; rows sent before
    and after get the answer the whole batch gave them."""
    rows = json.dumps({"inputs": x[:2].tolist()})
    status, answer = post(url, rows)
    assert status == 200, answer
    np.testing.assert_allclose(answer["predictions"], served[:2], atol=1e-5)
    for request, fragment in BAD_INPUT.items():
        status, answer = post(url, request)
        assert status == 400, (request, answer)
        assert fragment in answer["message"], (request, answer)
    status, answer = post(url, rows)
    assert status == 200, answer
    np.testing.assert_allclose(answer["predictions"], served[:2], atol=1e-5)


def csv_of(rows, header=None):
    lines = ([",".join(header)] if header else []) + [",".join(map(repr, r)) for r in rows]
    return "\n".join(lines) + "\n"


def named_columns_are_matched_by_name(url, x, served):
    """Issue 30 §2 for MLflow's own server: named columns (records,
    `dataframe_split.columns`, a CSV header) in any order are the same
    rows as `{"inputs": ...}` in the model's order (x, y); a missing or
    unknown name is a 400 naming the expected ones; a CSV without a
    header keeps its first row; positional formats are answered as they
    were."""
    rows = x[:3].tolist()
    want = served[:3]
    swapped = [[b, a] for a, b in rows]
    same = {
        "records, y before x": json.dumps(
            {"dataframe_records": [{"y": b, "x": a} for a, b in rows]}
        ),
        "split, columns y, x": json.dumps(
            {"dataframe_split": {"columns": ["y", "x"], "data": swapped}}
        ),
        "split, no columns": json.dumps({"dataframe_split": {"data": rows}}),
        "instances": json.dumps({"instances": rows}),
        "inputs": json.dumps({"inputs": rows}),
    }
    for what, body in same.items():
        status, answer = post(url, body)
        assert status == 200, (what, answer)
        np.testing.assert_allclose(answer["predictions"], want, atol=1e-5, err_msg=what)
    for what, body in {
        "CSV header y,x": csv_of(swapped, ["y", "x"]),
        "CSV header x,y": csv_of(rows, ["x", "y"]),
        "CSV without a header": csv_of(rows),
    }.items():
        status, answer = post(url, body, "text/csv")
        assert status == 200, (what, answer)
        np.testing.assert_allclose(answer["predictions"], want, atol=1e-5, err_msg=what)
    # A headerless first row with a value twice (pandas renames a
    # repeated header name "0.5" to "0.5.1") is still that row.
    twice = [[0.5, 0.5], rows[0]]
    status, answer = post(url, csv_of(twice), "text/csv")
    assert status == 200, answer
    status, expected = post(url, json.dumps({"inputs": twice}))
    np.testing.assert_allclose(answer["predictions"], expected["predictions"], atol=1e-5)
    # But "0,0" reads as the header "0", "0.1": also the row 0, 0.1, which
    # was answered (200) in place of 0, 0. Refused: which one it was cannot be told.
    for body in ("0,0\n", "1,1\n0.5,-0.2\n"):
        status, answer = post(url, body, "text/csv")
        assert status == 400, (body, answer)
        assert "cannot be read back exactly" in answer["message"], answer
    for body, content_type, fragment in (
        ('{"dataframe_records": [{"x": 0.5}]}', "application/json", "'y' missing"),
        ('{"dataframe_records": [{"x": 0.5, "y": 0.1, "z": 1}]}', "application/json", "'z'"),
        ('{"dataframe_split": {"columns": ["x", "z"], "data": [[0.5, 1]]}}', "application/json", "'z'"),
        ("x,z\n0.5,1\n", "text/csv", "'z'"),
        ('{"inputs": {"x": [0.5], "why": [1]}}', "application/json", "'why'"),
    ):
        status, answer = post(url, body, content_type)
        assert status == 400, (body, answer)
        assert fragment in answer["message"], (body, answer)
        assert "features are 'x', 'y'" in answer["message"], (body, answer)


def checked_while_served(url, x, served):
    named_columns_are_matched_by_name(url, x, served)
    bad_input_is_400_and_the_server_answers_on(url, x, served)


def test_served_model_takes_a_fresh_raw_moons_sample_at_the_reported_accuracy(
    sweep, monkeypatch
):
    """A fresh make_moons sample, drawn with a seed the service never used
    and sent as make_moons returns it, to the served champion and to its
    SavedModel: accuracy on it estimates what the test accuracy estimates,
    so the two agree within sampling noise: 3 standard errors of the
    difference of two binomial proportions (2000 fresh points, the test
    split's 200), plus 1 pp.

    The same server matches named columns to the features by name
    (`named_columns_are_matched_by_name`, issue 30 §2), answers bad input
    with 400 and keeps answering, its log clean
    (`bad_input_is_400_and_the_server_answers_on`: the checks of
    serving/test_serving.py's own `mlflow models serve`, issue 17)."""
    from sklearn.datasets import make_moons

    # As a user starts it: TensorFlow's log level is the model file's default.
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    cwd, _, uri = sweep
    x, y = make_moons(2000, noise=0.2, random_state=12345)
    served, saved, version = served_and_saved(
        cwd, uri, "tiny-gelu", x, while_served=checked_while_served
    )
    np.testing.assert_allclose(served, saved, atol=1e-5)
    log = (cwd / "model-server.log").read_text(errors="replace")
    assert "Add type hints" not in log
    assert "Traceback" not in log
    if not os.path.exists("/proc/driver/nvidia/version"):
        assert "failed call to cuInit" not in log
    reported = reported_test_accuracy(cwd, "tiny", version)
    assert reported > 0.9  # trained: the comparison means something
    p = min(reported, 0.95)
    noise = 3 * np.sqrt(p * (1 - p) * (1 / 2000 + 1 / 200)) + 0.01
    for got in (accuracy(served, y), accuracy(saved, y)):
        assert abs(got - reported) <= noise, (got, reported, noise)


def test_served_model_takes_raw_load_digits_rows_at_the_reported_accuracy(
    digits_sweep,
):
    """Digits has no generator, so there is no fresh sample to draw. The
    honest equivalent: the held-out test rows, re-derived here from
    load_digits() with scikit-learn's own split (test first, stratified,
    data seed 0), not through the service, and sent as load_digits returns
    them (pixels 0..16). The model never trained on them, and they are the
    rows its reported test accuracy was measured on, so the registered
    and exported models must score it to within one example (a float tie);
    a model expecting rescaled or standardized pixels scores far lower.

    The registered model is loaded in this process, not served: what
    differs from moons is the model, not the server (issue 17: an `mlflow
    models serve` start and stop is 7.6 CPU s, its uvicorn worker's share
    never in the suite's timeline); the moons test above serves its
    champion in a real `mlflow models serve`."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    cwd, uri = digits_sweep
    x, y = load_digits(return_X_y=True)
    _, x_test, _, y_test = train_test_split(
        x, y, test_size=0.2, stratify=y, random_state=0
    )
    served, saved, version = served_and_saved(cwd, uri, "digits-gelu", x_test, in_a_server=False)
    np.testing.assert_allclose(served, saved, atol=1e-5)
    reported = reported_test_accuracy(cwd, "tiny-digits", version)
    assert reported > 0.9
    for got in (accuracy(served, y_test), accuracy(saved, y_test)):
        assert abs(got - reported) <= 1 / len(y_test) + 1e-9, (got, reported)


def test_second_sweep_adds_versions_and_moves_the_alias(sweep):
    cwd, _, uri = sweep
    # relu alone: the version and the alias checked are relu's.
    result = kg_train_here(
        cwd, "--config", "tiny.yaml", "--set", "seeds=[5]", "--set", "activations=[relu]",
        *FEW_EPOCHS,
    )
    assert result.exit_code == 0, (result.output + str(result.exception))[-3000:]
    c = client(uri)
    version = c.get_model_version_by_alias("tiny-relu", "champion")
    assert str(version.version) == "2"
    assert version.tags["seed"] == "5"
    assert (cwd / "exports" / "tiny-relu" / "2" / "saved_model.pb").exists()


def test_sweep_under_jax_against_postgres_backed_mlflow_server_exports_through_tensorflow(
    tmp_path,
):
    """A sweep trained on the JAX backend, tracked and registered through
    a PostgreSQL-backed `mlflow server`, and exported through TensorFlow:
    the two were separate kg-train runs of the same config (issue 17).
    gelu alone, one seed: what is checked is gelu's model."""
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    (tmp_path / "tiny.yaml").write_text(TINY)
    with servers.postgres() as database:
        with servers.mlflow_server(database, str(artifacts)) as url:
            result = kg_train(
                tmp_path,
                "--config",
                "tiny.yaml",
                "--set",
                "seeds=[0]",
                "--set",
                "activations=[gelu]",
                "--set",
                "baseline=gelu",
                *FEW_EPOCHS,
                "--tracking-uri",
                url,
                env={"KERAS_BACKEND": "jax"},
            )
            assert result.returncode == 0, result.stdout + result.stderr
            c = client(url)
            runs = c.search_runs([c.get_experiment_by_name("tiny").experiment_id])
            assert {r.data.tags["device.backend"] for r in runs} == {"jax"}
            version = c.get_model_version_by_alias("tiny-gelu", "champion")
            assert str(version.version) == "1"
    assert not (tmp_path / "mlflow.db").exists()
    assert any(artifacts.rglob("MLmodel"))
    path = tmp_path / "exports" / "tiny-gelu" / str(version.version)
    assert (path / "saved_model.pb").exists()
