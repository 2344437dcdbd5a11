"""`kg report --study`: a study's sweeps from the store, analysed as one family.

Reads the finished sweeps tagged with the study (`tracking.studies`),
hands their numbers to `analysis.study` (one Holm family, interactions)
and `analysis.aggregate` (IQM, probability of improvement, performance
profile across the sweeps as tasks), and writes the study's report.
"""

import dataclasses
import datetime
import json
import pathlib
import tempfile

from kg_service.analysis import aggregate as aggregate_lib
from kg_service.analysis import stats
from kg_service.analysis import study as study_lib
from kg_service.analysis import study_report
from kg_service.config import loading
from kg_service.config import schema
from kg_service.tracking import studies


@dataclasses.dataclass(frozen=True)
class StudyOutcome:
    study: study_lib.Study
    aggregate: aggregate_lib.Aggregate
    out_dir: pathlib.Path
    paths: tuple


def sweep_names(stored):
    """A label per sweep: its experiment, with the run id's head where an
    experiment holds more than one sweep of the study."""
    counts = {}
    for s in stored:
        counts[s.experiment] = counts.get(s.experiment, 0) + 1
    return [s.experiment if counts[s.experiment] == 1 else f"{s.experiment}@{s.run_id[:8]}"
            for s in stored]


def analysis_config(ran):
    """The `analysis:` section of a sweep's config.json (`ran`), validated as
    kg-train validated it; a sweep from before the section: the defaults."""
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp, "config.json")
        path.write_text(json.dumps(ran))
        return loading.load_config(path).analysis


def study_sweeps(stored):
    """`analysis.study.StudySweep`s of `tracking.studies.StoredSweep`s, each
    metric with the sweep's equivalence margin for it."""
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
        ))
    return out


def margin_for(analysis, metric, compared):
    """The sweep's margin for `metric`: `analysis.margin` is the compared
    metric's when it is a number, so another metric (the classifiers' test
    loss) gets only a margin named for it, or the default one."""
    if metric == compared or isinstance(analysis.margin, dict):
        return analysis.margin_for(metric)
    return schema.DEFAULT_MARGINS.get(metric)


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
    sweeps = study_sweeps(studies.read_study(tracking_uri, name))
    study = study_lib.analyse(name, sweeps, confidence)
    aggregate = aggregate_lib.aggregate(normalized_scores(sweeps), confidence, reps)
    out = pathlib.Path(
        output_dir or f"kg-output/study-{name}-{datetime.datetime.now():%Y%m%d-%H%M%S}"
    )
    paths = study_report.write_study_report(study, aggregate, out)
    return StudyOutcome(study=study, aggregate=aggregate, out_dir=out, paths=tuple(paths))
