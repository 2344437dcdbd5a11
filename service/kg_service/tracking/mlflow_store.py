"""The MLflow tracking store: a sweep's runs, metrics and artifacts in an
MLflow tracking server (or a local sqlite file), and its models in the
MLflow registry beside it.

`Tracker` implements `store.TrackingStore`; every operation goes through
one retry policy (`retry.Retrier`); registering goes through
`registry.ModelRegistry`, logging the served model through
`model_logging`.
"""

import json
import logging
import os
import tempfile
import time

import numpy as np

from kg_service import redact
from kg_service.errors import ServiceError
from kg_service.tracking import client as mlflow_client
from kg_service.tracking import destinations
from kg_service.tracking import member_runs
from kg_service.tracking import model_logging
from kg_service.tracking import registry
from kg_service.tracking import retry
from kg_service.tracking import store

log = logging.getLogger("kg-train")


def ui_url(tracking_uri, experiment_id, run_id, artifact):
    """The MLflow UI's page of a run's artifact (issue 34 §4): the tracking
    server's own UI for an http(s) store (its password hidden), else
    `mlflow ui`'s default address for a local one."""
    base = tracking_uri.rstrip("/") if tracking_uri.startswith(("http://", "https://")) \
        else LOCAL_UI
    return (f"{redact.uri(base)}/#/experiments/{experiment_id}/runs/{run_id}"
            f"/artifactPath/{artifact}")

METRICS_PER_CALL = 1000  # MLflow's log_batch limit
PARAMS_PER_CALL = 100  # MLflow's log_batch limit
REPORT_FOLDER = "report"  # the sweep run's report files, under its artifacts
# Where `mlflow ui` serves a local store (sqlite, a folder) by default.
LOCAL_UI = "http://127.0.0.1:5000"
class NoExperiment(ServiceError):
    """--experiment names no experiment of the store (and `create` is off)."""

    def __init__(self, name, names):
        known = ", ".join(repr(n) for n in sorted(names)) or "none"
        super().__init__(
            f"--experiment {name!r}: no such experiment in the tracking store "
            f"(it has: {known}).{mlflow_client.did_you_mean(name, names)}"
        )


class Tracker(store.TrackingStore):
    """One sweep's view of an MLflow tracking server and model registry.

    Args:
        tracking_uri: e.g. `sqlite:///mlflow.db` or `http://host:5000`.
        experiment: MLflow experiment name (created if missing).
        retry_seconds: how long a store that fails is retried.
        create: False: a missing experiment is a ServiceError instead.
    """

    def __init__(self, tracking_uri, experiment, retry_seconds=120.0, create=True):
        self.mlflow = mlflow_client.import_mlflow()
        self.tracking_uri = tracking_uri
        self.retry_seconds = retry_seconds
        self.retried = retry.Retrier(tracking_uri, retry_seconds)
        destinations.check_store(tracking_uri, must_exist=not create)
        try:
            # A server that is up but fails would otherwise be retried
            # for minutes (MLflow's default: 7 retries, exponential backoff).
            with mlflow_client.environ_defaults(
                MLFLOW_HTTP_REQUEST_MAX_RETRIES="0",
                MLFLOW_HTTP_REQUEST_TIMEOUT=str(destinations.SERVER_TIMEOUT),
            ), mlflow_client.sqlite_setup_lock(tracking_uri):
                artifacts = self._open_experiment(experiment, create)
        except NoExperiment:
            raise
        except Exception as error:  # connection refused, bad URI, bad DB
            raise ServiceError(mlflow_client.store_problem(tracking_uri, error)) from None
        artifacts_dir = destinations.local_store_path(artifacts)
        if artifacts_dir is not None:
            destinations.check_writable_dir(
                artifacts_dir, f"the artifact folder of experiment {experiment!r}"
            )
        # MLflow's process-wide URIs (register's fluent start_run reads
        # them): set once the store is known to work, so a store that
        # fails leaves them as they were.
        self.mlflow.set_tracking_uri(tracking_uri)
        self.mlflow.set_registry_uri(tracking_uri)
        if redact.uri(tracking_uri) != tracking_uri:
            # MLflow prints each run's URL, password and all, on stdout.
            os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
        self.registry = registry.ModelRegistry(self.client, self.retried)
        self.parent_run_id = None
        self._sweep_ids = {}  # parent run id -> its kg.sweep_id tag

    def _open_experiment(self, experiment, create):
        """Sets `client` and `experiment_id`; returns the experiment's
        artifact location."""
        self.client = self.mlflow.MlflowClient(self.tracking_uri, registry_uri=self.tracking_uri)
        # Both stores (tracking, registry) migrate their schema on first
        # use: do it here, under the lock.
        self.client.search_registered_models(max_results=1)
        found = self.client.get_experiment_by_name(experiment)
        if found is None and not create:
            raise NoExperiment(experiment, [e.name for e in self.client.search_experiments()])
        self.experiment_id = (
            found.experiment_id if found else self._create_experiment(experiment)
        )
        return self.client.get_experiment(self.experiment_id).artifact_location

    def _create_experiment(self, experiment):
        """Creates `experiment`, or joins it where another job created it
        between our lookup and our create: two shards or sweeps started at
        once on a new server store (the sqlite lock covers a file store only;
        a server answers the second create with RESOURCE_ALREADY_EXISTS)."""
        try:
            return self.client.create_experiment(experiment)
        except self.mlflow.exceptions.MlflowException as error:
            if error.error_code != "RESOURCE_ALREADY_EXISTS":
                raise
            found = self.client.get_experiment_by_name(experiment)
            if found is None:
                raise
            return found.experiment_id

    # --- A sweep's parent run. -------------------------------------------

    def open_sweep(self, run_name, params, tags, resume=None):
        if resume is None:
            run = self.retried(
                "creating the sweep's run",
                lambda: self.client.create_run(
                    self.experiment_id, run_name=run_name, tags=store.tag_strings(tags)
                ),
            )
            self.parent_run_id = run.info.run_id
            self.retried(
                "logging the sweep's parameters",
                lambda: self._log_params(self.parent_run_id, params),
            )
            return self.parent_run_id
        self.parent_run_id = resume

        def reopen():
            self.client.update_run(resume, status=store.RUNNING)
            for key, value in store.tag_strings(tags).items():
                self.client.set_tag(resume, key, value)

        self.retried("reopening the sweep's run", reopen)
        return resume

    def close_sweep(self, status):
        """Marks the sweep's run `status`. A sweep that failed or was
        interrupted tries once, and never hides why it stopped: a store
        that is down leaves the run RUNNING, which --resume accepts."""
        if self.retried.down is not None:
            return
        if status == store.FINISHED:
            self.retried(
                "marking the sweep finished",
                lambda: self.client.set_terminated(self.parent_run_id, status),
            )
            return
        try:
            self.retried(
                f"marking the sweep {status}",
                lambda: self.client.set_terminated(self.parent_run_id, status),
                retry=False,
            )
        except Exception as error:
            log.warning(
                f"could not mark sweep run {self.parent_run_id} {status} "
                f"({retry.innermost_reason(error)}); it stays RUNNING, and --resume takes it."
            )

    def sweep_parents(self, sweep_id=None):
        query = f"tags.`kg.role` = '{store.SWEEP_ROLE}'"
        if sweep_id is not None:
            query += f" and tags.`{store.SWEEP_ID_TAG}` = '{sweep_id}'"
        runs = self.client.search_runs(
            [self.experiment_id], filter_string=query, max_results=10000
        )
        return [
            store.SweepParent(r.info.run_id, r.data.tags.get(store.SWEEP_ID_TAG))
            for r in sorted(runs, key=lambda r: (r.info.start_time, r.info.run_id))
        ]

    def create_run(self, run_name, params, tags):
        run_id = self.client.create_run(
            self.experiment_id, run_name=run_name, tags=store.tag_strings(tags)
        ).info.run_id
        self._log_params(run_id, params)
        return run_id

    def delete_run(self, run_id):
        self.client.delete_run(run_id)

    def sweep_info(self, run_id):
        """`(experiment name, params, status)` of a sweep's parent run.

        Raises:
            ServiceError: if there is no such run, or it is not a sweep.
        """
        try:
            run = self.retried(f"reading run {run_id}", lambda: self.client.get_run(run_id))
        except self.mlflow.exceptions.MlflowException:
            raise ServiceError(
                f"--resume {run_id}: no such run in the tracking store "
                f"{self.tracking_uri}. Use the parent run id kg-train printed "
                f"when the sweep started (or see it in the MLflow UI)."
            ) from None
        if run.data.tags.get("kg.role") != store.SWEEP_ROLE:
            raise ServiceError(
                f"--resume {run_id}: that run is not a kg-train sweep's parent "
                f"run (it is a member run, or not from kg-train)."
            )
        experiment = self.retried(
            f"reading run {run_id}",
            lambda: self.client.get_experiment(run.info.experiment_id).name,
        )
        return experiment, dict(run.data.params), run.info.status

    # --- Members. --------------------------------------------------------

    def log_member(self, result, params, tags):
        """Logs one (activation, seed) member as a child run; returns its id.

        A run of the same member already under the sweep is a half-logged
        one (a try cut off by a store failure, or an interrupt while
        logging): it is deleted first, so each member has one run, with
        each metric once, however many tries it took.
        """
        return self.retried(
            f"logging member {result.activation} seed {result.seed}",
            lambda: self._log_member(result, params, tags),
        )

    def _log_member(self, result, params, tags):
        # A tuning member may be logged by two shard jobs at once
        # (`sweep.tuning`): the other job's copy, perhaps being logged right
        # now, is not stale. Readers skip a half-logged run, and each
        # activation's choice is claimed once, so both copies may stay.
        shared = tags.get("kg.role") == store.TUNING_ROLE
        for stale in () if shared else self.client.search_runs(
            [self.experiment_id],
            filter_string=(
                f"tags.mlflow.parentRunId = '{self.parent_run_id}' and "
                f"tags.activation = '{result.activation}' and tags.seed = '{result.seed}'"
            ),
        ):
            self.client.delete_run(stale.info.run_id)
        run = self.client.create_run(
            self.experiment_id,
            run_name=store.member_run_name(result),
            tags=store.tag_strings(
                {
                    "mlflow.parentRunId": self.parent_run_id,
                    **store.member_tags(result, tags, self._sweep_id()),
                }
            ),
        )
        run_id = run.info.run_id
        self._log_params(run_id, store.member_params(result, params))
        Metric = self.mlflow.entities.Metric
        now = int(time.time() * 1000)
        metrics = [
            Metric(key, float(value), now, step)
            for key, values in result.history.items()
            for step, value in enumerate(values, start=1)
        ]
        metrics += [Metric(k, float(v), now, 0) for k, v in store.member_finals(result).items()]
        self._log_metrics(run_id, metrics)
        member_runs.log_files(self.client, run_id, result)
        if not result.ok:
            self.client.set_tag(run_id, "failure.reason", result.failure)
            self.client.set_tag(run_id, "failure.epoch", str(result.failed_epoch))
        self.client.set_tag(run_id, member_runs.LOGGED_TAG, "true")
        self.client.set_terminated(run_id, store.member_status(result))
        return run_id

    def finished_members(self, sweep_run_id):
        """The members of a sweep already in the store, as `MemberResult`s.

        Members logged FINISHED or FAILED (diverged) count; their models
        are loaded from the `member/` artifact.

        Returns:
            `{(activation, seed): (member run id, MemberResult)}`.
        """
        return self.retried(
            f"reading the members of sweep run {sweep_run_id}",
            lambda: {
                key: (run.info.run_id, member_runs.read(self.client, key, run))
                for key, run in member_runs.find(
                    self.client, self.experiment_id, sweep_run_id
                ).items()
            },
        )

    def member_model_file(self, run_id):
        """The `.keras` file's bytes of a member's run (a Ray task logged it)."""
        return self.retried(
            f"reading the model of run {run_id}",
            lambda: member_runs.member_files(self.client, run_id)[0],
        )

    def member_keys(self, sweep_run_id):
        """As the base's, without loading the members' models."""
        members = member_runs.find(self.client, self.experiment_id, sweep_run_id)
        return {key: run.info.run_id for key, run in members.items()}

    def _sweep_id(self):
        """The parent's `kg.sweep_id` tag (sharded sweeps), else None."""
        if self.parent_run_id not in self._sweep_ids:
            self._sweep_ids[self.parent_run_id] = self.client.get_run(
                self.parent_run_id
            ).data.tags.get(store.SWEEP_ID_TAG)
        return self._sweep_ids[self.parent_run_id]

    # --- Params, artifacts, the summary. ---------------------------------

    def claim(self, run_id, key, value):
        """A write-once claim: MLflow params cannot change once logged.

        In a SQL store (sqlite, PostgreSQL behind `mlflow server`) the
        param's primary key (run, key) lets exactly one insert commit; the
        others fail ("Changing param values is not allowed"). Read back
        either way: a request that committed but whose answer was lost
        still counts as won.
        """
        try:
            self.client.log_param(run_id, key, value)
        except self.mlflow.exceptions.MlflowException:
            pass  # another value came first
        return self.client.get_run(run_id).data.params.get(key) == value

    def run_marks(self, run_id):
        data = self.retried(f"reading run {run_id}", lambda: self.client.get_run(run_id)).data
        return dict(data.params), dict(data.tags)

    def set_tag(self, run_id, key, value):
        """One try, not through `retried`: the lease's heartbeat thread
        calls it, and a missed beat is retried by the next one; a store
        already given up on is not tried."""
        if self.retried.down is not None:
            raise self.retried.down
        self.client.set_tag(run_id, key, value)

    def load_dict(self, run_id, artifact_file):
        with tempfile.TemporaryDirectory() as tmp:
            path = self.client.download_artifacts(run_id, artifact_file, tmp)
            with open(path) as f:
                return json.load(f)

    def log_dict(self, run_id, data, artifact_file):
        self.retried(
            f"logging {artifact_file}",
            lambda: self.client.log_dict(run_id, data, artifact_file),
        )

    def report_page(self, name):
        """The MLflow UI's page of the parent run's artifact report/`name`."""
        if self.parent_run_id is None:
            return ""
        return ui_url(self.tracking_uri, self.experiment_id, self.parent_run_id,
                      f"{REPORT_FOLDER}/{name}")

    def log_summary(self, metrics, tags, artifact_paths):
        """Summary metrics, tags and report files on the parent run."""
        Metric = self.mlflow.entities.Metric
        # One timestamp for every try: a metric logged again with the same
        # key, step, value and time is the same row, not a second one.
        now = int(time.time() * 1000)
        summary = [Metric(k, float(v), now, 0) for k, v in metrics.items() if _finite(v)]

        def log():
            self._log_metrics(self.parent_run_id, summary)
            for key, value in store.tag_strings(tags).items():
                self.client.set_tag(self.parent_run_id, key, value)
            for path in artifact_paths:
                self.client.log_artifact(self.parent_run_id, str(path), REPORT_FOLDER)

        self.retried("logging the sweep's summary and report", log)

    def _log_params(self, run_id, params):
        Param = self.mlflow.entities.Param
        items = [Param(k, store.param_text(v)) for k, v in sorted(params.items())]
        for start in range(0, len(items), PARAMS_PER_CALL):
            self.client.log_batch(run_id, params=items[start : start + PARAMS_PER_CALL])

    def _log_metrics(self, run_id, metrics):
        for start in range(0, len(metrics), METRICS_PER_CALL):
            self.client.log_batch(
                run_id, metrics=metrics[start : start + METRICS_PER_CALL]
            )

    # --- The model registry. ---------------------------------------------

    def register(
        self, run_id, model, model_name, alias, tags, description,
        pip_requirements, extra_artifacts=None, metadata=None, serving=None,
    ):
        """Logs `model` as a pyfunc in `run_id`, registers it, sets `alias`.

        The served model (`model_logging.log_pyfunc`) is the task's
        `serving` (`kg_service.tasks.base.Serving`: its pyfunc file,
        signature and code paths). A classifier's signature is `[-1,
        classes]` float32 out and no input schema: its pyfunc matches named
        columns to `metadata`'s feature names and takes unnamed rows in
        their order; `metadata` (feature and class names, in the MLmodel
        file) and `description` say what they mean.

        Returns:
            The new model version (an int, as a string per MLflow).
        """
        def log_model():
            return model_logging.log_pyfunc(
                self.mlflow, run_id, model,
                python_model=serving.python_model, make_signature=serving.signature,
                code_paths=serving.code_paths, pip_requirements=pip_requirements,
                metadata=metadata, extra_artifacts=extra_artifacts,
                keras_file=self._member_model_file(run_id),
            )

        return self.registry.register(run_id, model_name, alias, log_model, tags, description)

    def _member_model_file(self, run_id):
        """The member's `member/model.keras` where the run's artifacts are
        a local folder, else None. The served model copies it instead of
        saving the same model again (0.1 CPU s a model, issue 17); a
        remote store's would cost a download, so it is saved again."""
        folder = destinations.local_store_path(self.client.get_run(run_id).info.artifact_uri)
        if folder is None:
            return None
        path = os.path.join(folder, "member", member_runs.MEMBER_MODEL)
        return path if os.path.isfile(path) else None

    def set_version_tag(self, model_name, version, key, value):
        self.registry.set_version_tag(model_name, version, key, value)

    def version_numbers(self, model_name):
        return self.registry.version_numbers(model_name)


def _finite(value):
    try:
        return np.isfinite(float(value))
    except (TypeError, ValueError):
        return False
