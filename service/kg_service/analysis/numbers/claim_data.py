"""A config's declared claims as numbers, and the per-seed values each
claim reads: from a sweep's `MemberResult`s (`kg report`, kg-train) or
from a study's stored sweeps by factor level (`kg report --study`, the
papers' page, `kg plan --config`'s pilot). Pure; the label rule is
`kg_service.analysis.numbers.claims`.

`by_level` maps a level of the study's factor (None for a lone sweep or
a study without a factor) to {metric: {activation: {seed: value}}}.
"""

import math

from kg_service.analysis.numbers import claims as rule
from kg_service.analysis.numbers import sequential_claims
from kg_service.config import schema


def declared(config):
    """The config's `claims:` as `claims.Claim`s (alpha: the claim's, else
    analysis.alpha); () where it declares none."""
    out = []
    for c in config.claims:
        plus, minus = c.sides(config.analysis.contrasts)
        out.append(rule.Claim(
            name=c.name, metric=c.metric, direction=c.direction,
            smallest_effect=c.smallest_effect,
            alpha=c.alpha if c.alpha is not None else config.analysis.alpha,
            plus=plus, minus=minus, interaction=c.interaction is not None,
            reference=c.reference, level=c.level, change=c.change is not None,
            versus=c.versus))
    return tuple(out)


def member_value(result, metric):
    """A `MemberResult`'s final value of `metric`: a test number, a task's
    final number, or the last epoch of a logged series; NaN where none."""
    if metric in ("test_loss", "test_accuracy"):
        return float(getattr(result, metric))
    if metric in result.final:
        return float(result.final[metric])
    series = result.history.get(metric)
    return float(series[-1]) if series else math.nan


def results_tables(results, metrics):
    """{metric: {activation: {seed: value}}} of the members that did not
    fail (a diverged member is left out of every statistic)."""
    out = {m: {} for m in metrics}
    for r in results:
        if not r.ok:
            continue
        for m in metrics:
            out[m].setdefault(r.activation, {})[r.seed] = member_value(r, m)
    return out


def evidence(claim, by_level):
    """One claim's `claims.Evidence` from the tables of every level."""
    if claim.interaction or claim.change:
        across = rule.interaction_evidence if claim.interaction else rule.change_evidence
        return across(claim, {lv: t.get(claim.metric, {}) for lv, t in by_level.items()})
    one_sweep = rule.pair_evidence if claim.versus is None else rule.constant_evidence
    if claim.level is not None:
        if claim.level not in by_level:
            return rule.Evidence(claim, missing=(
                f"no sweep at level {claim.level!r} (the study's levels: "
                f"{', '.join(repr(v) for v in by_level) or 'none'})"))
        return one_sweep(claim, by_level[claim.level].get(claim.metric, {}))
    if len(by_level) != 1:
        return rule.Evidence(claim, missing=(
            f"{len(by_level)} sweeps at levels {', '.join(repr(v) for v in by_level)}; "
            "the claim names no `level:` to be tested at"))
    (tables,) = by_level.values()
    return one_sweep(claim, tables.get(claim.metric, {}))


# A study's claims pool its sweeps' seeds: no sequential test runs across
# sweeps that stopped at their own looks (issue 32 §2 runs a claim at one
# sweep's looks), and the fixed design would claim too much over them.
STUDY_SEQUENTIAL = ("a study of sequential sweeps: no test across their looks; each "
                    "sweep's own report labels its claims from its looks")


def label_levels(claims, by_level, power=0.8, sequential=False):
    """Every claim labelled, Holm over them (`claims.label_all`); with
    `sequential` (a study of which a sweep ran sequential seeds) every
    claim "not tested" (`STUDY_SEQUENTIAL`), never the fixed design's."""
    if sequential:
        return rule.label_all([rule.Evidence(c, missing=STUDY_SEQUENTIAL) for c in claims],
                              power)
    return rule.label_all([evidence(c, by_level) for c in claims], power)


# A sequential sweep stopped at a look: a fixed-design test over its seeds
# says better/worse too often and its means are biased (issue 30 §7). Its
# claims take their own sequential tests at its looks (issue 32 §2,
# `sequential_claims`); without the looks, none.
SEQUENTIAL = ("a sequential sweep: its claims are decided by its looks, not by a "
              "fixed-design test over the seeds it stopped at")


def label_sweep(config, results, looks=None):
    """A lone sweep's claims labelled from its members: a pair, contrast or
    constant from its own numbers, an interaction or a level change "not
    tested" (it needs the study's other sweeps: `kg report --study`). ()
    without claims.

    `looks`: a sequential sweep's `sequential.SweepLooks`; its claims are
    then run sequentially at those looks (`sequential_claims.label_all`),
    whatever `config.seeds` says (the pipeline concludes a sequential sweep
    at the config of the seeds it used). A config with sequential seeds
    and no looks: every claim "not tested" (`SEQUENTIAL`), never the fixed
    design's label."""
    claims = declared(config)
    if not claims:
        return ()
    power = config.analysis.power
    if looks is None and isinstance(config.seeds, schema.SequentialSeeds):
        return rule.label_all([rule.Evidence(c, missing=SEQUENTIAL) for c in claims], power)
    tables = results_tables(results, {c.metric for c in claims})
    level = None
    factor = config.study_factor
    if factor is not None:
        level = schema.setting_value(config, factor.setting)
    if looks is not None:
        return sequential_claims.label_all(
            [evidence(c, {level: tables}) for c in claims], looks.counts, looks.n_max,
            looks.spending, power)
    return label_levels(claims, {level: tables}, power)
