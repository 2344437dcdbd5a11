"""A moons sweep of 20 members (relu, gelu x 10 seeds): engine local vs a
one-node Ray cluster (the overhead), and the same seeds on a two-node
cluster (each member once, each model version once, the same numbers).

    python benchmarks/bench_ray.py                     # 30 epochs
    python benchmarks/bench_ray.py --set training.epochs=100

It runs itself inside a private network and PID namespace (`unshare -n -p
-f --mount-proc`, root), as tests/service/execution/ray_cluster.py does:
Ray's nodes then use 127.0.0.1, and every process ends with it.

  local      kg-train, engine local, a sqlite store;
  ray 1 node `ray start --head --num-cpus 1`, kg-train --engine ray, a
             sqlite store (allowed on one node), the group as one task
             (the same stacking as local);
  ray 1 node, all cores  the same with `--num-cpus` the machine's cores
             and `execution.group_resources.num_cpus` as many: the task
             has every core, as local's process has;
  ray 2 nodes a head and a second node (1 CPU each), the PostgreSQL-backed
             MLflow server, execution.members_per_task 5 (4 tasks).

CPU seconds are the whole namespace's (driver, Ray daemons and workers),
before and after each run. Printed: a table, and each run's numbers
against local's (members' test accuracy and loss; the report's
summary.json).
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.dirname(sys.executable)
SETS = ("seeds=10", "training.epochs=30", "export.enabled=false")


def kg_train(cpu_seconds, folder, uri, sets, *extra):
    command = [os.path.join(BIN, "kg-train"), "--config", os.path.join(ROOT, "configs/moons.yaml"),
               "--quiet", "--tracking-uri", uri, "--output-dir", folder, *extra]
    for item in sets:
        command += ["--set", item]
    cpu, started = cpu_seconds(), time.perf_counter()
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - started, cpu_seconds() - cpu
    if done.returncode != 0:
        raise SystemExit(f"kg-train failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return wall, cpu


def ray_start(temp_dir, port=None, head=None, resources=None, cpus=1):
    command = [os.path.join(BIN, "ray"), "start", "--num-cpus", str(cpus), "--disable-usage-stats",
               "--object-store-memory", str(80 * 2**20), "--temp-dir", temp_dir]
    if head is None:
        command += ["--head", "--port", str(port), "--include-dashboard=false"]
    else:
        command += ["--address", head]
    if resources:
        command += ["--resources", json.dumps(resources)]
    subprocess.run(command, check=True, capture_output=True)


def ray_stop():
    # This namespace's Ray only: its /proc shows no other process.
    subprocess.run([os.path.join(BIN, "ray"), "stop", "--force"], capture_output=True)


def numbers(uri):
    """`({(activation, seed): (test_accuracy, test_loss)}, versions per model)`."""
    import mlflow

    client = mlflow.MlflowClient(uri, registry_uri=uri)
    (experiment,) = [e for e in client.search_experiments() if e.name != "Default"]
    members = {}
    for run in client.search_runs([experiment.experiment_id], "tags.`kg.role` = 'member'"):
        key = (run.data.tags["activation"], int(run.data.tags["seed"]))
        members.setdefault(key, []).append(
            (run.data.metrics["test_accuracy"], run.data.metrics["test_loss"]))
    versions = {m.name: len(client.search_model_versions(f"name = '{m.name}'"))
                for m in client.search_registered_models()}
    return members, versions


def summary(folder):
    (path,) = glob.glob(os.path.join(folder, "*", "summary.json"))
    with open(path) as f:
        return json.load(f)


def flat(value, prefix=""):
    """Every number of a summary.json, by its path (timings left out)."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if "seconds" not in k:
                out.update(flat(v, f"{prefix}{k}."))
        return out
    if isinstance(value, list):
        out = {}
        for i, v in enumerate(value):
            out.update(flat(v, f"{prefix}{i}."))
        return out
    return {prefix: value} if isinstance(value, (int, float)) and not isinstance(value, bool) else {}


def against(local, other):
    """Max |difference| over members' numbers and over summary.json's."""
    (lm, _), ls = local
    (om, ov), os_ = other
    assert set(lm) == set(om)
    each_once = all(len(v) == 1 for v in om.values()) and set(ov.values()) == {1}
    members = max(abs(a - b) for k in lm for a, b in zip(lm[k][0], om[k][0]))
    a, b = flat(ls), flat(os_)
    report = max(abs(a[k] - b[k]) for k in a if k in b)
    return each_once, members, report


def main(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("--set", action="append", default=[])
    sets = list(SETS) + parser.parse_args(argv).set
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    os.environ.update(RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="disabled",
                      KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2")
    # Inside the namespace only (the outer process just starts it):
    sys.path.insert(0, ROOT)
    from tests.service import servers  # the suite's PostgreSQL and MLflow server
    from tests.service.execution.ray_cluster import cpu_seconds  # the namespace's CPU seconds

    work = tempfile.mkdtemp(prefix="kg-bench-ray-", dir="/tmp")
    runs, results = {}, {}
    folder = os.path.join(work, "local")
    os.makedirs(folder)
    uri = f"sqlite:///{folder}/m.db"
    runs["local"] = kg_train(cpu_seconds, folder, uri, sets)
    results["local"] = numbers(uri), summary(folder)

    folder = os.path.join(work, "ray1")
    os.makedirs(folder)
    ray_start(os.path.join(work, "r1"), port=6380)
    uri = f"sqlite:///{folder}/m.db"
    runs["ray, 1 node"] = kg_train(cpu_seconds, folder, uri, sets, "--engine", "ray", "--ray-address",
                                   "127.0.0.1:6380")
    results["ray, 1 node"] = numbers(uri), summary(folder)
    ray_stop()

    # The node with every core, the group's task asking for all of them:
    # what local's process has (TensorFlow's threads on every core).
    cores = os.cpu_count()
    folder = os.path.join(work, "ray1all")
    os.makedirs(folder)
    ray_start(os.path.join(work, "r1all"), port=6382, cpus=cores)
    uri = f"sqlite:///{folder}/m.db"
    runs["ray, 1 node, all cores"] = kg_train(
        cpu_seconds, folder, uri, [*sets, f"execution.group_resources.num_cpus={cores}"],
        "--engine", "ray", "--ray-address", "127.0.0.1:6382")
    results["ray, 1 node, all cores"] = numbers(uri), summary(folder)
    ray_stop()

    folder = os.path.join(work, "ray2")
    os.makedirs(folder)
    artifacts = os.path.join(work, "artifacts")
    os.makedirs(artifacts)
    with servers.postgres() as database, servers.mlflow_server(database, artifacts) as uri:
        ray_start(os.path.join(work, "r2"), port=6381)
        ray_start(os.path.join(work, "r2"), head="127.0.0.1:6381", resources={"node2": 1})
        runs["ray, 2 nodes"] = kg_train(cpu_seconds, folder, uri, [*sets, "execution.members_per_task=5"],
                                        "--engine", "ray", "--ray-address", "127.0.0.1:6381")
        results["ray, 2 nodes"] = numbers(uri), summary(folder)
        ray_stop()

    wall0, cpu0 = runs["local"]
    print(f"moons, relu + gelu x 10 seeds, {' '.join(sets)}; load {os.getloadavg()[0]:.1f}")
    print("| run | wall s | / local | CPU s | / local | each member, version once | "
          "max abs diff, members' test acc & loss | max abs diff, summary.json |")
    print("|---|---|---|---|---|---|---|---|")
    for name, (wall, cpu) in runs.items():
        once, members, report = against(results["local"], results[name])
        print(f"| {name} | {wall:.1f} | {wall / wall0:.2f} | {cpu:.1f} | {cpu / cpu0:.2f} | "
              f"{'yes' if once else 'NO'} | {members:.3g} | {report:.3g} |")


if __name__ == "__main__":
    if os.getpid() != 1:  # not yet inside the namespace: run there
        sys.exit(subprocess.run(["unshare", "-n", "-p", "-f", "--mount-proc", sys.executable,
                                 os.path.abspath(__file__), *sys.argv[1:]]).returncode)
    main(sys.argv[1:])
