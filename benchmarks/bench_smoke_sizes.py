"""What a `--smoke` run's sizes cost per activation (issue 17): one
activation's seeds trained (stacked, as kg-train trains them) and its
champion exported and verified, at `kg_service.config.derived.smoke`'s
sizes and at variants of its depth and steps per epoch, interleaved in one
process after a warm-up; CPU seconds (`time.process_time`, every thread)
and wall seconds, each variant's CPU ratio to today's sizes.

Usage:

    KERAS_BACKEND=tensorflow .venv/bin/python benchmarks/bench_smoke_sizes.py \\
        --config configs/glu-variants.yaml --activations gelu,swiglu --rounds 1

The variants start from the smoke config with two blocks (or hidden
layers) and two steps per epoch where the config has them, so the table
reads the same before and after a change of SMOKE_DEPTH or SMOKE_STEPS.
"""

import argparse
import dataclasses
import os
import tempfile
import time

from kg_service.config import derived
from kg_service.config.loading import load_config
from kg_service.serving import export as export_lib
from kg_service.tasks import base as tasks
from kg_service.training.loop import train_sweep


def variants(config):
    """Smoke sizes at depth 2 / 1 and 2 / 1 steps per epoch."""
    full = load_config(config)
    smoke = derived.smoke(full)
    two = tuple(min(w, derived.SMOKE_WIDTH) for w in full.model.hidden_units[:2])

    def sized(depth, steps):
        model = dataclasses.replace(smoke.model, hidden_units=two[:depth])
        training = dataclasses.replace(smoke.training, steps_per_epoch=steps)
        return dataclasses.replace(smoke, model=model, training=training)

    return {
        f"{len(two)} blocks, 2 steps": sized(2, 2),
        "1 block, 2 steps": sized(1, 2),
        f"{len(two)} blocks, 1 step": sized(2, 1),
        "1 block, 1 step": sized(1, 1),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="configs/glu-variants.yaml")
    parser.add_argument("--activations", default="gelu,swiglu")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    activations = args.activations.split(",")
    sized = variants(args.config)
    first = next(iter(sized.values()))
    task = tasks.get(first.data.dataset)
    dataset = task.load(first.data)
    out = tempfile.mkdtemp()

    def one(config, activation):
        results = train_sweep(task, dataset, dataclasses.replace(config, activations=(activation,)))
        staged = export_lib.stage(results[0].model, out, f"bench-{activation}", dataset.x_test, 1e-5)
        export_lib.discard(staged)

    one(first, activations[0])  # warm-up: imports and first traces
    totals = {label: [0.0, 0.0] for label in sized}
    load = [os.getloadavg()[0]]
    for _ in range(args.rounds):
        for label, config in sized.items():
            for activation in activations:
                cpu, wall = time.process_time(), time.monotonic()
                one(config, activation)
                totals[label][0] += time.process_time() - cpu
                totals[label][1] += time.monotonic() - wall
        load.append(os.getloadavg()[0])
    n = args.rounds * len(activations)
    reference = next(iter(totals.values()))[0]
    print(f"{args.config} at smoke sizes, per activation ({', '.join(activations)}; "
          f"{args.rounds} round(s) interleaved): its seeds trained stacked + its export; "
          f"load average {min(load):.1f}-{max(load):.1f}")
    print("| sizes | CPU s | wall s | CPU vs the first |")
    print("|---|---|---|---|")
    for label, (cpu, wall) in totals.items():
        print(f"| {label} | {cpu / n:.1f} | {wall / n:.1f} | {reference / cpu:.2f}x less |")


if __name__ == "__main__":
    main()
