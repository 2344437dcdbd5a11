"""A real two-node Ray cluster, a PostgreSQL-backed MLflow server and the
scenarios of issue 33, run as ONE process inside a private network and PID
namespace (`python -m tests.service.execution.ray_cluster OUT.json WORKDIR RAYTMP`
under `unshare -n -p -f --mount-proc`; test_ray_cluster.py starts it).

Why a namespace: Ray will not use 127.0.0.1 as a node address on a machine
with a network address, and the test's traffic must stay on loopback; in a
namespace whose only interface is `lo` Ray falls back to 127.0.0.1. This
process is the namespace's PID 1, so the head, the second node, their
workers, PostgreSQL and MLflow all end when it does: nothing survives the
test, and no `ray stop` touches another user's Ray.

The scenarios run in this process (click's runner, `tests.service.in_process`)
as one Ray job, so each node's worker imports TensorFlow once for all of
them; the killed driver of the resume scenario is a process of its own.
Each writes what the test asserts into the JSON file.
"""

import json
import os
import resource
import signal
import subprocess
import sys
import threading
import time

import mlflow

from tests.service import in_process
from tests.service import servers
from tests.service.sweep.test_sequential_sweep import EARLY

RAY = os.path.join(servers.VENV_BIN, "ray")
TASK_TITLE = "ray::kg-train group"  # a worker's process title while it runs one of our tasks
SMOKE = ("--smoke", "--set", "export.enabled=false")


def start_cluster(port, temp_dir):
    """`ray start` a head and a second node (each 1 CPU, no dashboard), their
    session files in `temp_dir`, not the machine's /tmp/ray."""
    common = ["--num-cpus", "1", "--object-store-memory", str(80 * 2**20),
              "--disable-usage-stats", "--temp-dir", temp_dir]
    subprocess.run([RAY, "start", "--head", "--port", str(port), "--include-dashboard=false",
                    *common], check=True, capture_output=True)
    subprocess.run([RAY, "start", "--address", f"127.0.0.1:{port}", "--resources",
                    '{"node2": 1}', *common], check=True, capture_output=True)


def members(uri, experiment, role="member"):
    """`{(activation, seed): [run, ...]}` of an experiment's runs of `role`."""
    client = mlflow.MlflowClient(uri)
    found = client.get_experiment_by_name(experiment)
    out = {}
    for run in client.search_runs([found.experiment_id], max_results=1000):
        tags = run.data.tags
        if tags.get("kg.role") == role:
            out.setdefault(f"{tags['activation']}/{tags['seed']}", []).append(run)
    return out


def summary(uri, experiment, role="member"):
    """What a scenario's test reads: runs per member, statuses, nodes."""
    found = members(uri, experiment, role)
    return {
        "runs_per_member": {key: len(runs) for key, runs in found.items()},
        "statuses": sorted({r.info.status for runs in found.values() for r in runs}),
        "nodes": sorted({r.data.tags.get("kg.node", "") for runs in found.values() for r in runs}),
    }


def kg_train(uri, address, config, *args):
    result = in_process.kg_train("--config", config, "--engine", "ray", "--ray-address", address,
                                 "--tracking-uri", uri, *args)
    said = [line for line in result.output.splitlines() if " WARNING " not in line]  # matplotlib's fonts
    return {"exit_code": result.exit_code, "output": "\n".join(said)[-6000:]}


def write_config(work, name, text):
    path = os.path.join(work, f"{name}.yaml")
    with open(path, "w") as f:
        f.write(text)
    return path


def spread(uri, address, work):
    """Four members, one per task, over two 1-CPU nodes; registered once."""
    config = write_config(work, "spread", "experiment: ray-spread\nactivations: [relu, gelu]\n"
                          "execution: {members_per_task: 1}\n")
    out = kg_train(uri, address, config, *SMOKE)
    versions = mlflow.MlflowClient(uri).search_model_versions("name LIKE 'moons-%-smoke'")
    return {**out, **summary(uri, "ray-spread-smoke"), "versions": len(versions)}


# test_sequential_sweep's EARLY: a linear network cannot separate circles,
# worse than relu at the first look (measured there); 2 members a task.
SEQUENTIAL = EARLY.replace("experiment: seq-early", "experiment: ray-seq") + (
    "execution: {members_per_task: 2}\n")


def sequential(uri, address, work):
    out = kg_train(uri, address, write_config(work, "sequential", SEQUENTIAL))
    return {**out, **summary(uri, "ray-seq")}


# Not --smoke: it keeps one tuning candidate of one seed.
TUNED = """\
experiment: ray-tuned
activations: [relu, gelu]
seeds: 2
tuning: {parameter: training.learning_rate, values: [0.001, 0.03], seeds: 2}
execution: {members_per_task: 1}
data: {dataset: circles, n_samples: 300}
registry: {enabled: false}
export: {enabled: false}
model: {hidden_units: [8]}
training: {epochs: 4}
"""


def tuned(uri, address, work):
    """Each candidate's two seeds as two tasks: tuning members on both nodes."""
    out = kg_train(uri, address, write_config(work, "tuned", TUNED))
    return {**out, "tuning": summary(uri, "ray-tuned", "tuning"),
            "members": summary(uri, "ray-tuned")}


def kill_first_task(killed):
    """Kills (SIGKILL) the first worker seen running one of our tasks."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    title = f.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if title.startswith(TASK_TITLE):
                os.kill(int(pid), signal.SIGKILL)
                killed.append(title.strip())
                return
        time.sleep(0.05)


def worker_killed(uri, address, work):
    """A worker killed mid-task: Ray runs the task again, each member once."""
    config = write_config(work, "killed", "experiment: ray-killed\nactivations: [relu, gelu]\n"
                          "registry: {enabled: false}\nexecution: {members_per_task: 2}\n")
    killed = []
    killer = threading.Thread(target=kill_first_task, args=(killed,), daemon=True)
    killer.start()
    out = kg_train(uri, address, config, *SMOKE)
    killer.join(timeout=1)
    return {**out, **summary(uri, "ray-killed-smoke"), "killed": killed}


class StopAfterFirstTask:
    """A progress display that interrupts the driver (as Ctrl-C would) once
    the first task's members landed, others still training."""

    def __call__(self, event):
        pass

    def stage(self, message):
        if "members trained on the Ray cluster" in message:
            raise KeyboardInterrupt

    def close(self):
        pass


def driver_stopped(uri, address, work):
    """The driver stopped once a task landed; --resume on a new run of the
    driver trains the rest, each member once. (A driver killed with
    SIGKILL, then --resume --wait: docs/scaling.md, run by hand; here the
    cheap in-process stop, in the same Ray job.)"""
    from kg_service.config.loading import load_config  # the driver's own code, after the cluster is up
    from kg_service.errors import SweepInterrupted
    from kg_service.sweep import pipeline

    path = write_config(work, "driver", "experiment: ray-driver\nactivations: [relu, gelu]\n"
                        "registry: {enabled: false}\nexport: {enabled: false}\n"
                        "execution: {members_per_task: 1}\n")
    config = load_config(path, ["seeds=3", "training.epochs=2", "data.n_samples=200",
                                "model.hidden_units=[8]", "execution.engine=ray",
                                f"execution.address={address}", f"tracking.uri={uri}"])
    try:
        pipeline.run(config, claimant="test", progress=StopAfterFirstTask(), echo=lambda line: None)
        return {"exit_code": "not stopped"}
    except SweepInterrupted as stopped:
        run_id = stopped.run_id
    landed = sum(len(r) for r in members(uri, "ray-driver").values())
    out = kg_train(uri, address, path, "--set", "seeds=3", "--set", "training.epochs=2",
                   "--set", "data.n_samples=200", "--set", "model.hidden_units=[8]",
                   "--resume", run_id)
    status = mlflow.MlflowClient(uri).get_run(run_id).info.status
    return {**out, **summary(uri, "ray-driver"), "landed_before_stop": landed,
            "sweep_status": status}


def sqlite_refused(address, work):
    uri = f"sqlite:///{os.path.join(work, 'refused.db')}"
    config = write_config(work, "refused", "experiment: ray-refused\n")
    return kg_train(uri, address, config, *SMOKE)


SCENARIOS = {"spread": spread, "sequential": sequential, "tuned": tuned,
             "worker_killed": worker_killed, "driver_stopped": driver_stopped}


def cpu_seconds():
    """User + system CPU seconds of everything in this namespace: this
    process and its reaped children, and every process alive in it (the
    Ray daemons, PostgreSQL, MLflow), with their own reaped children."""
    total = sum(getattr(resource.getrusage(who), field) for who in
                (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN) for field in ("ru_utime", "ru_stime"))
    ticks = os.sysconf("SC_CLK_TCK")
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != os.getpid():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += sum(int(x) for x in fields[11:15]) / ticks  # utime stime cutime cstime
    return round(total, 1)


def main(out_path, work, ray_temp):
    """`ray_temp`: Ray's session folder, a short path (its socket names);
    the test removes it once the namespace has ended."""
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    # No token: nothing outside this namespace can reach its loopback.
    os.environ.update(RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="disabled",
                      KERAS_BACKEND="tensorflow")
    os.chdir(work)
    results = {}
    artifacts = os.path.join(work, "artifacts")
    os.makedirs(artifacts)
    with servers.postgres() as database, servers.mlflow_server(database, artifacts) as uri:
        port = servers.free_port()
        start_cluster(port, ray_temp)
        address = f"127.0.0.1:{port}"
        for name, scenario in SCENARIOS.items():
            started = time.monotonic()
            results[name] = scenario(uri, address, work)
            results[name]["seconds"] = round(time.monotonic() - started, 1)
        results["sqlite_refused"] = sqlite_refused(address, work)
        results["cpu_seconds"] = cpu_seconds()
    with open(out_path, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:])
