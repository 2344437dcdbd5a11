"""Which activation won, and by how much: a sweep's members compared by seed.

Numbers only (`kg_service.analysis.words.wording` phrases them): `summarize`
turns a list of `MemberResult`s into a `Summary` with the statistics of
`kg_service.analysis.numbers.stats`. The unit of replication is the seed: each
seed gives one final value of the compared metric per activation, and the
same seed means the same initialisation stream and batch order, so
activations are compared *paired by seed* (Hendrycks & Gimpel 2016 report
medians over runs; the make_moons seed article asks for several seeds and
a held-out test set).

The compared metric is any per-member final value with a direction: test
accuracy (higher is better) for the classifiers, test loss or perplexity
(lower is better) for a language model. For each activation other than the
baseline the mean paired difference (activation - baseline) is tested with
a paired t-test, with a t-based confidence interval; with several
comparisons, significance is decided on Holm-adjusted p-values (family:
every activation vs the baseline, on the compared metric). The winner is
the best mean by the metric's direction, and a comparison's `sign` says
whether the activation did better (+1) or worse (-1) than the baseline.
The significance level is `alpha = 1 - confidence`, so an interval that
excludes zero and an unadjusted p below alpha say the same thing.

Each comparison also gets a three-way `decisions.Verdict` (better, worse,
equivalent within the margin, or inconclusive; Holm over the family, with
the interval that decides it) and a `planning.SeedPlan` (the seeds that
would decide it). Members that diverged stay in the record: each
activation's failures are counted and compared with the baseline's
(`stats.failure_p`), and the metric's statistics use the members that
did not fail, paired by seed (`PairedTest.n` says how many pairs).

Model selection never looks at the test set: the "best seed" of an
activation is the one with the best final validation value (`select_by`,
by default the validation counterpart of the metric, e.g. val_accuracy).

Example:

>>> from kg_service.results import MemberResult
>>> h = {"loss": [0.3], "accuracy": [0.9], "val_loss": [0.3],
...      "val_accuracy": [0.9]}
>>> rs = [MemberResult(a, s, h, 0.3, acc, 1)
...       for a, accs in {"relu": [0.90, 0.91, 0.92],
...                       "gelu": [0.92, 0.92, 0.95]}.items()
...       for s, acc in enumerate(accs)]
>>> summary = summarize(rs, baseline="relu")
>>> summary.winner.activation
'gelu'
>>> summary.comparisons[0].sign
1
"""

import dataclasses
import math

import numpy as np

from kg_service.analysis.numbers import decisions
from kg_service.analysis.numbers import planning
from kg_service.analysis.numbers import resampling
from kg_service.analysis.numbers import multiplicity
from kg_service.analysis.numbers import stats
from kg_service.analysis.numbers.summary import ActivationSummary
from kg_service.analysis.numbers.summary import Comparison
from kg_service.analysis.numbers.summary import PairComparison
from kg_service.analysis.numbers.summary import Summary
from kg_service.analysis.numbers.summary import Winner
from kg_service.errors import ServiceError


def summarize(results, baseline, *, metric=stats.ACCURACY, higher_is_better=True,
              confidence=0.95, secondary=None, select_by=None, margin=None, power=0.8,
              contrasts=(), sequential=None):
    """Summarizes a sweep and compares every activation with the baseline.

    Args:
        results: iterable of `MemberResult` (`model` may be None).
        baseline: the activation the others are compared with.
        metric: the per-member final value compared (a `MemberResult`
            attribute): "test_accuracy", "test_loss", "test_perplexity"...
        higher_is_better: the metric's direction; the winner, each
            comparison's sign and the ranking follow it.
        confidence: interval coverage; alpha = 1 - confidence.
        secondary: `Metric`s reported beside the compared one (estimate
            and unadjusted paired difference) and used, in order, to break
            ties for the winner. Default: test loss (lower is better),
            unless it is the compared metric.
        select_by: the `Metric` whose final validation value picks each
            activation's best seed (the one registered). Default: the
            metric's validation counterpart ("val_accuracy" for
            "test_accuracy"), in the same direction.
        margin: the equivalence margin in the compared metric's units
            (`AnalysisConfig.margin_for`); None: no equivalence verdicts.
        power: the power each comparison's seed plan aims for.
        contrasts: declared contrasts (`AnalysisConfig.contrasts`): mean of
            `plus` minus mean of `minus`, paired over the seeds all have.
        sequential: a sequential sweep's {activation: decision}: its
            verdicts, and no fixed-design one is made (issue 30 §7).

    Members that diverged (`MemberResult.ok` false) are counted as
    failures of their activation and left out of every metric statistic.

    Returns:
        A `Summary`.

    Raises:
        ServiceError: no results, the baseline has no results, a duplicate
            (activation, seed), confidence outside (0, 1), or results
            without the named metric.
    """
    results, diverged = _trained_and_diverged(results, confidence)
    primary, secondary, select_by = _metrics(results[0], metric, higher_is_better,
                                             secondary, select_by)
    by_act = _by_activation(results, baseline)
    order = [baseline] + [a for a in by_act if a != baseline]
    alpha = round(1.0 - confidence, 12)  # 0.05, not 0.050000000000000044

    failures = {a: sum(r.activation == a for r in diverged) for a in order}
    failed_only = _failed_only(diverged, by_act, baseline, failures[baseline])
    activations = tuple(
        dataclasses.replace(
            _summarize_one(a, by_act[a], primary, secondary, select_by, confidence),
            failed=failures[a])
        for a in order
    )
    comparisons = _compare(by_act, order, primary, secondary, alpha, confidence)
    comparisons = (_decide(comparisons, activations, primary, alpha, margin, power)
                   if sequential is None else _decided_by_looks(comparisons, sequential, margin))
    comparisons = _few_runs(comparisons, by_act, primary, alpha)
    table = {a: {s: getattr(r, primary.name) for s, r in by_act[a].items()
                 if math.isfinite(getattr(r, primary.name))} for a in order}
    fixed = sequential is None  # a sequential sweep makes no fixed-design pair verdicts
    pairs = _all_pairs(table, order, primary, alpha, margin, confidence) if fixed else ()
    declared = _contrasts(table, contrasts, primary, alpha, margin, confidence) if fixed else ()
    use_holm = len(comparisons) > 1 and fixed
    winner = _winner(activations, comparisons, by_act, baseline, primary, secondary,
                     alpha, confidence)
    return Summary(
        baseline=baseline, metric=primary, secondary=secondary, select_by=select_by,
        confidence=confidence, alpha=alpha, activations=activations,
        comparisons=comparisons, winner=winner, holm=use_holm,
        margin=math.nan if margin is None else float(margin), power=power,
        rank_first=resampling.rank_first(table, primary.higher_is_better),
        pairs=pairs, contrasts=declared, failed_only=failed_only,
        sequential=sequential is not None,
    )



def _trained_and_diverged(results, confidence):
    """(members that trained, members that diverged), after `summarize`'s
    checks of its arguments."""
    everything = list(results)
    if not 0.0 < confidence < 1.0:
        raise ServiceError(f"confidence must be in (0, 1), got {confidence!r}.")
    trained = [r for r in everything if getattr(r, "ok", True)]
    if not trained:
        raise ServiceError("No sweep results to summarize: did any member train?")
    return trained, [r for r in everything if not getattr(r, "ok", True)]


def _metrics(first, metric, higher_is_better, secondary, select_by):
    """(compared, secondary, select_by) `Metric`s, defaults filled in, each
    checked against a result (`summarize`'s arguments)."""
    primary = stats.Metric.of(metric, higher_is_better)
    if secondary is None:
        secondary = () if metric == stats.LOSS else (
            stats.Metric.of(stats.LOSS, higher_is_better=False),)
    secondary = tuple(secondary)
    if select_by is None:
        select_by = stats.Metric(f"val_{primary.short}", higher_is_better)
    for m in (primary, *secondary, select_by):
        _check_metric(first, m.name)
    return primary, secondary, select_by


def _failed_only(diverged, by_act, baseline, base_failed):
    """{activation: (failures, Fisher p vs the baseline)} of the activations
    whose every member diverged."""
    base_total = len(by_act[baseline]) + base_failed
    failed_only = {}
    for r in diverged:
        if r.activation not in by_act and r.activation not in failed_only:
            k = sum(d.activation == r.activation for d in diverged)
            failed_only[r.activation] = (k, stats.failure_p(k, k, base_failed, base_total))
    return failed_only


def _decided_by_looks(comparisons, sequential, margin):
    """A sequential sweep's comparisons: its looks' decision only, no
    fixed-design p or verdict beside it (issue 30 §7)."""
    return tuple(dataclasses.replace(
        c, p_holm=math.nan, significant=False,
        verdict=decisions.decided_elsewhere(sequential.get(c.activation), margin))
        for c in comparisons)

def _few_runs(comparisons, by_act, primary, alpha):
    """Each comparison with its bootstrap interval, P(improvement) and ASO."""
    out = []
    for c in comparisons:
        x = [getattr(r, primary.name) for r in by_act[c.activation].values()]
        y = [getattr(r, primary.name) for r in by_act[c.baseline].values()]
        x, y = [v for v in x if math.isfinite(v)], [v for v in y if math.isfinite(v)]
        out.append(dataclasses.replace(
            c,
            bootstrap=resampling.bootstrap_interval(c.paired.diffs, 1.0 - alpha),
            p_improvement=resampling.probability_of_improvement(
                x, y, primary.higher_is_better),
            aso=resampling.aso_epsilon(x, y, 1.0 - alpha, comparisons=len(comparisons),
                                       higher_is_better=primary.higher_is_better),
        ))
    return tuple(out)


def _group_test(table, plus, minus, metric, confidence):
    """mean(plus) - mean(minus), paired over the seeds every one of them has."""
    seeds = sorted(set.intersection(*(set(table[a]) for a in (*plus, *minus))))
    diffs = [float(np.mean([table[a][s] for a in plus]) - np.mean([table[a][s] for a in minus]))
             for s in seeds]
    return stats.paired_test(diffs, metric, seeds, confidence)


def _family(named, primary, alpha, margin):
    decided = decisions.decide([t for _, _, _, t in named], alpha=alpha, margin=margin,
                            higher_is_better=primary.higher_is_better)
    return tuple(PairComparison(name=name, plus=plus, minus=minus, paired=t, verdict=v)
                 for (name, plus, minus, t), v in zip(named, decided))


def _all_pairs(table, order, primary, alpha, margin, confidence):
    """Every pair of activations, in config order, Holm over all of them."""
    named = [(f"{a} vs {b}", (a,), (b,), _group_test(table, (a,), (b,), primary.name,
                                                      confidence))
             for i, b in enumerate(order) for a in order[i + 1:]]
    return _family(named, primary, alpha, margin)


def _contrasts(table, contrasts, primary, alpha, margin, confidence):
    """The declared contrasts whose activations all have results."""
    named = [(c.name, tuple(c.plus), tuple(c.minus),
              _group_test(table, c.plus, c.minus, primary.name, confidence))
             for c in contrasts if all(a in table for a in (*c.plus, *c.minus))]
    return _family(named, primary, alpha, margin)


def _decide(comparisons, activations, primary, alpha, margin, power):
    """Each comparison with its three-way verdict, seed plan and failure test."""
    decided = decisions.decide([c.paired for c in comparisons], alpha=alpha, margin=margin,
                            higher_is_better=primary.higher_is_better)
    by_name = {a.activation: a for a in activations}
    out = []
    for c, verdict in zip(comparisons, decided):
        a, b = by_name[c.activation], by_name[c.baseline]
        out.append(dataclasses.replace(
            c, verdict=verdict,
            plan=planning.plan(c.paired.diffs, margin=margin, alpha=alpha, power=power,
                               family=len(comparisons)),
            failures_p=stats.failure_p(a.failed, a.attempted, b.failed, b.attempted),
        ))
    return tuple(out)


def _by_activation(results, baseline):
    """{activation: {seed: MemberResult}}, each pair once, the baseline present."""
    by_act = {}
    for r in results:
        members = by_act.setdefault(r.activation, {})
        if r.seed in members:
            raise ServiceError(
                f"Two results for activation {r.activation!r}, seed {r.seed}: "
                "each (activation, seed) must be trained once."
            )
        members[r.seed] = r
    if baseline not in by_act:
        raise ServiceError(
            f"The baseline {baseline!r} has no results; activations with "
            f"results: {', '.join(by_act)}. Set `baseline` to one of them."
        )
    return by_act


def _check_metric(result, name):
    if not hasattr(result, name):
        raise ServiceError(
            f"The sweep results have no {name!r}: summarize a metric every "
            f"member reports (e.g. {stats.ACCURACY!r} or {stats.LOSS!r})."
        )


def _better(m, a, b):
    """+1 if value a is better than b by the metric's direction, -1 worse, 0 else."""
    if not (math.isfinite(a) and math.isfinite(b)) or a == b:
        return 0
    return 1 if (a > b) == m.higher_is_better else -1


def _rank_key(m, value):
    """Sort key: better first, NaN last."""
    value = float(value)
    if math.isnan(value):
        return math.inf
    return -value if m.higher_is_better else value


def _summarize_one(name, members, primary, secondary, select_by, confidence):
    seeds = tuple(sorted(members))
    rs = [members[s] for s in seeds]
    reached = [r.epochs_to_threshold for r in rs if r.epochs_to_threshold is not None]
    best = min(rs, key=lambda r: (_rank_key(select_by, getattr(r, select_by.name)),
                                  _rank_key(_VAL_LOSS, _val_loss(r)), r.seed))
    return ActivationSummary(
        activation=name,
        n=len(rs),
        seeds=seeds,
        estimate=stats.estimate([getattr(r, primary.name) for r in rs], confidence,
                          bounds=primary.bounds),
        secondary={m.name: stats.estimate([getattr(r, m.name) for r in rs], confidence,
                                    bounds=m.bounds) for m in secondary},
        epochs_to_threshold_mean=float(np.mean(reached)) if reached else math.nan,
        epochs_to_threshold_median=float(np.median(reached)) if reached else math.nan,
        reached=len(reached),
        selection_mean=float(np.mean([getattr(r, select_by.name) for r in rs])),
        best_seed=best.seed,
        best_selection=float(getattr(best, select_by.name)),
        best_val_loss=float(_val_loss(best)),
        train_seconds_mean=float(np.mean([r.train_seconds for r in rs])),
    )


_VAL_LOSS = stats.Metric("val_loss", higher_is_better=False)


def _val_loss(result):
    return getattr(result, "val_loss", math.nan)


def _compare(by_act, order, primary, secondary, alpha, confidence):
    """Every activation vs the baseline (order[0]), Holm over the family."""
    baseline = order[0]
    raw = [
        (name, _paired(by_act[name], by_act[baseline], primary.name, confidence),
         {m.name: _paired(by_act[name], by_act[baseline], m.name, confidence)
          for m in secondary})
        for name in order[1:]
    ]
    p_values = [test.p_value for _, test, _ in raw]
    adjusted = multiplicity.holm(p_values) if len(raw) > 1 else p_values
    return tuple(
        Comparison(
            activation=name, baseline=baseline, paired=test, secondary=others,
            p_holm=p_adj, significant=bool(p_adj < alpha),  # NaN -> False
            sign=_better(primary, test.mean_diff, 0.0),
        )
        for (name, test, others), p_adj in zip(raw, adjusted)
    )


def _paired(members, reference, metric, confidence):
    seeds = sorted(set(members) & set(reference))
    diffs, kept = [], []
    for s in seeds:
        d = float(getattr(members[s], metric)) - float(getattr(reference[s], metric))
        if math.isfinite(d):
            diffs.append(d)
            kept.append(s)
    test = stats.paired_test(diffs, metric, kept, confidence)
    return dataclasses.replace(
        test, unpaired=len(set(members) ^ set(reference)), non_finite=len(seeds) - len(kept)
    )


def _winner(activations, comparisons, by_act, baseline, primary, secondary, alpha,
            confidence):
    ranked = sorted(
        activations,
        key=lambda a: (_rank_key(primary, a.estimate.mean),
                       *(_rank_key(m, a.secondary[m.name].mean) for m in secondary),
                       a.activation != baseline, a.activation),
    )
    top = ranked[0]
    if len(ranked) == 1:
        return Winner(activation=top.activation, mean=top.estimate.mean, runner_up=None,
                      lead=None, lead_p=math.nan, significant_over_runner_up=False,
                      significant_over_baseline=None)
    second = ranked[1]
    lead = _paired(by_act[top.activation], by_act[second.activation], primary.name,
                   confidence)
    comp_by_name = {c.activation: c for c in comparisons}
    if baseline in (top.activation, second.activation):
        other = second.activation if top.activation == baseline else top.activation
        lead_p = comp_by_name[other].p_holm
    else:
        lead_p = lead.p_value  # unadjusted: the runner-up was chosen after looking
    return Winner(
        activation=top.activation,
        mean=top.estimate.mean,
        runner_up=second.activation,
        lead=lead,
        lead_p=lead_p,
        significant_over_runner_up=bool(lead_p < alpha),
        significant_over_baseline=(None if top.activation == baseline
                                   else comp_by_name[top.activation].significant),
    )
