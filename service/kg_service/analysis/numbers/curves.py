"""The training-loss curves compared, not only their end points (issue 19, item 5).

The GELU paper's claim is about curves (its Figures 2 and 3: GELU's
training loss lower throughout training), so two numbers per member
summarize its curve:

- the area under the training-loss curve per epoch, i.e. the mean of the
  member's end-of-epoch training losses (`loss_auc`): lower means lower
  over the whole run, not only at its end;
- the epochs to reach a training loss (`epochs_to_loss`): the first epoch
  whose loss is at or below a threshold, `training.loss_threshold` when
  the config names one, else the largest final training loss of the
  sweep's members (`default_threshold`), which every member reaches by
  its last epoch, so no member is censored.

Each is compared with the baseline paired over seeds, with the same test
and three-way verdicts as the end point (`stats.paired_test`,
`decisions.decide`, Holm over the activations; no equivalence margin: a
margin in loss-epochs has no agreed unit). Numbers only;
`kg_service.analysis.reports.variance_report` words them.
"""

import dataclasses
import math

import numpy as np

from kg_service.analysis.numbers import decisions
from kg_service.analysis.numbers import stats

MEASURES = ("loss_auc", "epochs_to_loss")


def loss_auc(losses):
    """Area under the training-loss curve per epoch: the mean epoch loss.

    The trapezoid rule over epochs 1..E divided by E - 1 would weigh the
    first and last epochs half; the paper plots end-of-epoch losses, so
    each epoch counts once.

    >>> loss_auc([0.9, 0.5, 0.4])
    0.6
    """
    values = np.asarray(losses, dtype=float)
    return float(values.mean()) if values.size else math.nan


def epochs_to_loss(losses, threshold):
    """The first epoch (1-based) whose training loss is <= threshold, else None.

    >>> epochs_to_loss([0.9, 0.5, 0.4], 0.5), epochs_to_loss([0.9], 0.5)
    (2, None)
    """
    for epoch, value in enumerate(losses, start=1):
        if value <= threshold:
            return epoch
    return None


def default_threshold(results):
    """The largest final training loss over the members: every member's
    curve reaches it by its last epoch (NaN without finite losses)."""
    finals = [r.history["loss"][-1] for r in results
              if getattr(r, "ok", True) and r.history.get("loss")]
    finals = [v for v in finals if math.isfinite(v)]
    return float(max(finals)) if finals else math.nan


@dataclasses.dataclass(frozen=True)
class CurveComparison:
    """One measure of one activation against the baseline, paired by seed."""

    activation: str
    measure: str  # one of MEASURES
    mean: float  # the activation's mean over its seeds
    reference_mean: float  # the baseline's
    test: stats.PairedTest  # activation - baseline
    verdict: decisions.Verdict  # lower is better
    censored: int = 0  # members (either side) that never reached the threshold


@dataclasses.dataclass(frozen=True)
class CurveSummary:
    threshold: float
    threshold_from: str  # "config" | "data"
    epochs: int  # the longest curve: a member that never reached the threshold counts epochs + 1
    comparisons: tuple  # CurveComparison, measure-major, activations in order


def member_measures(result, threshold, epochs):
    """`{measure: value}` of one member; never reaching the threshold
    counts as `epochs + 1`, one past the end (a censored value, flagged)."""
    losses = result.history["loss"]
    reached = epochs_to_loss(losses, threshold)
    return {"loss_auc": loss_auc(losses),
            "epochs_to_loss": float(epochs + 1 if reached is None else reached),
            "censored": reached is None}


def compare_curves(results, baseline, *, threshold=None, alpha=0.05, confidence=0.95):
    """The curve measures of every activation against `baseline`.

    Args:
        results: `MemberResult`s with a per-epoch `history["loss"]`;
            diverged members are left out.
        baseline: the reference activation.
        threshold: the training loss to reach; None: `default_threshold`.
        alpha, confidence: as the end point's verdicts.

    Returns:
        A `CurveSummary`, or None when no member has a training-loss curve.
    """
    members = [r for r in results if getattr(r, "ok", True) and r.history.get("loss")]
    if not members:
        return None
    threshold_from = "config" if threshold is not None else "data"
    if threshold is None:
        threshold = default_threshold(members)
    epochs = max(len(r.history["loss"]) for r in members)
    by_act = {}
    for r in members:
        by_act.setdefault(r.activation, {})[r.seed] = member_measures(r, threshold, epochs)
    if baseline not in by_act:
        return None
    reference = by_act[baseline]
    out = []
    for measure in MEASURES:
        tests, rows = [], []
        for activation, seeds in by_act.items():
            if activation == baseline:
                continue
            common = sorted(set(seeds) & set(reference))
            diffs = [seeds[s][measure] - reference[s][measure] for s in common]
            tests.append(stats.paired_test(diffs, metric=measure, seeds=common,
                                           confidence=confidence))
            censored = (sum(seeds[s]["censored"] for s in common)
                        + sum(reference[s]["censored"] for s in common))
            rows.append((activation, float(np.mean([v[measure] for v in seeds.values()])),
                         censored))
        decided = decisions.decide(tests, alpha=alpha, margin=None, higher_is_better=False)
        reference_mean = float(np.mean([v[measure] for v in reference.values()]))
        out += [
            CurveComparison(activation=a, measure=measure, mean=mean,
                            reference_mean=reference_mean, test=t, verdict=v,
                            censored=censored)
            for (a, mean, censored), t, v in zip(rows, tests, decided)
        ]
    return CurveSummary(threshold=float(threshold), threshold_from=threshold_from,
                        epochs=epochs, comparisons=tuple(out))
