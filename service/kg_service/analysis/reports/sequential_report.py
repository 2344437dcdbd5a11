"""A sequential sweep's looks in words: the line printed at each look, and
the report's section (a `page.Section`, an entry of summary.json). The numbers are
`kg_service.analysis.numbers.sequential`'s; this module phrases them."""

import json
import math

from kg_service.analysis.numbers import sequential
from kg_service.analysis.reports import page
from kg_service.analysis.words import sequential_wording
from kg_service.analysis.words import wording

HEADING = "Sequential seeds"


SPENDING = sequential_wording.SPENDING
DECISIONS = {"better": "better", "worse": "worse", "equivalent": "equivalent",
             sequential.FUTILITY: "futility", "": "inconclusive"}


def format_level(level):
    """A look's nominal alpha, or a p compared with one: "0.0046",
    "2.3e-05" (a level that small is shown, not rounded to 0)."""
    if level is None or math.isnan(level):
        return "n/a"
    return f"{level:.2g}" if level < 1e-3 else f"{level:.4f}"


def _look_decision(looks, activation, test, naive=False):
    """The comparison's decision, then its median-unbiased estimate and
    repeated CI (issue 32 §2: never the naive mean alone)."""
    text = _decision(looks, activation, test)
    if test.looks:
        text += "; " + sequential_wording.estimate_text(looks, test, naive)
    return text


def _decision(looks, activation, test):
    s = wording.shown(looks.metric)
    if test.decision == sequential.FUTILITY:
        return f"{activation} vs {looks.baseline}: " + sequential_wording.futility_text(
            looks, test)
    if not test.decided:
        last = test.looks[-1] if test.looks else None
        if last is None:
            return f"{activation} vs {looks.baseline}: inconclusive (no paired seeds)"
        tost = (f"; TOST p={format_level(last.p_tost)} > "
                f"{format_level(last.equivalence_alpha)}" if looks.margin is not None else "")
        return (f"{activation} vs {looks.baseline}: inconclusive after "
                f"{wording.seeds_text(last.n, 'paired seed')} (p={format_level(last.p_value)} > "
                f"{format_level(last.nominal_alpha)}{tost})")
    look = test.looks[-1]
    if test.decision == "equivalent":
        why = (f"TOST p={format_level(look.p_tost)} <= {format_level(look.equivalence_alpha)} "
               f"within ±{s.number(looks.margin)}{' pp' if s.kind.percent else ''}")
    else:
        why = f"p={format_level(look.p_value)} <= {format_level(look.nominal_alpha)}"
    return (f"{activation} vs {looks.baseline}: {DECISIONS[test.decision]} at look "
            f"{look.index + 1} ({wording.seeds_text(look.n)}; {why})")


def look_line(looks, next_count=None):
    """The line kg-train prints after each look of a sequential sweep."""
    k, n = len(looks.counts), looks.counts[-1]
    parts = "; ".join(_look_decision(looks, a, t) for a, t in looks.comparisons)
    if looks.decided:
        tail = "every comparison decided: no more seeds"
    elif next_count is None:
        tail = f"at the most seeds ({looks.n_max}): the undecided stay inconclusive"
    else:
        tail = f"training seeds {n}..{next_count - 1}"
    return f"Look {k} at {wording.seeds_text(n)}: {parts}. {tail[0].upper()}{tail[1:]}."


def sequential_lines(looks):
    """What a sequential sweep's looks decided, as lines for the terminal
    and the report: the design, each look's levels, each comparison."""
    margin = (f"equivalence within ±{wording.shown(looks.metric).number(looks.margin)}"
              f"{' pp' if wording.shown(looks.metric).kind.percent else ''} by TOST"
              if looks.margin is not None else "no equivalence margin set")
    futility = ("" if looks.futility is None else
                f"; futility (non-binding: conditional power < {looks.futility.floor:g}, or "
                f"the repeated CI inside ±smallest effect) at "
                f"the smallest effect ±{wording.shown(looks.metric).number(looks.futility.smallest_effect)}"
                f"{' pp' if wording.shown(looks.metric).kind.percent else ''}")
    family = (f"alpha {looks.family_alpha:g} over {len(looks.comparisons)} comparisons, "
              f"{looks.alpha:.4g} each (Bonferroni)" if len(looks.comparisons) > 1
              else f"alpha {looks.family_alpha:g}")
    lines = [
        f"Sequential seeds: {wording.seeds_text(len(looks.counts), 'look')}, {looks.counts[-1]} of at most "
        f"{looks.n_max} seeds; {SPENDING[looks.spending]} alpha spending "
        f"(Lan-DeMets), {family}; {margin}{futility}.",
        "Nominal alpha per look (two-sided paired t; each TOST side): "
        + ", ".join(
            f"{i + 1}: {n} seeds {format_level(a)}"
            + (f" / {format_level(e)}" if looks.margin is not None else "")
            for i, (n, a, e) in enumerate(zip(looks.counts, looks.design.nominal_alpha,
                                              looks.design.equivalence_alpha))
        )
        + ".",
    ]
    return lines + [_look_decision(looks, a, t, naive=True) + "." for a, t in looks.comparisons]


def looks_section(looks):
    """The report's section of the looks (a `page.Section`)."""
    return page.Section(HEADING, (page.Bullets(tuple(sequential_lines(looks))),))


def add_looks_summary(summary_path, looks):
    """Adds the looks to summary.json ("sequential")."""
    data = json.loads(summary_path.read_text())
    data["sequential"] = sequential.looks_summary(looks)
    summary_path.write_text(json.dumps(data, indent=2, allow_nan=False) + "\n")


def looks_tags(looks):
    """Each comparison's sequential decision, as tags on the sweep's run."""
    return {
        f"sequential.{activation}": DECISIONS[test.decision]
        for activation, test in looks.comparisons
    }
