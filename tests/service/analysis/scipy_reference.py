"""Seed planning's TOST power and d_z's interval as the service computed
them before issue 17, word for word, through scipy.stats' distribution
objects (norm.cdf, chi2.pdf, t.ppf, nct.cdf): the slow references that
`kg_service.analysis.numbers.planning` and `kg_service.analysis.numbers.stats` must equal
bit for bit now that they call scipy.special's functions directly.
tests/service/analysis/test_verdicts.py checks that;
benchmarks/bench_analysis.py measures the difference side by side."""

import math

import numpy as np
from scipy import integrate
from scipy import optimize
from scipy import stats as st


def tost_power(n, mean, sd, margin, alpha=0.05):
    """TOST's power by integrating over the sample sd (planning.py's formula)."""
    if n < 2 or not (sd > 0) or not (margin > 0):
        return 0.0
    df = n - 1
    c = st.t.ppf(1 - alpha, df)
    root_n = math.sqrt(n)
    se = sd / root_n
    v_max = df * (margin * root_n / c / sd) ** 2

    def given(v):
        s = sd * math.sqrt(v / df)
        half = margin - c * s / root_n
        p = st.norm.cdf((half - mean) / se) - st.norm.cdf((-half - mean) / se)
        return max(p, 0.0) * st.chi2.pdf(v, df)

    value, _ = integrate.quad(given, 0.0, v_max, limit=200)
    return float(min(max(value, 0.0), 1.0))


def dz_interval(d, confidence=0.95):
    """d_z's interval by inverting nct.cdf (stats.py's bracketing and brentq),
    for n >= 2 differences that are not all equal."""
    d = np.asarray(d, dtype=float)
    n = int(d.size)
    df, root_n = n - 1, math.sqrt(n)
    t = float(np.mean(d) / np.std(d, ddof=1) * root_n)
    tail = (1.0 - confidence) / 2.0

    def solve(target):
        f = lambda nc: float(st.nct.cdf(t, df, nc)) - target  # noqa: E731
        direction = -1.0 if f(t) < 0 else 1.0
        near, step = t, 0.5
        far = near + direction * step
        while f(far) * direction > 0:
            near, step = far, step * 2
            far = near + direction * step
        return optimize.brentq(f, min(near, far), max(near, far), xtol=1e-10)

    return solve(1.0 - tail) / root_n, solve(tail) / root_n
