"""`kg report --study`: a study's sweeps from the store, analysed as one family.

Reads the finished sweeps tagged with the study (`tracking.studies`),
hands their numbers to `analysis.numbers.study` (one Holm family, interactions)
and `analysis.numbers.aggregate` (IQM, probability of improvement, performance
profile across the sweeps as tasks) and `analysis.numbers.mixed` (one mixed
model of the compared metric across the sweeps, with the declared
contrasts), and writes the study's report.
"""

import dataclasses
import datetime
import json
import math
import pathlib
import tempfile

from kg_service.analysis.numbers import aggregate as aggregate_lib
from kg_service.analysis.numbers import claim_data
from kg_service.analysis.numbers import mixed as mixed_lib
from kg_service.analysis.numbers import stats
from kg_service.analysis.numbers import study as study_lib
from kg_service.analysis.reports import study_report
from kg_service.config import derived
from kg_service.config import loading
from kg_service.config import schema
from kg_service.errors import ServiceError
from kg_service.tracking import studies


@dataclasses.dataclass(frozen=True)
class StudyOutcome:
    study: study_lib.Study
    aggregate: aggregate_lib.Aggregate
    out_dir: pathlib.Path
    paths: tuple
    claims: tuple = ()  # the study's declared claims labelled (claims.Label)
    # The mixed model's `MixedFit`, or why it was not fitted (a sentence).
    mixed: object = None
    page_url: str = ""  # report.html in MLflow's UI, on the newest sweep's run


def sweep_names(stored):
    """A label per sweep: its experiment, with the run id's head where an
    experiment holds more than one sweep of the study."""
    counts = {}
    for s in stored:
        counts[s.experiment] = counts.get(s.experiment, 0) + 1
    return [s.experiment if counts[s.experiment] == 1 else f"{s.experiment}@{s.run_id[:8]}"
            for s in stored]


def sweep_config(ran):
    """A sweep's config.json (`ran`) as the `Config` kg-train validated."""
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp, "config.json")
        path.write_text(json.dumps(ran))
        return loading.load_config(path)


def analysis_config(ran):
    """The `analysis:` section of a sweep's config.json (`ran`), validated as
    kg-train validated it; a sweep from before the section: the defaults."""
    return sweep_config(ran).analysis


def declared_claims(name, configs):
    """The `Config` whose claims a study's sweeps (their `Config`s) declare:
    one set of claims for the whole study, like its factor.

    Raises:
        ServiceError: sweeps of one study declaring different claims.
    """
    declared = {repr(c.claims) for c in configs}
    if len(declared) > 1:
        raise ServiceError(
            f"study {name!r}: its sweeps declare different `claims:`; expected one set of "
            "claims for the whole study (declared before its first sweep ran).")
    return configs[0] if configs else None


def declared_factor(name, stored):
    """`(setting, reference)` of the study's `study_factor:`, the same in
    every sweep's config, or `(None, None)` where none declares one.

    Raises:
        ServiceError: sweeps of one study declaring different factors.
    """
    declared = {json.dumps(s.config.get("study_factor"), sort_keys=True) for s in stored}
    if len(declared) > 1:
        raise ServiceError(
            f"study {name!r}: its sweeps declare different `study_factor:`s ("
            + "; ".join(sorted(declared)) + "); expected one factor and one reference "
            "level for the whole study (issue 30 §4).")
    factor = stored[0].config.get("study_factor") if stored else None
    if not factor:
        return None, None
    return factor["setting"], factor["reference"]


def level_of(config, setting):
    """A sweep config's (dict or `Config`) level of the study factor's
    `setting`; None without a factor or where the config has no such key."""
    if setting is None:
        return None
    try:
        return schema.setting_value(config, setting)
    except KeyError:
        return None


def members_tables(members):
    """{metric: {activation: {seed: value}}} of `SweepRuns.members`
    ({activation: {seed: {metric: value}}}), finite values only."""
    out = {}
    for activation, seeds in members.items():
        for seed, metrics in seeds.items():
            for metric, value in metrics.items():
                if isinstance(value, (int, float)) and math.isfinite(value):
                    out.setdefault(metric, {}).setdefault(activation, {})[seed] = float(value)
    return out


def stored_levels(tracking_uri, stored, setting):
    """{level: {metric: {activation: {seed: value}}}} of a study's stored
    sweeps, every metric their members logged (`claim_data`'s `by_level`),
    and {level: "experiment (run id)"}; of two sweeps at one level, the
    newer (`stored` is oldest first)."""
    by_level, names = {}, {}
    for s in stored:
        level = level_of(s.config, setting)
        by_level[level] = members_tables(studies.read_sweep_runs(tracking_uri, s.run_id).members)
        names[level] = f"{s.experiment} ({s.run_id[:8]})"
    return by_level, names


def label_claims(name, sweeps):
    """The claims a study's sweeps declare, labelled, Holm over them (issue
    32 §1); () without any. `sweeps`: (config.json as a dict, members as
    `SweepRuns.members`) per sweep, oldest first (a level's newest wins)."""
    configs = [sweep_config(ran) for ran, _ in sweeps]
    config = declared_claims(name, configs)
    claims = claim_data.declared(config) if config is not None else ()
    if not claims:
        return ()
    setting = config.study_factor.setting if config.study_factor else None
    by_level = {level_of(c, setting): members_tables(members)
                for c, (_, members) in zip(configs, sweeps)}
    # A sequential sweep's seeds never take the fixed design (issue 32 §2).
    sequential = any(derived.sequential(c) for c in configs)
    return claim_data.label_levels(claims, by_level, config.analysis.power, sequential)


def study_claims(name, tracking_uri, stored):
    """`label_claims` of a study's stored sweeps, every metric their
    members logged read from the store."""
    return label_claims(name, [(s.config, studies.read_sweep_runs(tracking_uri, s.run_id).members)
                               for s in stored])


def analyse_stored(name, stored, confidence=0.95):
    """`analysis.numbers.study.analyse` of a study's stored sweeps, each at its level
    of the declared factor (read from the config it ran)."""
    setting, reference = declared_factor(name, stored)
    return study_lib.analyse(name, study_sweeps(stored), confidence,
                             reference=reference, factor=setting)


def study_sweeps(stored):
    """`analysis.numbers.study.StudySweep`s of `tracking.studies.StoredSweep`s, each
    metric with the sweep's equivalence margin for it, and each at its level
    of the study's declared factor (None where none is declared)."""
    setting = (stored[0].config.get("study_factor") or {}).get("setting") if stored else None
    out = []
    for name, s in zip(sweep_names(stored), stored):
        metrics = tuple(
            stats.Metric.of(m, s.higher_is_better if m == s.metric else False)
            for m in s.values
        )
        analysis = analysis_config(s.config)
        out.append(study_lib.StudySweep(
            name=name, baseline=s.baseline, metrics=metrics, values=s.values,
            failed=s.failed,
            margins={m.name: margin_for(analysis, m.name, s.metric) for m in metrics},
            level=level_of(s.config, setting),
        ))
    return out


def margin_for(analysis, metric, compared):
    """The sweep's margin for `metric`: `analysis.margin` is the compared
    metric's when it is a number, so another metric (the classifiers' test
    loss) gets only a margin named for it, or the default one."""
    if metric == compared or isinstance(analysis.margin, dict):
        return analysis.margin_for(metric)
    return schema.DEFAULT_MARGINS.get(metric)


def study_contrasts(stored, sweeps):
    """The contrasts the mixed model estimates: those the sweeps' configs
    declare (`analysis.contrasts`, the first of a name kept), else gated vs
    plain (`mixed.gated_vs_plain`) and each activation against the first
    sweep's baseline."""
    declared = {}
    for s in stored:
        for c in analysis_config(s.config).contrasts:
            declared.setdefault(c.name, c)
    if declared:
        return tuple(declared.values())
    activations = list(dict.fromkeys(a for s in sweeps for a in s.activations()))
    baseline = sweeps[0].baseline
    gated = mixed_lib.gated_vs_plain(activations)
    return tuple([gated] if gated else []) + tuple(
        mixed_lib.pair(a, baseline) for a in activations if a != baseline)


def mixed_model(stored, sweeps, confidence=0.95):
    """`mixed.fit` of the sweeps' compared metric, the sweeps as tasks; a
    sentence saying why not where it cannot be fitted (sweeps comparing
    different metrics, too few sweeps, a contrast without results)."""
    metrics = sorted({s.metric.name for s in sweeps})
    if len(metrics) != 1:
        return (f"not fitted: the sweeps compare different metrics ({', '.join(metrics)}); "
                "one model needs one metric in one unit")
    values = {s.name: s.values[metrics[0]] for s in sweeps}
    try:
        return mixed_lib.fit(values, study_contrasts(stored, sweeps), metrics[0], confidence)
    except ServiceError as e:
        return f"not fitted: {e}"


def normalized_scores(sweeps):
    """Every sweep's compared metric, min-max normalized within the sweep."""
    out = {}
    for s in sweeps:
        runs = {a: list(by_seed.values()) for a, by_seed in s.values[s.metric.name].items()}
        out.update(aggregate_lib.normalize({s.name: runs}, s.metric.higher_is_better))
    return out


def report_study(name, tracking_uri, output_dir=None, confidence=0.95,
                 reps=aggregate_lib.DEFAULT_REPS):
    """Analyses the study `name` and writes its report.

    Args:
        output_dir: where report.md, summary.json and the figure go;
            default kg-output/study-<name>-<time>.

    Returns:
        A `StudyOutcome`.

    Raises:
        tracking.studies.UnknownStudy: no finished sweep has that study.
    """
    stored = studies.read_study(tracking_uri, name)
    sweeps = study_sweeps(stored)
    study = analyse_stored(name, stored, confidence)
    aggregate = aggregate_lib.aggregate(normalized_scores(sweeps), confidence, reps)
    out = pathlib.Path(
        output_dir or f"kg-output/study-{name}-{datetime.datetime.now():%Y%m%d-%H%M%S}"
    )
    claims = study_claims(name, tracking_uri, stored)
    mixed = mixed_model(stored, sweeps, confidence)
    paths = study_report.write_study_report(study, aggregate, out, claims, mixed)
    url = studies.log_study_report(tracking_uri, stored, name, paths)
    return StudyOutcome(study=study, aggregate=aggregate, out_dir=out, paths=tuple(paths),
                        claims=claims, mixed=mixed, page_url=url)
