"""Issue 32 §2: a sequential comparison's non-binding futility stop, its
repeated confidence intervals and its median-unbiased estimate
(kg_service.analysis.numbers.sequential_estimates), against simulation.

Independent references: Monte Carlo of the paired differences (N(mu, 1),
the sd estimated at each look, as a sweep does) and of Brownian motion for
the conditional power and the stagewise ordering; scipy's t interval for a
single look. Five looks of 8 seeds (n_max 40), O'Brien-Fleming-type
spending, two-sided alpha 0.05, smallest effect of interest 0.45 sd (the
fixed design's 80 % power at 40 seeds). Every tolerance is a stated number
of Monte Carlo standard errors.

The figures the tests pin down, printed by
`KG_PRINT_FIGURES=1 KERAS_BACKEND=tensorflow .venv/bin/python -m pytest
tests/service/analysis/test_sequential_estimates.py -q -n 0 -s -k figures`
(skipped otherwise: the suite's CPU budget).
"""

import math
import os

import numpy as np
import pytest
from scipy import stats as st

from kg_service.analysis.numbers import sequential
from kg_service.analysis.numbers import sequential_estimates as est
from kg_service.analysis.reports import sequential_report

ALPHA, SPENDING = 0.05, "obrien_fleming"
LOOKS, N_MAX = (8, 16, 24, 32, 40), 40
DELTA = 0.45  # (z_0.975 + z_0.8) / sqrt(40) = 0.443


def _se(rate, sims):
    return math.sqrt(rate * (1 - rate) / sims)


def _simulate(mu, futility, sims, seed=1, estimate=False, delta=DELTA):
    """What `sequential.sequential_test` decides, vectorized over `sims`
    comparisons with N(mu, 1) paired differences: each look's decision,
    futility at `delta` where `futility` (obeyed), the repeated CI's coverage
    at the stopping look, and (with `estimate`) the naive and the adjusted
    estimate there."""
    rng = np.random.default_rng(seed)
    d = rng.normal(mu, 1.0, (sims, N_MAX))
    design = sequential.plan(LOOKS, N_MAX, ALPHA, SPENDING)
    total, squares = np.cumsum(d, axis=1), np.cumsum(d * d, axis=1)
    decision = np.full(sims, "", dtype=object)
    used, stop_k = np.full(sims, N_MAX), np.zeros(sims, dtype=int)
    mean_at, sd_at, covered = np.zeros(sims), np.zeros(sims), np.zeros(sims, dtype=bool)
    for k, n in enumerate(LOOKS):
        mean = total[:, n - 1] / n
        sd = np.sqrt(np.maximum(squares[:, n - 1] - n * mean**2, 0.0) / (n - 1))
        now = sequential.decisions(mean, sd, np.full(sims, n), design.nominal_alpha[k],
                                   design.equivalence_alpha[k])
        if futility:
            final = est.final_boundary(design.fractions[: k + 1], ALPHA, SPENDING)
            now = np.where((now == "") & est.futile(mean, sd, n, N_MAX, delta, final,
                                                        design.nominal_alpha[k]),
                           sequential.FUTILITY, now)
        low, high = est.repeated_interval(mean, sd, n, design.nominal_alpha[k])
        stop = (decision == "") & ((now != "") | (k == len(LOOKS) - 1))
        covered[stop] = ((low <= mu) & (mu <= high))[stop]
        mean_at[stop], sd_at[stop], stop_k[stop], used[stop] = mean[stop], sd[stop], k, n
        decision[stop] = now[stop]
    out = {"difference": np.mean(np.isin(decision, [sequential.BETTER, sequential.WORSE])),
           "futile": np.mean(decision == sequential.FUTILITY), "seeds": used.mean(),
           "covered": covered.mean()}
    if estimate:
        adjusted = np.empty(sims)
        for k, n in enumerate(LOOKS):
            at = stop_k == k
            adjusted[at] = est.adjusted_mean(mean_at[at], sd_at[at], n, N_MAX, design.z,
                                             design.fractions[: k + 1], k)
        out.update(naive=mean_at, adjusted=adjusted)
    return out


# --- Futility: error under no difference, power and seeds at the smallest effect.


@pytest.mark.parametrize("futility", [True, False], ids=["futility_obeyed", "ignored"])
def test_futility_leaves_the_false_difference_rate_at_alpha_obeyed_or_ignored(futility):
    sims = 20_000
    rate = _simulate(0.0, futility, sims)["difference"]
    assert rate <= ALPHA + 3 * _se(ALPHA, sims)  # 3 MC errors: 0.0046


def test_futility_saves_seeds_when_there_is_no_effect_and_keeps_power_at_the_smallest():
    sims = 20_000
    null_with, null_without = _simulate(0.0, True, sims), _simulate(0.0, False, sims)
    at_with, at_without = _simulate(DELTA, True, sims), _simulate(DELTA, False, sims)
    # Under no difference most comparisons stop for futility, on fewer seeds
    # (mean seeds: MC error about 0.05 seed).
    assert null_with["futile"] > 0.5 and null_with["seeds"] < null_without["seeds"] - 4
    # At the smallest effect the power lost is at most the floor times the
    # chance of a futility stop (the same paths: no MC error between them).
    lost = at_without["difference"] - at_with["difference"]
    assert 0 <= lost <= est.CONDITIONAL_POWER_FLOOR * at_with["futile"] + ALPHA / 2
    assert at_without["difference"] == pytest.approx(0.80, abs=3 * _se(0.8, sims) + 0.03)
    assert at_with["seeds"] <= at_without["seeds"]


def test_conditional_power_is_the_chance_a_brownian_continuation_finds():
    rng = np.random.default_rng(3)
    z, t, theta, c = 0.8, 0.4, 2.5, 2.0
    final = z * math.sqrt(t) + rng.normal(theta * (1 - t), math.sqrt(1 - t), 200_000)
    expected = np.mean(np.abs(final) >= c)
    assert float(est.conditional_power(z, t, theta, c)) == pytest.approx(
        expected, abs=4 * _se(expected, 200_000))


# --- Repeated confidence intervals. -----------------------------------------


@pytest.mark.parametrize("mu", [0.0, DELTA])
def test_the_repeated_interval_at_the_stop_covers_the_true_difference(mu):
    sims = 20_000
    covered = _simulate(mu, True, sims)["covered"]
    assert covered >= 1 - ALPHA - 3 * _se(ALPHA, sims)  # 3 MC errors: 0.0046


def test_a_single_looks_repeated_interval_is_the_t_interval():
    d = np.array([0.3, -0.1, 0.25, 0.05, 0.4, 0.1])
    low, high = est.repeated_interval(d.mean(), d.std(ddof=1), d.size, 0.05)
    ci = st.ttest_1samp(d, 0.0).confidence_interval(0.95)
    assert (float(low), float(high)) == pytest.approx((ci.low, ci.high))


# --- The median-unbiased estimate. -------------------------------------------


def test_the_adjusted_estimate_removes_the_bias_of_stopping_early():
    sims, mu = 3_000, 0.6  # stops early for a difference most of the time
    out = _simulate(mu, True, sims, seed=2, estimate=True)
    naive, adjusted = out["naive"].mean() - mu, out["adjusted"].mean() - mu
    se = out["naive"].std() / math.sqrt(sims)  # about 0.004
    assert naive > 5 * se  # the naive mean overstates the difference
    assert abs(adjusted) < 2.5 * se and abs(adjusted) < naive / 3


def test_the_median_unbiased_drift_puts_half_the_stagewise_outcomes_above():
    # Independent of the recursion: Brownian paths at the estimated drift,
    # ordered stagewise, fall above the observed outcome half of the time.
    design = sequential.plan(LOOKS, N_MAX, ALPHA, SPENDING)
    k, z = 2, design.z[2] + 0.3  # stopped for a difference at look 3
    theta = float(est.stagewise_median(design.z, design.fractions, k, z)[0])
    assert theta < z / math.sqrt(design.fractions[k])  # below the naive
    rng = np.random.default_rng(5)
    t = np.array(design.fractions)
    s = np.cumsum(rng.normal(theta * np.diff(t, prepend=0), np.sqrt(np.diff(t, prepend=0)),
                             (200_000, t.size)), axis=1)
    zs = s / np.sqrt(t)
    crossed = np.abs(zs) >= np.array(design.z)
    first = np.where(crossed.any(axis=1), crossed.argmax(axis=1), t.size)
    earlier_up = (first < k) & (zs[np.arange(zs.shape[0]), np.minimum(first, t.size - 1)] > 0)
    above = earlier_up | ((first >= k) & (zs[:, k] >= z))
    assert above.mean() == pytest.approx(0.5, abs=4 * _se(0.5, 200_000))


def test_a_single_look_needs_no_adjustment():
    design = sequential.plan((10,), 10)
    assert est.adjusted_mean(0.3, 1.0, 10, 10, design.z, design.fractions, 0) == (
        pytest.approx(0.3, abs=1e-6))


# --- In a comparison, and in words. ------------------------------------------


def test_a_comparison_that_cannot_reach_its_smallest_effect_stops_for_futility():
    rng = np.random.default_rng(0)
    d = rng.normal(0.0, 0.01, 40)
    d = list(d - d.mean())  # no difference; the smallest effect is 0.2 sd,
    futility = sequential.Futility(smallest_effect=0.002)  # 24 % power at 40 seeds
    result = sequential.sequential_test([d[:n] for n in LOOKS], N_MAX, futility=futility)
    assert result.decision == sequential.FUTILITY and result.decided_at < len(LOOKS) - 1
    low, high = result.interval
    assert low < result.adjusted < high and math.isfinite(result.naive_mean)
    values = {("relu", s): 0.9 for s in range(40)}
    values.update({("gelu", s): 0.9 + x for s, x in enumerate(d)})
    looks = sequential.compare_looks(values, "relu", LOOKS[:3], N_MAX, futility=futility)
    (_, test), = looks.comparisons
    assert test.decision == sequential.FUTILITY and looks.decided
    line = sequential_report.look_line(looks, None)
    assert (f"gelu vs relu: stopped for futility at look {test.decided_at + 1} ("
            in line and "the smallest effect of interest ±0.20 pp test accuracy is out of reach"
            in line), line
    assert "(conditional power 0.0" in line and "< 0.1 in either direction)" in line
    assert sequential_report.looks_tags(looks) == {"sequential.gelu": "futility"}
    summary = sequential.looks_summary(looks)["comparisons"]["gelu"]
    assert summary["decision"] == "futility" and len(summary["repeated_ci_oriented"]) == 2
    assert looks.outcomes() == {"gelu": ""}  # a verdict of inconclusive, never equivalent


def test_a_comparison_whose_interval_excludes_the_smallest_effect_says_so():
    # Plenty of seeds for 0.02 (conditional power near 1), and differences
    # so tight around 0 that the repeated CI at look 2 lies inside ±0.02.
    rng = np.random.default_rng(1)
    d = rng.normal(0.0, 0.005, 40)
    values = {("relu", s): 0.9 for s in range(40)}
    values.update({("gelu", s): 0.9 + x for s, x in enumerate(d)})
    looks = sequential.compare_looks(values, "relu", (8, 16), 40,
                                     futility=sequential.Futility(0.02))
    (_, test), = looks.comparisons
    assert test.decision == sequential.FUTILITY and test.looks[-1].conditional_power > 0.9
    low, high = test.interval
    assert -0.02 < low < high < 0.02
    assert "out of reach (its repeated CI lies inside ±2.00 pp)" in (
        sequential_report.look_line(looks, 24))


@pytest.mark.skipif(not os.environ.get("KG_PRINT_FIGURES"), reason="prints figures only")
def test_figures():
    """Prints the simulation's figures (the report's numbers); asserts nothing new."""
    sims = 20_000
    for mu in (0.0, DELTA):
        for futility in (False, True):
            out = _simulate(mu, futility, sims)
            print(f"mu={mu} futility={futility}: difference {out['difference']:.4f} "
                  f"futile {out['futile']:.4f} mean seeds {out['seeds']:.2f} "
                  f"RCI coverage {out['covered']:.4f} (MC se {_se(0.05, sims):.4f})")
    for mu in (0.0, 0.2):  # a smallest effect of 0.2 sd: 40 seeds give it 24 % power
        out = _simulate(mu, True, sims, delta=0.2)
        print(f"smallest effect 0.2, mu={mu}, futility obeyed: difference "
              f"{out['difference']:.4f} futile {out['futile']:.4f} mean seeds {out['seeds']:.2f}")
    for futility in (False, True):
        out = _simulate(0.6, futility, 3_000, seed=2, estimate=True)
        se = out["naive"].std() / math.sqrt(3_000)
        print(f"mu=0.6 futility={futility}: bias naive {out['naive'].mean() - 0.6:+.4f} "
              f"adjusted {out['adjusted'].mean() - 0.6:+.4f} (MC se {se:.4f})")
