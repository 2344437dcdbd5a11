"""Faults, injected for real: a diverging member, a SIGTERM mid-sweep.

- A member whose loss turns NaN is contained: it is tracked FAILED with
  the reason and the epoch, listed (not averaged) in the report, and the
  other members of its vectorized group train exactly as if alone.
- SIGTERM during training or during export stops kg-train with exit
  code 130, marks the sweep KILLED, keeps every member already trained
  in the store, registers and exports nothing, and says how to resume;
  kill -9 leaves it RUNNING with the members trained so far. `--resume
  RUN_ID` trains only what is missing and ends with the same statistics
  as an uninterrupted sweep. (The refused resumes, of a changed config or
  a finished sweep, are sweep/test_golden.py's, on its finished sweep.)
"""

import json
import os
import re
import shutil
import signal
import subprocess
import time

import numpy as np

from kg_service.tasks import base as tasks
from kg_service.config.schema import Config, DataConfig, ModelConfig, TrainingConfig
from kg_service.training.loop import train_sweep
from tests.service import servers
from tests.service import in_process
from tests.service.sweep.test_golden import GOLDEN
from tests.service.sweep.test_golden import _same

TINY = GOLDEN.parents[3] / "configs" / "tiny.yaml"


# SGD at learning rate 100 on this data: seeds 3, 6 and 7 overflow to NaN
# in epoch 1, the others stay finite (measured, with each member's own
# init/order/split seeds: `vary`'s default).
def _diverging_config(seeds):
    return Config(
        activations=("relu",),
        baseline="relu",
        seeds=seeds,
        model=ModelConfig(hidden_units=(16, 16)),
        training=TrainingConfig(optimizer="sgd", learning_rate=100.0, epochs=4, batch_size=16),
    )


def test_a_diverged_member_is_contained_and_its_group_trains_on():
    dataset = tasks.load_dataset(DataConfig(n_samples=200))
    task = tasks.get("moons")
    group = train_sweep(task, dataset, _diverging_config(tuple(range(8))))
    failed = {r.seed: r.failed_epoch for r in group if not r.ok}
    assert failed == {3: 1, 6: 1, 7: 1}
    for r in group:
        if not r.ok:
            assert "not finite" in r.failure
            assert not np.isfinite(r.history["loss"][r.failed_epoch - 1]) or not np.isfinite(
                r.history["val_loss"][r.failed_epoch - 1]
            )
    # Member 0 trained beside three diverging members equals member 0 alone.
    (alone,) = train_sweep(task, dataset, _diverging_config((0,)))
    np.testing.assert_allclose(
        group[0].history["val_loss"], alone.history["val_loss"], rtol=1e-5
    )
    assert group[0].test_accuracy == alone.test_accuracy


def kg_train_process(cwd, *args):
    command = [os.path.join(servers.VENV_BIN, "kg-train"), *args, "--quiet"]
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    return subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )


def _run_until(process, marker, timeout=300):
    """Reads stderr (the --quiet log) until a line contains `marker`."""
    seen = []
    deadline = time.monotonic() + timeout
    for line in process.stderr:
        seen.append(line)
        if marker in line:
            return seen
        if time.monotonic() > deadline:
            break
    raise AssertionError(f"never saw {marker!r}:\n{''.join(seen)[-3000:]}")


def _client(tmp_path):
    import mlflow

    return mlflow.MlflowClient(
        f"sqlite:///{tmp_path / 'mlflow.db'}",
        # Explicit: an earlier in-process sweep set MLflow's global
        # registry URI to its own store.
        registry_uri=f"sqlite:///{tmp_path / 'mlflow.db'}",
    )


def _sweep_runs(client, experiment):
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id], max_results=1000)
    parents = [r for r in runs if r.data.tags.get("kg.role") == "sweep"]
    members = [r for r in runs if r.data.tags.get("kg.role") == "member"]
    return parents, members


def _trained_groups(log):
    """The training groups a --quiet log shows, in order, each once:
    "relu+gelu" for a stacked group of two activations."""
    return list(dict.fromkeys(re.findall(r"training (\S+) +epoch", log)))


def _stop_at(tmp_path, args, marker, sig):
    """kg-train `args` in tmp_path, sent `sig` once its log shows `marker`;
    returns (exit code, stdout, stderr)."""
    process = kg_train_process(tmp_path, *args)
    seen = _run_until(process, marker)
    process.send_signal(sig)
    # No timing assertion (a loaded machine takes its time): the timeout
    # only keeps a hung process from hanging the suite.
    stdout, stderr = process.communicate(timeout=300)
    return process.returncode, stdout, "".join(seen) + stderr


def _assert_stopped(tmp_path, status, members_kept):
    """The sweep run has `status`, `members_kept` finished members, and
    nothing is registered or exported yet; returns its run id."""
    client = _client(tmp_path)
    (parent,), members = _sweep_runs(client, "golden-tiny")
    assert parent.info.status == status
    assert len(members) == members_kept
    assert all(m.info.status == "FINISHED" for m in members)
    assert len({(m.data.tags["activation"], m.data.tags["seed"]) for m in members}) == members_kept
    assert client.search_registered_models() == []
    assert not list((tmp_path / "exports").rglob("saved_model.pb"))
    return parent.info.run_id


def test_sigterm_and_kill_9_stop_keep_members_and_each_resume_carries_on(tmp_path, monkeypatch):
    """One sweep, stopped three times, each stop where the old separate
    tests stopped a fresh sweep of this config (one sweep: each variant
    trained the same 12 members again, issue 17). Its activations train
    in three groups (issue 20: activations x seeds in one stacked model):
    relu+gelu, then swiglu, then learnable_leaky_relu. SIGTERM while the
    second group trains (the first one's 6 kept), kill -9 of the resumed
    run while the third trains (9 kept, the run left RUNNING), SIGTERM of
    the next resume during the export (all 12 trained and tracked). The
    last resume finishes with the statistics of an uninterrupted sweep,
    and registers and exports once."""
    shutil.copy(GOLDEN / "config.yaml", tmp_path / "config.yaml")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    args = ["--config", "config.yaml", "--tracking-uri", uri, "--set", "export.enabled=true"]

    code, _, stderr = _stop_at(tmp_path, args, "training swiglu", signal.SIGTERM)
    assert code == 130, stderr[-3000:]
    # The first group trained as one: one progress line names both.
    assert _trained_groups(stderr) == ["relu+gelu", "swiglu"], stderr[-3000:]
    match = re.search(r"--resume (\w+)", stderr)
    assert match, stderr[-3000:]
    run_id = match.group(1)
    # The printed command repeats the --set it ran with (without it the
    # command was refused: "this config differs from the sweep's").
    assert f"--set export.enabled=true --resume {run_id}" in stderr, stderr[-3000:]
    assert _assert_stopped(tmp_path, "KILLED", 6) == run_id
    resume = [*args, "--resume", run_id]

    _stop_at(tmp_path, resume, "training learnable_leaky_relu", signal.SIGKILL)
    assert _assert_stopped(tmp_path, "RUNNING", 9) == run_id

    code, stdout, stderr = _stop_at(tmp_path, resume, "exporting and verifying", signal.SIGTERM)
    assert code == 130, stderr[-3000:]
    assert "resumed, 9 members already done" in stdout
    # Only the group the kill left untrained trained again.
    assert _trained_groups(stderr) == ["learnable_leaky_relu"]
    assert f"--resume {run_id}" in stderr
    assert _assert_stopped(tmp_path, "KILLED", 12) == run_id
    _, members = _sweep_runs(_client(tmp_path), "golden-tiny")
    trained = {m.info.run_id for m in members}

    # The last resume in this process (click's runner): it is about the
    # store, not the process; the three stopped runs above are processes.
    monkeypatch.chdir(tmp_path)  # the config's output_dir and export.dir are relative
    resumed = in_process.kg_train(*resume)
    assert resumed.exit_code == 0, (resumed.stderr + str(resumed.exception))[-3000:]
    assert "resumed, 12 members already done" in resumed.stdout
    assert _trained_groups(resumed.stderr) == [], resumed.stderr[-3000:]
    client = _client(tmp_path)
    (parent,), members = _sweep_runs(client, "golden-tiny")
    assert parent.info.status == "FINISHED" and len(members) == 12
    # Nothing trained again: a retrained member replaces its run.
    assert {m.info.run_id for m in members} == trained
    # The resumed run's report (an export-time kill left the first one).
    summary = max((tmp_path / "kg-output").rglob("summary.json"), key=os.path.getmtime)
    _same(json.loads((GOLDEN / "summary.json").read_text()), json.loads(summary.read_text()))
    assert len(client.search_registered_models()) == 4
    assert len(list((tmp_path / "exports").rglob("saved_model.pb"))) == 4


def test_two_sweeps_started_at_once_on_one_new_sqlite_store_both_finish(tmp_path, monkeypatch):
    """Two sweeps in two processes, one new sqlite file: MLflow's schema
    migration and the experiment creation used to race ("duplicate column
    name"); both sweeps now finish with all their runs and versions. The
    first is a kg-train process; the second runs in this test's process
    (click's runner), started the moment the first takes the store's
    setup lock (`<db>.lock`), so both set the store up at once (a second
    kg-train process paid TensorFlow's and MLflow's start-up, ~8 CPU s,
    and met the store whenever its imports were done, issue 17)."""
    tiny = (GOLDEN.parents[2].parent / "configs" / "tiny.yaml").read_text()
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    for name in ("first", "second"):
        (tmp_path / f"{name}.yaml").write_text(
            tiny.replace("kg-smoke", f"both-{name}").replace("tiny-{activation}", f"{name}-{{activation}}")
        )
    # Two epochs, not tiny.yaml's ten (issue 30 §21's): the race is in the
    # store's setup, before any training (issue 30 §25).
    args = ["--tracking-uri", uri, "--set", "export.enabled=false", "--set", "training.epochs=2"]
    process = kg_train_process(tmp_path, "--config", "first.yaml", *args)
    try:
        lock = tmp_path / "mlflow.db.lock"
        deadline = time.monotonic() + 600
        while not lock.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert lock.exists(), process.communicate(timeout=60)[1][-3000:]
        monkeypatch.chdir(tmp_path)  # the configs' output_dir is relative
        second = in_process.kg_train("--config", "second.yaml", *args)
    finally:
        _, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, stderr[-3000:]
    assert second.exit_code == 0, (second.stderr + str(second.exception))[-3000:]
    client = _client(tmp_path)
    for name in ("first", "second"):
        (parent,), members = _sweep_runs(client, f"both-{name}")
        assert parent.info.status == "FINISHED" and len(members) == 4
        for activation in ("relu", "gelu"):
            assert client.get_model_version_by_alias(f"{name}-{activation}", "champion")


def test_resume_after_kill_9_during_registration_finishes_without_retraining(
    tmp_path, monkeypatch
):
    """kill -9 while the champion's model is being logged for registration
    (its member run reopened, RUNNING) and its SavedModel staged. It was
    trained again on --resume, its run replaced, and the .staging-*
    folder stayed (issue 15). The process pauses at that point
    (KG_TEST_PAUSE, tracking._test_pause) and is killed there."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    args = ["--config", str(TINY), "--tracking-uri", uri,
            "--set", "activations=[gelu]", "--set", "seeds=1", "--set", "training.epochs=2"]
    marker = tmp_path / "paused"
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    process = subprocess.Popen(
        [os.path.join(servers.VENV_BIN, "kg-train"), *args, "--quiet"], cwd=tmp_path,
        env={**env, "KG_TEST_PAUSE": "register", "KG_TEST_PAUSE_MARKER": str(marker)},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 600
        while not marker.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert marker.exists(), process.communicate(timeout=60)[1][-3000:]
    finally:
        process.kill()
        process.communicate(timeout=60)

    client = _client(tmp_path)
    (parent,), (member,) = _sweep_runs(client, "kg-smoke")
    assert parent.info.status == "RUNNING" and member.info.status == "RUNNING"
    losses = [m.value for m in client.get_metric_history(member.info.run_id, "loss")]
    assert len(losses) == 2
    assert list((tmp_path / "exports" / "tiny-gelu").glob(".staging-*"))

    # The resume in this process (click's runner): what it finds in the
    # store and leaves there; the killed run above is the process.
    monkeypatch.chdir(tmp_path)  # export.dir is relative
    resumed = in_process.kg_train(*args, "--resume", parent.info.run_id)
    assert resumed.exit_code == 0, (resumed.stderr + str(resumed.exception))[-3000:]
    assert "resumed, 1 members already done" in resumed.stdout
    (parent,), members = _sweep_runs(client, "kg-smoke")
    assert parent.info.status == "FINISHED"
    assert [m.info.run_id for m in members] == [member.info.run_id]  # not replaced
    assert members[0].info.status == "FINISHED"
    again = [m.value for m in client.get_metric_history(member.info.run_id, "loss")]
    assert again == losses  # not trained again
    (version,) = client.search_model_versions("name='tiny-gelu'")
    assert version.run_id == member.info.run_id
    assert client.get_model_version_by_alias("tiny-gelu", "champion").version == version.version
    assert not list((tmp_path / "exports").rglob(".staging-*"))
    assert (tmp_path / "exports" / "tiny-gelu" / str(version.version) / "saved_model.pb").exists()


def two_resumes_at_once(tmp_path, monkeypatch, uri, name, *extra):
    """Issue 30 §1: a sweep stopped before registering; two `--resume` of
    it at once. The first (a kg-train process) takes the sweep's lease and
    is held inside registration (KG_TEST_PAUSE); the second (this process,
    click's runner) starts then, and must exit 2 naming the holder, writing
    nothing. The first then finishes. Returns the store's client and the
    sweep run id for the caller's counts."""
    import socket

    from kg_service.sweep import stages

    args = ["--config", str(TINY), "--tracking-uri", uri, "--set", "activations=[gelu]",
            "--set", "seeds=2", "--set", "training.epochs=2", "--set", f"experiment={name}",
            "--set", f"registry.model_name={name}-{{activation}}", *extra]  # fmt: skip
    monkeypatch.chdir(tmp_path)  # export.dir and output_dir are relative
    with monkeypatch.context() as patched:  # stopped after training, as Ctrl-C there

        def stop(*_, **__):
            raise KeyboardInterrupt

        patched.setattr(stages, "conclude", stop)
        first = in_process.kg_train(*args)
    assert first.exit_code == 130, first.stderr[-3000:]
    run_id = re.search(r"--resume (\w+)", first.stderr).group(1)
    marker = tmp_path / "paused"
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    holder = subprocess.Popen(
        [os.path.join(servers.VENV_BIN, "kg-train"), *args, "--resume", run_id, "--quiet"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**env, "KG_TEST_PAUSE": "register", "KG_TEST_PAUSE_MARKER": str(marker)},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 600
        while not marker.exists() and holder.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert marker.exists(), holder.communicate(timeout=60)[1][-3000:]
        second = in_process.kg_train(*args, "--resume", run_id)
        assert second.exit_code == 2, (second.stderr + str(second.exception))[-3000:]
        message = second.stderr
        assert "Traceback" not in message
        assert f"pid {holder.pid}" in message and socket.gethostname() in message
        assert "--wait" in message and "tracking.lease_seconds" in message
        marker.unlink()  # the holder goes on
        stdout, stderr = holder.communicate(timeout=600)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.communicate(timeout=60)
    assert holder.returncode == 0, stderr[-3000:]
    return run_id


def assert_written_once(client, name, run_id, exports=None):
    """Each member run once (trained once), each model version once, and
    no run left RUNNING."""
    from mlflow.entities import ViewType

    experiment = client.get_experiment_by_name(f"{name}")
    runs = client.search_runs([experiment.experiment_id], run_view_type=ViewType.ALL)
    assert [r.info.run_id for r in runs if r.data.tags.get("kg.role") == "sweep"] == [run_id]
    assert all(r.info.status == "FINISHED" for r in runs), [r.info.status for r in runs]
    members = [r for r in runs if r.data.tags.get("kg.role") == "member"]
    assert sorted(m.data.tags["seed"] for m in members) == ["0", "1"]
    for member in members:
        assert len(client.get_metric_history(member.info.run_id, "loss")) == 2
    (version,) = client.search_model_versions(f"name='{name}-gelu'")
    assert str(version.version) == "1"
    if exports is not None:
        assert [p.parent.name for p in exports.rglob("saved_model.pb")] == ["1"]
        assert not list(exports.rglob(".staging-*"))


def test_two_resumes_at_once_one_writes_the_other_exits_2_naming_it(tmp_path, monkeypatch):
    run_id = two_resumes_at_once(
        tmp_path, monkeypatch, f"sqlite:///{tmp_path / 'mlflow.db'}", "lease"
    )
    assert_written_once(_client(tmp_path), "lease", run_id, tmp_path / "exports")
