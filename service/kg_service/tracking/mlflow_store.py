"""Everything kg-train says to MLflow: runs, metrics, artifacts, registry.

The only module that imports mlflow (besides the pyfunc model file it logs).
"""

import abc
import contextlib
import dataclasses
import json
import logging
import os
import pathlib
import random
import re
import tempfile
import time
import urllib.parse
import warnings

import numpy as np

from kg_service.tracking import destinations
from kg_service.errors import ServiceError
from kg_service.errors import StoreUnavailable

log = logging.getLogger("kg-train")

_METRICS_PER_CALL = 1000  # MLflow's log_batch limit

# Deliberate choices MLflow warns about on every logged model: a float32
# tensor signature instead of predict() type hints, and no input example
# (input_example crashes keras logging, mlflow#16183). Its log_model forces
# a "once" filter, so these are caught and dropped rather than filtered.
_DELIBERATE = re.compile("Add type hints to the `predict`|An input example was not provided")
_HERE = pathlib.Path(__file__).parents[1]  # kg_service/
MEMBER_MODEL = "model.keras"  # each member's trained model, artifact member/
# Set on a member's run once everything of it is logged: a run that a kill
# during registration left RUNNING (registration reopens it to log the
# served model) still counts as trained, and --resume finishes it.
LOGGED_TAG = "kg.member_logged"
# What log_member records once per member (step 0) beside a task's own
# `MemberResult.final` numbers.
_MEMBER_FINALS = frozenset(
    {"test_loss", "test_accuracy", "final_val_accuracy", "final_val_loss",
     "train_seconds", "epochs_to_threshold"}
)

# HTTP answers worth another try: MLflow's own list
# (mlflow.utils.request_utils._TRANSIENT_FAILURE_RESPONSE_CODES; a test
# keeps them equal). Any other 4xx is a request the store refused: raised
# at once.
TRANSIENT_HTTP_STATUS = frozenset({408, 429, 500, 502, 503, 504})
# MLflow's error codes for a store that is busy rather than refusing: it
# raises every OperationalError of a local database ("database is locked",
# disk I/O) as TEMPORARILY_UNAVAILABLE.
_TRANSIENT_ERROR_CODES = frozenset({"TEMPORARILY_UNAVAILABLE", "REQUEST_LIMIT_EXCEEDED"})
# Waits between tries: 1 s, doubling, at most 30 s, each drawn from the
# upper half of that ("equal jitter"), so sweeps sharing a server that
# came back do not all knock at once.
_FIRST_WAIT, _LONGEST_WAIT = 1.0, 30.0


def _mlflow():
    import mlflow

    # MLflow's INFO chatter ("View run at...", "Created version") would
    # break the progress display; warnings and errors still show.
    for name in ("mlflow", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)
    # It logs a traceback for every database error before raising it as an
    # MlflowException; a locked sqlite file retried here would print one
    # per try. The exception itself still carries the message.
    logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)
    return mlflow


def backoff_waits(window, rng=random):
    """The waits before each retry of a store operation, in seconds.

    They start at 1 s and double up to 30 s, each with jitter in its upper
    half, and are cut so that the last try comes at most `window` seconds
    after the first failure (a last, shorter wait lands it there).

    Example:
        >>> waits = backoff_waits(120)
        >>> sum(waits) <= 120 and len(waits) >= 6
        True
        >>> backoff_waits(0)
        ()
    """
    waits, total, step = [], 0.0, _FIRST_WAIT
    while total < window:
        wait = min(step * (0.5 + 0.5 * rng.random()), window - total)
        waits.append(wait)
        total += wait
        step = min(2 * step, _LONGEST_WAIT)
    return tuple(waits)


def transient(error):
    """Whether `error` is a store failure worth retrying: the store could
    not be reached, timed out, answered 5xx/429 or was locked, rather than
    refusing the request (4xx: invalid parameter, no such run...).

    Walks the exception's causes: MLflow wraps a refused connection as an
    MlflowException "API request ... failed" whose context is requests'
    ConnectionError.
    """
    import requests
    from mlflow.exceptions import RestException

    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(
            error,
            (
                ConnectionError,  # refused, reset, aborted, broken pipe
                TimeoutError,
                requests.exceptions.ConnectionError,
                requests.exceptions.Timeout,
                requests.exceptions.RetryError,  # 5xx, MLflow's retries spent
                requests.exceptions.ChunkedEncodingError,
            ),
        ):
            return True
        if isinstance(error, requests.exceptions.HTTPError):
            status = getattr(error.response, "status_code", None)
            return status in TRANSIENT_HTTP_STATUS
        if isinstance(error, RestException):  # the server's own answer
            return error.get_http_status_code() in TRANSIENT_HTTP_STATUS
        if getattr(error, "error_code", None) in _TRANSIENT_ERROR_CODES:
            return True
        error = error.__cause__ or error.__context__
    return False


def _reason(error):
    """The innermost cause of `error`, in one short line."""
    while error.__cause__ or error.__context__:
        error = error.__cause__ or error.__context__
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text[:200]}"


class TrackingStore(abc.ABC):
    """What the pipeline needs of a tracking store and model registry.

    The pipeline talks only to this interface. `Tracker` (MLflow) is the
    implementation a sweep uses; another backend implements these
    methods (MLflow's as the reference). `tests/service/memory_store.py` is an in-memory one that runs
    a whole sweep, which keeps this seam honest.
    """

    @abc.abstractmethod
    def sweep_run(self, run_name, params, tags, resume=None):
        """A context manager: opens the sweep's parent run (or reopens the
        run id `resume`) and yields its id; marks it finished, failed (on
        an error) or killed (on an interrupt)."""

    @abc.abstractmethod
    def sweep_info(self, run_id):
        """`(experiment name, params, status)` of a sweep's parent run;
        a ServiceError if it is not one."""

    @abc.abstractmethod
    def finished_members(self, sweep_run_id):
        """`{(activation, seed): (run id, MemberResult)}` of the members
        already logged under the sweep (finished or diverged), with their
        trained models: what a resumed sweep does not train again."""

    @abc.abstractmethod
    def join_sweep(self, run_name, params, tags, sweep_id):
        """Finds the parent run of the sharded sweep `sweep_id` in this
        experiment, or opens it; returns `(run id, created)`. Leaves its
        status alone (other jobs of the sweep may be running)."""

    @abc.abstractmethod
    def find_sweeps(self, sweep_id=None):
        """Parent run ids of this experiment's sweeps, newest first; with
        `sweep_id`, of that sharded sweep (or the sweep with that run id)."""

    @abc.abstractmethod
    def member_keys(self, sweep_run_id):
        """`{(activation, seed): run id}` of the members `finished_members`
        would return, without loading their models."""

    @abc.abstractmethod
    def claim(self, run_id, key, value):
        """Records `value` under `key` on the run unless a value is there
        already; True if the run now holds `value` (this caller won)."""

    @abc.abstractmethod
    def load_dict(self, run_id, artifact_file):
        """The JSON artifact `log_dict` stored, as plain data."""

    @abc.abstractmethod
    def log_dict(self, run_id, data, artifact_file):
        """Stores `data` as a JSON artifact of the run."""

    @abc.abstractmethod
    def log_member(self, result, params, tags):
        """Logs one `MemberResult` as a child run; returns its id."""

    @abc.abstractmethod
    def log_summary(self, metrics, tags, artifact_paths):
        """Summary metrics, tags and report files on the parent run."""

    @abc.abstractmethod
    def register(
        self, run_id, model, model_name, alias, tags, description,
        pip_requirements, metadata=None, serving="classifier",
    ):
        """Registers `model` (from `run_id`) as a new version of
        `model_name`, moves `alias` to it, and returns the version.
        `serving` is the task's kind of served model (a key of `SERVING`)."""

    @abc.abstractmethod
    def set_version_tag(self, model_name, version, key, value):
        """Tags one registered model version."""

    @abc.abstractmethod
    def next_version(self, model_name):
        """The version number `register` will give `model_name` next."""


class Tracker(TrackingStore):
    """One sweep's view of an MLflow tracking server and model registry.

    Args:
        tracking_uri: e.g. `sqlite:///mlflow.db` or `http://host:5000`.
        experiment: MLflow experiment name (created if missing).
        create: False: a missing experiment is a ServiceError instead.
    """

    def __init__(self, tracking_uri, experiment, retry_seconds=120.0, create=True):
        self.mlflow = _mlflow()
        self.tracking_uri = tracking_uri
        self.retry_seconds = retry_seconds
        self._down = None  # the StoreUnavailable once retries ran out
        destinations.check_store(tracking_uri)
        try:
            # A server that is up but fails would otherwise be retried
            # for minutes (MLflow's default: 7 retries, exponential backoff).
            with _environ(
                MLFLOW_HTTP_REQUEST_MAX_RETRIES="0",
                MLFLOW_HTTP_REQUEST_TIMEOUT=str(destinations.SERVER_TIMEOUT),
            ), _sqlite_setup_lock(tracking_uri):
                self.client = self.mlflow.MlflowClient(
                    tracking_uri, registry_uri=tracking_uri
                )
                # Both stores (tracking, registry) migrate their schema on
                # first use: do it here, under the lock.
                self.client.search_registered_models(max_results=1)
                found = self.client.get_experiment_by_name(experiment)
                if found is None and not create:
                    names = [e.name for e in self.client.search_experiments()]
                    raise _NoExperiment(experiment, names)
                self.experiment_id = (
                    found.experiment_id
                    if found
                    else self.client.create_experiment(experiment)
                )
                artifacts = self.client.get_experiment(self.experiment_id).artifact_location
        except _NoExperiment as missing:
            raise ServiceError(str(missing)) from None
        except Exception as error:  # connection refused, bad URI, bad DB
            raise ServiceError(_store_problem(tracking_uri, error)) from None
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
        self.parent_run_id = None
        self._sweep_ids = {}  # parent run id -> its kg.sweep_id tag

    def _retried(self, doing, operation, retry=True):
        """Runs `operation()` (one idempotent store operation), retrying it
        through transient failures for `retry_seconds` after the first one.

        MLflow's own per-request retry (urllib3: 7 retries, about 4 minutes,
        silent, resending a create whose answer was lost) is off for these
        calls unless the user set MLFLOW_HTTP_REQUEST_MAX_RETRIES, and a
        request waits at most `retry_seconds` (10 to 120 s) for its answer:
        one policy, one place, bounded in total time. Each retry is a
        warning the user sees.

        Raises:
            StoreUnavailable: once the window has passed (and at once for
                every later call: the sweep is over).
            Exception: a failure that is not transient (a 4xx), unchanged.
        """
        if self._down is not None:
            raise self._down
        waits = None
        attempt = 0
        first_failure = None
        while True:
            try:
                with _environ(
                    MLFLOW_HTTP_REQUEST_MAX_RETRIES="0",
                    MLFLOW_HTTP_REQUEST_TIMEOUT=str(int(min(120, max(10, self.retry_seconds)))),
                ):
                    result = operation()
                if first_failure is not None:
                    log.warning(
                        f"tracking store {self.tracking_uri} is back after "
                        f"{time.monotonic() - first_failure:.0f} s; {doing} done."
                    )
                return result
            except Exception as error:
                if not transient(error):
                    raise
                if waits is None:
                    first_failure = time.monotonic()
                    waits = backoff_waits(self.retry_seconds) if retry else ()
                if attempt == len(waits):
                    self._down = StoreUnavailable(
                        f"the tracking store {self.tracking_uri} failed while "
                        f"{doing} and did not come back within "
                        f"{self.retry_seconds:g} s ({attempt + 1} tries; last error: "
                        f"{_reason(error)})."
                    )
                    raise self._down from None
                log.warning(
                    f"tracking store {self.tracking_uri} unreachable while {doing} "
                    f"({_reason(error)}); retrying in {waits[attempt]:.0f} s "
                    f"(attempt {attempt + 2}/{len(waits) + 1})"
                )
                time.sleep(waits[attempt])
                attempt += 1

    @contextlib.contextmanager
    def sweep_run(self, run_name, params, tags, resume=None):
        """Opens the parent run of a sweep (or reopens `resume`, a run id,
        and sets `tags` on it; `params` are the first opening's);
        marks it FAILED on an error, KILLED on an interrupt."""
        if resume is None:
            run = self._retried(
                "creating the sweep's run",
                lambda: self.client.create_run(
                    self.experiment_id, run_name=run_name, tags=_strings(tags)
                ),
            )
            self.parent_run_id = run.info.run_id
            self._retried(
                "logging the sweep's parameters",
                lambda: self._log_params(self.parent_run_id, params),
            )
        else:
            self.parent_run_id = resume

            def reopen():
                self.client.update_run(resume, status="RUNNING")
                for key, value in _strings(tags).items():
                    self.client.set_tag(resume, key, value)

            self._retried("reopening the sweep's run", reopen)
        status = "FAILED"
        try:
            yield self.parent_run_id
            status = "FINISHED"
        except KeyboardInterrupt:
            status = "KILLED"
            raise
        finally:
            self._close_sweep(status)

    def _close_sweep(self, status):
        """Marks the sweep's run `status`. A sweep that failed or was
        interrupted tries once, and never hides why it stopped: a store
        that is down leaves the run RUNNING, which --resume accepts."""
        if self._down is not None:
            return
        if status == "FINISHED":
            self._retried(
                "marking the sweep finished",
                lambda: self.client.set_terminated(self.parent_run_id, status),
            )
            return
        try:
            self._retried(
                f"marking the sweep {status}",
                lambda: self.client.set_terminated(self.parent_run_id, status),
                retry=False,
            )
        except Exception as error:
            log.warning(
                f"could not mark sweep run {self.parent_run_id} {status} "
                f"({_reason(error)}); it stays RUNNING, and --resume takes it."
            )

    def join_sweep(self, run_name, params, tags, sweep_id):
        """The parent run of sharded sweep `sweep_id`, found or created.

        Jobs that start at once may each create one: each then reads the
        sweep's parent runs back and keeps the earliest (start time, then
        run id), deleting its own if that is not it. Whatever parent a
        job's members name, they carry the `kg.sweep_id` tag, by which the
        sweep's members are found (`member_keys`, `finished_members`).

        Returns:
            `(run id, created)`: created is True if this call made it.
        """
        found = self._sweep_parents(sweep_id)
        mine = None
        if not found:
            mine = self.client.create_run(
                self.experiment_id,
                run_name=run_name,
                tags=_strings({**tags, "kg.sweep_id": sweep_id}),
            ).info.run_id
            self._log_params(mine, params)
            found = self._sweep_parents(sweep_id)
        first = found[0].info.run_id
        if mine is not None and mine != first:
            self.client.delete_run(mine)
        self.parent_run_id = first
        return first, mine == first

    def find_sweeps(self, sweep_id=None):
        """Parent run ids of this experiment's sweeps, newest first."""
        runs = self._sweep_parents()
        if sweep_id is not None:
            runs = [
                r for r in runs
                if sweep_id in (r.data.tags.get("kg.sweep_id"), r.info.run_id)
            ]
        return [r.info.run_id for r in reversed(runs)]

    def _sweep_parents(self, sweep_id=None):
        """Sweep parent runs, oldest first (start time, then run id)."""
        query = "tags.`kg.role` = 'sweep'"
        if sweep_id is not None:
            query += f" and tags.`kg.sweep_id` = '{sweep_id}'"
        runs = self.client.search_runs(
            [self.experiment_id], filter_string=query, max_results=10000
        )
        return sorted(runs, key=lambda r: (r.info.start_time, r.info.run_id))

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

    def load_dict(self, run_id, artifact_file):
        with tempfile.TemporaryDirectory() as tmp:
            path = self.client.download_artifacts(run_id, artifact_file, tmp)
            with open(path) as f:
                return json.load(f)

    def log_member(self, result, params, tags):
        """Logs one (activation, seed) member as a child run; returns its id.

        A run of the same member already under the sweep is a half-logged
        one (a try cut off by a store failure, or an interrupt while
        logging): it is deleted first, so each member has one run, with
        each metric once, however many tries it took.
        """
        return self._retried(
            f"logging member {result.activation} seed {result.seed}",
            lambda: self._log_member(result, params, tags),
        )

    def _log_member(self, result, params, tags):
        for stale in self.client.search_runs(
            [self.experiment_id],
            filter_string=(
                f"tags.mlflow.parentRunId = '{self.parent_run_id}' and "
                f"tags.activation = '{result.activation}' and tags.seed = '{result.seed}'"
            ),
        ):
            self.client.delete_run(stale.info.run_id)
        run = self.client.create_run(
            self.experiment_id,
            run_name=f"{result.activation}-seed{result.seed}",
            tags=_strings(
                {
                    "mlflow.parentRunId": self.parent_run_id,
                    "kg.sweep_id": self._sweep_id(),
                    "activation": result.activation,
                    "seed": result.seed,
                    **tags,
                }
            ),
        )
        run_id = run.info.run_id
        self._log_params(run_id, {**params, "activation": result.activation, "seed": result.seed})
        Metric = self.mlflow.entities.Metric
        now = int(time.time() * 1000)
        metrics = [
            Metric(key, float(value), now, step)
            for key, values in result.history.items()
            for step, value in enumerate(values, start=1)
        ]
        final = {
            "test_loss": result.test_loss,
            "test_accuracy": result.test_accuracy,
            "final_val_accuracy": result.val_accuracy,
            "final_val_loss": result.val_loss,
            "train_seconds": result.train_seconds,
            **result.final,
        }
        if result.epochs_to_threshold is not None:
            final["epochs_to_threshold"] = result.epochs_to_threshold
        metrics += [Metric(k, float(v), now, 0) for k, v in final.items()]
        self._log_metrics(run_id, metrics)
        if result.model is not None:
            # The trained member itself: a resumed (or sharded) sweep
            # rebuilds its results from the store without retraining.
            with tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, MEMBER_MODEL)
                result.model.save(path)
                self.client.log_artifact(run_id, path, "member")
        if not result.ok:
            self.client.set_tag(run_id, "failure.reason", result.failure)
            self.client.set_tag(run_id, "failure.epoch", str(result.failed_epoch))
        self.client.set_tag(run_id, LOGGED_TAG, "true")
        self.client.set_terminated(run_id, "FINISHED" if result.ok else "FAILED")
        return run_id

    def sweep_info(self, run_id):
        """`(experiment name, params, status)` of a sweep's parent run.

        Raises:
            ServiceError: if there is no such run, or it is not a sweep.
        """
        try:
            run = self._retried(
                f"reading run {run_id}", lambda: self.client.get_run(run_id)
            )
        except self.mlflow.exceptions.MlflowException:
            raise ServiceError(
                f"--resume {run_id}: no such run in the tracking store "
                f"{self.tracking_uri}. Use the parent run id kg-train printed "
                f"when the sweep started (or see it in the MLflow UI)."
            ) from None
        if run.data.tags.get("kg.role") != "sweep":
            raise ServiceError(
                f"--resume {run_id}: that run is not a kg-train sweep's parent "
                f"run (it is a member run, or not from kg-train)."
            )
        experiment = self._retried(
            f"reading run {run_id}",
            lambda: self.client.get_experiment(run.info.experiment_id).name,
        )
        return experiment, dict(run.data.params), run.info.status

    def finished_members(self, sweep_run_id):
        """The members of a sweep already in the store, as `MemberResult`s.

        Members logged FINISHED or FAILED (diverged) count; their models
        are loaded from the `member/` artifact.

        Returns:
            `{(activation, seed): (member run id, MemberResult)}`.
        """
        return self._retried(
            f"reading the members of sweep run {sweep_run_id}",
            lambda: self._finished_members(sweep_run_id),
        )

    def _finished_members(self, sweep_run_id):
        import keras

        import keras_gelu.api  # noqa: F401 -- registers its layers for loading
        from kg_service.tasks.language import lm_layers  # noqa: F401 -- a language model's own layers
        from kg_service.results import MemberResult

        found = {}
        for key, run in self._member_runs(sweep_run_id).items():
            tags, metrics = run.data.tags, run.data.metrics
            history, final = {}, {}
            for name in sorted(metrics):
                points = sorted(
                    self.client.get_metric_history(run.info.run_id, name),
                    key=lambda m: m.step,
                )
                if points and points[-1].step >= 1:  # a per-epoch series
                    history[name] = [m.value for m in points]
                elif name not in _MEMBER_FINALS:
                    final[name] = metrics[name]  # a task's own, e.g. test_perplexity
            with tempfile.TemporaryDirectory() as tmp:
                path = self.client.download_artifacts(
                    run.info.run_id, f"member/{MEMBER_MODEL}", tmp
                )
                # compile=False: the report and the registry need the weights
                # only; restoring the optimizer printed Keras' "Skipping variable
                # loading for optimizer" once per member.
                model = keras.saving.load_model(path, compile=False)
            epoch = tags.get("failure.epoch")
            found[key] = MemberResult(
                activation=key[0],
                seed=key[1],
                history=history,
                test_loss=metrics["test_loss"],
                test_accuracy=metrics["test_accuracy"],
                epochs_to_threshold=(
                    int(metrics["epochs_to_threshold"])
                    if "epochs_to_threshold" in metrics
                    else None
                ),
                model=model,
                train_seconds=metrics.get("train_seconds", 0.0),
                failure=tags.get("failure.reason"),
                failed_epoch=int(epoch) if epoch else None,
                final=final,
            )
            found[key] = (run.info.run_id, found[key])
        return found

    def member_keys(self, sweep_run_id):
        return {key: run.info.run_id for key, run in self._member_runs(sweep_run_id).items()}

    def _member_runs(self, sweep_run_id):
        """`{(activation, seed): run}` of the sweep's finished or diverged
        members: by the `kg.sweep_id` tag for a sharded sweep (its jobs'
        members), else as the parent run's children. Should a member be
        there twice, the earliest run counts."""
        sweep_id = self.client.get_run(sweep_run_id).data.tags.get("kg.sweep_id")
        query = (
            f"tags.`kg.sweep_id` = '{sweep_id}'"
            if sweep_id
            else f"tags.mlflow.parentRunId = '{sweep_run_id}'"
        )
        runs = self.client.search_runs(
            [self.experiment_id], filter_string=query, max_results=10000
        )
        found = {}
        for run in sorted(runs, key=lambda r: (r.info.start_time, r.info.run_id)):
            tags = run.data.tags
            logged = tags.get(LOGGED_TAG) == "true"
            if run.info.status not in ("FINISHED", "FAILED") and not logged:
                continue
            if "seed" not in tags:
                continue
            if run.info.status == "RUNNING":  # killed while registering
                status = "FAILED" if "failure.reason" in tags else "FINISHED"
                self.client.set_terminated(run.info.run_id, status)
            found.setdefault((tags["activation"], int(tags["seed"])), run)
        return found

    def _sweep_id(self):
        """The parent's `kg.sweep_id` tag (sharded sweeps), else None."""
        if self.parent_run_id not in self._sweep_ids:
            self._sweep_ids[self.parent_run_id] = self.client.get_run(
                self.parent_run_id
            ).data.tags.get("kg.sweep_id")
        return self._sweep_ids[self.parent_run_id]

    def log_summary(self, metrics, tags, artifact_paths):
        """Summary metrics, tags and report files on the parent run."""
        Metric = self.mlflow.entities.Metric
        # One timestamp for every try: a metric logged again with the same
        # key, step, value and time is the same row, not a second one.
        now = int(time.time() * 1000)
        summary = [Metric(k, float(v), now, 0) for k, v in metrics.items() if _finite(v)]

        def log():
            self._log_metrics(self.parent_run_id, summary)
            for key, value in _strings(tags).items():
                self.client.set_tag(self.parent_run_id, key, value)
            for path in artifact_paths:
                self.client.log_artifact(self.parent_run_id, str(path), "report")

        self._retried("logging the sweep's summary and report", log)

    def log_dict(self, run_id, data, artifact_file):
        self._retried(
            f"logging {artifact_file}",
            lambda: self.client.log_dict(run_id, data, artifact_file),
        )

    def register(
        self,
        run_id,
        model,
        model_name,
        alias,
        tags,
        description,
        pip_requirements,
        extra_artifacts=None,
        metadata=None,
        serving="classifier",
    ):
        """Logs `model` as a pyfunc in `run_id`, registers it, sets `alias`.

        The logged model carries its own copy of keras_gelu (code path) and
        a pyfunc loader that imports it, so `mlflow models serve` works in a
        fresh process that never imported keras_gelu. Its signature is one
        float32 tensor `[-1, features]` in and `[-1, classes]` out (clients
        send `{"inputs": [[...], ...]}`); a tensor spec cannot name its
        columns, so `metadata` (e.g. feature and class names, in the
        MLmodel file) and `description` say what they mean.

        Retried as one operation: a try that failed after its version was
        created (its answer lost) finds that version and does not make a
        second one.

        Returns:
            The new model version (an int, as a string per MLflow).
        """
        known = self._retried(
            f"reading the versions of {model_name!r}",
            lambda: self._versions_of(model_name, run_id),
        )
        first_try = True

        def register():
            nonlocal first_try
            made = () if first_try else self._versions_of(model_name, run_id) - known
            first_try = False
            if made:
                version = str(max(made))
            else:
                version = self._register(
                    run_id, model, model_name, tags, description,
                    pip_requirements, extra_artifacts, metadata, serving,
                )
            self.client.set_registered_model_alias(model_name, alias, version)
            return version

        return self._retried(f"registering {model_name!r}", register)

    def _versions_of(self, model_name, run_id):
        return {
            int(v.version)
            for v in self.client.search_model_versions(
                f"name='{model_name}' and run_id='{run_id}'"
            )
        }

    def _register(
        self, run_id, model, model_name, tags, description, pip_requirements,
        extra_artifacts, metadata, serving,
    ):
        import keras_gelu

        mlflow = self.mlflow
        python_model, make_signature, code = SERVING[serving]
        signature = make_signature(mlflow, model)
        with tempfile.TemporaryDirectory() as tmp:
            keras_path = os.path.join(tmp, "model.keras")
            model.save(keras_path)
            artifacts = {"keras_model": keras_path, **(extra_artifacts or {})}
            with mlflow.start_run(run_id=run_id, nested=True), warnings.catch_warnings(
                record=True
            ) as caught:
                warnings.simplefilter("always")
                _test_pause("register")
                info = mlflow.pyfunc.log_model(
                    name="model",
                    python_model=str(_HERE / python_model),
                    artifacts=artifacts,
                    code_paths=[os.path.dirname(keras_gelu.__file__)]
                    + [str(_HERE / path) for path in code],
                    signature=signature,
                    pip_requirements=pip_requirements,
                    metadata=metadata,
                )
            for warning in caught:
                if not _DELIBERATE.search(str(warning.message)):
                    warnings.warn_explicit(
                        warning.message, warning.category, warning.filename, warning.lineno
                    )
        try:
            self.client.get_registered_model(model_name)
        except mlflow.exceptions.MlflowException:
            self.client.create_registered_model(model_name)
        version = self.client.create_model_version(
            model_name,
            info.model_uri,
            run_id=run_id,
            tags=_strings(tags),
            description=description,
            model_id=info.model_id,
        )
        return version.version

    def set_version_tag(self, model_name, version, key, value):
        self._retried(
            f"tagging {model_name!r} version {version}",
            lambda: self.client.set_model_version_tag(model_name, version, key, str(value)),
        )

    def next_version(self, model_name):
        """The version number the registry will give `model_name` next."""
        versions = self._retried(
            f"reading the versions of {model_name!r}",
            lambda: self.client.search_model_versions(f"name='{model_name}'"),
        )
        return 1 + max((int(v.version) for v in versions), default=0)

    def _log_params(self, run_id, params):
        Param = self.mlflow.entities.Param
        items = [Param(k, param_text(v)) for k, v in sorted(params.items())]
        for start in range(0, len(items), 100):
            self.client.log_batch(run_id, params=items[start : start + 100])

    def _log_metrics(self, run_id, metrics):
        for start in range(0, len(metrics), _METRICS_PER_CALL):
            self.client.log_batch(
                run_id, metrics=metrics[start : start + _METRICS_PER_CALL]
            )


def _classifier_signature(mlflow, model):
    """float32 `[-1, features]` in, `[-1, classes]` probabilities out."""
    return mlflow.models.ModelSignature(
        inputs=mlflow.types.Schema(
            [mlflow.types.TensorSpec(np.dtype("float32"), (-1, model.input_shape[-1]))]
        ),
        outputs=mlflow.types.Schema(
            [mlflow.types.TensorSpec(np.dtype("float32"), (-1, model.output_shape[-1]))]
        ),
    )


LM_DEFAULT_NEW_TOKENS = 32  # mlflow_lm.DEFAULT_NEW_TOKENS: the same when no params come


def _language_model_signature(mlflow, model):
    """A `prompt` string column in; `continuation` and the next-byte
    log-probabilities out; `max_new_tokens` a request parameter."""
    from mlflow.types import ColSpec
    from mlflow.types import DataType
    from mlflow.types import ParamSchema
    from mlflow.types import ParamSpec
    from mlflow.types import Schema
    from mlflow.types.schema import Array

    return mlflow.models.ModelSignature(
        inputs=Schema([ColSpec(DataType.string, "prompt")]),
        outputs=Schema(
            [
                ColSpec(DataType.string, "continuation"),
                ColSpec(Array(DataType.double), "next_token_logprobs"),
            ]
        ),
        params=ParamSchema(
            [ParamSpec("max_new_tokens", DataType.long, LM_DEFAULT_NEW_TOKENS)]
        ),
    )


# Task.serving -> (the pyfunc model file, its signature, the code paths
# beside keras_gelu that its model needs to load), all in this folder.
SERVING = {
    "classifier": ("tasks/classification/pyfunc.py", _classifier_signature, ()),
    "language_model": (
        "tasks/language/pyfunc.py",
        _language_model_signature,
        ("tasks/language/lm_layers.py",),
    ),
}


class _NoExperiment(Exception):
    def __init__(self, name, names):
        import difflib

        close = difflib.get_close_matches(name, names, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        known = ", ".join(repr(n) for n in sorted(names)) or "none"
        super().__init__(
            f"--experiment {name!r}: no such experiment in the tracking store "
            f"(it has: {known}).{hint}"
        )


def _test_pause(point):
    """For the kill tests: with KG_TEST_PAUSE=<point>, writes the file
    KG_TEST_PAUSE_MARKER and waits there until the process is killed, so
    that a test kills it at a known point, not after a guessed delay."""
    if os.environ.get("KG_TEST_PAUSE") != point:
        return
    pathlib.Path(os.environ["KG_TEST_PAUSE_MARKER"]).write_text(str(os.getpid()))
    while True:
        time.sleep(1)


@contextlib.contextmanager
def _sqlite_setup_lock(tracking_uri):
    """Serializes opening a sqlite store among kg-train processes.

    Two sweeps started at once on a new sqlite file both ran MLflow's
    schema migration, and the second failed ("duplicate column name",
    measured); two creating the same experiment race the same way. The
    lock (an flock on `<db>.lock`) covers only store setup and
    get-or-create of the experiment; later writes are sqlite's own
    transactions.
    """
    prefix = "sqlite:///"
    if not tracking_uri.startswith(prefix):
        yield
        return
    import fcntl

    db = pathlib.Path(tracking_uri[len(prefix):])
    with open(f"{db}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _store_problem(uri, error):
    from mlflow.tracking.registry import UnsupportedModelRegistryStoreURIException

    if isinstance(error, UnsupportedModelRegistryStoreURIException):
        scheme = urllib.parse.urlsplit(uri).scheme
        known = ", ".join(f"{s}:" for s in error.supported_uri_schemes if s)
        return (
            f"cannot use the MLflow tracking store {uri!r}: MLflow does not know "
            f"its scheme {scheme + ':'!r} (it knows {known} and plain folder "
            f"paths). {destinations.URI_HELP}"
        )
    refused = re.search(r"error code (401|403)\b", str(error))
    if refused:
        return (
            f"the MLflow tracking server {uri} refused the request (HTTP "
            f"{refused.group(1)}, {'not signed in' if refused.group(1) == '401' else 'no permission'}): "
            f"set MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD to an account "
            f"of its basic-auth app{'' if refused.group(1) == '401' else ' that may do this'}."
        )
    return (
        f"cannot use the MLflow tracking store {uri!r}: "
        f"{type(error).__name__}: {error}. {destinations.URI_HELP}"
    )


@contextlib.contextmanager
def _environ(**values):
    """Sets environment variables the user has not set, for a block."""
    added = {k: v for k, v in values.items() if k not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)


def pip_requirements():
    """Pinned requirements of a logged model (explicit: no inference)."""
    import keras

    requirements = [f"keras=={keras.__version__}", f"numpy=={np.__version__}"]
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        requirements.append(f"tensorflow=={tf.__version__}")
    elif backend == "jax":
        import jax

        requirements.append(f"jax=={jax.__version__}")
    elif backend == "torch":
        import torch

        requirements.append(f"torch=={torch.__version__.split('+')[0]}")
    return requirements


def library_versions():
    import platform

    import keras

    import keras_gelu

    versions = {
        "python": platform.python_version(),
        "keras": keras.__version__,
        "keras_gelu": keras_gelu.__version__,
        "numpy": np.__version__,
        "mlflow": _mlflow().__version__,
    }
    for name in ("tensorflow", "jax", "torch", "sklearn"):
        try:
            module = __import__(name)
            versions[name] = module.__version__
        except Exception:
            pass
    return {f"version.{k}": v for k, v in versions.items()}


def param_text(value):
    if isinstance(value, (list, tuple, dict)):
        value = json.dumps(value)
    value = str(value)
    return value if len(value) <= 6000 else value[:5997] + "..."


def _strings(tags):
    return {k: str(v) for k, v in tags.items() if v is not None}


def _finite(value):
    try:
        return np.isfinite(float(value))
    except (TypeError, ValueError):
        return False


@dataclasses.dataclass(frozen=True)
class RegisteredVersion:
    """One registered model version, as `kg models` lists it."""

    name: str
    version: int
    aliases: tuple
    activation: str = None
    seed: int = None
    dataset: str = None
    val_accuracy: float = None
    test_accuracy: float = None
    saved_model: str = None
    run_id: str = None
    created: str = None  # ISO 8601, UTC
    description: str = None


def registered_versions(tracking_uri, names=()):
    """Every version of the registered models (or of `names`), newest first,
    with what kg-train's register stage tagged them with.

    Raises:
        ServiceError: if the store cannot be read, or a name is unknown.
    """
    import datetime

    mlflow = _mlflow()
    destinations.check_store(tracking_uri)
    try:
        # check_store saw the server answer: no retries, MLflow's own timeout
        # (a basic-auth server's first answers take seconds: password hashing).
        with _environ(MLFLOW_HTTP_REQUEST_MAX_RETRIES="0"):
            client = mlflow.MlflowClient(tracking_uri, registry_uri=tracking_uri)
            known = sorted(m.name for m in client.search_registered_models(max_results=1000))
            for name in names:
                if name not in known:
                    raise ServiceError(
                        f"no registered model {name!r} in {tracking_uri}; it holds "
                        f"{', '.join(known) or 'none'}.{_did_you_mean(name, known)}"
                    )
            found = []
            for name in names or known:
                # search_model_versions leaves aliases out; the model has them.
                aliases = client.get_registered_model(name).aliases or {}
                for v in client.search_model_versions(f"name='{name}'"):
                    held = tuple(sorted(a for a, n in aliases.items() if str(n) == str(v.version)))
                    found.append(_registered_version(v, held, datetime))
    except ServiceError:
        raise
    except Exception as error:
        raise ServiceError(_store_problem(tracking_uri, error)) from None
    return sorted(found, key=lambda v: (v.name, -v.version))


def _registered_version(v, aliases, datetime):
    tags = v.tags or {}

    def number(key, kind=float):
        try:
            return kind(tags[key])
        except (KeyError, ValueError):
            return None

    return RegisteredVersion(
        name=v.name,
        version=int(v.version),
        aliases=aliases,
        activation=tags.get("activation"),
        seed=number("seed", int),
        dataset=tags.get("dataset"),
        val_accuracy=number("val_accuracy"),
        test_accuracy=number("test_accuracy"),
        saved_model=tags.get("saved_model"),
        run_id=v.run_id,
        created=datetime.datetime.fromtimestamp(
            v.creation_timestamp / 1000, datetime.timezone.utc
        ).isoformat(timespec="seconds"),
        description=v.description or None,
    )


def _did_you_mean(name, known):
    import difflib

    close = difflib.get_close_matches(name, known, n=1)
    return f" Did you mean {close[0]!r}?" if close else ""
