"""Almost stochastic order: deepsig's `aso` against kg_service's vectorised
`resampling.aso_epsilon`, side by side in one process (issue 18).

Usage:

    .venv/bin/python benchmarks/bench_aso.py

Both compute epsilon_min of the same score pairs with the same algorithm
(deepsig's quantile function, dt = 0.005, 1000 bootstrap iterations);
deepsig loops over its iterations in Python, kg_service draws them as one
array. Rounds alternate the two in a shuffled order; the report is the
median over rounds of (deepsig time / kg_service time in the same round),
with the range of those ratios, and the largest difference between their
epsilon_min (bootstrap noise: each draws its own resamples).
"""

import pathlib
import random
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "service"))

from deepsig import aso  # noqa: E402

from kg_service.analysis.numbers import resampling  # noqa: E402

ROUNDS = 5
SEEDS = 10  # runs per activation, as in configs/moons.yaml


def main():
    rng = np.random.default_rng(0)
    ratios, gaps = [], []
    for r in range(ROUNDS):
        a, b = rng.normal(0.961, 0.002, SEEDS), rng.normal(0.962, 0.002, SEEDS)
        times = {}
        order = ["deepsig", "kg_service"]
        random.Random(r).shuffle(order)
        for name in order:
            start = time.perf_counter()
            if name == "deepsig":
                ours_or_theirs = aso(a, b, seed=r, show_progress=False)
            else:
                ours_or_theirs = resampling.aso_epsilon(a, b, seed=r)
            times[name] = time.perf_counter() - start
            times[name + "_eps"] = ours_or_theirs
        ratios.append(times["deepsig"] / times["kg_service"])
        gaps.append(abs(times["deepsig_eps"] - times["kg_service_eps"]))
        print(f"round {r}: deepsig {times['deepsig']:.3f} s, kg_service "
              f"{times['kg_service']:.4f} s, epsilon_min {times['deepsig_eps']:.3f} vs "
              f"{times['kg_service_eps']:.3f}")
    print(f"\ndeepsig / kg_service time: median {statistics.median(ratios):.0f}x "
          f"(range {min(ratios):.0f}x-{max(ratios):.0f}x) over {ROUNDS} rounds, "
          f"{SEEDS} scores a side; largest epsilon_min difference {max(gaps):.3f}")


if __name__ == "__main__":
    main()
