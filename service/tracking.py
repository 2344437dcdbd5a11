"""Everything kg-train says to MLflow: runs, metrics, artifacts, registry.

The only module that imports mlflow (besides the pyfunc model file it logs).
"""

import abc
import contextlib
import json
import logging
import os
import pathlib
import re
import tempfile
import time
import urllib.parse
import warnings

import keras
import numpy as np

from kg_service import destinations
from kg_service.errors import ServiceError

_METRICS_PER_CALL = 1000  # MLflow's log_batch limit

# Deliberate choices MLflow warns about on every logged model: a float32
# tensor signature instead of predict() type hints, and no input example
# (input_example crashes keras logging, mlflow#16183). Its log_model forces
# a "once" filter, so these are caught and dropped rather than filtered.
_DELIBERATE = re.compile("Add type hints to the `predict`|An input example was not provided")
_MODEL_FILE = pathlib.Path(__file__).with_name("mlflow_model.py")
MEMBER_MODEL = "model.keras"  # each member's trained model, artifact member/


def _mlflow():
    import mlflow

    # MLflow's INFO chatter ("View run at...", "Created version") would
    # break the progress display; warnings and errors still show.
    for name in ("mlflow", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)
    return mlflow


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
        pip_requirements, metadata=None,
    ):
        """Registers `model` (from `run_id`) as a new version of
        `model_name`, moves `alias` to it, and returns the version."""

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

    def __init__(self, tracking_uri, experiment, create=True):
        self.mlflow = _mlflow()
        self.tracking_uri = tracking_uri
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

    @contextlib.contextmanager
    def sweep_run(self, run_name, params, tags, resume=None):
        """Opens the parent run of a sweep (or reopens `resume`, a run id,
        and sets `tags` on it; `params` are the first opening's);
        marks it FAILED on an error, KILLED on an interrupt."""
        if resume is None:
            run = self.client.create_run(
                self.experiment_id, run_name=run_name, tags=_strings(tags)
            )
            self.parent_run_id = run.info.run_id
            self._log_params(self.parent_run_id, params)
        else:
            self.parent_run_id = resume
            self.client.update_run(resume, status="RUNNING")
            for key, value in _strings(tags).items():
                self.client.set_tag(resume, key, value)
        status = "FAILED"
        try:
            yield self.parent_run_id
            status = "FINISHED"
        except KeyboardInterrupt:
            status = "KILLED"
            raise
        finally:
            self.client.set_terminated(self.parent_run_id, status)

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
        """Logs one (activation, seed) member as a child run; returns its id."""
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
        self.client.set_terminated(run_id, "FINISHED" if result.ok else "FAILED")
        return run_id

    def sweep_info(self, run_id):
        """`(experiment name, params, status)` of a sweep's parent run.

        Raises:
            ServiceError: if there is no such run, or it is not a sweep.
        """
        try:
            run = self.client.get_run(run_id)
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
        experiment = self.client.get_experiment(run.info.experiment_id).name
        return experiment, dict(run.data.params), run.info.status

    def finished_members(self, sweep_run_id):
        """The members of a sweep already in the store, as `MemberResult`s.

        Members logged FINISHED or FAILED (diverged) count; their models
        are loaded from the `member/` artifact.

        Returns:
            `{(activation, seed): (member run id, MemberResult)}`.
        """
        import keras

        import keras_gelu  # noqa: F401 -- registers its layers for loading
        from kg_service.results import MemberResult

        found = {}
        for key, run in self._member_runs(sweep_run_id).items():
            tags, metrics = run.data.tags, run.data.metrics
            history = {
                name: [m.value for m in sorted(
                    self.client.get_metric_history(run.info.run_id, name),
                    key=lambda m: m.step,
                )]
                for name in ("loss", "accuracy", "val_loss", "val_accuracy")
            }
            with tempfile.TemporaryDirectory() as tmp:
                path = self.client.download_artifacts(
                    run.info.run_id, f"member/{MEMBER_MODEL}", tmp
                )
                model = keras.saving.load_model(path)
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
            if run.info.status not in ("FINISHED", "FAILED") or "seed" not in tags:
                continue
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
        now = int(time.time() * 1000)
        self._log_metrics(
            self.parent_run_id,
            [Metric(k, float(v), now, 0) for k, v in metrics.items() if _finite(v)],
        )
        for key, value in _strings(tags).items():
            self.client.set_tag(self.parent_run_id, key, value)
        for path in artifact_paths:
            self.client.log_artifact(self.parent_run_id, str(path), "report")

    def log_dict(self, run_id, data, artifact_file):
        self.client.log_dict(run_id, data, artifact_file)

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
    ):
        """Logs `model` as a pyfunc in `run_id`, registers it, sets `alias`.

        The logged model carries its own copy of keras_gelu (code path) and
        a pyfunc loader that imports it, so `mlflow models serve` works in a
        fresh process that never imported keras_gelu. Its signature is one
        float32 tensor `[-1, features]` in and `[-1, classes]` out (clients
        send `{"inputs": [[...], ...]}`); a tensor spec cannot name its
        columns, so `metadata` (e.g. feature and class names, in the
        MLmodel file) and `description` say what they mean.

        Returns:
            The new model version (an int, as a string per MLflow).
        """
        import keras_gelu

        mlflow = self.mlflow
        signature = mlflow.models.ModelSignature(
            inputs=mlflow.types.Schema(
                [mlflow.types.TensorSpec(np.dtype("float32"), (-1, model.input_shape[-1]))]
            ),
            outputs=mlflow.types.Schema(
                [mlflow.types.TensorSpec(np.dtype("float32"), (-1, model.output_shape[-1]))]
            ),
        )
        with tempfile.TemporaryDirectory() as tmp:
            keras_path = os.path.join(tmp, "model.keras")
            model.save(keras_path)
            artifacts = {"keras_model": keras_path, **(extra_artifacts or {})}
            with mlflow.start_run(run_id=run_id, nested=True), warnings.catch_warnings(
                record=True
            ) as caught:
                warnings.simplefilter("always")
                info = mlflow.pyfunc.log_model(
                    name="model",
                    python_model=str(_MODEL_FILE),
                    artifacts=artifacts,
                    code_paths=[os.path.dirname(keras_gelu.__file__)],
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
        self.client.set_registered_model_alias(model_name, alias, version.version)
        return version.version

    def set_version_tag(self, model_name, version, key, value):
        self.client.set_model_version_tag(model_name, version, key, str(value))

    def next_version(self, model_name):
        """The version number the registry will give `model_name` next."""
        versions = self.client.search_model_versions(f"name='{model_name}'")
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
