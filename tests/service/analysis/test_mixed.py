"""Issue 32 §3: one model across tasks (kg_service.analysis.numbers.mixed)
against statsmodels' MixedLM called directly, and on simulated studies
with known effects: the contrasts' bias and their simultaneous coverage.

Independent references: statsmodels MixedLM (the same model, fitted on the
unscaled frame), and the known effects of the simulated studies.
"""

import math

import numpy as np
import pandas as pd
import pytest
import statsmodels.formula.api as smf

from kg_service.analysis.numbers import mixed
from kg_service.errors import ServiceError

ACTIVATIONS = ("relu", "gelu", "swiglu")
EFFECTS = {"relu": 0.0, "gelu": 0.01, "swiglu": 0.02}
CONTRASTS = (mixed.gated_vs_plain(ACTIVATIONS), mixed.pair("gelu", "relu"))
TRUTH = np.array([0.02 - 0.005, 0.01])  # gated minus mean of plain; gelu - relu


def _study(rng, tasks=4, seeds=4, task_sd=0.05, act_task_sd=0.004, seed_sd=0.01, noise=0.005,
           dropped=0.0):
    """{task: {activation: {seed: value}}} of the model with known effects;
    each member left out with chance `dropped` (a diverged run)."""
    out = {}
    for g in range(tasks):
        level = 0.8 + rng.normal(0, task_sd)
        moved = {a: rng.normal(0, act_task_sd) for a in ACTIVATIONS}
        shared = rng.normal(0, seed_sd, seeds)  # one seed, every activation
        out[f"task{g}"] = {
            a: {s: level + EFFECTS[a] + moved[a] + shared[s] + rng.normal(0, noise)
                for s in range(seeds) if rng.random() >= dropped} for a in ACTIVATIONS}
    return out


def test_gating_is_read_from_the_activation_table():
    c = mixed.gated_vs_plain(["relu", "bilinear", "gelu", "glu", "swiglu"])
    assert c.plus == ("bilinear", "glu", "swiglu") and c.minus == ("relu", "gelu")
    assert mixed.gated_vs_plain(["relu", "gelu"]) is None


def test_the_fixed_effects_and_contrasts_are_statsmodels_mixedlm_on_the_same_frame():
    values = _study(np.random.default_rng(0))
    fitted = mixed.fit(values, CONTRASTS, draws=20_000)
    formula, re_formula, vc = mixed.model_formula()
    frame = pd.DataFrame(mixed.long_rows(values))
    direct = smf.mixedlm(formula, frame, groups="task", re_formula=re_formula,
                         vc_formula=vc).fit(reml=True)
    names = [f"C(activation)[{a}]" for a in sorted(ACTIVATIONS)]
    beta = direct.fe_params[names].to_numpy()
    assert [fitted.fixed[a] for a in sorted(ACTIVATIONS)] == pytest.approx(beta, abs=1e-6)
    # gelu - relu from the direct fit's estimates and covariance.
    L = np.array([1.0 if a == "gelu" else -1.0 if a == "relu" else 0.0 for a in sorted(ACTIVATIONS)])
    cov = direct.cov_params().loc[names, names].to_numpy()
    gelu_relu = fitted.contrasts[1]
    assert gelu_relu.estimate == pytest.approx(L @ beta, abs=1e-6)
    assert gelu_relu.se == pytest.approx(math.sqrt(L @ cov @ L), rel=1e-3)
    assert fitted.df == (3 - 1) * (4 - 1) and fitted.converged


def test_simulated_studies_recover_the_effects_with_simultaneous_coverage():
    """20 simulated studies (4 tasks x 4 seeds x 3 activations, a tenth of
    the members diverged, so that the fit is not the cell means): each
    contrast's mean error within 3 Monte Carlo errors of 0, and both
    contrasts inside their intervals at once in >= 95 % - 3 MC errors
    (0.95 - 3 x 0.049) of them."""
    rng, reps = np.random.default_rng(1), 20
    errors, covered = [], []
    for _ in range(reps):
        fitted = mixed.fit(_study(rng, dropped=0.1), CONTRASTS, draws=20_000)
        est = np.array([c.estimate for c in fitted.contrasts])
        low = np.array([c.low for c in fitted.contrasts])
        high = np.array([c.high for c in fitted.contrasts])
        errors.append(est - TRUTH)
        covered.append(bool(np.all((low <= TRUTH) & (TRUTH <= high))))
    errors = np.array(errors)
    mc = errors.std(axis=0, ddof=1) / math.sqrt(reps)
    assert np.all(np.abs(errors.mean(axis=0)) <= 3 * mc), (errors.mean(axis=0), mc)
    assert np.mean(covered) >= 0.95 - 3 * math.sqrt(0.95 * 0.05 / reps)


def test_max_t_is_wider_than_one_interval_and_narrower_than_bonferroni():
    from scipy import stats as st

    law = mixed.max_t(np.array([[1.0, 0.5], [0.5, 1.0]]), 9)
    c = mixed.critical_value(law, 0.95)
    assert st.t.isf(0.025, 9) < c < st.t.isf(0.0125, 9)
    single = mixed.max_t(np.eye(1), 9)  # one contrast: the t quantile
    assert mixed.critical_value(single, 0.95) == pytest.approx(st.t.isf(0.025, 9), abs=0.02)


def test_a_study_of_one_task_or_an_unknown_contrast_is_refused():
    values = _study(np.random.default_rng(2), tasks=2)
    with pytest.raises(ServiceError, match="at least 2 tasks"):
        mixed.fit({"task0": values["task0"]}, CONTRASTS)
    with pytest.raises(ServiceError, match="geglu"):
        mixed.fit(values, (mixed.pair("geglu", "relu"),))
