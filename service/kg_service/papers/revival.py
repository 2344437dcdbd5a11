"""docs/results.md's "ReLU's Revival" section: perplexity, attention
entropy per layer (normalised by log t), the learnable slope, as numbers;
the paper's claims (the LayerNorm interaction, GELU's entropic overload,
ReLU's relief, the slope falling from its start) are labelled from the
config's `claims:` only (`papers.claims`), and nothing here restates them.
"""

import math

import numpy as np

from kg_service.papers import published
from kg_service.papers.maths import head_shares
from kg_service.papers.maths import layer_entropies
from kg_service.papers.maths import mean_sd
from kg_service.papers.sections import mean_pm
from kg_service.papers.sections import comparison_lines


def revival_section(runs, study, slope_runs=()):
    by_ln = {r.layer_norm: r for r in runs}
    lines = [
        "Test loss (nats/byte, mean ± sd over seeds), its perplexity exp(mean loss) and "
        f"the paper's eval perplexity ({published.REVIVAL_PAPER}, GPT-2, T=128, per token):",
        "", "| config | ours: test loss | ours: perplexity | paper: GPT-2 perplexity |",
        "|---|---|---|---|",
    ]
    for ln in (True, False):
        run = by_ln.get(ln)
        if run is None:
            continue
        loss = run.values("test_loss")
        for a in run.members:
            m = mean_sd(loss[a].values())[0]
            paper = published.REVIVAL_GPT2_PERPLEXITY.get((ln, a))
            lines.append(f"| {'LayerNorm' if ln else 'no LayerNorm'} + {a} | "
                         f"{mean_pm(loss[a].values())} | {math.exp(m):.2f} | "
                         f"{'–' if paper is None else f'{paper:.3f}'} |")
    lines += [""] + comparison_lines(study)
    lines += ["", "### Attention entropy per layer, normalised by log t", ""] + \
        entropy_lines(by_ln)
    lines += ["", "### The learnable leaky ReLU's slope", ""] + slope_lines(runs, slope_runs)
    checks = revival_checks(by_ln)
    if checks:
        lines += ["", "**Described, not claimed** (numbers without a label; the labels are "
                  "the claims table's):"] + checks
    return lines


def entropy_lines(by_ln):
    lines = [
        "Each query row's attention entropy divided by log t (t = the positions it may "
        "attend to; row 0 left out), averaged over rows, the 8 fixed validation windows "
        "and the layer's heads, at the final epoch: 1 is uniform attention. Mean ± sd "
        "over seeds; \"top quarter\": the share of heads with normalised entropy in "
        "[0.75, 1], a fixed maximum (the old page's max was each member's highest head, "
        "which puts at least one head of 8 (12.5 %) in the top quarter whatever happens).",
        "",
    ]
    blocks = max((len(layer_entropies(r, a)) for r in by_ln.values() for a in r.members),
                 default=0)
    lines += ["| config | " + " | ".join(f"layer {i}" for i in range(blocks))
              + " | heads in [0.75, 1] (mean over seeds) | paper: top quarter (max-relative) |",
              "|---|" + "---|" * (blocks + 2)]
    for ln in (True, False):
        run = by_ln.get(ln)
        if run is None:
            continue
        for a in run.members:
            cells = [mean_pm(v, 3) for v in layer_entropies(run, a)]
            share, _ = head_shares(run, a)
            paper = published.REVIVAL_ENTROPY_QUARTERS.get((ln, a))
            lines.append(f"| {'LayerNorm' if ln else 'no LayerNorm'} + {a} | "
                         + " | ".join(cells) + f" | {100 * share:.0f}% | "
                         + ("–" if paper is None else f"{100 * paper[3]:.0f}%") + " |")
    return lines


def slope_lines(runs, slope_runs):
    lines = [
        f"The slope starts at {published.REVIVAL_INITIAL_SLOPE} and is excluded from "
        "weight decay (training/optimizers.py: `exclude_from_weight_decay`); whether it "
        "falls from there without LayerNorm is a claim, labelled in the claims table. "
        "Final slope per block, mean ± sd over seeds (per seed in brackets):", "",
        "| sweep | epochs | " + "block 0 | block 1 |", "|---|---|---|---|",
    ]
    for run in list(runs) + list(slope_runs):
        cells = []
        for b in (0, 1):
            v = run.values(f"leaky_slope.block{b}").get("learnable_leaky_relu", {})
            seeds = sorted(v)
            per_seed = ", ".join(f"{v[s]:+.3f}" for s in seeds)
            cells.append(f"{mean_pm([v[s] for s in seeds])} ({per_seed})"
                         if v else "–")
        lines.append(f"| `{run.experiment}` | {run.config['training']['epochs']} | "
                     + " | ".join(cells) + " |")
    for run in slope_runs:
        hist = {k: v for k, v in run.histories.items() if k[2].startswith("leaky_slope")}
        if hist:
            epochs = run.config["training"]["epochs"]
            marks = sorted({max(1, epochs // 3), max(1, 2 * epochs // 3), epochs})
            lines += ["", f"`{run.experiment}`, mean over seeds of |slope| by epoch:", "",
                      "| block | " + " | ".join(f"epoch {e}" for e in marks) + " |",
                      "|---|" + "---|" * len(marks)]
            for b in (0, 1):
                series = [v for k, v in hist.items() if k[2] == f"leaky_slope.block{b}"]
                cells = [f"{np.mean([abs(s[e - 1]) for s in series if len(s) >= e]):.4f}"
                         for e in marks]
                lines.append(f"| {b} | " + " | ".join(cells) + " |")
    return lines


def revival_checks(by_ln):
    """What the page describes beside the declared claims, without a label:
    how many activations removing LayerNorm hurt (the entropy and the slope
    are the claims table's: issue 32 §4)."""
    ln, noln = by_ln.get(True), by_ln.get(False)
    if ln is None or noln is None:
        return []
    hurt = [a for a in ln.members if a in noln.members
            and np.mean(list(noln.values("test_loss")[a].values()))
            > np.mean(list(ln.values("test_loss")[a].values()))]
    return [f"- Perplexity: removing LayerNorm raises the mean test loss of "
            f"{len(hurt)} of {len(ln.members)} activations."]
