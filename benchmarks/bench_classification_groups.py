"""CPU seconds of a classification sweep's training: one stacked model per
architecture (activations x seeds, issue 20) against one per activation.

`training/loop.train_sweep` hands the activations of one architecture
(`task.stack_key`: ReLU, GELU, Swish... MLPs; the gated units) to
`task.train_members` as one stacked model; before, each activation's
seeds were a stacked model of their own (`task.train`). Both paths train
the same members of a config (`--smoke` by default, as CI's smoke runs),
in one process, interleaved rounds (per activation, grouped, per
activation, grouped...), so drift of this shared machine hits both alike;
the first round pays one-time warm-up and is shown but not counted. CPU
is the process's (`time.process_time`, every thread), the suite's
currency (issue 17). It prints each round, the median CPU of each path,
their ratio, and how far the two paths' members are apart (test
accuracy and final validation loss: float rounding only).

    KERAS_BACKEND=tensorflow .venv/bin/python benchmarks/bench_classification_groups.py \\
        configs/moons-glu.yaml configs/digits.yaml --rounds 3
"""

import argparse
import statistics
import time

from kg_service.config.derived import smoke
from kg_service.config.loading import load_config
from kg_service.tasks import base as tasks
from kg_service.training import loop


class _PerActivation:
    """The task, without `train_members`: every activation alone."""

    train_members = None

    def __init__(self, task):
        self._task = task

    def __getattr__(self, name):
        return getattr(self._task, name)


def _timed(task, dataset, config):
    cpu, wall = time.process_time(), time.perf_counter()
    results = loop.train_sweep(task, dataset, config)
    return time.process_time() - cpu, time.perf_counter() - wall, results


def bench(path, rounds, full=False):
    config = load_config(path)
    config = config if full else smoke(config)
    task = tasks.get(config.data.dataset)
    dataset = task.load(config.data)
    paths = {"per activation": _PerActivation(task), "grouped": task}
    groups = loop.activation_groups(task, config)
    print(f"\n{path}{'' if full else ' --smoke'}: {len(config.activations)} activations x "
          f"{len(config.seeds)} seeds, {config.training.epochs} epochs; groups "
          f"{' | '.join('+'.join(g) for g in groups)}")
    cpu = {name: [] for name in paths}
    last = {}
    for r in range(rounds + 1):
        for name, t in paths.items():
            seconds, wall, last[name] = _timed(t, dataset, config)
            if r:
                cpu[name].append(seconds)
            print(f"  round {r}{' (warm-up)' if not r else ''}  {name:<15} CPU {seconds:6.2f} s"
                  f"  wall {wall:6.2f} s", flush=True)
    a, b = (statistics.median(cpu[n]) for n in paths)
    apart = max(
        max(abs(x.test_accuracy - y.test_accuracy),
            abs(x.history["val_loss"][-1] - y.history["val_loss"][-1]))
        for x, y in zip(last["per activation"], last["grouped"])
    )
    print(f"  median CPU: per activation {a:.2f} s, grouped {b:.2f} s: ratio {a / b:.2f}x;"
          f" members apart by at most {apart:.1e}")
    return a, b


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("configs", nargs="+")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--full", action="store_true", help="the config as it is, not --smoke")
    args = parser.parse_args()
    for path in args.configs:
        bench(path, args.rounds, args.full)


if __name__ == "__main__":
    main()
