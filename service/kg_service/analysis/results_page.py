"""docs/results.md, computed: the three papers' reruns from stored sweeps.

`kg results` (cli/results.py) reads every finished sweep of the page's
studies from one MLflow store and hands them here as plain data
(`StoredRun`s and each study's `analysis.study.Study`); `render` returns
the whole page. Every number on it is computed here from those runs or
read from `analysis.papers`: the digits' median training loss, ranks,
Spearman's rho, rank differences in the table's order, the probability of
each rank by resampling seeds, the attention entropy per layer normalised
by log t, the learnable slopes, the wall times. Nothing opens a store.

The math (`ranks`, `rank_agreement`, `rank_probabilities`) is checked
against scipy and plain numpy in tests/service/analysis/test_results_page.py.
"""

import dataclasses
import math

import numpy as np
from scipy import stats as _st

from kg_service.analysis import papers
from kg_service.analysis import planning
from kg_service.analysis import study_report
from kg_service.analysis import tables
from kg_service.analysis import verdict_wording
from kg_service.analysis import wording

RESAMPLES = 10_000
SEED = 0
TOP_QUARTER = 0.75  # normalised entropy in [0.75, 1]: the fixed top quarter

# The page's studies, in its order: (study tag, section title).
STUDIES = (
    ("digits", "Hendrycks & Gimpel 2016 (GELU), MNIST classifier → 8x8 digits"),
    ("glu-variants", "Shazeer 2020, GLU variants in the transformer feed-forward"),
    ("revival", "Jha & Reagen 2024, \"ReLU's Revival\" (normalization-free LMs)"),
)
SLOPE_STUDY = "revival-slope"  # the learnable slope trained longer (optional)


@dataclasses.dataclass(frozen=True)
class StoredRun:
    """One finished sweep as the page needs it.

    `members` maps activation -> seed -> {metric: final value} (every
    metric the member's run logged: test_loss, loss, entropy_norm.block0,
    leaky_slope.block1, ...); `histories` maps (activation, seed, metric)
    -> the per-epoch values of the few metrics read whole (the slopes).
    """

    experiment: str
    run_id: str
    study: str
    baseline: str
    config: dict
    members: dict
    seconds: float
    histories: dict = dataclasses.field(default_factory=dict)
    failed: dict = dataclasses.field(default_factory=dict)
    commit: str = ""  # the code the sweep ran (its run's git_commit tag)
    started: str = ""  # when it started, e.g. "2026-12-01 16:32 UTC"

    def values(self, metric):
        """{activation: {seed: value}} of one metric, members that have it."""
        out = {}
        for activation, seeds in self.members.items():
            got = {s: m[metric] for s, m in seeds.items() if metric in m}
            if got:
                out[activation] = got
        return out

    @property
    def layer_norm(self):
        return bool(self.config.get("model", {}).get("layer_norm", True))

    @property
    def seed_count(self):
        return max((len(s) for s in self.members.values()), default=0)


# --- The math. ----------------------------------------------------------------


def ranks(values, higher_is_better=False):
    """Rank of each value, 1 = best, ties sharing their mean rank
    (`scipy.stats.rankdata`, method "average").

    Example:

    >>> ranks([2.6, 2.5, 2.7]).tolist()
    [2.0, 1.0, 3.0]
    """
    v = np.asarray(values, dtype=np.float64)
    return _st.rankdata(-v if higher_is_better else v)


@dataclasses.dataclass(frozen=True)
class RankAgreement:
    """Ours against the paper, item by item in the table's order."""

    names: tuple
    ours: tuple  # ranks, 1 = best
    paper: tuple
    differences: tuple  # ours - paper, in `names`' order
    rho: float  # Spearman's rank correlation
    p_value: float  # its two-sided p (scipy's t approximation)


def rank_agreement(names, ours, paper, higher_is_better=False):
    """Spearman's rho between our values and the paper's, with both
    rankings and their differences in the order of `names`.

    `scipy.stats.spearmanr` computes rho and p: the Pearson correlation of
    the ranks, p from the t distribution with n - 2 degrees of freedom.
    """
    ours_r, paper_r = ranks(ours, higher_is_better), ranks(paper, higher_is_better)
    result = _st.spearmanr(ours, paper)
    return RankAgreement(
        names=tuple(names), ours=tuple(float(r) for r in ours_r),
        paper=tuple(float(r) for r in paper_r),
        differences=tuple(float(a - b) for a, b in zip(ours_r, paper_r)),
        rho=float(result.statistic), p_value=float(result.pvalue),
    )


def rank_probabilities(table, higher_is_better=False, paired=True, resamples=RESAMPLES,
                       seed=SEED):
    """P(each activation takes each rank), resampling the seeds.

    Args:
        table: {activation: {seed: value}}.
        paired: resample seed indices together for all activations (a
            seed's runs share their batch order; as
            `resampling.rank_first`), over the seeds every activation has;
            False: each activation's seeds on their own draw.

    Returns:
        {activation: [P(rank 1), ..., P(rank k)]}; ties take the best of
        their ranks ("min"). {} with fewer than 2 activations or 2 seeds.
    """
    names = list(table)
    if len(names) < 2:
        return {}
    rng = np.random.default_rng(seed)
    if paired:
        common = sorted(set.intersection(*(set(v) for v in table.values())))
        if len(common) < 2:
            return {}
        values = np.array([[table[a][s] for a in names] for s in common], dtype=np.float64)
        idx = rng.integers(0, len(common), size=(resamples, len(common)))
        means = values[idx].mean(axis=1)
    else:
        columns = []
        for a in names:
            v = np.array(list(table[a].values()), dtype=np.float64)
            if len(v) < 2:
                return {}
            columns.append(v[rng.integers(0, len(v), size=(resamples, len(v)))].mean(axis=1))
        means = np.stack(columns, axis=1)
    score = -means if higher_is_better else means
    r = _st.rankdata(score, axis=1, method="min")
    k = len(names)
    return {a: [float(np.mean(r[:, j] == rank)) for rank in range(1, k + 1)]
            for j, a in enumerate(names)}


def mean_sd(values):
    v = np.asarray(list(values), dtype=np.float64)
    return float(v.mean()), (float(v.std(ddof=1)) if len(v) > 1 else math.nan)


def welch(first, second):
    """Welch's t-test (second - first): estimate, p (`scipy.stats.ttest_ind`)."""
    a, b = np.asarray(first, dtype=np.float64), np.asarray(second, dtype=np.float64)
    if len(a) < 2 or len(b) < 2:
        return float(b.mean() - a.mean()), math.nan
    return float(b.mean() - a.mean()), float(_st.ttest_ind(b, a, equal_var=False).pvalue)


def layer_entropies(run, activation):
    """[blocks] of [values over seeds]: the final normalised attention
    entropy of each layer (`entropy_norm.block{i}`, tasks/language/entropy.py)."""
    out, i = [], 0
    while True:
        values = list(run.values(f"entropy_norm.block{i}").get(activation, {}).values())
        if not values:
            return out
        out.append(values)
        i += 1


def head_shares(run, activation):
    """Mean over seeds of the share of heads in the fixed top quarter
    [0.75, 1] of normalised entropy, and the seeds' head counts."""
    shares = list(run.values("entropy_norm_quarter4").get(activation, {}).values())
    return (float(np.mean(shares)) if shares else math.nan), len(shares)


# --- Words. -------------------------------------------------------------------


def _f(x, digits=4):
    return "–" if x is None or not math.isfinite(x) else f"{x:.{digits}f}"


def _pm(values, digits=4):
    m, s = mean_sd(values)
    return f"{_f(m, digits)} ± {_f(s, digits)}"


def _signed(d):
    return "0" if d == 0 else f"{d:+g}"


def _p(p):
    return wording.format_p(p)


def _minutes(seconds):
    return f"{seconds:.0f} s ({seconds / 60:.1f} min)"


def _code(lines):
    return ["```text", *lines, "```"]


def _runs_line(runs):
    return "; ".join(
        f"`{r.experiment}`: {r.seed_count} seeds, {len(r.members)} "
        f"activation{'s' if len(r.members) != 1 else ''}, "
        f"wall time {_minutes(r.seconds)}"
        + (f", started {r.started}" if r.started else "")
        + (f" at commit {r.commit[:7]}" if r.commit else "") for r in runs)


def comparison_lines(study):
    """The study's family of comparisons (Holm), as `kg report --study`."""
    header, rows = study_report.comparison_rows(study)
    lines = [f"Each activation against its sweep's baseline, paired by seed; one Holm "
             f"family of {study.family_size} over the study (as `kg report --study`):", "",
             *tables.markdown_table(header, rows)]
    plans = []
    for c in study.comparisons:
        plan = planning.plan(c.paired.diffs, margin=c.margin if math.isfinite(c.margin) else None,
                             alpha=study.alpha, family=study.family_size)
        n = plan.decide
        plans.append(f"{c.activation} ({c.sweep}, {wording.shown(c.metric.name).label}) "
                     + (f"~{n}" if n is not None else "no finite count"))
    lines += ["", f"Seeds to decide each comparison (better/worse at the observed d_z or "
              f"equivalent within the margin, power 0.8, alpha {study.alpha:g}/"
              f"{study.family_size}: `analysis.planning`, as `kg plan`): "
              + "; ".join(plans) + "."]
    if study.interactions:
        header, rows = study_report.interaction_rows(study)
        lines += ["", "Interactions (difference of paired differences, Welch's t, Holm "
                  "over the interactions):", "", *tables.markdown_table(header, rows)]
    return lines


def _outcomes(study):
    """{activation: StudyComparison} on each sweep's compared metric."""
    compared = {s.name: s.metric.name for s in study.sweeps}
    return {c.activation: c for c in study.comparisons
            if c.metric.name == compared[c.sweep]}


# --- Sections. ----------------------------------------------------------------


def digits_section(runs, study):
    run = runs[0]
    train = run.values("loss")
    acc = run.values("test_accuracy")
    loss = run.values("test_loss")
    names = list(run.members)
    medians = {a: float(np.median(list(train[a].values()))) for a in names}
    lowest = min(medians, key=medians.get)
    # How sure is "lowest median": resample each activation's seeds.
    first = _median_first(train)
    lines = [
        "Median over seeds of the final epoch's training loss (the paper's "
        "quantity), test accuracy and test loss (mean ± sd over seeds).", "",
        "| activation | median final training loss | P(lowest median), resampling seeds "
        "| test accuracy | test loss |", "|---|---|---|---|---|",
    ]
    for a in names:
        m, s = mean_sd(acc[a].values())
        lines.append(f"| {a} | {medians[a]:.3g} | {first.get(a, math.nan):.2f} | "
                     f"{100 * m:.2f}% ± {100 * s:.2f} | {_pm(loss[a].values())} |")
    claim = papers.GELU_LOWEST_TRAINING_LOSS
    lines += ["", f"The paper ({papers.GELU_PAPER}, MNIST, curves only): {claim.upper()} "
              "has the lowest median training log-loss.", ""]
    lines += comparison_lines(study)
    best_acc = max(names, key=lambda a: np.mean(list(acc[a].values())))
    if lowest == claim:
        verdict = (f"**Training loss: reproduced in direction** ({claim} has the lowest "
                   f"median, P = {first.get(claim, math.nan):.2f} by resampling the seeds).")
    else:
        verdict = (f"**Training loss: not reproduced**: the lowest median is {lowest}'s "
                   f"(P({claim} lowest) = {first.get(claim, math.nan):.2f}).")
    c = _outcomes(study).get(claim)
    held = (f" On held-out data the best mean test accuracy is {best_acc}'s; {claim} vs "
            f"{run.baseline}: {verdict_wording.OUTCOME_WORDS.get(c.outcome, c.outcome)} "
            f"(study Holm p {_p(c.p_holm)})." if c else "")
    lines += ["", "**Verdict.** " + verdict + held]
    return lines


def _median_first(table, resamples=RESAMPLES, seed=SEED):
    """P(each activation has the lowest median), each one's seeds resampled."""
    rng = np.random.default_rng(seed)
    names = list(table)
    cols = []
    for a in names:
        v = np.array(list(table[a].values()), dtype=np.float64)
        cols.append(np.median(v[rng.integers(0, len(v), size=(resamples, len(v)))], axis=1))
    m = np.stack(cols, axis=1)
    best = m == m.min(axis=1, keepdims=True)
    shares = best / best.sum(axis=1, keepdims=True)
    return {a: float(p) for a, p in zip(names, shares.mean(axis=0))}


def agreement_words(agree, alpha=0.05):
    """What Spearman's test supports about the two rankings."""
    if agree.p_value < alpha:
        return ("agrees with the paper's beyond chance" if agree.rho > 0
                else "runs against the paper's beyond chance")
    return "is not shown to agree with the paper's (nor to disagree)"


def glu_section(runs, study):
    run = runs[0]
    loss = run.values("test_loss")
    names = [a for a in papers.GLU_65K if a in loss]
    means = [mean_sd(loss[a].values())[0] for a in names]
    agree = rank_agreement(names, means, [papers.GLU_65K[a][0] for a in names])
    table = {a: loss[a] for a in names}
    paired = rank_probabilities(table, paired=True)
    alone = rank_probabilities(table, paired=False)
    lines = [
        "| FFN | ours: test loss (mean ± sd) | ours: rank | P(first), seeds resampled "
        "together | P(first), each alone | paper: log-perplexity, 65k steps | paper: rank "
        "| rank difference (ours − paper) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for i, a in enumerate(names):
        pm, ps = papers.GLU_65K[a]
        lines.append(
            f"| {a} | {_pm(loss[a].values())} | {agree.ours[i]:g} | "
            f"{paired.get(a, [math.nan])[0]:.2f} | {alone.get(a, [math.nan])[0]:.2f} | "
            f"{pm:.3f} ({ps:.3f}) | {agree.paper[i]:g} | {_signed(agree.differences[i])} |")
    diffs = ", ".join(f"{a} {_signed(d)}" for a, d in zip(names, agree.differences))
    lines += [
        "", f"Rank agreement with the paper's 65k-step column: Spearman ρ = "
        f"{agree.rho:.2f} (p = {_p(agree.p_value)}, {len(names)} FFNs; "
        f"`scipy.stats.spearmanr`). Rank differences in the table's order: {diffs}.",
        "", "P(first): the share of 10,000 resamples of the seeds in which the FFN has "
        "the lowest mean test loss; \"together\" draws the same seed indices for every "
        "FFN (a seed's runs share their batch order), \"each alone\" draws each FFN's "
        "seeds on their own.", "",
    ]
    lines += comparison_lines(study)
    ours_best = names[int(np.argmin(means))]
    paper_best = min(papers.GLU_65K, key=lambda a: papers.GLU_65K[a][0])
    decided = [c for c in study.comparisons if c.metric.name == "test_loss"
               and c.outcome in ("better", "worse")]
    order = agreement_words(agree)
    verdict = (
        f"Our ranking {order} (ρ = {agree.rho:.2f}, p = {_p(agree.p_value)}). "
        f"Our best mean is {ours_best}'s (paper: {paper_best}); P({ours_best} first) = "
        f"{paired[ours_best][0]:.2f} with the seeds resampled together and "
        f"{alone[ours_best][0]:.2f} each alone, so the top of our ranking is "
        f"{'firm' if min(paired[ours_best][0], alone[ours_best][0]) >= 0.9 else 'uncertain'}. "
        f"Against {run.baseline}, {len(decided)} of "
        f"{sum(1 for c in study.comparisons if c.metric.name == 'test_loss')} comparisons "
        f"are decided (better or worse, study Holm)."
    )
    lines += ["", "**Verdict.** " + verdict]
    return lines


def revival_section(runs, study, slope_runs=()):
    by_ln = {r.layer_norm: r for r in runs}
    lines = [
        "Test loss (nats/byte, mean ± sd over seeds), its perplexity exp(mean loss) and "
        f"the paper's eval perplexity ({papers.REVIVAL_PAPER}, GPT-2, T=128, per token):",
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
            paper = papers.REVIVAL_GPT2_PERPLEXITY.get((ln, a))
            lines.append(f"| {'LayerNorm' if ln else 'no LayerNorm'} + {a} | "
                         f"{_pm(loss[a].values())} | {math.exp(m):.2f} | "
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
            cells = [_pm(v, 3) for v in layer_entropies(run, a)]
            share, _ = head_shares(run, a)
            paper = papers.REVIVAL_ENTROPY_QUARTERS.get((ln, a))
            lines.append(f"| {'LayerNorm' if ln else 'no LayerNorm'} + {a} | "
                         + " | ".join(cells) + f" | {100 * share:.0f}% | "
                         + ("–" if paper is None else f"{100 * paper[3]:.0f}%") + " |")
    return lines


def entropy_tests(by_ln):
    """The paper's two entropy claims, per layer, Welch over seeds:
    overload (noLN GELU above LN GELU) and relief (noLN ReLU below noLN
    GELU). [(claim, layer, difference, p)]."""
    ln, noln = by_ln.get(True), by_ln.get(False)
    if ln is None or noln is None:
        return []
    out = []
    for i, (a, b) in enumerate(zip(layer_entropies(ln, "gelu"), layer_entropies(noln, "gelu"))):
        out.append(("overload", i, *welch(a, b)))
    for i, (a, b) in enumerate(zip(layer_entropies(noln, "gelu"),
                                   layer_entropies(noln, "relu"))):
        out.append(("relief", i, *welch(a, b)))
    return out


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
            cells.append(f"{_pm([v[s] for s in seeds])} ({', '.join(f'{v[s]:+.3f}' for s in seeds)})"
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


def slope_verdict(runs, slope_runs):
    noln = [r for r in list(runs) + list(slope_runs) if not r.layer_norm]
    if not noln:
        return "no normalization-free run with the learnable slope"
    longest = max(noln, key=lambda r: r.config["training"]["epochs"])
    finals = [abs(v) for b in (0, 1) for v in
              longest.values(f"leaky_slope.block{b}").get("learnable_leaky_relu", {}).values()]
    if not finals:
        return "no slope logged"
    m = float(np.mean(finals))
    towards = m < papers.REVIVAL_INITIAL_SLOPE / 2
    return (f"{'reproduced' if towards else 'not reproduced'}: after "
            f"{longest.config['training']['epochs']} epochs without LayerNorm the mean "
            f"|slope| is {m:.4f} (start {papers.REVIVAL_INITIAL_SLOPE}; the paper: towards 0)")


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


def revival_verdicts(by_ln, study, slope_runs=()):
    lines = []
    ln, noln = by_ln.get(True), by_ln.get(False)
    if ln is not None and noln is not None:
        hurt = [a for a in ln.members if a in noln.members
                and np.mean(list(noln.values("test_loss")[a].values()))
                > np.mean(list(ln.values("test_loss")[a].values()))]
        inter = [i for i in study.interactions if i.activation == "relu"
                 and i.metric.name == "test_loss"]
        i_text = (f"the ReLU − GELU gap moves {inter[0].test.estimate:+.4f} nats/byte "
                  f"without LayerNorm (study Holm p {_p(inter[0].p_holm)}, "
                  f"{'significant' if inter[0].significant else 'not significant'})"
                  if inter else "no interaction test")
        lines.append(f"- Perplexity: removing LayerNorm raises the test loss of "
                     f"{len(hurt)} of {len(ln.members)} activations; {i_text}.")
        tests = entropy_tests(by_ln)
        words = {c: claim_word([(d, p) for k, _, d, p in tests if k == c],
                               negative=(c == "relief")) for c in ("overload", "relief")}
        whole = ("reproduced" if set(words.values()) == {"reproduced"}
                 else "not reproduced" if words["relief"] != "reproduced" else "partly")
        detail = "; ".join(f"{k} layer {i}: {d:+.3f} (Welch p {_p(p)})" for k, i, d, p in tests)
        lines.append(f"- Entropy: **{whole}** (overload: {words['overload']}; ReLU's relief: "
                     f"{words['relief']}). The paper's claim: without LayerNorm GELU's "
                     "attention entropy rises (overload: noLN GELU − LN GELU > 0) and ReLU "
                     f"relieves it (relief: noLN ReLU − noLN GELU < 0). Ours, per layer: "
                     f"{detail}.")
    runs = [r for r in (ln, noln) if r is not None]
    lines.append(f"- Learnable slope: **{slope_verdict(runs, slope_runs)}**.")
    return lines


# --- The page. ----------------------------------------------------------------


def render(found, analysed, *, command, commit, when, slope_runs=()):
    """The whole page.

    Args:
        found: {study tag: [StoredRun, ...]} for the page's studies
            (`STUDIES`); a study missing from it is said to be missing.
        analysed: {study tag: analysis.study.Study} of the same sweeps.
        command, commit, when: what made the page (shown at its top).
        slope_runs: the `SLOPE_STUDY`'s sweeps, if any.
    """
    lines = [
        "# Results: three papers rerun with kg-train", "",
        "<!-- Generated by `kg results`; do not edit by hand: rerun the command below. -->",
        "",
        f"Generated by `{command}` at commit {commit}, {when}, from the MLflow runs of "
        f"the studies {', '.join(s for s, _ in STUDIES)} and {SLOPE_STUDY} (sweeps found "
        "by their `study:` tag); the papers' numbers are constants in "
        "`kg_service/analysis/papers.py` (from shared/reference/papers.md). Every "
        "number below is computed from those runs by `kg_service/analysis/results_page.py`.",
        "",
        "From nothing to this page: `bash docs/make_results.sh` (or `kg results --run`), "
        "which trains each study's config into `results-store/mlflow.db` (the seeds and "
        "`--set`s of every sweep are in that script) and then runs `kg results`.",
        "",
        "TensorFlow backend, CPU, the shared 2-core machine with other jobs beside the "
        "runs, so wall times are upper bounds. Fixed learning rate; per-activation tuning: "
        "see issue 19 item 1 (not on main when these ran). Seeds: the most the ~30 min "
        "budget per study allowed (docs/make_results.sh says which); the seed plans of "
        "`kg plan` asked for more in most comparisons.",
        "",
        "Units differ from the papers: our language models are byte-level (256-token "
        "vocabulary), so our loss is nats per byte and our perplexity is per byte; the "
        "papers' are per BPE/SentencePiece token. Compare orderings and gaps within a "
        "table, not absolute values across tables.",
    ]
    for n, (tag, title) in enumerate(STUDIES, 1):
        lines += ["", f"## {n}. {title}", ""]
        runs = found.get(tag)
        if not runs:
            lines.append(f"No finished sweep tagged `study: {tag}` in the store (not run, "
                         "or not finished when the page was made).")
            continue
        lines += [_runs_line(runs) + ".", ""]
        section = {"digits": digits_section, "glu-variants": glu_section}.get(tag)
        if section is not None:
            lines += section(runs, analysed[tag])
        else:
            lines += revival_section(runs, analysed[tag], slope_runs)
    if slope_runs:
        lines += ["", f"Learnable-slope sweep(s): {_runs_line(slope_runs)}."]
    return "\n".join(lines) + "\n"
