"""docs/results.md's "ReLU's Revival" section: perplexity, attention
entropy per layer (normalised by log t), the learnable slope, described;
the paper's claims are labelled from the config's `claims:` only
(`papers.claims`).
"""

import math

import numpy as np

from kg_service.papers import published
from kg_service.papers.maths import ENTROPY_CEILING
from kg_service.papers.maths import entropy_at_ceiling
from kg_service.papers.maths import entropy_tests
from kg_service.papers.maths import slope_test
from kg_service.papers.maths import head_shares
from kg_service.papers.maths import layer_entropies
from kg_service.papers.maths import mean_sd
from kg_service.papers.sections import fmt_p
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
    lines += ["", "**Described, not claimed** (numbers without a label; the labels are the "
              "claims table's):"] + revival_checks(by_ln, slope_runs)
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
        "The slope starts at 0.01 and is excluded from weight decay "
        "(training/optimizers.py: `exclude_from_weight_decay`). Final slope per "
        "block, mean ± sd over seeds (per seed in brackets):", "",
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


def slope_text(runs, slope_runs):
    """The learnable slope after the longest normalization-free run, and a
    one-sided t-test of each seed's final |slope| (mean over blocks) below
    its start. Described, not labelled: the paper's "towards 0" is not a
    declared claim (a claim compares activations or levels, not a value
    against a constant), so the page gives the numbers only."""
    noln = [r for r in list(runs) + list(slope_runs) if not r.layer_norm]
    if not noln:
        return "no normalization-free run with the learnable slope"
    longest = max(noln, key=lambda r: r.config["training"]["epochs"])
    per_block = [longest.values(f"leaky_slope.block{b}").get("learnable_leaky_relu", {})
                 for b in (0, 1)]
    seeds = sorted(set().union(*per_block))
    finals = [float(np.mean([abs(v[s]) for v in per_block if s in v])) for s in seeds]
    if not finals:
        return "no slope logged"
    start = published.REVIVAL_INITIAL_SLOPE
    m, p, n = slope_test(finals, start)
    after = (f"after {longest.config['training']['epochs']} epochs without LayerNorm the "
             f"mean |slope| is {m:.4f} (start {start}; the paper: towards 0)")
    if math.isnan(p):
        return (f"{after}, from {n} seed{'s' if n != 1 else ''} without a spread: no "
                "one-sided t-test can run")
    return (f"{after}; one-sided t-test of each seed's final |slope| below the start, "
            f"p {fmt_p(p)} over {n} seeds")


def entropy_text(tests, at_ceiling):
    """The overload and relief differences per layer, with the layers at the
    ceiling named (issue 30 §6): numbers, no label (the declared relief
    claim's label is in the claims table)."""
    detail = "; ".join(f"{k} layer {i}: {d:+.3f} (Welch p {fmt_p(p)})" for k, i, d, p in tests)
    ceiling = ", ".join(f"{c} layer {i} {a:.3f} and {b:.3f}"
                        for (c, i), (a, b) in at_ceiling.items())
    return (detail + (f"; at or above the ceiling {ENTROPY_CEILING} of the maximum, where no "
                      f"difference can show: {ceiling}" if ceiling else ""))


def revival_checks(by_ln, slope_runs=()):
    """What the page describes beside the declared claims, without a label."""
    lines = []
    ln, noln = by_ln.get(True), by_ln.get(False)
    if ln is not None and noln is not None:
        hurt = [a for a in ln.members if a in noln.members
                and np.mean(list(noln.values("test_loss")[a].values()))
                > np.mean(list(ln.values("test_loss")[a].values()))]
        lines.append(f"- Perplexity: removing LayerNorm raises the mean test loss of "
                     f"{len(hurt)} of {len(ln.members)} activations.")
        lines.append("- Entropy (overload: noLN GELU − LN GELU; relief: noLN ReLU − noLN "
                     "GELU), per layer: "
                     + entropy_text(entropy_tests(by_ln), entropy_at_ceiling(by_ln)) + ".")
    runs = [r for r in (ln, noln) if r is not None]
    lines.append(f"- Learnable slope: {slope_text(runs, slope_runs)}.")
    return lines
