"""The tracking store a sweep talks to: the interface, and the bookkeeping
every implementation shares.

As MLflow keeps `store/tracking/abstract_store.py` beside its SQL and REST
stores: `mlflow_store.Tracker` is the implementation a sweep uses;
`tests/service/memory_store.py` is an in-memory one that runs a whole
sweep, which keeps this seam honest. What is the same for both (when a
run counts as finished, how a member run is named and tagged, which
sweep parent wins a race, the next version number) lives here, so a
second store implements storage only.
"""

import abc
import contextlib
import dataclasses
import json

# A sweep's parent run and a member's run end in one of these.
FINISHED, FAILED, KILLED, RUNNING = "FINISHED", "FAILED", "KILLED", "RUNNING"
# A member counts as logged (not trained again) once its run ended either
# way: trained, or diverged.
MEMBER_DONE = (FINISHED, FAILED)
SWEEP_ROLE = "sweep"  # the kg.role tag of a sweep's parent run
# The kg.role tag of a tuning member (kg_service.sweep.tuning): logged
# without its model, which nothing after the tuning stage reads.
TUNING_ROLE = "tuning"
SWEEP_ID_TAG = "kg.sweep_id"  # a sharded sweep's id, on the parent and members
# What log_member records once per member (step 0) beside a task's own
# `MemberResult.final` numbers.
MEMBER_FINALS = frozenset(
    {"test_loss", "test_accuracy", "final_val_accuracy", "final_val_loss",
     "train_seconds", "epochs_to_threshold"}
)


@dataclasses.dataclass(frozen=True)
class SweepParent:
    """A sweep's parent run: its id and its kg.sweep_id tag (sharded)."""

    run_id: str
    sweep_id: str = None


def param_text(value):
    """A parameter as the store keeps it: text, lists as JSON, at most
    6,000 characters (MLflow's limit)."""
    if isinstance(value, (list, tuple, dict)):
        value = json.dumps(value)
    value = str(value)
    return value if len(value) <= 6000 else value[:5997] + "..."


def same_param(logged, value):
    """Whether the stored text `logged` holds `value`; in a list of
    mappings (claims) an unset (null) key counts as absent, so a sweep
    logged before a claim kind existed still resumes."""
    if logged == param_text(value):
        return True
    try:
        was = json.loads(logged)
    except ValueError:
        return False
    return _unset_dropped(was) == _unset_dropped(json.loads(param_text(value)))


def _unset_dropped(tree):
    if isinstance(tree, list):
        return [_unset_dropped(v) for v in tree]
    if isinstance(tree, dict):
        return {k: _unset_dropped(v) for k, v in tree.items() if v is not None}
    return tree


def tag_strings(tags):
    """Tags as a store keeps them: text, a None left out."""
    return {k: str(v) for k, v in tags.items() if v is not None}


def member_run_name(result):
    return f"{result.activation}-seed{result.seed}"


def member_params(result, params):
    """The sweep's params and the member's own (activation, seed)."""
    return {**params, "activation": result.activation, "seed": result.seed}


def member_tags(result, tags, sweep_id):
    """What a member run is found by (sweep, activation, seed), then `tags`."""
    return {
        SWEEP_ID_TAG: sweep_id,
        "activation": result.activation,
        "seed": result.seed,
        **tags,
    }


def member_status(result):
    """A member's run ends FINISHED, or FAILED when training diverged."""
    return FINISHED if result.ok else FAILED


def member_finals(result):
    """The numbers logged once per member (step 0): `MEMBER_FINALS` and
    the task's own `result.final`."""
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
    return final


class TrackingStore(abc.ABC):
    """What the pipeline needs of a tracking store and model registry.

    The pipeline talks only to this interface. An implementation stores
    runs, params, metrics, artifacts and model versions (the abstract
    methods); the sweep's life cycle on top of them is here.
    """

    parent_run_id = None  # the sweep's parent run, once opened or joined

    # --- A sweep's parent run. -------------------------------------------

    @contextlib.contextmanager
    def sweep_run(self, run_name, params, tags, resume=None):
        """A context manager: opens the sweep's parent run (or reopens the
        run id `resume`, setting `tags` on it; `params` are the first
        opening's) and yields its id; marks it FINISHED, FAILED (on an
        error) or KILLED (on an interrupt)."""
        self.parent_run_id = self.open_sweep(run_name, params, tags, resume)
        status = FAILED
        try:
            yield self.parent_run_id
            status = FINISHED
        except KeyboardInterrupt:
            status = KILLED
            raise
        finally:
            self.close_sweep(status)

    @abc.abstractmethod
    def open_sweep(self, run_name, params, tags, resume=None):
        """Creates the sweep's parent run RUNNING (or sets `resume` RUNNING
        and adds `tags`); returns its id."""

    @abc.abstractmethod
    def close_sweep(self, status):
        """Marks the parent run `status` (FINISHED, FAILED or KILLED)."""

    def join_sweep(self, run_name, params, tags, sweep_id):
        """Finds the parent run of the sharded sweep `sweep_id` in this
        experiment, or opens it; leaves its status alone (other jobs of the
        sweep may be running).

        Jobs that start at once may each create one: each then reads the
        sweep's parent runs back and keeps the earliest, deleting its own
        if that is not it. Whatever parent a job's members name, they carry
        the `kg.sweep_id` tag, by which the sweep's members are found.

        Returns:
            `(run id, created)`: created is True if this call made it.
        """
        found = self.sweep_parents(sweep_id)
        mine = None
        if not found:
            mine = self.create_run(run_name, params, {**tags, SWEEP_ID_TAG: sweep_id})
            found = self.sweep_parents(sweep_id)
        first = found[0].run_id
        if mine is not None and mine != first:
            self.delete_run(mine)
        self.parent_run_id = first
        return first, mine == first

    def find_sweeps(self, sweep_id=None):
        """Parent run ids of this experiment's sweeps, newest first; with
        `sweep_id`, of that sharded sweep (or the sweep with that run id)."""
        runs = self.sweep_parents()
        if sweep_id is not None:
            runs = [r for r in runs if sweep_id in (r.sweep_id, r.run_id)]
        return [r.run_id for r in reversed(runs)]

    @abc.abstractmethod
    def sweep_parents(self, sweep_id=None):
        """`SweepParent`s of this experiment's sweeps (of the sharded sweep
        `sweep_id`: by its tag), oldest first (start time, then run id)."""

    @abc.abstractmethod
    def create_run(self, run_name, params, tags):
        """A new top-level run, RUNNING, with `params`; returns its id."""

    @abc.abstractmethod
    def delete_run(self, run_id):
        """Deletes a run (a sweep parent that lost the race to another)."""

    @abc.abstractmethod
    def sweep_info(self, run_id):
        """`(experiment name, params, status)` of a sweep's parent run;
        a ServiceError if it is not one."""

    # --- Members. --------------------------------------------------------

    @abc.abstractmethod
    def log_member(self, result, params, tags):
        """Logs one `MemberResult` as a child run of the sweep, named
        `member_run_name`, with `member_params`, `member_tags`, its history,
        `member_finals` and its model; ends it `member_status`. Returns its
        id."""

    @abc.abstractmethod
    def finished_members(self, sweep_run_id):
        """`{(activation, seed): (run id, MemberResult)}` of the members
        already logged under the sweep (a run ended `MEMBER_DONE`), with
        their trained models: what a resumed sweep does not train again."""

    def member_keys(self, sweep_run_id):
        """`{(activation, seed): run id}` of the members `finished_members`
        would return (a store that can, skips loading their models)."""
        return {key: run_id for key, (run_id, _) in self.finished_members(sweep_run_id).items()}

    # --- Params, artifacts, the summary. ---------------------------------

    @abc.abstractmethod
    def claim(self, run_id, key, value):
        """Records `value` under `key` on the run unless a value is there
        already; True if the run now holds `value` (this caller won)."""

    @abc.abstractmethod
    def run_marks(self, run_id):
        """`(params, tags)` of a run, as text, read together (a lease's
        write-once claims and its heartbeat, `tracking.lease`)."""

    @abc.abstractmethod
    def set_tag(self, run_id, key, value):
        """Sets (or overwrites) one tag of a run."""

    @abc.abstractmethod
    def load_dict(self, run_id, artifact_file):
        """The JSON artifact `log_dict` stored, as plain data."""

    @abc.abstractmethod
    def log_dict(self, run_id, data, artifact_file):
        """Stores `data` as a JSON artifact of the run."""

    def claim_dict(self, run_id, key, data, artifact_file):
        """A write-once JSON record on the run: stores `data` as
        `artifact_file`, then claims `key` with that name (`claim`).
        Returns `data` if this call won the claim, else the record
        claimed first."""
        self.log_dict(run_id, data, artifact_file)  # before the claim names it
        if self.claim(run_id, key, artifact_file):
            return data
        return self.claimed_dict(run_id, key)

    def claimed_dict(self, run_id, key):
        """The record claimed under `key` on the run (`claim_dict`), or None."""
        artifact = self.sweep_info(run_id)[1].get(key)
        return None if artifact is None else self.load_dict(run_id, artifact)

    @abc.abstractmethod
    def log_summary(self, metrics, tags, artifact_paths):
        """Summary metrics, tags and report files on the parent run."""

    def report_page(self, name):
        """Where a person sees the report file `name` ("report.html") that
        `log_summary` logged on the parent run: the URL of the store's UI,
        or "" for a store without one."""
        return ""

    # --- The model registry. ---------------------------------------------

    @abc.abstractmethod
    def register(
        self, run_id, model, model_name, alias, tags, description,
        pip_requirements, metadata=None, serving=None,
    ):
        """Registers `model` (from `run_id`) as a new version of
        `model_name`, moves `alias` to it, and returns the version.
        `serving` is what the task's served model is (a
        `kg_service.tasks.base.Serving`)."""

    @abc.abstractmethod
    def set_version_tag(self, model_name, version, key, value):
        """Tags one registered model version."""

    @abc.abstractmethod
    def version_numbers(self, model_name):
        """The version numbers `model_name` has (none if unregistered)."""

    def next_version(self, model_name):
        """The version number `register` will give `model_name` next."""
        return 1 + max(self.version_numbers(model_name), default=0)
