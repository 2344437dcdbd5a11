"""docs/results.md's "ReLU's Revival" section: perplexity, attention
entropy per layer (normalised by log t), the learnable slope, and the
verdicts on the paper's claims.
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
    lines += ["", "**Verdict.**"] + revival_verdicts(by_ln, study, slope_runs)
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


def slope_verdict(runs, slope_runs, alpha=0.05):
    """The paper's claim that the slope moves towards 0 without LayerNorm, by
    a one-sided t-test of each seed's final |slope| (mean over blocks)
    against its start (issue 30 §6: a test, not a cut-off): "reproduced"
    when it rejects, "inconclusive" when it does not, "not tested" (and
    why) when it cannot be run."""
    noln = [r for r in list(runs) + list(slope_runs) if not r.layer_norm]
    if not noln:
        return "not tested: no normalization-free run with the learnable slope"
    longest = max(noln, key=lambda r: r.config["training"]["epochs"])
    per_block = [longest.values(f"leaky_slope.block{b}").get("learnable_leaky_relu", {})
                 for b in (0, 1)]
    seeds = sorted(set().union(*per_block))
    finals = [float(np.mean([abs(v[s]) for v in per_block if s in v])) for s in seeds]
    if not finals:
        return "not tested: no slope logged"
    start = published.REVIVAL_INITIAL_SLOPE
    m, p, n = slope_test(finals, start)
    after = (f"after {longest.config['training']['epochs']} epochs without LayerNorm the "
             f"mean |slope| is {m:.4f} (start {start}; the paper: towards 0)")
    if math.isnan(p):
        return (f"not tested: {after}, from {n} seed{'s' if n != 1 else ''} without a "
                "spread, and a one-sided t-test needs 2 with one")
    word = "reproduced" if p < alpha else "inconclusive"
    return (f"{word}: {after}; one-sided t-test of each seed's final |slope| below the "
            f"start, p {fmt_p(p)} over {n} seeds")


def claim_word(tests, negative=False, alpha=0.05):
    """A per-layer claim over [(difference, Welch p)]: "reproduced" (the
    claimed sign, significant, in every layer), "in direction only" (the
    sign in every layer), else "not reproduced"."""
    if not tests:
        return "not tested"
    signs = all((d < 0) if negative else (d > 0) for d, _ in tests)
    if signs and all(p < alpha for _, p in tests):
        return "reproduced"
    return "in direction only, not significant" if signs else "not reproduced"


def _ln_words(level):
    return "LayerNorm" if level else "no LayerNorm"


def interaction_text(study):
    """ReLU's test-loss interaction in the direction the study declared
    (issue 30 §4): from the reference level to the other, whichever sweep
    started first. The paper's claim (removing LayerNorm hurts GELU more
    than ReLU) is a negative move from LayerNorm to none."""
    inter = [i for i in study.interactions if i.activation == "relu"
             and i.metric.name == "test_loss"]
    if not inter or study.factor != "model.layer_norm":
        return "no interaction test over model.layer_norm"
    i = inter[0]
    return (f"the ReLU − GELU gap moves {i.test.estimate:+.4f} nats/byte from "
            f"{_ln_words(i.first_level)} (the declared reference) to "
            f"{_ln_words(i.second_level)} (the paper: negative from LayerNorm to none; "
            f"study Holm p {fmt_p(i.p_holm)}, "
            f"{'significant' if i.significant else 'not significant'})")


def entropy_words(tests, at_ceiling):
    """Each entropy claim's word; "not tested" with the numbers where a
    layer's two groups both sit at the ceiling (issue 30 §6): no difference
    can appear there, so its test says nothing about the claim."""
    words = {}
    for claim in ("overload", "relief"):
        ceiling = {i: m for (c, i), m in at_ceiling.items() if c == claim}
        if ceiling:
            where = ", ".join(f"layer {i} {a:.3f} and {b:.3f}" for i, (a, b) in ceiling.items())
            words[claim] = (f"not tested: at the ceiling ({where} of the maximum, both at "
                            f"or above {ENTROPY_CEILING}: no room for the claimed difference)")
        else:
            words[claim] = claim_word([(d, p) for k, _, d, p in tests if k == claim],
                                      negative=(claim == "relief"))
    return words


def revival_verdicts(by_ln, study, slope_runs=()):
    lines = []
    ln, noln = by_ln.get(True), by_ln.get(False)
    if ln is not None and noln is not None:
        hurt = [a for a in ln.members if a in noln.members
                and np.mean(list(noln.values("test_loss")[a].values()))
                > np.mean(list(ln.values("test_loss")[a].values()))]
        lines.append(f"- Perplexity: removing LayerNorm raises the test loss of "
                     f"{len(hurt)} of {len(ln.members)} activations; {interaction_text(study)}.")
        tests = entropy_tests(by_ln)
        words = entropy_words(tests, entropy_at_ceiling(by_ln))
        whole = ("not tested" if any(w.startswith("not tested") for w in words.values())
                 else "reproduced" if set(words.values()) == {"reproduced"}
                 else "not reproduced" if words["relief"] != "reproduced" else "partly")
        detail = "; ".join(f"{k} layer {i}: {d:+.3f} (Welch p {fmt_p(p)})" for k, i, d, p in tests)
        lines.append(f"- Entropy: **{whole}** (overload: {words['overload']}; ReLU's relief: "
                     f"{words['relief']}). The paper's claim: without LayerNorm GELU's "
                     "attention entropy rises (overload: noLN GELU − LN GELU > 0) and ReLU "
                     f"relieves it (relief: noLN ReLU − noLN GELU < 0). Ours, per layer: "
                     f"{detail}.")
    runs = [r for r in (ln, noln) if r is not None]
    lines.append(f"- Learnable slope: **{slope_verdict(runs, slope_runs)}**.")
    return lines
