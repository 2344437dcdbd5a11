"""What a `tuning:` block costs a sweep: `configs/digits.yaml --smoke` with
its tuning block (2 values x 1 seed per activation, at smoke sizes) and
without it (`--set tuning=null`), side by side in one process.

Usage:

    KERAS_BACKEND=tensorflow TF_CPP_MIN_LOG_LEVEL=2 \\
        .venv/bin/python benchmarks/bench_tuning_smoke.py [--rounds 2]

Each round runs both, in the order A B then B A (ABBA across rounds), each
into its own temporary sqlite store, export and output folders, through
`kg_service.sweep.pipeline.run` as kg-train runs it (TensorFlow's start-up
is paid once, before the first round, by a warm-up sweep of tiny.yaml).
Reported: each run's wall time, and the median over rounds of (tuned /
untuned) in the same round. The load average is printed beside it: the
machine is shared, so absolute times drift; the ratio drifts less.
"""

import argparse
import dataclasses
import os
import pathlib
import statistics
import tempfile
import time

from kg_service.config import derived
from kg_service.config.loading import load_config
from kg_service.sweep import pipeline

REPO = pathlib.Path(__file__).resolve().parents[1]


def _sweep(config, where):
    where.mkdir(parents=True)
    config = dataclasses.replace(
        config,
        output_dir=str(where / "out"),
        tracking=dataclasses.replace(config.tracking, uri=f"sqlite:///{where / 'm.db'}"),
        export=dataclasses.replace(config.export, dir=str(where / "exports")),
    )
    started = time.perf_counter()
    pipeline.run(config, claimant="bench", echo=lambda line: None)
    return time.perf_counter() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    tuned = derived.smoke(load_config(REPO / "configs" / "digits.yaml"))
    plain = dataclasses.replace(tuned, tuning=None)
    print(f"load average before: {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        _sweep(derived.smoke(load_config(REPO / "configs" / "tiny.yaml")),
               pathlib.Path(tmp, "warm"))
        times = {"tuned": [], "untuned": []}
        for r in range(args.rounds):
            order = [("tuned", tuned), ("untuned", plain)]
            for name, config in order if r % 2 == 0 else order[::-1]:
                seconds = _sweep(config, pathlib.Path(tmp, f"{name}-{r}"))
                times[name].append(seconds)
                print(f"round {r + 1}: {name:<8} {seconds:6.1f} s   load {os.getloadavg()[0]:.1f}")
    ratios = [t / u for t, u in zip(times["tuned"], times["untuned"])]
    print(f"\ndigits --smoke, tuned / untuned wall time: median {statistics.median(ratios):.2f} "
          f"over {args.rounds} rounds ({', '.join(f'{x:.2f}' for x in ratios)})")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
