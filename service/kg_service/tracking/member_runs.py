"""A sweep member's MLflow run: the files logged beside it, the query that
finds a sweep's members, and the `MemberResult` a member's run holds.

`mlflow_store.Tracker` writes and reads members through these; `kg results`
reads a member's test correctness by `MEMBER_TEST_CORRECT`.
"""

import dataclasses
import os
import tempfile

import numpy as np

from kg_service.results import MemberResult
from kg_service.tasks import base as tasks
from kg_service.tracking import store

MEMBER_MODEL = "model.keras"  # each member's trained model, artifact member/
MEMBER_TEST_CORRECT = "test_correct.npy"  # its per-test-example correctness, beside it
# Set on a member's run once everything of it is logged: a run that a kill
# during registration left RUNNING (registration reopens it to log the
# served model) still counts as trained, and --resume finishes it.
LOGGED_TAG = "kg.member_logged"


def log_files(client, run_id, result):
    """The trained member itself, and which test examples it got right,
    as the run's `member/` artifact: a resumed (or sharded) sweep rebuilds
    its results, the per-example McNemar test included, without
    retraining. Nothing is logged for a member that has neither."""
    if result.model is None and result.test_correct is None:
        return
    with tempfile.TemporaryDirectory() as tmp:
        if result.model is not None:
            result.model.save(os.path.join(tmp, MEMBER_MODEL))
        if result.test_correct is not None:
            np.save(os.path.join(tmp, MEMBER_TEST_CORRECT), np.asarray(result.test_correct))
        client.log_artifacts(run_id, tmp, "member")


def find(client, experiment_id, sweep_run_id):
    """`{(activation, seed): run}` of the sweep's finished or diverged
    members: by the `kg.sweep_id` tag for a sharded sweep (its jobs'
    members), else as the parent run's children. Should a member be
    there twice, the earliest run counts."""
    sweep_id = client.get_run(sweep_run_id).data.tags.get(store.SWEEP_ID_TAG)
    query = (
        f"tags.`{store.SWEEP_ID_TAG}` = '{sweep_id}'"
        if sweep_id
        else f"tags.mlflow.parentRunId = '{sweep_run_id}'"
    )
    runs = client.search_runs([experiment_id], filter_string=query, max_results=10000)
    found = {}
    for run in sorted(runs, key=lambda r: (r.info.start_time, r.info.run_id)):
        tags = run.data.tags
        logged = tags.get(LOGGED_TAG) == "true"
        if run.info.status not in store.MEMBER_DONE and not logged:
            continue
        if "seed" not in tags:
            continue
        if run.info.status == store.RUNNING:  # killed while registering
            status = store.FAILED if "failure.reason" in tags else store.FINISHED
            client.set_terminated(run.info.run_id, status)
        found.setdefault((tags["activation"], int(tags["seed"])), run)
    return found


def read(client, key, run):
    """The `MemberResult` a member's run holds (its model loads on first use)."""
    tags, metrics = run.data.tags, run.data.metrics
    history, final = {}, {}
    for name in sorted(metrics):
        points = sorted(client.get_metric_history(run.info.run_id, name), key=lambda m: m.step)
        if points and points[-1].step >= 1:  # a per-epoch series
            history[name] = [m.value for m in points]
        elif name not in store.MEMBER_FINALS:
            final[name] = metrics[name]  # a task's own, e.g. test_perplexity
    model_file = test_correct = None
    if tags.get("kg.role") != store.TUNING_ROLE:  # a tuning member keeps its scores only
        model_file, test_correct = member_files(client, run.info.run_id)
    epoch = tags.get("failure.epoch")
    result = StoredMemberResult(
        activation=key[0],
        seed=key[1],
        history=history,
        test_loss=metrics["test_loss"],
        test_accuracy=metrics["test_accuracy"],
        epochs_to_threshold=(
            int(metrics["epochs_to_threshold"]) if "epochs_to_threshold" in metrics else None
        ),
        train_seconds=metrics.get("train_seconds", 0.0),
        failure=tags.get("failure.reason"),
        failed_epoch=int(epoch) if epoch else None,
        final=final,
        test_correct=test_correct,
    )
    result.model_file = model_file
    return result


def member_files(client, run_id):
    """`(the .keras file's bytes, the test correctness or None)` of a member's run."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = client.download_artifacts(run_id, "member", tmp)
        with open(os.path.join(folder, MEMBER_MODEL), "rb") as f:
            model_file = f.read()
        kept = os.path.join(folder, MEMBER_TEST_CORRECT)
        # Members logged before it was kept have none.
        return model_file, (np.load(kept) if os.path.exists(kept) else None)


def from_run(result, model_source):
    """A `StoredMemberResult` with `result`'s numbers whose model comes
    from `model_source()` (the `.keras` file's bytes, or None) on first
    use: a member a Ray task trained and logged (`kg_service.execution`)."""
    numbers = {f.name: getattr(result, f.name) for f in dataclasses.fields(MemberResult)}
    stored = StoredMemberResult(**{**numbers, "model": None})
    stored.model_source = model_source
    return stored


class StoredMemberResult(MemberResult):
    """A member read back from the store: its Keras model loads on first use.

    A report draws only each activation's panel member, and a resumed sweep
    registers only champions, so most members' models are never used
    (loading one is Keras' deserialization, seconds for a language model).
    `model_file` holds the `.keras` file's bytes until then; assigning
    `model` replaces them.
    """

    model_file = None
    model_source = None  # a callable giving `model_file` when first needed

    @property
    def model(self):
        if self.model_file is None and self.model_source is not None:
            self.model_file, self.model_source = self.model_source(), None
        if self.model_file is not None:
            self.__dict__["_model"] = _load(self.model_file)
            self.model_file = None
        return self.__dict__.get("_model")

    @model.setter
    def model(self, value):
        self.model_file = self.model_source = None
        self.__dict__["_model"] = value


def _load(model_file):
    # Keras (TensorFlow: seconds) only once a model is loaded: a store
    # or experiment that is wrong fails before it (measured: kg report
    # on a missing experiment, 8 s against 19 s with these at the top).
    import keras

    import keras_gelu  # noqa: F401 -- registers its layers for loading
    tasks.load_layers()  # each task's own layers (a language model's attention)

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, MEMBER_MODEL)
        with open(path, "wb") as f:
            f.write(model_file)
        # compile=False: the report and the registry need the weights
        # only; restoring the optimizer printed Keras' "Skipping variable
        # loading for optimizer" once per member.
        return keras.saving.load_model(path, compile=False)
