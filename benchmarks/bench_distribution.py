"""Data-parallel training: one device vs `distribution: mirrored` over two.

One process, TensorFlow, the CPU split into two logical devices before
TensorFlow starts (`tf.config.set_logical_device_configuration`); the
same sweep (`train_sweep`, no tracking) alternates between
`distribution: none` (one device, /cpu:0) and `mirrored` (a
MirroredStrategy over /cpu:0 and /cpu:1), `--repeats` times each, so that
both see the same machine load. Both logical devices share the same
physical cores: this measures the engine's overhead, not a speed-up a
second GPU would give.

Printed per run: the sweep's wall time (start-up of each activation's
model and its tracing included) and its steady state, the mean time of
an epoch after the first, as member-examples per second (members x
training examples per epoch / epoch seconds); then the medians and the
ratio mirrored / none.

    python benchmarks/bench_distribution.py                        # configs/moons.yaml, 10 epochs
    python benchmarks/bench_distribution.py --config configs/tiny.yaml --epochs 20
"""

import argparse
import os
import platform
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=os.path.join(ROOT, "configs", "moons.yaml"))
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--seeds", type=int, default=None, help="default: the config's")
    parser.add_argument("--repeats", type=int, default=2)
    return parser.parse_args()


def two_logical_cpus():
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2
    )


def one_run(config, task, dataset):
    """(wall seconds, steady-state member-examples per second)."""
    from kg_service.training import loop as train

    epoch_ends = {}  # activation -> [time of each epoch's end]
    members = {}

    def progress(event):
        epoch_ends.setdefault(event["activation"], []).append(time.perf_counter())
        members[event["activation"]] = event["group_size"]

    started = time.perf_counter()
    train.train_sweep(task, dataset, config, progress=progress)
    wall = time.perf_counter() - started
    examples, seconds = 0, 0.0
    for activation, ends in epoch_ends.items():
        examples += members[activation] * len(dataset.y_train) * (len(ends) - 1)
        seconds += ends[-1] - ends[0]
    return wall, examples / seconds


def main():
    args = parse_args()
    two_logical_cpus()
    import keras
    import tensorflow as tf

    from kg_service.tasks import base as tasks
    from kg_service.config.loading import load_config

    overrides = [f"training.epochs={args.epochs}"]
    if args.seeds:
        overrides.append(f"seeds={args.seeds}")
    configs = {
        kind: load_config(args.config, overrides + [f"device.distribution={kind}"])
        for kind in ("none", "mirrored")
    }
    config = configs["none"]
    task = tasks.get(config.data.dataset)
    dataset = task.load(config.data)
    print(
        f"{os.path.relpath(args.config, ROOT)}: {len(config.activations)} activations x "
        f"{len(config.seeds)} seeds, {len(dataset.y_train)} training examples, batch "
        f"{config.training.batch_size} (global), {args.epochs} epochs, hidden "
        f"{list(config.model.hidden_units)}"
    )
    print(
        f"{platform.machine()}, {os.cpu_count()} cores, keras {keras.__version__}, "
        f"tensorflow {tf.__version__}, logical devices "
        f"{[d.name for d in tf.config.list_logical_devices('CPU')]}"
    )
    times = {kind: [] for kind in configs}
    for repeat in range(args.repeats):
        for kind, kind_config in configs.items():
            wall, rate = one_run(kind_config, task, dataset)
            times[kind].append((wall, rate))
            print(f"  run {repeat + 1} {kind:<9} wall {wall:7.2f} s   steady {rate:10.0f} member-examples/s")
    print()
    print(f"{'':<28}{'wall (s)':>10}{'member-examples/s':>20}")
    medians = {}
    for kind, values in times.items():
        wall = statistics.median(v[0] for v in values)
        rate = statistics.median(v[1] for v in values)
        medians[kind] = (wall, rate)
        label = "none (1 device)" if kind == "none" else "mirrored (2 logical CPUs)"
        print(f"{label:<28}{wall:>10.2f}{rate:>20.0f}")
    print(
        f"mirrored / none: wall x{medians['mirrored'][0] / medians['none'][0]:.2f}, "
        f"steady throughput x{medians['mirrored'][1] / medians['none'][1]:.2f}"
    )


if __name__ == "__main__":
    main()
