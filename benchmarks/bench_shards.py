"""One sweep on one process vs the same sweep as two shards at once.

Per round, in alternation (the order flips each round):

  single      one `kg-train` process trains the whole sweep;
  two shards  `kg-train --shard 1/2` and `--shard 2/2` started together;
              the wall time runs until the last of the two exits;
  empty       `kg-train --shard 1/2` of a one-member grid, whose first
              half is empty: nothing to train, so it is the fixed cost
              every job pays (start-up, data, joining the sweep).

Each run gets its own new sqlite store in a temporary folder; all use
the same config. From the single runs' store, the members' training
time (the sum of their `train_seconds`) splits the single wall time into
start-up S, training W and the rest R (statistics, report, registry):
the cost model docs/scaling.md uses.

    python benchmarks/bench_shards.py                 # moons, 2 x 4 seeds x 30 epochs
    python benchmarks/bench_shards.py --rounds 5 --set training.epochs=60
"""

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KG_TRAIN = os.path.join(os.path.dirname(sys.executable), "kg-train")
DEFAULT_SETS = ("seeds=4", "training.epochs=30", "export.enabled=false")


def _start(config, sets, folder, *extra):
    command = [KG_TRAIN, "--config", config, "--quiet",
               "--tracking-uri", f"sqlite:///{folder}/mlflow.db", "--output-dir", folder]
    for item in sets:
        command += ["--set", item]
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return subprocess.Popen(command + list(extra), cwd=folder, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _timed(*processes):
    started = time.perf_counter()
    for process in processes:
        _, err = process.communicate()
        if process.returncode != 0:
            raise SystemExit(f"kg-train failed:\n{err[-3000:]}")
    return time.perf_counter() - started


def _training_seconds(folder):
    import mlflow

    uri = f"sqlite:///{folder}/mlflow.db"
    client = mlflow.MlflowClient(uri, registry_uri=uri)
    (experiment,) = [e for e in client.search_experiments() if e.name != "Default"]
    runs = client.search_runs([experiment.experiment_id], "tags.`kg.role` = 'member'")
    return sum(r.data.metrics["train_seconds"] for r in runs)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=os.path.join(ROOT, "configs", "moons.yaml"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--set", dest="sets", action="append", default=None,
                        help=f"config overrides (default: {' '.join(DEFAULT_SETS)})")
    args = parser.parse_args()
    sets = tuple(args.sets or DEFAULT_SETS)
    times = {"single": [], "two shards": [], "empty": []}
    training = []
    load_before = os.getloadavg()
    for round_ in range(args.rounds):
        order = ["single", "two shards", "empty"]
        if round_ % 2:
            order.reverse()
        for kind in order:
            with tempfile.TemporaryDirectory(prefix="kg-bench-shards-") as folder:
                if kind == "single":
                    times[kind].append(_timed(_start(args.config, sets, folder)))
                    training.append(_training_seconds(folder))
                elif kind == "two shards":
                    times[kind].append(_timed(
                        _start(args.config, sets, folder, "--shard", "1/2"),
                        _start(args.config, sets, folder, "--shard", "2/2"),
                    ))
                else:
                    one = sets + ("seeds=1", "activations=[relu]")
                    times[kind].append(_timed(_start(args.config, one, folder, "--shard", "1/2")))
        print(f"round {round_ + 1}: " + ", ".join(f"{k} {v[-1]:.1f} s" for k, v in times.items()),
              flush=True)
    median = {k: statistics.median(v) for k, v in times.items()}
    w = statistics.median(training)
    s = median["empty"]
    r = median["single"] - s - w
    print()
    print(f"{platform.machine()}, {os.cpu_count()} cores, load average before "
          f"{load_before[0]:.1f}, after {os.getloadavg()[0]:.1f}; config {os.path.relpath(args.config, ROOT)} "
          f"--set {' --set '.join(sets)}; {args.rounds} rounds, medians")
    print(f"| run | wall s |")
    print(f"|---|---:|")
    for kind in times:
        print(f"| {kind} | {median[kind]:.1f} |")
    print()
    print(f"speed-up single / two shards: {median['single'] / median['two shards']:.2f}x")
    print(f"cost model (single): start-up S {s:.1f} s + training W {w:.1f} s "
          f"+ rest R {r:.1f} s = {median['single']:.1f} s")


if __name__ == "__main__":
    main()
