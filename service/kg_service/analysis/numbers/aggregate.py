"""Activations aggregated across tasks, rliable style (issue 18 §7).

Numbers only. Agarwal et al. 2021 ("Deep RL at the edge of the
statistical precipice", the `rliable` library) summarise an algorithm that
ran on several tasks by robust, interval-carrying statistics instead of a
mean of means; the same applies to an activation that ran in several
sweeps of a study. Here a *task* is a sweep and a *run* is a seed.

Normalization (scores of different tasks are in different units): per
task, min-max over every run of every activation in it, oriented so that
1 is the task's best run and 0 its worst (`normalize`). A score is thus
"how far from the worst to the best run seen on this task"; it depends on
which activations the study holds, as any relative score does. A task
whose runs all scored the same gives every run 0.5.

- `iqm`: the interquartile mean of all normalized runs of all tasks
  pooled (25 % trimmed from each end; rliable's `aggregate_iqm`, as
  `scipy.stats.trim_mean(x, 0.25)`).
- `probability_of_improvement`: P(X > Y) + P(X = Y)/2 within each task
  (the Mann-Whitney U statistic over n_x n_y), averaged over tasks
  (rliable's `probability_of_improvement`).
- `performance_profile`: at each threshold tau, the share of runs scoring
  above tau, per task, averaged over tasks (rliable's score
  distribution; equal to it when every task has as many runs).
- `stratified_bootstrap`: percentile intervals from resampling the runs
  with replacement *within each task* (tasks are the strata; rliable's
  `StratifiedBootstrap` without task resampling), so a task with few
  seeds cannot be dropped or doubled by chance.

Example:

>>> tasks = [[0.1, 0.5, 0.9, 1.0], [0.0, 0.4, 0.6, 0.8]]
>>> round(iqm(tasks), 4)
0.575
>>> probability_of_improvement([[1.0, 2.0]], [[1.5, 1.5]])
0.5
"""

import dataclasses

import numpy as np
from scipy import stats as _st

from kg_service.analysis.numbers import resampling

DEFAULT_REPS = 2000  # rliable's default number of bootstrap replications
TAUS = np.linspace(0.0, 1.0, 101)  # performance-profile thresholds


# --- The statistics, on normalized scores: one list of runs per task. --------


def normalize(values_by_task, higher_is_better=True):
    """Min-max per task over every run of every activation, oriented.

    Args:
        values_by_task: `{task: {activation: [score, ...]}}` in the
            metric's own units.
        higher_is_better: the metric's direction; for a loss the lowest run
            maps to 1.

    Returns:
        `{task: {activation: np.ndarray}}` in [0, 1], 1 = the task's best run.

    >>> normalize({"t": {"a": [2.0, 4.0], "b": [3.0]}}, higher_is_better=False)["t"]["a"]
    array([1., 0.])
    """
    out = {}
    for task, by_act in values_by_task.items():
        pooled = np.concatenate([np.asarray(v, dtype=float) for v in by_act.values()])
        pooled = pooled[np.isfinite(pooled)]
        low, high = (float(pooled.min()), float(pooled.max())) if pooled.size else (0, 0)
        out[task] = {}
        for activation, v in by_act.items():
            v = np.asarray(v, dtype=float)
            v = v[np.isfinite(v)]
            if high == low:
                scaled = np.full(v.shape, 0.5)
            else:
                scaled = (v - low) / (high - low)
                scaled = scaled if higher_is_better else 1.0 - scaled
            out[task][activation] = scaled
    return out


def _pooled(tasks):
    return np.concatenate([np.asarray(t, dtype=float) for t in tasks])


def iqm(tasks):
    """The interquartile mean of every run of every task, pooled."""
    return float(_st.trim_mean(_pooled(tasks), 0.25))


def _improvement(x, y):
    """P(X > Y) + P(X = Y)/2 over all pairs, for a batch of bootstrap
    resamples at once: x (reps, n), y (reps, m)."""
    gt = (x[..., :, None] > y[..., None, :]).mean(axis=(-2, -1))
    eq = (x[..., :, None] == y[..., None, :]).mean(axis=(-2, -1))
    return gt + 0.5 * eq


def probability_of_improvement(tasks_x, tasks_y):
    """P(X > Y) within each task (ties count half; a sweep's
    `resampling.probability_of_improvement`), averaged over tasks.

    `tasks_x[i]` and `tasks_y[i]` are the runs of X and Y on task i.
    """
    return float(np.mean([resampling.probability_of_improvement(x, y)
                          for x, y in zip(tasks_x, tasks_y)]))


def performance_profile(tasks, taus=TAUS):
    """Share of runs scoring above each tau, per task, averaged over tasks."""
    taus = np.asarray(taus, dtype=float)
    return np.mean(
        [(np.asarray(t, dtype=float)[:, None] > taus[None, :]).mean(axis=0) for t in tasks],
        axis=0,
    )


# --- Stratified bootstrap: runs resampled within each task. ------------------


def _resampled(task, reps, rng):
    """(reps, n) resamples of one task's n runs, with replacement."""
    task = np.asarray(task, dtype=float)
    return task[rng.integers(0, task.size, size=(reps, task.size))]


def _interval(samples, confidence):
    tail = 50.0 * (1.0 - confidence)
    low, high = np.percentile(samples, [tail, 100.0 - tail], axis=0)
    return low, high


def stratified_bootstrap(statistic, task_groups, reps=DEFAULT_REPS, confidence=0.95,
                         seed=0):
    """Percentile interval of `statistic` under runs resampled per task.

    Args:
        statistic: "iqm", "improvement" or "profile".
        task_groups: the statistic's arguments: `(tasks,)` for "iqm" and
            "profile", `(tasks_x, tasks_y)` for "improvement", each a list
            of one array of runs per task; every array is resampled on its
            own.
        reps: bootstrap replications.
        confidence: interval coverage.
        seed: the generator's seed; the same seed gives the same interval.

    Returns:
        `(low, high)`: floats, or arrays over `TAUS` for "profile".
    """
    rng = np.random.default_rng(seed)
    groups = [[_resampled(t, reps, rng) for t in tasks] for tasks in task_groups]
    if statistic == "iqm":
        samples = _st.trim_mean(np.concatenate(groups[0], axis=1), 0.25, axis=1)
    elif statistic == "improvement":
        samples = np.mean([_improvement(x, y) for x, y in zip(*groups)], axis=0)
    elif statistic == "profile":
        samples = np.mean(
            [(t[:, :, None] > TAUS[None, None, :]).mean(axis=1) for t in groups[0]], axis=0
        )
    else:
        raise ValueError(f"unknown statistic {statistic!r}: iqm, improvement or profile")
    return _interval(samples, confidence)


# --- A study's activations aggregated. ---------------------------------------


@dataclasses.dataclass(frozen=True)
class Aggregated:
    """One activation over the tasks it ran in."""

    activation: str
    tasks: tuple  # task names
    runs: int
    iqm: float
    ci_low: float
    ci_high: float
    profile: np.ndarray  # over TAUS
    profile_low: np.ndarray
    profile_high: np.ndarray


@dataclasses.dataclass(frozen=True)
class Improvement:
    """P(X > Y) over the tasks both ran, with its interval."""

    x: str
    y: str
    tasks: tuple
    probability: float
    ci_low: float
    ci_high: float


@dataclasses.dataclass(frozen=True)
class Aggregate:
    normalization: str  # "min-max per task"
    confidence: float
    reps: int
    activations: tuple  # Aggregated, best IQM first
    improvements: tuple  # Improvement, each pair once (x before y in `activations`)
    taus: np.ndarray = dataclasses.field(default_factory=TAUS.copy)  # profile thresholds


def aggregate(normalized, confidence=0.95, reps=DEFAULT_REPS, seed=0, min_tasks=2):
    """Every activation that ran in at least `min_tasks` tasks, aggregated.

    Args:
        normalized: `normalize`'s `{task: {activation: scores}}`.

    Returns:
        An `Aggregate`; no activations when none ran in `min_tasks` tasks.
    """
    by_act = {}
    for task, scores in normalized.items():
        for activation, runs in scores.items():
            if np.size(runs):
                by_act.setdefault(activation, {})[task] = runs
    kept = {a: t for a, t in by_act.items() if len(t) >= min_tasks}
    rows = []
    for activation, tasks in kept.items():
        runs = list(tasks.values())
        low, high = stratified_bootstrap("iqm", (runs,), reps, confidence, seed)
        p_low, p_high = stratified_bootstrap("profile", (runs,), reps, confidence, seed)
        rows.append(Aggregated(
            activation=activation, tasks=tuple(tasks), runs=sum(len(r) for r in runs),
            iqm=iqm(runs), ci_low=float(low), ci_high=float(high),
            profile=performance_profile(runs), profile_low=p_low, profile_high=p_high,
        ))
    rows.sort(key=lambda r: (-r.iqm, r.activation))
    improvements = []
    for i, x in enumerate(rows):
        for y in rows[i + 1:]:
            shared = tuple(t for t in x.tasks if t in y.tasks)
            if not shared:
                continue
            xs = [kept[x.activation][t] for t in shared]
            ys = [kept[y.activation][t] for t in shared]
            low, high = stratified_bootstrap("improvement", (xs, ys), reps, confidence, seed)
            improvements.append(Improvement(
                x=x.activation, y=y.activation, tasks=shared,
                probability=probability_of_improvement(xs, ys),
                ci_low=float(low), ci_high=float(high),
            ))
    return Aggregate(normalization="min-max per task", confidence=confidence, reps=reps,
                     activations=tuple(rows), improvements=tuple(improvements))

