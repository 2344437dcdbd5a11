"""A sequential comparison's stop and estimates in words: the futility
stop ("stopped for futility at look k: the smallest effect of interest X
is out of reach") and, after any stop, the median-unbiased estimate with
its repeated confidence interval (the naive mean labelled as naive). The
numbers are `kg_service.analysis.numbers.sequential`'s and
`sequential_estimates`'; `kg_service.analysis.reports.sequential_report`
places these phrases."""

import math

from kg_service.analysis.words import wording

# The spending functions' names in words (a sweep's looks, a claim's test).
SPENDING = {"obrien_fleming": "O'Brien-Fleming-type", "pocock": "Pocock-type"}


def _raw(looks, x):
    """An oriented difference (positive is better) in the metric's sign."""
    return x if looks.higher_is_better else -x


def futility_text(looks, test):
    """'stopped for futility at look 3 (12 seeds): the smallest effect of
    interest ±0.50 pp is out of reach (conditional power 0.03 < 0.1 in either
    direction)', or '(its repeated CI lies inside ±0.50 pp)'."""
    s = wording.shown(looks.metric)
    look = test.looks[-1]
    effect = f"±{s.number(looks.futility.smallest_effect)}{' pp' if s.kind.percent else ''}"
    if look.conditional_power < looks.futility.floor:
        why = (f"conditional power {look.conditional_power:.2f} < {looks.futility.floor:g} "
               "in either direction")
    else:  # the other reason `sequential_estimates.futile` stops for
        why = f"its repeated CI lies inside {effect}"
    return (f"stopped for futility at look {look.index + 1} ({wording.seeds_text(look.n)}): "
            f"the smallest effect of interest {effect} {s.label} is out of reach ({why})")


def estimate_text(looks, test, naive=False):
    """'median-unbiased estimate +0.41 pp, 97.5% repeated CI +0.02 to +0.80'
    in the metric's sign; with `naive`, the plain mean too, labelled so."""
    s = wording.shown(looks.metric)
    low, high = sorted(_raw(looks, x) for x in test.interval)
    confidence = 100 * (1 - looks.alpha)
    text = (f"median-unbiased estimate {s.diff(_raw(looks, test.adjusted))} {s.label}, "
            f"{confidence:g}% repeated CI {s.interval(low, high, sep=' to ', signed=True)}")
    if naive and math.isfinite(test.naive_mean):
        text += f" (naive mean {s.diff(_raw(looks, test.naive_mean))}, biased by the stop)"
    return text
