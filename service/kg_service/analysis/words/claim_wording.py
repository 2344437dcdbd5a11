"""A paper's claims in words: each `claims.Label` as a table row and one
sentence saying why it got its label, and `kg plan --config`'s rows.

The labels themselves are `kg_service.analysis.numbers.claims.label`'s;
nothing here decides.
"""

import math

from kg_service.analysis.numbers import claims as rule
from kg_service.analysis.numbers import sequential_estimates
from kg_service.analysis.words import sequential_wording
from kg_service.analysis.words import wording

CLAIM_HEADER = ["claim", "compares", "metric", "claimed", "label",
                "estimate (deciding interval)", "power at the smallest effect", "seeds"]


def _num(x):
    return "–" if x is None or not math.isfinite(x) else f"{x:+.4g}"


def compares(claim):
    """What a claim compares, as a - b."""
    def side(names):
        return names[0] if len(names) == 1 else f"mean({', '.join(names)})"

    if claim.change:
        return (f"{side(claim.plus)} at the other level − at the reference level "
                f"{claim.reference!r}")
    if claim.versus is not None:
        return (f"{side(claim.plus)} − {claim.versus:g}"
                + (f" at level {claim.level!r}" if claim.level is not None else ""))
    gap = f"{side(claim.plus)} − {side(claim.minus)}"
    if claim.interaction:
        return (f"({gap}) at the other level − ({gap}) at the reference level "
                f"{claim.reference!r}")
    return gap + (f" at level {claim.level!r}" if claim.level is not None else "")


def claimed(claim):
    """'< -0.01' or '> +0.003': the claimed direction and smallest effect."""
    sign = ">" if claim.direction == rule.GREATER else "<"
    d = claim.smallest_effect if claim.direction == rule.GREATER else -claim.smallest_effect
    return f"{sign} 0 (smallest effect {d:+g})"


def interval_text(lab):
    """The estimate with its deciding interval; a sequential claim's is the
    median-unbiased estimate with its repeated confidence interval."""
    low, high = lab.interval
    if not (math.isfinite(low) and math.isfinite(high)):
        return _num(lab.estimate)
    if lab.sequential:
        return (f"{_num(lab.estimate)} median-unbiased ({_num(low)} to {_num(high)}, "
                f"{100 * lab.confidence:.4g}% repeated CI; naive mean "
                f"{_num(lab.naive_estimate)})")
    return (f"{_num(lab.estimate)} ({_num(low)} to {_num(high)}, "
            f"{100 * lab.confidence:.4g}%)")


def sequential_text(lab):
    """How a sequential claim was tested: '(sequential: O'Brien-Fleming-type
    spending at alpha 0.025 = alpha / 2 claims, Bonferroni; look 2 of 3, 8
    seeds)'."""
    m = round(lab.claim.alpha / (1.0 - lab.confidence)) if lab.confidence < 1 else 1
    return (f"(sequential: {sequential_wording.SPENDING.get(lab.spending, lab.spending)} "
            f"spending at alpha {1.0 - lab.confidence:.4g} = {lab.claim.alpha:g} / {m} "
            f"claim{'s' if m != 1 else ''}, Bonferroni; look {lab.look} of {lab.looks}, "
            f"{lab.seeds} seeds)")


def power_text(lab):
    return "–" if not math.isfinite(lab.power) else f"{lab.power:.2f}"


def why(lab):
    """The sentence that says why the claim got its label; a sequential
    claim's says so, with its look and level."""
    said = _why(lab)
    return f"{said} {sequential_text(lab)}" if lab.sequential else said


def _why(lab):
    c = lab.claim
    if lab.why == rule.NO_TEST:
        return f"not tested: the test could not run ({lab.detail[0]})"
    if lab.why in (rule.CEILING, rule.FLOOR):
        side, mean, bound = lab.detail
        return (f"not tested: {_side_name(c, side)} {mean:.4g} is within the smallest "
                f"effect {c.smallest_effect:g} of the metric's {lab.why} {bound:g}, so the "
                "claimed effect cannot show")
    if lab.why == rule.OUT_OF_REACH:
        effect, look, seeds = lab.detail
        return (f"not tested: the smallest effect {effect:g} is out of reach at look {look} "
                f"({seeds} seeds): stopped for futility, the chance left of showing it "
                f"below {sequential_estimates.CONDITIONAL_POWER_FLOOR:g}")
    if lab.why == rule.UNDERPOWERED:
        needed, ran = lab.detail
        need = (f"needs {needed} seeds" if needed is not None
                else "no seed count within reach gives it")
        return (f"not tested: power {power_text(lab)} < {lab.target:g} at the smallest "
                f"effect {c.smallest_effect:g} with the seeds run; {need}, ran {ran}")
    # A sequential claim's test and level follow in `sequential_text`.
    hp = "" if lab.sequential else f" (Holm p {wording.format_p(lab.p_holm)} over the claims)"
    if lab.label == rule.REPRODUCED:
        return f"reproduced: significant in the claimed direction{hp}"
    if lab.why == rule.OPPOSITE:
        return f"contradicted: significant in the opposite direction{hp}"
    if lab.why == rule.EQUIVALENT:
        by = (" at its look's level" if lab.sequential else
              f" (TOST, Holm p {wording.format_p(lab.p_equivalence_holm)} over the claims)")
        return f"contradicted: equivalent within ±{c.smallest_effect:g}{by}"
    return (f"inconclusive: neither significant{hp} nor equivalent within "
            f"±{c.smallest_effect:g}, with power {power_text(lab)} at the smallest effect")


def _side_name(claim, side):
    """What a bound's side (`claims.bound_hit`'s "a" or "b") is, in words."""
    if claim.versus is not None and side == "b":
        return "the constant"
    if claim.change:
        where = "the reference level" if side == "b" else "the other level"
        return f"{', '.join(claim.plus)}'s mean at {where}"
    return f"{', '.join(claim.minus if side == 'b' else claim.plus)}'s mean"


def claim_rows(labels):
    """(header, rows) of the claims table."""
    rows = [[lab.claim.name, compares(lab.claim), lab.claim.metric, claimed(lab.claim),
             lab.label, interval_text(lab), power_text(lab), str(lab.seeds)]
            for lab in labels]
    return CLAIM_HEADER, rows


def caption(labels):
    """What the claims table is, in one paragraph."""
    if not labels:
        return ""
    c = labels[0].claim
    if labels[0].sequential:
        return _sequential_caption(labels)
    return (f"Claims declared in the config before the run ({len(labels)}; Holm over them "
            f"at alpha {c.alpha:g}). Each label: reproduced (significant in the claimed "
            "direction), contradicted (significant the other way, or equivalent within "
            "±smallest effect by TOST), not tested (the test could not run, the metric at a "
            f"ceiling or floor, or power < {labels[0].target:g} at the smallest effect with "
            "the seeds run), else inconclusive. The interval is the deciding one (at Holm's "
            "level for the claim; TOST's where equivalence decides). Power: the paired "
            "(against a constant: one-sample) t-test's at the smallest effect, the observed "
            f"per-seed sd, alpha / {len(labels)}.")


def _sequential_caption(labels):
    c, m = labels[0].claim, len(labels)
    return (f"Claims declared in the config before the run ({m}), each run sequentially "
            f"at this sweep's looks: its own group-sequential test at alpha {c.alpha:g} / "
            f"{m} (Bonferroni over the claims), the smallest effect as its equivalence "
            "margin and its non-binding futility rule. Each label: reproduced (stopped or "
            "ended significant in the claimed direction), contradicted (significant the "
            "other way, or equivalent within ±smallest effect), not tested (the test could "
            "not run, the metric at a ceiling or floor, stopped for futility with the "
            f"smallest effect out of reach, or power < {labels[0].target:g} at the smallest "
            "effect with the seeds used), else inconclusive. The estimate is the "
            "median-unbiased one (stagewise ordering), its interval the repeated confidence "
            "interval at the claim's last look; no fixed-design test over the seeds the "
            "sweep stopped at is shown (it claims too much after a sequential stop).")


def claim_lines(labels):
    """One line per claim: its name and `why`."""
    return [f"{lab.claim.name}: {why(lab)}" for lab in labels]


PLAN_HEADER = ["claim", "compares", "metric", "smallest effect", "per-seed sd",
               "seeds for power", "alpha (÷ claims)"]


def plan_rows(plans):
    """(header, rows) of `kg plan --config`'s claims table."""
    rows = []
    for p in plans:
        sd = "no pilot" if not math.isfinite(p.sd) else f"{p.sd:.4g} ({p.pilot_seeds} seeds)"
        if not math.isfinite(p.sd):
            needed = "; ".join(f"{n} if sd = {'' if k == 1 else f'{k}×'}effect" for k, n in p.if_sd)
        else:
            needed = f"{p.needed}" if p.needed is not None else "beyond any budget"
        rows.append([p.claim.name, compares(p.claim), p.claim.metric,
                     f"{p.claim.smallest_effect:g}", sd, needed, f"{p.alpha:.4g}"])
    return PLAN_HEADER, rows
