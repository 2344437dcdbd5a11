"""A sweep's summary, the numbers `comparisons.summarize` returns: each
activation's statistics (`ActivationSummary`), each comparison with the
baseline (`Comparison`) or declared pair (`PairComparison`), the winner
(`Winner`) and the whole (`Summary`). Types only: no statistic is
computed here."""

import dataclasses
import math
from typing import Optional

from kg_service.analysis.numbers import decisions
from kg_service.analysis.numbers import planning
from kg_service.analysis.numbers import stats


@dataclasses.dataclass(frozen=True)
class ActivationSummary:
    """One activation over its seeds."""

    activation: str
    n: int  # seeds
    seeds: tuple
    estimate: stats.Estimate  # the compared metric
    secondary: dict  # metric name -> Estimate, the metrics reported beside it
    # Over the seeds that reached the threshold; NaN if none did.
    epochs_to_threshold_mean: float
    epochs_to_threshold_median: float
    reached: int  # seeds that reached the threshold
    selection_mean: float  # final `select_by` value, mean over seeds
    # Best final `select_by` value; ties: lower val loss, then lower seed.
    best_seed: int
    best_selection: float
    best_val_loss: float
    train_seconds_mean: float
    failed: int = 0  # members that diverged: counted here, not in the estimate

    @property
    def attempted(self):
        """Members trained, the diverged ones included."""
        return self.n + self.failed



@dataclasses.dataclass(frozen=True)
class Comparison:
    """One activation against the baseline, paired by seed."""

    activation: str
    baseline: str
    paired: stats.PairedTest  # the compared metric
    secondary: dict  # metric name -> PairedTest (unadjusted)
    # Holm-adjusted p-value over all comparisons with the baseline (equal
    # to paired.p_value when there is one comparison).
    p_holm: float
    significant: bool  # p_holm < alpha
    # +1: the activation's mean is better than the baseline's by the
    # metric's direction; -1: worse; 0: equal or untested (NaN).
    sign: int
    verdict: Optional[decisions.Verdict] = None  # better/worse/equivalent/inconclusive
    plan: Optional[planning.SeedPlan] = None  # the seeds that would decide it
    failures_p: float = math.nan  # Fisher exact: failure rate vs the baseline's
    # Few-run statistics (`resampling`): the percentile bootstrap interval of
    # the mean paired difference, P(a run beats a baseline run), and almost
    # stochastic order's epsilon_min (< 0.5: better as a distribution).
    bootstrap: tuple = (math.nan, math.nan)
    p_improvement: float = math.nan
    aso: float = math.nan


@dataclasses.dataclass(frozen=True)
class PairComparison:
    """Two activations (or a declared contrast) compared, paired by seed."""

    name: str  # "gelu vs relu", or the contrast's name
    plus: tuple  # activations averaged on the left
    minus: tuple  # ... and on the right
    paired: stats.PairedTest  # mean(plus) - mean(minus), seed by seed
    verdict: decisions.Verdict  # Holm over its family (all pairs, or the contrasts)


@dataclasses.dataclass(frozen=True)
class Winner:
    """The activation with the best mean of the compared metric, and its lead."""

    activation: str
    mean: float
    runner_up: Optional[str]
    lead: Optional[stats.PairedTest]  # winner - runner-up, the compared metric
    # The p-value the lead was judged on: Holm-adjusted when the pair is
    # (winner, baseline), otherwise the unadjusted paired p-value.
    lead_p: float
    significant_over_runner_up: bool
    # None when the winner is the baseline.
    significant_over_baseline: Optional[bool]


@dataclasses.dataclass(frozen=True)
class Summary:
    """Everything `summarize` found; activations listed baseline first."""

    baseline: str
    metric: stats.Metric  # the compared metric
    secondary: tuple  # Metric, reported beside it
    select_by: stats.Metric  # the validation value that picks each best seed
    confidence: float
    alpha: float
    activations: tuple  # ActivationSummary, baseline first
    comparisons: tuple  # Comparison, one per non-baseline activation
    winner: Winner
    holm: bool  # Holm adjustment applied (more than one comparison)
    margin: float = math.nan  # equivalence margin of the compared metric; NaN: none
    power: float = 0.8  # what the seed plans aim for
    # activation -> P(it has the best mean) over bootstrap resamples of seeds.
    rank_first: dict = dataclasses.field(default_factory=dict)
    pairs: tuple = ()  # PairComparison: every pair of activations, Holm over all
    # Activations every member of which diverged: activation -> (members,
    # Fisher exact p of that failure rate against the baseline's).
    failed_only: dict = dataclasses.field(default_factory=dict)
    contrasts: tuple = ()  # PairComparison: the declared contrasts, Holm over them
    sequential: bool = False  # verdicts = the sequential decisions (issue 30 §7)

    def activation(self, name):
        for a in self.activations:
            if a.activation == name:
                return a
        raise KeyError(name)

    def comparison(self, name):
        for c in self.comparisons:
            if c.activation == name:
                return c
        return None


# --- The summary. ------------------------------------------------------------
