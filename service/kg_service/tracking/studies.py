"""A study's sweeps, read back from the tracking store (issue 18 §6).

A sweep whose config names a `study:` carries the tags `kg.study` (the
name), `kg.metric` and `kg.higher_is_better` (the task's compared metric)
on its parent run (`kg_service.sweep.preflight.study_tags`). `read_study`
finds every FINISHED sweep of a study in every experiment of the store and
returns its members' final numbers as plain data, without loading a model:
`kg report --study` needs the numbers only.
"""

import dataclasses
import json
import tempfile

import numpy as np

from kg_service.errors import ServiceError
from kg_service.tracking import client as mlflow_client
from kg_service.tracking import destinations
from kg_service.tracking import mlflow_store
from kg_service.tracking import store
from kg_service.tracking.member_runs import LOGGED_TAG
from kg_service.tracking.member_runs import MEMBER_TEST_CORRECT

STUDY_TAG = "kg.study"
METRIC_TAG = "kg.metric"
DIRECTION_TAG = "kg.higher_is_better"
LOSS = "test_loss"  # read beside the compared metric: the classifiers' second metric
STUDY_FOLDER = "study"  # a study's report on each of its sweeps' runs: study/<name>/


@dataclasses.dataclass(frozen=True)
class StoredSweep:
    """One finished sweep of a study, as its runs hold it.

    `values` maps each metric read (the compared one, then test loss when
    that is another) to {activation: {seed: value}} of the members that
    finished; `failed` counts the diverged members per activation.
    """

    experiment: str
    run_id: str
    baseline: str
    metric: str
    higher_is_better: bool
    values: dict
    failed: dict
    config: dict  # the sweep's config as it ran (its config.json)


class UnknownStudy(ServiceError):
    """No finished sweep of the store carries this study name."""

    def __init__(self, name, studies, tracking_uri):
        known = ", ".join(repr(s) for s in sorted(studies)) or "none"
        super().__init__(
            f"--study {name!r}: no finished kg-train sweep in {tracking_uri} is "
            f"tagged with that study (studies there: {known})."
            f"{mlflow_client.did_you_mean(name, sorted(studies))} A sweep joins a "
            "study by the top-level config key `study: NAME`."
        )
        self.name, self.studies = name, tuple(sorted(studies))


def read_study(tracking_uri, name):
    """The finished sweeps tagged `kg.study = name`, oldest first.

    Raises:
        UnknownStudy: when there are none (it names the studies there are).
        ServiceError: for a store that cannot be read.
    """
    mlflow = mlflow_client.import_mlflow()
    destinations.check_store(tracking_uri, must_exist=True)
    try:
        client = mlflow.MlflowClient(tracking_uri, registry_uri=tracking_uri)
        experiments = {e.experiment_id: e.name for e in client.search_experiments()}
        parents = _study_parents(client, list(experiments))
    except Exception as error:  # connection refused, bad URI, bad DB
        raise ServiceError(mlflow_client.store_problem(tracking_uri, error)) from None
    mine = [r for r in parents if r.data.tags[STUDY_TAG] == name]
    if not mine:
        raise UnknownStudy(name, {r.data.tags[STUDY_TAG] for r in parents}, tracking_uri)
    try:
        return [_stored_sweep(client, run, experiments[run.info.experiment_id])
                for run in mine]
    except Exception as error:  # the store went away, an artifact is missing
        raise ServiceError(mlflow_client.store_problem(tracking_uri, error)) from None


def log_study_report(tracking_uri, stored, name, paths):
    """Logs a study's report files on each of its sweeps' parent runs,
    under study/<name>/ (a study has no run of its own; issue 34 §1), so
    MLflow's UI shows the study's page from any of them.

    Args:
        stored: the study's `StoredSweep`s (`read_study`).
        paths: the files to log (report.md, report.html, figures...).

    Returns:
        The UI address of report.html on the newest sweep's run.
    """
    mlflow = mlflow_client.import_mlflow()
    folder = f"{STUDY_FOLDER}/{name}"
    try:
        client = mlflow.MlflowClient(tracking_uri, registry_uri=tracking_uri)
        for sweep in stored:
            for path in paths:
                client.log_artifact(sweep.run_id, str(path), artifact_path=folder)
        newest = client.get_run(stored[-1].run_id)
    except Exception as error:  # the store went away, a read-only artifact store
        raise ServiceError(mlflow_client.store_problem(tracking_uri, error)) from None
    return mlflow_store.ui_url(tracking_uri, newest.info.experiment_id, newest.info.run_id,
                               f"{folder}/report.html")


def _study_parents(client, experiment_ids):
    """Every finished sweep parent with a study tag, oldest first."""
    if not experiment_ids:
        return []
    runs = client.search_runs(
        experiment_ids,
        filter_string=(
            f"tags.`kg.role` = '{store.SWEEP_ROLE}' and attributes.status = "
            f"'{store.FINISHED}'"
        ),
        max_results=10000,
    )
    runs = [r for r in runs if r.data.tags.get(STUDY_TAG)]
    return sorted(runs, key=lambda r: (r.info.start_time, r.info.run_id))


def _stored_sweep(client, parent, experiment):
    tags = parent.data.tags
    metric = tags[METRIC_TAG]
    names = [metric] + ([LOSS] if metric != LOSS else [])
    values = {m: {} for m in names}
    failed = {}
    for (activation, seed), run in _members(client, parent).items():
        if run.info.status == store.FAILED or "failure.reason" in run.data.tags:
            failed[activation] = failed.get(activation, 0) + 1
            continue
        for m in names:
            if m in run.data.metrics:
                values[m].setdefault(activation, {})[seed] = run.data.metrics[m]
    return StoredSweep(
        experiment=experiment,
        run_id=parent.info.run_id,
        baseline=parent.data.params["baseline"],
        metric=metric,
        higher_is_better=tags.get(DIRECTION_TAG, "true") == "true",
        values={m: v for m, v in values.items() if v},
        failed=failed,
        config=_config(client, parent.info.run_id),
    )


def _config(client, run_id):
    """The sweep's config.json artifact, as plain data."""
    # MLflow's download progress bar would print over the report.
    with tempfile.TemporaryDirectory() as tmp, mlflow_client.environ_defaults(
        MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR="false"
    ):
        path = client.download_artifacts(run_id, "config.json", tmp)
        with open(path) as f:
            return json.load(f)


def _members(client, parent):
    """`{(activation, seed): run}` of a sweep's logged members, the earliest
    run of each (as `mlflow_store.Tracker` reads them): by the sharded
    sweep's id tag, else as the parent's children."""
    sweep_id = parent.data.tags.get(store.SWEEP_ID_TAG)
    query = (
        f"tags.`{store.SWEEP_ID_TAG}` = '{sweep_id}'"
        if sweep_id
        else f"tags.mlflow.parentRunId = '{parent.info.run_id}'"
    )
    runs = client.search_runs([parent.info.experiment_id], filter_string=query,
                              max_results=10000)
    found = {}
    for run in sorted(runs, key=lambda r: (r.info.start_time, r.info.run_id)):
        t = run.data.tags
        # Neither the sweep's run nor its tuning members (their own seeds,
        # scored on validation before the comparison: not comparison seeds).
        if "seed" not in t or t.get("kg.role") in (store.SWEEP_ROLE, store.TUNING_ROLE):
            continue
        if run.info.status not in store.MEMBER_DONE and t.get(LOGGED_TAG) != "true":
            continue
        found.setdefault((t["activation"], int(t["seed"])), run)
    return found


@dataclasses.dataclass(frozen=True)
class SweepRuns:
    """A study sweep's runs in full, as plain data (the paper reruns,
    `kg_service.papers`, read them): the parent's times and tags, each
    finished member's final metrics, the per-epoch histories asked for,
    and the per-test-example correctness a member keeps where asked."""

    run_id: str
    tags: dict  # the parent run's tags
    start_ms: int
    end_ms: int  # the parent's end, or its start where it has none
    members: dict  # {activation: {seed: {metric: value}}}, failed members left out
    histories: dict  # {(activation, seed, metric): [value per step, in step order]}
    examples: dict  # {(activation, seed): the member's test-correctness array}


def read_sweep_runs(tracking_uri, run_id, *, histories=(), test_correct=False):
    """The sweep under the parent run `run_id`, its members as `read_study`
    reads them (the earliest run of each). `histories` names the metrics
    whose per-epoch values are read, for each member that logged them;
    `test_correct` reads each member's per-test-example correctness, where
    it kept one.

    Raises:
        ServiceError: for a store that cannot be read.
    """
    client = mlflow_client.import_mlflow().MlflowClient(tracking_uri, registry_uri=tracking_uri)
    try:
        parent = client.get_run(run_id)
        members, read, examples = {}, {}, {}
        for (activation, seed), run in _members(client, parent).items():
            if run.info.status == store.FAILED or "failure.reason" in run.data.tags:
                continue
            members.setdefault(activation, {})[seed] = dict(run.data.metrics)
            for key in histories:
                if key in run.data.metrics:
                    read[(activation, seed, key)] = _history(client, run, key)
            correct = _test_correct(client, run) if test_correct else None
            if correct is not None:
                examples[(activation, seed)] = correct
    except Exception as error:  # the store went away
        raise ServiceError(mlflow_client.store_problem(tracking_uri, error)) from None
    return SweepRuns(
        run_id=run_id, tags=dict(parent.data.tags), start_ms=parent.info.start_time,
        end_ms=parent.info.end_time or parent.info.start_time, members=members,
        histories=read, examples=examples,
    )


def _history(client, run, key):
    """A member's per-epoch values of one metric, in step order."""
    return [m.value for m in sorted(client.get_metric_history(run.info.run_id, key),
                                    key=lambda m: m.step)]


def _test_correct(client, run):
    """A classification member's per-test-example correctness (the array
    its run keeps beside its model), or None where it kept none."""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            path = client.download_artifacts(
                run.info.run_id, f"member/{MEMBER_TEST_CORRECT}", tmp)
        except Exception:  # MLflow raises its own kinds for a missing artifact
            return None
        return np.load(path)
