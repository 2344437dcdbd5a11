"""Sequential seeds against the fixed design, by simulation.

Thousands of synthetic sweeps of one comparison: paired differences drawn
N(delta, 1) (delta in units of the differences' sd), looks at 4, 8, ...,
40 seeds (`seeds: {start: 4, step: 4, max: 40}`), decided by
`kg_service.analysis.numbers.sequential` at alpha 0.05, with and without an
equivalence margin of 0.5 sd; beside them the fixed design: one paired
t-test (and TOST) at 40 seeds. Prints a Markdown table: how often each
design says better / worse / equivalent, and the seeds it used on average, as a
ratio to the fixed design's 40.

    .venv/bin/python benchmarks/sequential_seeds.py [--sims 20000]
"""

import argparse
import os
import subprocess

import numpy as np

from kg_service.analysis.numbers import sequential

LOOKS = tuple(range(4, 41, 4))
ALPHA = 0.05


def simulate(delta, design, margin, sims, seed):
    """(decision, seeds used) per simulated sweep, vectorized."""
    rng = np.random.default_rng(seed)
    d = rng.normal(delta, 1.0, (sims, design.counts[-1]))
    total, squares = np.cumsum(d, axis=1), np.cumsum(d * d, axis=1)
    decision = np.full(sims, "", dtype=object)
    used = np.full(sims, design.counts[-1])
    for k, n in enumerate(design.counts):
        mean = total[:, n - 1] / n
        sd = np.sqrt(np.maximum(squares[:, n - 1] - n * mean**2, 0.0) / (n - 1))
        now = sequential.decisions(mean, sd, np.full(sims, n), design.nominal_alpha[k],
                                   design.equivalence_alpha[k], margin)
        new = (decision == "") & (now != "")
        decision[new], used[new] = now[new], n
    return decision, used


def fixed_design(n):
    """One look at n seeds: the plain t-test and TOST at alpha."""
    return sequential.Design(counts=(n,), n_max=n, alpha=ALPHA, spending="fixed", z=(),
                             nominal_alpha=(ALPHA,), equivalence_alpha=(ALPHA,))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sims", type=int, default=20_000)
    args = parser.parse_args()
    designs = {
        "fixed, 40 seeds": fixed_design(LOOKS[-1]),
        "O'Brien-Fleming, 4..40": sequential.plan(LOOKS, LOOKS[-1], ALPHA, "obrien_fleming"),
        "Pocock, 4..40": sequential.plan(LOOKS, LOOKS[-1], ALPHA, "pocock"),
    }
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    print(f"{args.sims} simulated sweeps per row, alpha {ALPHA}, commit {commit}, "
          f"load average {os.getloadavg()[0]:.1f}\n")
    print("| design | true difference (sd) | margin (sd) | better | worse | equivalent "
          "| mean seeds | seeds / fixed |")
    print("|---|---|---|---|---|---|---|---|")
    for margin in (None, 0.5):
        for delta in (0.0, 0.3, 0.5, 0.8):
            for name, design in designs.items():
                decision, used = simulate(delta, design, margin, args.sims, seed=11)
                print(
                    f"| {name} | {delta:g} | {'none' if margin is None else f'{margin:g}'} "
                    f"| {np.mean(decision == sequential.BETTER):.3f} "
                    f"| {np.mean(decision == sequential.WORSE):.3f} "
                    f"| {np.mean(decision == sequential.EQUIVALENT):.3f} "
                    f"| {used.mean():.1f} | {used.mean() / LOOKS[-1]:.2f} |"
                )


if __name__ == "__main__":
    main()
