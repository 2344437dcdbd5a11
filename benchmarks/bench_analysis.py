"""What kg-train's compare stage costs (issue 17): the statistics of a
glu-variants-sized sweep (eight activations, two seeds: seven comparisons
with their seed plans, 28 pairs, one contrast) and its report's figures,
today's code beside the scipy.stats calls it replaced (seed planning's TOST
power, d_z's interval: `tests/service/analysis/scipy_reference.py`),
interleaved in one process after a warm-up; CPU seconds per round
(`time.process_time`) and the ratio.

Usage:

    .venv/bin/python benchmarks/bench_analysis.py --rounds 3

Both columns compute the same numbers (the tests pin them bit for bit);
the script checks that each round's summaries agree.
"""

import argparse
import math
import os
import pathlib
import sys
import tempfile
import time
import types

import numpy as np

from kg_service.analysis.numbers import comparisons
from kg_service.analysis.reports import figures
from kg_service.analysis.numbers import planning
from kg_service.analysis.numbers import stats
from kg_service.results import MemberResult

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tests.service.analysis import scipy_reference  # noqa: E402

ACTIVATIONS = ("relu", "gelu", "swish", "glu", "bilinear", "reglu", "geglu", "swiglu")
LM_FIGURES = ("learning_curves", "per_seed", "attention_entropy", "leaky_slopes")


def glu_sweep(seeds=2, epochs=2, blocks=2, heads=2):
    """Language-model members shaped like glu-variants --smoke's."""
    rng = np.random.default_rng(17)
    out = []
    for a in ACTIVATIONS:
        for s in range(seeds):
            loss = list(np.linspace(5.6, 5.52, epochs) + rng.normal(0, 0.004, epochs))
            history = {"loss": loss, "val_loss": loss, "val_accuracy": [0.01] * epochs,
                       "val_perplexity": list(np.exp(loss))}
            for b in range(blocks):
                for h in range(heads):
                    history[f"entropy.block{b}.head{h}"] = [float(rng.uniform(0.5, 3))]
            out.append(MemberResult(a, s, history, loss[-1], 0.01, None, None, 1.0,
                                    final={"test_perplexity": math.exp(loss[-1])}))
    return out


def summarize(results):
    gated = types.SimpleNamespace(name="gated-vs-plain", plus=ACTIVATIONS[3:],
                                  minus=ACTIVATIONS[:3])
    return comparisons.summarize(results, "relu", metric="test_loss", higher_is_better=False,
                                 select_by=stats.Metric.of("val_loss", False), margin=0.01,
                                 contrasts=[gated])


def plans(summary):
    return [c.plan for c in summary.comparisons]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results = glu_sweep()
    today = (planning.tost_power, stats.dz_interval)
    before = (scipy_reference.tost_power, scipy_reference.dz_interval)

    def use(functions):
        planning.tost_power, stats.dz_interval = functions

    out = pathlib.Path(tempfile.mkdtemp())
    summary = summarize(results)
    figures.draw_figures(LM_FIGURES, out, summary, results)  # warm-up: fonts, caches
    cpu = {"statistics, scipy.stats calls": 0.0, "statistics, today": 0.0, "figures": 0.0}
    for _ in range(args.rounds):
        use(before)
        t = time.process_time()
        old = summarize(results)
        cpu["statistics, scipy.stats calls"] += time.process_time() - t
        use(today)
        t = time.process_time()
        new = summarize(results)
        cpu["statistics, today"] += time.process_time() - t
        assert plans(old) == plans(new), (plans(old), plans(new))
        t = time.process_time()
        figures.draw_figures(LM_FIGURES, out, new, results)
        cpu["figures"] += time.process_time() - t
    print(f"glu-variants-sized compare stage ({len(ACTIVATIONS)} activations x 2 seeds), "
          f"CPU s per round over {args.rounds} rounds:")
    for name, seconds in cpu.items():
        print(f"  {name:32s} {seconds / args.rounds:7.3f}")
    ratio = cpu["statistics, scipy.stats calls"] / cpu["statistics, today"]
    print(f"  statistics: today is {ratio:.1f}x cheaper")


if __name__ == "__main__":
    main()
