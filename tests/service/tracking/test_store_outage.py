"""The tracking store fails mid-sweep (issue 10, section 4), for real.

- Each store operation is retried through transient failures (a refused
  connection, 5xx, a locked sqlite file) with growing, jittered waits, for
  `tracking.retry_seconds`; a refused request (4xx) is raised at once.
- A real `mlflow server` stopped after the sweep's first member reached it
  and started again within the window: the sweep finishes with every run,
  metric and registry version exactly once.
- Stopped for longer than the window: kg-train exits 75 with one message
  (no traceback) naming what is in the store, what is kept locally and
  the exact resume command; once the server is back, that command logs
  the kept members without training them again and finishes the sweep
  with the numbers of an uninterrupted one.

The two outage tests share one module-scoped server and one outage
(issue 17: a start of `mlflow server` is ~6 CPU s): their two sweeps run
at once, one that outlasts the outage and one that gives up, and the
server is stopped once and started again once for both (`outage`). The
resume runs in the test's process; each sweep that met the outage is a
kg-train process.
"""

import collections
import json
import logging
import os
import random
import re
import shlex
import sqlite3
import subprocess
import threading
import time

import mlflow
import pytest

from kg_service.tracking import member_runs
from kg_service.tracking import mlflow_store as tracking
from kg_service.tracking import retry
from tests.service import in_process
from tests.service import servers
from tests.service.sweep.test_golden import GOLDEN
from tests.service.sweep.test_golden import _same

EPOCHS = 6  # GOLDEN's training.epochs
ACTIVATIONS = ("relu", "gelu", "swiglu", "learnable_leaky_relu")  # GOLDEN's, 3 seeds each


def test_backoff_waits_double_with_jitter_and_the_last_try_comes_at_the_window():
    waits = retry.backoff_waits(120, random.Random(0))
    assert sum(waits) == pytest.approx(120)
    for i, wait in enumerate(waits[:-1]):
        step = min(2.0**i, 30.0)
        assert step / 2 <= wait <= step
    assert retry.backoff_waits(0) == ()


def test_the_http_answers_retried_are_mlflows_own_transient_ones():
    from mlflow.utils.request_utils import _TRANSIENT_FAILURE_RESPONSE_CODES

    assert retry.TRANSIENT_HTTP_STATUS == _TRANSIENT_FAILURE_RESPONSE_CODES


def test_a_locked_sqlite_store_is_retried_until_the_lock_goes(tmp_path, caplog):
    """Another connection holds the database's write lock for 24 s, longer
    than the 20 s busy wait MLflow gives sqlite: the write is retried, not
    lost or doubled."""
    db = tmp_path / "mlflow.db"
    tracker = tracking.Tracker(f"sqlite:///{db}", "locked", retry_seconds=60)
    tracker.parent_run_id = tracker.client.create_run(tracker.experiment_id).info.run_id
    holder = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")
    release = threading.Timer(24, holder.execute, ["ROLLBACK"])
    release.start()
    try:
        with caplog.at_level(logging.WARNING, logger="kg-train"):
            tracker.log_summary({"score": 0.5}, {"winner": "gelu"}, [])
    finally:
        release.join()
        holder.close()
    retries = [r.getMessage() for r in caplog.records if "retrying in" in r.getMessage()]
    assert retries and "database is locked" in retries[0], caplog.text
    assert any("is back after" in r.getMessage() for r in caplog.records)
    history = tracker.client.get_metric_history(tracker.parent_run_id, "score")
    assert [m.value for m in history] == [0.5]
    assert tracker.client.get_run(tracker.parent_run_id).data.tags["winner"] == "gelu"


def test_a_request_the_store_refuses_is_raised_at_once(tmp_path, caplog):
    tracker = tracking.Tracker(f"sqlite:///{tmp_path / 'mlflow.db'}", "refused", retry_seconds=60)
    with caplog.at_level(logging.WARNING, logger="kg-train"):
        with pytest.raises(mlflow.exceptions.MlflowException, match="not found|does not exist"):
            tracker.set_version_tag("no-such-model", "1", "key", "value")
    assert "retrying" not in caplog.text


# --- A real server, stopped mid-sweep. ---------------------------------------


def _golden_config(folder, experiment, model_prefix):
    """GOLDEN's config.yaml in `folder` as experiment `experiment`, its
    models `{model_prefix}-{activation}`: the sweep's numbers are GOLDEN's."""
    text = (GOLDEN / "config.yaml").read_text()
    for old, new in [("experiment: golden-tiny\n", f"experiment: {experiment}\n"),
                     ('model_name: "golden-{activation}"', f'model_name: "{model_prefix}-{{activation}}"')]:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    (folder / "config.yaml").write_text(text)


class Sweep:
    """A kg-train process of GOLDEN's config in `folder` against the
    server, its stdout and stderr in files (two run at once: a pipe
    nobody reads while the other is waited for could fill and stall it)."""

    def __init__(self, folder, server, experiment, model_prefix, *args):
        _golden_config(folder, experiment, model_prefix)
        self.folder, self.experiment = folder, experiment
        self.out, self.err = folder / "kg-train.out", folder / "kg-train.err"
        with open(self.out, "w") as out, open(self.err, "w") as err:
            self.process = subprocess.Popen(
                [os.path.join(servers.VENV_BIN, "kg-train"), "--config", "config.yaml",
                 "--tracking-uri", server.uri, *args, "--quiet"],
                cwd=folder, stdout=out, stderr=err,
                env={k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"},
            )  # fmt: skip

    def wait(self):
        """Its exit code, once it has exited; its stdout and stderr."""
        self.process.wait(timeout=600)
        self.stdout, self.stderr = self.out.read_text(), self.err.read_text()
        return self.process.returncode

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture(scope="module")
def outage(tmp_path_factory):
    """One real `mlflow server` over a sqlite file and two sweeps on it,
    cut by one outage (issue 17: each start of the server is ~6 CPU s, and
    one outage serves both tests). `within` retries for 600 s (the default
    120 s would have to cover `past`'s exit too); `past` gives up after
    3 s. The server is stopped once each sweep has a member in the store,
    started again once `past` has exited, and `within` is then waited for;
    the server stays up for the tests (`past`'s resume). Their sweeps are
    two experiments with their own registered models, so neither sees the
    other's runs."""
    folder = tmp_path_factory.mktemp("outage-server")
    (folder / "server-artifacts").mkdir()
    server = servers.MlflowServer(f"sqlite:///{folder / 'server.db'}", str(folder / "server-artifacts"))
    server.start()
    client = _backend(server)
    sweeps = {}
    try:
        # A long window for `within`: the server is down while `past`
        # notices, gives up and exits, and then while it starts again.
        sweeps["within"] = Sweep(tmp_path_factory.mktemp("within"), server, "outage-within",
                                 "within", "--set", "tracking.retry_seconds=600")
        sweeps["past"] = Sweep(tmp_path_factory.mktemp("past"), server, "outage-past", "past",
                               "--set", "tracking.retry_seconds=3")
        for sweep in sweeps.values():
            _wait_for_first_member(client, sweep.process, sweep.experiment)
        # A sweep already over would meet no outage: say so, not later.
        assert sweeps["within"].process.poll() is None, "the within sweep ended before the outage"
        server.stop()
        sweeps["past"].wait()
        server.start()
        sweeps["within"].wait()
        yield server, sweeps
    finally:
        for sweep in sweeps.values():
            sweep.kill()
        server.stop()


def _backend(server):
    """The server's own database, read directly: it answers while the
    server is stopped."""
    uri = server.backend_store_uri
    return mlflow.MlflowClient(uri, registry_uri=uri)


def _wait_for_first_member(client, process, experiment_name, timeout=300):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        experiment = client.get_experiment_by_name(experiment_name)
        if experiment and client.search_runs(
            [experiment.experiment_id],
            "tags.`kg.role` = 'member' and attributes.status = 'FINISHED'",
        ):
            return
        time.sleep(0.1)
    raise AssertionError(f"no member of {experiment_name} reached the store; kg-train: {process.poll()}")


def _assert_the_sweep_is_whole_and_once(client, tmp_path, experiment_name, model_prefix):
    """One finished sweep run; each of the 12 members once, each metric
    once per epoch; one registry version per activation; the numbers of
    the uninterrupted golden sweep."""
    experiment = client.get_experiment_by_name(experiment_name)
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    (parent,) = [r for r in runs if r.data.tags.get("kg.role") == "sweep"]
    assert parent.info.status == "FINISHED"
    members = [r for r in runs if r.data.tags.get("kg.role") == "member"]
    keys = collections.Counter((r.data.tags["activation"], r.data.tags["seed"]) for r in members)
    assert keys == {(a, str(s)): 1 for a in ACTIVATIONS for s in range(3)}
    for run in members:
        assert run.info.status == "FINISHED"
        assert run.data.tags["mlflow.parentRunId"] == parent.info.run_id
        for key in ("loss", "val_accuracy"):
            steps = [m.step for m in client.get_metric_history(run.info.run_id, key)]
            assert sorted(steps) == list(range(1, EPOCHS + 1)), (run.info.run_name, key)
    for activation in ACTIVATIONS:
        versions = client.search_model_versions(f"name='{model_prefix}-{activation}'")
        assert [str(v.version) for v in versions] == ["1"], activation
        assert str(client.get_model_version_by_alias(f"{model_prefix}-{activation}", "champion").version) == "1"
    summary = max((tmp_path / "kg-output").rglob("summary.json"), key=os.path.getmtime)
    _same(json.loads((GOLDEN / "summary.json").read_text()), json.loads(summary.read_text()))


def test_a_server_stopped_mid_sweep_and_back_within_the_window_loses_and_doubles_nothing(outage):
    server, sweeps = outage
    within = sweeps["within"]
    assert within.process.returncode == 0, within.stderr[-3000:]
    stderr = within.stderr
    # The first failed call may meet the server half-stopped (a reset or a
    # dropped connection) rather than refused: the retry is what matters,
    # and at least one attempt finds nothing listening.
    retries = [line for line in stderr.splitlines() if "unreachable while" in line]
    assert retries and re.search(r"retrying in \d+ s \(attempt 2/\d+\)$", retries[0]), stderr[-3000:]
    assert any("ConnectionRefusedError" in line for line in retries), stderr[-3000:]
    assert "is back after" in stderr
    _assert_the_sweep_is_whole_and_once(_backend(server), within.folder, "outage-within", "within")
    # The server answers a refused request with a 4xx: raised at once.
    tracker = tracking.Tracker(server.uri, "outage-within", retry_seconds=60)
    with pytest.raises(mlflow.exceptions.RestException):
        tracker.set_version_tag("no-such-model", "1", "key", "value")


def test_a_server_down_past_the_window_stops_keeps_the_members_and_resume_finishes(
    outage, monkeypatch
):
    server, sweeps = outage
    past = sweeps["past"]
    tmp_path, stderr = past.folder, past.stderr
    assert past.process.returncode == 75, stderr[-3000:]
    assert "Traceback" not in stderr
    assert "did not come back within 3 s" in stderr
    held = int(re.search(r"(\d+) of 12 members are in the tracking store", stderr).group(1))
    kept = int(re.search(r"(\d+) more trained members are kept in (\S+),", stderr).group(1))
    command = re.search(r"resume with: (.*)", stderr).group(1)
    run_id = command.split()[-1]
    spooled = sorted(p.name for p in (tmp_path / "kg-output" / "spool" / run_id).iterdir())
    # Whole activations trained: the ones in the store and the ones kept.
    assert held >= 1 and kept == len(spooled) and (held + kept) % 3 == 0
    client = _backend(server)
    runs = client.search_runs([client.get_experiment_by_name("outage-past").experiment_id])
    (parent,) = [r for r in runs if r.data.tags["kg.role"] == "sweep"]
    assert parent.info.run_id == run_id and parent.info.status == "RUNNING"
    in_store = [
        r.data.tags["activation"] for r in runs
        if r.data.tags["kg.role"] == "member" and r.info.status == "FINISHED"
    ]
    assert len(in_store) == held
    # A member whose last call (ending its run) was cut by the outage is
    # whole in the store (its `kg.member_logged` tag set) though the sweep
    # counted it as kept: the resume takes the store's copy and drops the
    # local one, so it moves from "kept" to "done" (seen on CI's machine).
    whole_but_running = [
        r.data.tags["activation"] for r in runs
        if r.data.tags["kg.role"] == "member" and r.info.status == "RUNNING"
        and r.data.tags.get(member_runs.LOGGED_TAG) == "true"
    ]
    assert len(whole_but_running) <= 1
    assert client.search_registered_models("name LIKE 'past-%'") == []

    # The server is back (the fixture started it again). The printed
    # command runs in this process (click's runner): what it finds in the
    # store and the spool is the point, not the process; the sweeps that
    # met the outage are processes, and so are test_faults.py's resumes.
    words = shlex.split(command)
    assert words[:2] == ["kg-train", "--config"] and server.uri in words
    monkeypatch.chdir(tmp_path)  # the config, its output_dir: relative
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    resumed = in_process.kg_train(*words[1:])
    assert resumed.exit_code == 0, (resumed.stderr + str(resumed.exception))[-3000:]
    done_now, kept_now = held + len(whole_but_running), kept - len(whole_but_running)
    assert f"resumed, {done_now} members already done" in resumed.stdout, resumed.stdout[:500]
    assert (f", {kept_now} kept locally to log" in resumed.stdout) == (kept_now > 0), (
        resumed.stdout[:500]
    )
    # Kept members are logged, not trained again: their activations do not
    # train. A progress line names every activation its group trains now
    # ("training relu+gelu  epoch ...", a stacked group's).
    trained_before = {name.rsplit("-seed", 1)[0] for name in spooled} | set(in_store)
    trained_now = {
        activation for group in re.findall(r"training (\S+) +epoch", resumed.stderr)
        for activation in group.split("+")
    }
    for activation in ACTIVATIONS:
        assert (activation in trained_now) == (activation not in trained_before), activation
    assert not (tmp_path / "kg-output" / "spool").exists()
    _assert_the_sweep_is_whole_and_once(client, tmp_path, "outage-past", "past")
