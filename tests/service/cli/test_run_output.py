"""What a real `kg-train` process writes where, and what it tells the user
to run next: one smoke sweep of configs/tiny.yaml in a subprocess, with
`--tracking-uri` and `MLFLOW_TRACKING_URI` naming two different stores,
then the printed `Serve:` command run as printed."""

import http.client
import os
import shlex
import sqlite3
import subprocess

import pytest

from tests.service import servers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
KG_TRAIN = os.path.join(servers.VENV_BIN, "kg-train")


def runs_in(db):
    """Run count of a sqlite MLflow store, read with sqlite3 (not MLflow,
    whose URI resolution is what is under test); 0 if no store."""
    if not db.exists():
        return 0
    with sqlite3.connect(db) as connection:
        tables = {r[0] for r in connection.execute("select name from sqlite_master")}
        if "runs" not in tables:
            return 0
        return connection.execute("select count(*) from runs").fetchone()[0]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("run-output")
    env = servers.server_env(MLFLOW_TRACKING_URI=f"sqlite:///{cwd / 'env.db'}")
    out = subprocess.run(
        [KG_TRAIN, "--config", os.path.join(ROOT, "configs", "tiny.yaml"), "--smoke",
         "--set", "activations=[gelu]", "--set", "seeds=1", "--set", "export.enabled=false",
         "--tracking-uri", f"sqlite:///{cwd / 'flag.db'}", "--quiet"],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    return cwd, out.stdout


def test_tracking_uri_flag_wins_over_the_environment_in_a_real_run(sweep):
    # kg --help and the README disagreed on which wins (issue 15).
    cwd, _ = sweep
    assert runs_in(cwd / "flag.db") == 2  # the sweep's run and its member's
    assert runs_in(cwd / "env.db") == 0


def test_printed_serve_command_is_kg_serve_and_answers_a_csv_request(sweep):
    # The line named plain `mlflow models serve`, which answers any CSV
    # request with a stack trace in the body (issue 15).
    cwd, stdout = sweep
    (line,) = [l for l in stdout.splitlines() if l.startswith("Serve:")]
    words = shlex.split(line[len("Serve:"):])
    assert os.path.basename(words[0]) == "kg" and words[1] == "serve", line
    assert f"sqlite:///{cwd / 'flag.db'}" in words, line
    assert "mlflow models serve" in stdout  # still offered, as the alternative
    port = servers.free_port()
    log_path = cwd / "serve.log"
    env = servers.server_env()
    env.pop("MLFLOW_TRACKING_URI", None)
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [*words, "--port", str(port)], cwd=cwd, env=env, stdout=log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        servers.wait_for_http(f"http://127.0.0.1:{port}/ping", process, 300, log_path)
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        connection.request(
            "POST", "/invocations", "x,y\n0.5,-0.2\n", {"Content-Type": "text/csv"}
        )
        response = connection.getresponse()
        body = response.read().decode()
        connection.close()
        assert response.status == 200, body
        assert "predictions" in body and "Traceback" not in body, body
    finally:
        servers.stop(process)
