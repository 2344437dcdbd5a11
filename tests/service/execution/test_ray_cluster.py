"""Issue 33 on a real cluster: a Ray head and a second node (`ray start`,
one CPU each), the PostgreSQL-backed MLflow server as the store, all in a
private network and PID namespace that `ray_cluster.py` (one process, the
namespace's PID 1) creates; every process ends with it. One cluster for
the whole module: each test reads its scenario's results.

CPU seconds of the module (the namespace's processes, its `cpu_seconds`)
are printed with -s; see docs/scaling.md.
"""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import pytest

pytest.importorskip("ray", reason="Ray is the optional extra .[ray] (.ci/run installs it)")

REPO = pathlib.Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("the test cluster's private network namespace needs root (CI runs as root)")
    work = tmp_path_factory.mktemp("ray")
    out = work / "results.json"
    ray_temp = tempfile.mkdtemp(prefix="kg-ray-", dir="/tmp")  # short: Ray's socket names
    try:
        done = subprocess.run(
            ["unshare", "-n", "-p", "-f", "--mount-proc", sys.executable, "-m",
             "tests.service.execution.ray_cluster", str(out), str(work), ray_temp],
            cwd=REPO, capture_output=True, text=True, timeout=1500,
        )
    finally:  # every process that wrote there ended with the namespace
        shutil.rmtree(ray_temp, ignore_errors=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    results = json.loads(out.read_text())
    seconds = {k: v["seconds"] for k, v in results.items() if isinstance(v, dict) and "seconds" in v}
    print(f"\nray cluster module: {results['cpu_seconds']} CPU s in its namespace; wall s {seconds}")
    return results


def _each_once(scenario, keys):
    assert scenario["runs_per_member"] == {key: 1 for key in keys}, scenario
    assert scenario["statuses"] == ["FINISHED"]


def _grid(activations, seeds):
    return [f"{a}/{s}" for a in activations for s in seeds]


def test_a_sweeps_members_train_on_both_nodes_and_register_once(cluster):
    spread = cluster["spread"]
    assert spread["exit_code"] == 0, spread["output"]
    _each_once(spread, _grid(("relu", "gelu"), (0, 1)))
    assert len(spread["nodes"]) == 2 and "" not in spread["nodes"]
    assert spread["versions"] == 2  # one champion per activation, registered by the driver


def test_a_sequential_sweep_on_the_cluster_stops_at_its_first_look(cluster):
    seq = cluster["sequential"]
    assert seq["exit_code"] == 0, seq["output"]
    assert "linear vs relu: worse at look 1" in seq["output"]
    assert "Sequential seeds: 1 look, 3 of at most 9 seeds" in seq["output"]
    _each_once(seq, _grid(("relu", "linear"), (0, 1, 2)))
    assert len(seq["nodes"]) == 2


def test_tuning_candidates_train_across_the_cluster_and_the_driver_chooses(cluster):
    tuned = cluster["tuned"]
    assert tuned["exit_code"] == 0, tuned["output"]
    assert "Tuned training.learning_rate by mean val_loss on validation: relu " in tuned["output"]
    assert len(tuned["tuning"]["nodes"]) == 2
    assert sum(tuned["tuning"]["runs_per_member"].values()) == 8  # 2 activations x 2 values x 2 seeds
    assert set(tuned["tuning"]["runs_per_member"].values()) == {1}
    _each_once(tuned["members"], _grid(("relu", "gelu"), (0, 1)))


def test_a_worker_killed_mid_task_is_retried_and_each_member_is_logged_once(cluster):
    killed = cluster["worker_killed"]
    assert killed["killed"] == ["ray::kg-train group"]  # a worker that ran one of our tasks
    assert killed["exit_code"] == 0, killed["output"]
    _each_once(killed, _grid(("relu", "gelu"), (0, 1)))


def test_a_stopped_driver_s_sweep_finishes_with_resume_each_member_once(cluster):
    driver = cluster["driver_stopped"]
    assert driver["landed_before_stop"] >= 1
    assert driver["exit_code"] == 0, driver["output"]
    assert "resumed" in driver["output"]
    assert driver["sweep_status"] == "FINISHED"
    _each_once(driver, _grid(("relu", "gelu"), (0, 1, 2)))


def test_a_two_node_cluster_refuses_a_sqlite_store_with_exit_2(cluster):
    refused = cluster["sqlite_refused"]
    assert refused["exit_code"] == 2
    assert "has 2 nodes" in refused["output"] and "sqlite" in refused["output"]
    assert "Traceback" not in refused["output"]
