"""One model across tasks: a linear mixed model of the per-seed metric, and
declared contrasts between activations with simultaneous intervals
(issue 32 §3). Numbers only (`kg_service.analysis.words.study_wording`
phrases them).

The model, fitted by REML with statsmodels' MixedLM:

    y[a, g, s] = beta[a] + u[g] + w[a, g] + v[g, s] + e[a, g, s]

beta[a]: each activation's fixed mean (no intercept: cell means);
u[g] ~ N(0, s2_task): the task's (a study's sweep: a task, or one FFN
family) random level; w[a, g] ~ N(0, s2_act_task): how far the task moves
an activation from its mean, so that a contrast's uncertainty comes from
the spread of its effect over tasks and not from the seeds alone (seeds
of one task are not independent tasks); v[g, s] ~ N(0, s2_seed): seed s
within task g, shared by every activation trained at that seed (the
paired design: the same split, order and initial draw), a variance
component nested in the task; e: the rest. In statsmodels' terms: groups
= task, re_formula "1", vc_formula {"seed": "0 + C(seed)", "activation":
"0 + C(activation)"}. The metric is centred and scaled by its sd before
the fit (MixedLM's optimizer on variances of 1e-5 stops at the boundary)
and the estimates scaled back: REML is equivariant, so nothing changes
but the numerics.

A contrast is the mean of its `plus` activations' beta minus the mean of
its `minus` ones (a config's `analysis.contrasts`, or `gated_vs_plain`,
read from the activation table `keras_gelu_names.TABLE`, or `pair`). Its
estimate L beta has the Wald covariance L V L'. The intervals hold for all
contrasts at once: max-t (Hothorn, Bretz & Westfall 2008, the multcomp
method), the critical value c with P(max_i |T_i| <= c) = 1 - alpha for T
multivariate t with the contrasts' correlation and df = (A - 1)(G - 1),
the df of the activation-by-task stratum against which a balanced
split-plot tests activations (A activations, G tasks); computed from
200,000 draws at a fixed seed (its Monte Carlo error on c is about 0.005).
With few tasks the df is small and the intervals wide: that is the
information a handful of tasks carries about an effect across tasks.

Example:

>>> c = gated_vs_plain(["relu", "gelu", "geglu", "swiglu"])
>>> c.name, c.plus, c.minus
('gated-vs-plain', ('geglu', 'swiglu'), ('relu', 'gelu'))
"""

import dataclasses
import math
import warnings

import numpy as np

import keras_gelu_names
from kg_service.errors import ServiceError

_DRAWS = 200_000  # of the multivariate t, for the max-t critical value
_SEED = 0


@dataclasses.dataclass(frozen=True)
class Contrast:
    """Mean of `plus` minus mean of `minus` (as a config's ContrastConfig)."""

    name: str
    plus: tuple
    minus: tuple


def pair(first, second):
    """`first` minus `second`: "gelu-vs-relu"."""
    return Contrast(name=f"{first}-vs-{second}", plus=(first,), minus=(second,))


def gated_vs_plain(activations):
    """Gated units (kind "gated" in `keras_gelu_names.TABLE`) minus plain
    elementwise ones, among `activations`; None unless both are there."""
    kinds = {a: keras_gelu_names.TABLE.get(keras_gelu_names.lookup(a) or "", ("", ""))[0]
             for a in activations}
    gated = tuple(a for a in activations if kinds[a] == "gated")
    plain = tuple(a for a in activations if kinds[a] == "elementwise")
    if not gated or not plain:
        return None
    return Contrast(name="gated-vs-plain", plus=gated, minus=plain)


@dataclasses.dataclass(frozen=True)
class ContrastEstimate:
    """One contrast: estimate, standard error and simultaneous interval, in
    the metric's units; `p_adjusted` is the max-t adjusted p."""

    name: str
    estimate: float
    se: float
    low: float
    high: float
    p_adjusted: float


@dataclasses.dataclass(frozen=True)
class MixedFit:
    """The model's numbers: fixed means, contrasts, variance components."""

    metric: str
    fixed: dict  # activation -> beta (the metric's units)
    contrasts: tuple  # ContrastEstimate, in the order given
    confidence: float
    critical: float  # the max-t critical value
    df: int
    variances: dict  # "task", "activation within task", "seed within task", "residual"
    tasks: int
    observations: int
    converged: bool
    warnings: tuple  # statsmodels' warnings of the fit, as text


def long_rows(values_by_task):
    """{task: {activation: {seed: value}}} as columns (value, activation,
    task, seed), the frame the model reads; non-finite values left out."""
    rows = [(float(v), a, str(task), str(seed))
            for task, by_activation in values_by_task.items()
            for a, by_seed in by_activation.items()
            for seed, v in by_seed.items() if v is not None and math.isfinite(v)]
    value, activation, task, seed = (list(c) for c in zip(*rows)) if rows else ([],) * 4
    return {"value": value, "activation": activation, "task": task, "seed": seed}


def _check(columns, contrasts):
    tasks, activations = set(columns["task"]), sorted(set(columns["activation"]))
    if len(tasks) < 2:
        raise ServiceError(
            f"a mixed model across tasks needs at least 2 tasks (sweeps); got {len(tasks)}")
    for c in contrasts:
        missing = [a for a in (*c.plus, *c.minus) if a not in activations]
        if missing or not c.plus or not c.minus:
            raise ServiceError(
                f"contrast {c.name!r} names {', '.join(missing) or 'no activation on a side'}, "
                f"which the study has no results of; it has {', '.join(activations)}")
    return activations


def model_formula():
    """(formula, re_formula, vc_formula) of the model, as statsmodels reads them."""
    return ("value ~ 0 + C(activation)", "1",
            {"seed": "0 + C(seed)", "activation": "0 + C(activation)"})


def _fit(columns):
    import pandas as pd  # statsmodels' input: only when a study is fitted
    import statsmodels.formula.api as smf  # 1 s to import: only when a study is fitted

    frame = pd.DataFrame(columns)
    centre, scale = frame["value"].mean(), frame["value"].std(ddof=1) or 1.0
    frame["value"] = (frame["value"] - centre) / scale
    formula, re_formula, vc = model_formula()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = smf.mixedlm(formula, frame, groups="task", re_formula=re_formula,
                             vc_formula=vc).fit(reml=True)
    return result, centre, scale, tuple(dict.fromkeys(str(w.message) for w in caught))


def max_t(correlation, df, seed=_SEED, draws=_DRAWS):
    """Draws of max_i |T_i|, T multivariate t (`df`) with this correlation
    (a singular one is fine), at a fixed seed: the same draws every time."""
    r = np.atleast_2d(np.asarray(correlation, dtype=float))
    rng = np.random.default_rng(seed)
    w, v = np.linalg.eigh(r)
    z = rng.standard_normal((draws, r.shape[0])) @ (v * np.sqrt(np.clip(w, 0, None))).T
    return np.max(np.abs(z / np.sqrt(rng.chisquare(df, draws) / df)[:, None]), axis=1)


def critical_value(draws, confidence):
    """c with P(max |T_i| <= c) = confidence, from `max_t`'s draws."""
    return float(np.quantile(draws, confidence))


def fit(values_by_task, contrasts, metric="", confidence=0.95, draws=_DRAWS):
    """Fits the model and the declared contrasts.

    Args:
        values_by_task: {task: {activation: {seed: value}}} of one metric.
        contrasts: objects with `name`, `plus`, `minus` (`Contrast`, a
            config's ContrastConfig), at least one.
        metric: its name, carried for the words.
        confidence: of the simultaneous intervals.
        draws: of the max-t law (`max_t`).

    Returns:
        A `MixedFit`.

    Raises:
        ServiceError: fewer than 2 tasks, no contrast, or a contrast naming
            an activation without results.
    """
    columns = long_rows(values_by_task)
    if not contrasts:
        raise ServiceError("a mixed model needs at least one declared contrast")
    activations = _check(columns, contrasts)
    result, centre, scale, caught = _fit(columns)
    names = [f"C(activation)[{a}]" for a in activations]
    beta = result.fe_params[names].to_numpy() * scale
    cov = result.cov_params().loc[names, names].to_numpy() * scale**2
    L = np.array([[(a in c.plus) / len(c.plus) - (a in c.minus) / len(c.minus)
                   for a in activations] for c in contrasts])
    est, var = L @ beta, L @ cov @ L.T
    se = np.sqrt(np.diag(var))
    corr = var / np.outer(se, se)
    df = max((len(activations) - 1) * (len(set(columns["task"])) - 1), 1)
    law = max_t(corr, df, draws=draws)
    c = critical_value(law, confidence)
    p = [float(np.mean(law >= abs(t))) for t in est / se]
    vcomp = dict(zip(result.model.exog_vc.names, np.asarray(result.vcomp) * scale**2))
    return MixedFit(
        metric=metric, fixed=dict(zip(activations, (float(b + centre) for b in beta))),
        contrasts=tuple(ContrastEstimate(k.name, float(e), float(s), float(e - c * s),
                                         float(e + c * s), pv)
                        for k, e, s, pv in zip(contrasts, est, se, p)),
        confidence=confidence, critical=c, df=df,
        variances={"task": float(result.cov_re.iloc[0, 0]) * scale**2,
                   "activation within task": float(vcomp.get("activation", math.nan)),
                   "seed within task": float(vcomp.get("seed", math.nan)),
                   "residual": float(result.scale) * scale**2},
        tasks=len(set(columns["task"])), observations=len(columns["value"]),
        converged=bool(result.converged), warnings=caught,
    )
