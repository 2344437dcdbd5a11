"""A sweep's `Summary` as plain data: summary.json's numbers, tracked metrics.

Numbers only, in strict JSON types (NaN -> None, inf -> "inf");
`kg_service.analysis.words.verdict_wording.summary_json` adds the sentences.
"""

import dataclasses
import math

import numpy as np


def _clean(value):
    if isinstance(value, float) or isinstance(value, np.floating):
        value = float(value)
        if math.isnan(value):
            return None
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return value
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def paired_to_dict(test):
    """A `PairedTest` as a flat dict: its fields, then its statistics by name."""
    d = {f.name: getattr(test, f.name) for f in dataclasses.fields(test)
         if f.name not in ("statistics", "unpaired", "non_finite", "dz_low", "dz_high",
                           "diffs")}
    d.update(test.statistics)
    d["unpaired"], d["non_finite"] = test.unpaired, test.non_finite
    d["d_z_low"], d["d_z_high"] = test.dz_low, test.dz_high
    d["degenerate"] = test.degenerate
    return d


def verdict_to_dict(verdict):
    """A `decisions.Verdict` as plain data, with the interval that decides it."""
    if verdict is None:
        return None
    d = dataclasses.asdict(verdict)
    d["interval"], d["interval_confidence"] = verdict.interval, verdict.confidence
    return d


def plan_to_dict(plan):
    """A `planning.SeedPlan` as plain data, with the count that decides."""
    if plan is None:
        return None
    return {**dataclasses.asdict(plan), "decide": plan.decide}


def verdict_tags(summary):
    """Tags for the sweep's run: "verdict.<activation>" -> "better" etc."""
    tags = {f"verdict.{c.activation}": c.verdict.outcome
            for c in summary.comparisons if c.verdict is not None}
    tags.update({f"verdict.contrast.{pc.name}": pc.verdict.outcome
                 for pc in summary.contrasts})
    return tags


def summary_to_dict(summary):
    """The summary's numbers as plain JSON types (NaN -> None, inf -> "inf").

    Keys are named after the metrics: an activation's estimates under the
    metric names ("test_accuracy", "test_loss"), a comparison's paired
    tests under the short names ("accuracy", "loss"), the winner's mean as
    "mean_<metric>". `kg_service.analysis.words.verdict_wording.summary_json` adds the sentences.
    """
    sel = summary.select_by.name

    def activation(a):
        return {
            "activation": a.activation, "n": a.n, "seeds": a.seeds,
            summary.metric.name: dataclasses.asdict(a.estimate),
            **{k: dataclasses.asdict(e) for k, e in a.secondary.items()},
            "epochs_to_threshold_mean": a.epochs_to_threshold_mean,
            "epochs_to_threshold_median": a.epochs_to_threshold_median,
            "reached": a.reached,
            f"{sel}_mean": a.selection_mean,
            "best_seed": a.best_seed,
            f"best_{sel}": a.best_selection,
            "best_val_loss": a.best_val_loss,
            "train_seconds_mean": a.train_seconds_mean,
            "failed": a.failed, "attempted": a.attempted,
        }

    def comparison(c):
        return {
            "activation": c.activation, "baseline": c.baseline,
            summary.metric.short: paired_to_dict(c.paired),
            **{m.short: paired_to_dict(c.secondary[m.name]) for m in summary.secondary},
            "p_holm": c.p_holm, "significant": c.significant, "sign": c.sign,
            "verdict_numbers": verdict_to_dict(c.verdict),
            "seed_plan": plan_to_dict(c.plan),
            "failures_p": c.failures_p,
            "bootstrap_ci": c.bootstrap, "p_improvement": c.p_improvement,
            "aso_epsilon_min": c.aso,
        }

    def family(pcs):
        return {pc.name: {"plus": pc.plus, "minus": pc.minus,
                          summary.metric.short: paired_to_dict(pc.paired),
                          "verdict_numbers": verdict_to_dict(pc.verdict)} for pc in pcs}

    w = summary.winner
    d = {
        "baseline": summary.baseline,
        "metric": summary.metric.name,
        "higher_is_better": summary.metric.higher_is_better,
        "confidence": summary.confidence,
        "alpha": summary.alpha,
        "holm": summary.holm,
        "margin": summary.margin,
        "power": summary.power,
        "activations": {a.activation: activation(a) for a in summary.activations},
        "comparisons": {c.activation: comparison(c) for c in summary.comparisons},
        "rank_first": summary.rank_first,
        "failed_only": {a: {"failed": k, "failures_p": p}
                        for a, (k, p) in summary.failed_only.items()},
        "pairs": family(summary.pairs),
        "contrasts": family(summary.contrasts),
        "winner": {
            "activation": w.activation, f"mean_{summary.metric.name}": w.mean,
            "runner_up": w.runner_up,
            "lead": None if w.lead is None else paired_to_dict(w.lead),
            "lead_p": w.lead_p,
            "significant_over_runner_up": w.significant_over_runner_up,
            "significant_over_baseline": w.significant_over_baseline,
        },
    }
    return _clean(d)


def flat_metrics(summary):
    """Finite numbers keyed "<activation>.<stat>" for a metrics logger.

    E.g. "gelu.test_accuracy_mean", "gelu.vs_baseline.accuracy_d_z",
    "gelu.vs_baseline.p_holm".
    """
    out = {}
    sel = summary.select_by.name
    for a in summary.activations:
        k = a.activation
        for name, e in ((summary.metric.name, a.estimate), *a.secondary.items()):
            for stat in ("mean", "std", "ci_low", "ci_high"):
                out[f"{k}.{name}_{stat}"] = getattr(e, stat)
        out[f"{k}.seeds"] = a.n
        out[f"{k}.reached_threshold"] = a.reached
        out[f"{k}.failed"] = a.failed
        out[f"{k}.epochs_to_threshold_median"] = a.epochs_to_threshold_median
        out[f"{k}.{sel}_mean"] = a.selection_mean
    for c in summary.comparisons:
        k = f"{c.activation}.vs_baseline"
        short = summary.metric.short
        # A sequential sweep: no fixed-design interval or p beside its
        # sequential verdict (issue 30 §7).
        for stat in ("mean_diff",) if summary.sequential else ("mean_diff", "ci_low",
                                                               "ci_high", "p_t"):
            out[f"{k}.{short}_{stat}"] = getattr(c.paired, stat)
        for stat, value in c.paired.statistics.items():
            out[f"{k}.{short}_{stat}"] = value
        for m in summary.secondary:
            out[f"{k}.{m.short}_mean_diff"] = c.secondary[m.name].mean_diff
        out[f"{k}.p_holm"] = c.p_holm
        out[f"{k}.{short}_d_z_low"] = c.paired.dz_low
        out[f"{k}.{short}_d_z_high"] = c.paired.dz_high
        out[f"{k}.failures_p"] = c.failures_p
        if c.verdict is not None:
            v = c.verdict
            out[f"{k}.p_equivalence_holm"] = v.p_equivalence_holm
            out[f"{k}.{short}_decision_low"], out[f"{k}.{short}_decision_high"] = v.interval
        if c.plan is not None and c.plan.decide is not None:
            out[f"{k}.seeds_to_decide"] = c.plan.decide
        out[f"{k}.{short}_bootstrap_low"], out[f"{k}.{short}_bootstrap_high"] = c.bootstrap
        out[f"{k}.p_improvement"] = c.p_improvement
        out[f"{k}.aso_epsilon_min"] = c.aso
    for a, p in summary.rank_first.items():
        out[f"{a}.p_best"] = p
    for pc in summary.contrasts:
        k = f"contrast.{pc.name}"
        out[f"{k}.{summary.metric.short}_mean_diff"] = pc.paired.mean_diff
        out[f"{k}.p_holm"] = pc.verdict.p_holm
    return {k: float(v) for k, v in out.items() if math.isfinite(float(v))}


def json_ready(value):
    """Numbers, dicts, lists and tuples in strict JSON types (NaN -> None,
    inf -> "inf"), as summary.json holds them; a study's summary uses it."""
    return _clean(value)
