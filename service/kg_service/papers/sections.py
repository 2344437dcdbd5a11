"""docs/results.md's GELU and GLU sections, and the words every section
shares (the runs line, the study's comparisons and seed plans): text made
from `page.StoredRun`s and an `analysis.numbers.study.Study`.
"""

import math
import types

import numpy as np

from kg_service.papers import published
from kg_service.analysis.numbers import planning
from kg_service.analysis.reports import study_report
from kg_service.analysis.words import tables
from kg_service.analysis.reports import variance_report
from kg_service.analysis.words import wording
from kg_service.papers.maths import mean_sd
from kg_service.papers.maths import median_first
from kg_service.papers.maths import rank_agreement
from kg_service.papers.maths import rank_probabilities
from kg_service.errors import ServiceError


# --- Words. -------------------------------------------------------------------


def _f(x, digits=4):
    return "–" if x is None or not math.isfinite(x) else f"{x:.{digits}f}"


def mean_pm(values, digits=4):
    m, s = mean_sd(values)
    return f"{_f(m, digits)} ± {_f(s, digits)}"


def _signed(d):
    return "0" if d == 0 else f"{d:+g}"


def fmt_p(p):
    return wording.format_p(p)


def _minutes(seconds):
    return f"{seconds:.0f} s ({seconds / 60:.1f} min)"


def _code(lines):
    return ["```text", *lines, "```"]


def runs_line(runs):
    return "; ".join(
        f"`{r.experiment}`: {r.seed_count} seeds, {len(r.members)} "
        f"activation{'s' if len(r.members) != 1 else ''}, "
        f"wall time {_minutes(r.seconds)}"
        + (f" ({r.cost})" if r.cost else "")
        + (f", started {r.started}" if r.started else "")
        + (f" at commit {r.commit[:7]}" if r.commit else "") for r in runs)


def setup_lines(runs):
    """What each sweep tuned and what its seeds varied, from its config
    and its sweep run's tuning tags."""
    out = []
    for r in runs:
        tuning = r.config.get("tuning")
        if tuning and r.tuned:
            parameter = tuning["parameter"]
            grid = (f"grid {tuning['values']}" if tuning.get("values") is not None
                    else f"{tuning['trials']} TPE trials in [{tuning['low']:g}, "
                    f"{tuning['high']:g}]")
            chosen = ", ".join(f"{a} {v}" for a, v in r.tuned.items())
            tuned = (f"`{parameter}` tuned per activation on validation ({grid}, "
                     f"{tuning['seeds']} tuning seed{'s' if tuning['seeds'] != 1 else ''} "
                     f"per value apart from the comparison's, by {tuning['select_by']}; "
                     f"docs/tuning.md), chosen: {chosen}" + _edge_words(tuning, r.tuned))
        else:
            lr = r.config.get("training", {}).get("learning_rate")
            tuned = f"not tuned: learning rate {lr:g} for every activation"
        varied = ("each seed varies " + ", ".join(r.config.get("vary") or ())
                  + " (`vary`), each from its own derived seed")
        if (r.config.get("data", {}).get("dataset") == "python_code"
                and "split" in (r.config.get("vary") or ())):
            varied += " (the split: which corpus blocks a member holds out)"
        out.append(f"`{r.experiment}`: {_length_words(r.config)}; {tuned}; {varied}.")
    return out


def _length_words(config):
    """How long each member trained (the sweep's own settings, which
    docs/make_results.sh may have cut from the config file's)."""
    training = config.get("training", {})
    steps = training.get("steps_per_epoch")
    return (f"{training.get('epochs')} epochs" + (f" of {steps} steps" if steps else "")
            + f", batch {training.get('batch_size')}")


def _edge_words(tuning, tuned):
    """A warning when chosen values sit on the grid's edge: the best value
    may lie outside the grid."""
    values = tuning.get("values")
    if not values or len(values) < 2:
        return ""
    edge = [a for a, v in tuned.items() if float(v) in (min(values), max(values))]
    if not edge:
        return ""
    who = "every activation's" if len(edge) == len(tuned) else ", ".join(edge) + "'s"
    return (f" ({who} on the grid's edge: a wider grid might choose a value "
            "outside it)")


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
                     + (f"~{n}" if n is not None else "no finite count")
                     + f" (ran {len(c.paired.diffs)})")
    lines += ["", f"Seeds to decide each comparison, beside the paired seeds it ran "
              f"(better/worse at the observed d_z or "
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


def agreement_words(agree, alpha=0.05):
    """What Spearman's test supports about the two rankings."""
    if agree.p_value < alpha:
        return ("agrees with the paper's beyond chance" if agree.rho > 0
                else "runs against the paper's beyond chance")
    return "is not shown to agree with the paper's (nor to disagree)"


# --- Sections. ----------------------------------------------------------------


def only_run(runs):
    """The one sweep a single-sweep section reads; more than one is refused,
    never chosen by which started first (issue 30 §4)."""
    if len(runs) != 1:
        names = ", ".join(f"{r.experiment} ({r.run_id})" for r in runs)
        raise ServiceError(
            f"study {runs[0].study!r}: this section reads one sweep, and the store holds "
            f"{len(runs)} ({names}); delete the ones that should not be on the page, or "
            "tag them with another study, so that no sweep is picked by its start time.")
    return runs[0]


def digits_section(runs, study):
    run = only_run(runs)
    train = run.values("loss")
    acc = run.values("test_accuracy")
    loss = run.values("test_loss")
    names = list(run.members)
    medians = {a: float(np.median(list(train[a].values()))) for a in names}
    lowest = min(medians, key=medians.get)
    # How sure is "lowest median": resample each activation's seeds.
    first = median_first(train)
    lines = [
        "Median over seeds of the final epoch's training loss (the paper's "
        "quantity), test accuracy and test loss (mean ± sd over seeds).", "",
        "| activation | median final training loss | P(lowest median), resampling seeds "
        "| test accuracy | test loss |", "|---|---|---|---|---|",
    ]
    for a in names:
        m, s = mean_sd(acc[a].values())
        lines.append(f"| {a} | {medians[a]:.3g} | {first.get(a, math.nan):.2f} | "
                     f"{100 * m:.2f}% ± {100 * s:.2f} | {mean_pm(loss[a].values())} |")
    claim = published.GELU_LOWEST_TRAINING_LOSS
    lines += ["", f"The paper ({published.GELU_PAPER}, MNIST, curves only): {claim.upper()} "
              "has the lowest median training log-loss.", ""]
    lines += comparison_lines(study)
    lines += ["", f"Lowest median final training loss: {lowest}'s; P({claim} lowest) = "
              f"{first.get(claim, math.nan):.2f} by resampling the seeds (described; the "
              "claims table labels the paper's claims)."]
    return lines + variance_lines(run)


def variance_lines(run):
    """The sweep report's per-example (McNemar) and training-loss-curve
    sections (`analysis.variance_report`), from the members' stored test
    predictions and loss histories; [] when the store kept neither."""
    members = []
    for activation, seeds in run.members.items():
        for seed in seeds:
            members.append(types.SimpleNamespace(
                activation=activation, seed=seed, ok=True,
                history={"loss": run.histories.get((activation, seed, "loss"), [])},
                test_correct=run.examples.get((activation, seed))))
    analysis = run.config.get("analysis", {})
    summary = types.SimpleNamespace(baseline=run.baseline, alpha=analysis.get("alpha", 0.05),
                                    confidence=1 - analysis.get("alpha", 0.05))
    config = types.SimpleNamespace(
        vary=tuple(run.config.get("vary") or ()),
        training=types.SimpleNamespace(
            loss_threshold=run.config.get("training", {}).get("loss_threshold")))
    lines = variance_report.markdown_sections(summary, members, config)
    return [line.replace("## ", "### ", 1) if line.startswith("## ") else line
            for line in lines]


def glu_section(runs, study):
    run = only_run(runs)
    loss = run.values("test_loss")
    names = [a for a in published.GLU_65K if a in loss]
    means = [mean_sd(loss[a].values())[0] for a in names]
    agree = rank_agreement(names, means, [published.GLU_65K[a][0] for a in names])
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
        pm, ps = published.GLU_65K[a]
        lines.append(
            f"| {a} | {mean_pm(loss[a].values())} | {agree.ours[i]:g} | "
            f"{paired.get(a, [math.nan])[0]:.2f} | {alone.get(a, [math.nan])[0]:.2f} | "
            f"{pm:.3f} ({ps:.3f}) | {agree.paper[i]:g} | {_signed(agree.differences[i])} |")
    diffs = ", ".join(f"{a} {_signed(d)}" for a, d in zip(names, agree.differences))
    lines += [
        "", f"Rank agreement with the paper's 65k-step column: Spearman ρ = "
        f"{agree.rho:.2f} (p = {fmt_p(agree.p_value)}, {len(names)} FFNs; "
        f"`scipy.stats.spearmanr`). Rank differences in the table's order: {diffs}.",
        "", "P(first): the share of 10,000 resamples of the seeds in which the FFN has "
        "the lowest mean test loss; \"together\" draws the same seed indices for every "
        "FFN (a seed's runs share their batch order), \"each alone\" draws each FFN's "
        "seeds on their own.", "",
    ]
    lines += comparison_lines(study)
    ours_best = names[int(np.argmin(means))]
    paper_best = min(published.GLU_65K, key=lambda a: published.GLU_65K[a][0])
    decided = [c for c in study.comparisons if c.metric.name == "test_loss"
               and c.outcome in ("better", "worse")]
    order = agreement_words(agree)
    verdict = (
        f"Our ranking {order} (ρ = {agree.rho:.2f}, p = {fmt_p(agree.p_value)}). "
        f"Our best mean is {ours_best}'s (paper: {paper_best}); P({ours_best} first) = "
        f"{paired[ours_best][0]:.2f} with the seeds resampled together and "
        f"{alone[ours_best][0]:.2f} each alone, so the top of our ranking is "
        f"{'firm' if min(paired[ours_best][0], alone[ours_best][0]) >= 0.9 else 'uncertain'}. "
        f"Against {run.baseline}, {len(decided)} of "
        f"{sum(1 for c in study.comparisons if c.metric.name == 'test_loss')} comparisons "
        f"are decided (better or worse, study Holm)."
    )
    lines += ["", "**Ranking** (described; the claims table labels the paper's claims). "
              + verdict]
    return lines
