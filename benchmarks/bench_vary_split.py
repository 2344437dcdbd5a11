"""What a per-member data split (issue 19, `vary: [init, order, split]`)
costs a classification sweep against one split for every member.

Usage:

    KERAS_BACKEND=tensorflow .venv/bin/python benchmarks/bench_vary_split.py

One activation (gelu) of 10 seeds on moons (2000 samples, hidden [64, 64],
10 epochs, batch 32), trained as one stacked model, with `vary: [init,
order]` (every member on data.seed's split) and with the default (each
member its own split: a gathered batch per member, its own normalization
statistics). Both run in this process, alternating, after one untimed
round (tracing); the report is each one's times and the ratio of their
medians. Say the load average (`uptime`) beside the number.
"""

import dataclasses
import statistics
import time

from kg_service.config.schema import Config
from kg_service.config.schema import DataConfig
from kg_service.config.schema import ModelConfig
from kg_service.config.schema import TrainingConfig
from kg_service.tasks import base as tasks
from kg_service.tasks.base import load_dataset
from kg_service.training.loop import train_sweep

ROUNDS = 3


def main():
    dataset = load_dataset(DataConfig(n_samples=2000))
    varied = Config(activations=("gelu",), seeds=tuple(range(10)),
                    model=ModelConfig(hidden_units=(64, 64)),
                    training=TrainingConfig(epochs=10, batch_size=32))
    configs = {"fixed split": dataclasses.replace(varied, vary=("init", "order")),
               "varied split": varied}
    times = {name: [] for name in configs}
    for round_ in range(ROUNDS + 1):
        for name, config in configs.items():
            start = time.perf_counter()
            train_sweep(tasks.get("moons"), dataset, config)
            if round_:  # round 0 traces
                times[name].append(time.perf_counter() - start)
    for name, values in times.items():
        print(f"{name:13s} " + " ".join(f"{v:.2f} s" for v in values))
    ratio = statistics.median(times["varied split"]) / statistics.median(times["fixed split"])
    print(f"varied / fixed split: {ratio:.3f} (ratio of medians of {ROUNDS} rounds)")


if __name__ == "__main__":
    main()
