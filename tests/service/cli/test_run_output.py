"""What a real `kg train` process writes where, and what it tells the user
to run next: the session's shared sweep of configs/tiny.yaml in a
subprocess (tests/service/shared_sweep.py), with `--tracking-uri` and
`MLFLOW_TRACKING_URI` naming two different stores, and the printed
`Serve:` command (run as printed by serving/test_kg.py's server)."""

import os
import shlex
import sqlite3


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


def test_tracking_uri_flag_wins_over_the_environment_in_a_real_run(tiny_sweep):
    # kg --help and the README disagreed on which wins (issue 15). The
    # shared sweep (tests/service/shared_sweep.py) ran with --tracking-uri
    # naming mlflow.db and MLFLOW_TRACKING_URI naming env.db.
    assert tiny_sweep.env_uri.endswith("env.db") and tiny_sweep.uri.endswith("mlflow.db")
    assert runs_in(tiny_sweep.db) == 2  # the sweep's run and its member's
    assert runs_in(tiny_sweep.cwd / "env.db") == 0


def test_printed_serve_command_is_kg_serve_of_the_champion_on_the_sweeps_store(tiny_sweep):
    # The line named plain `mlflow models serve`, which answers any CSV
    # request with a stack trace in the body (issue 15). The line run as
    # printed, answering a CSV request: serving/test_kg.py, whose server is
    # started from it (one kg serve process for both, issue 17).
    stdout = tiny_sweep.stdout
    (line,) = [l for l in stdout.splitlines() if l.startswith("Serve:")]
    words = shlex.split(line[len("Serve:"):])
    assert os.path.basename(words[0]) == "kg" and words[1] == "serve", line
    assert words[2] == "models:/tiny-gelu@champion" and tiny_sweep.uri in words, line
    assert "mlflow models serve" in stdout  # still offered, as the alternative
