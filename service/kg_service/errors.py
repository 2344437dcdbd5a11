"""The exceptions the service raises for what a user can act on.

The core raises them with data (a run id, what a stopped sweep kept, what
resuming it takes); `kg_service.cli.messages` turns that data into the
sentences and the commands a user reads, so no flag is spelled here.
"""

import dataclasses
from typing import Optional


class ServiceError(Exception):
    """A mistake the user can fix (bad config, missing file, bad flag).

    The CLI prints its message as one paragraph and exits with code 2; no
    traceback. The message names the file, the key path or argument, what
    was expected, and the closest valid name for a typo.
    """

    exit_code = 2


def sentence(text):
    """`text` stripped and ended with a full stop, unless it ends a sentence
    already: for a message made of another library's words (MLflow's
    "... not found") followed by one of ours (" Did you mean ...?").
    Issue 30 §18: they were joined as "...not found Did you mean"."""
    text = str(text).strip()
    return text if not text or text.endswith((".", "?", "!")) else text + "."


@dataclasses.dataclass(frozen=True)
class ResumeHint:
    """What resuming a stopped sweep takes; the CLI writes it as a command.

    `tracking_uri` and `output_dir` are set only where the config was
    given them (the folder is where members kept locally wait).
    """

    run_id: str
    config_path: Optional[str]
    tracking_uri: Optional[str] = None
    output_dir: Optional[str] = None
    # The command line's `--set` values and `--smoke`, which the config does
    # not record (`kg-train` adds them): a resume without them is refused.
    sets: tuple = ()
    smoke: bool = False


@dataclasses.dataclass(frozen=True)
class Kept:
    """What a stopped sweep keeps: `held` of `total` members in the
    tracking store, its parent run's status now `run_state` ("KILLED" or
    "RUNNING"), and `spooled` more on local disk in `spool_dir`."""

    held: int
    total: int
    run_state: str
    spooled: int = 0
    spool_dir: Optional[str] = None


class SweepInterrupted(ServiceError):
    """SIGINT or SIGTERM stopped a sweep; what is done is in the store.

    Carries the sweep's parent run id (None if it never started), what it
    kept and how to resume it; for a shard of a sharded sweep, the shard
    and the sweep id instead (a shard resumes by running again).
    """

    exit_code = 130

    def __init__(self, run_id, kept=None, resume=None, shard=None, sweep_id=None):
        super().__init__("interrupted")
        self.run_id = run_id
        self.kept = kept
        self.resume = resume
        self.shard = shard
        self.sweep_id = sweep_id


class StoreUnavailable(ServiceError):
    """The tracking store failed mid-sweep and stayed down past its retries.

    Exit code 75 is sysexits.h's EX_TEMPFAIL ("a temporary failure; the
    user is invited to retry later"): what was trained is kept, and a
    resume finishes the sweep once the store is back. The message says
    what failed; `in_sweep` is True once the pipeline has added what the
    sweep kept (`run_id`, `kept`, `resume`: None if it never started).
    """

    exit_code = 75

    def __init__(self, message, run_id=None, kept=None, resume=None, in_sweep=False):
        super().__init__(message)
        self.run_id = run_id
        self.kept = kept
        self.resume = resume
        self.in_sweep = in_sweep


class ResumeRefused(ServiceError):
    """A sweep cannot be resumed: `reason` is "experiment" (it belongs to
    another), "finished" or "multi_worker". The message says why; the CLI
    puts the run id it was given in front."""

    def __init__(self, message, run_id, reason):
        super().__init__(message)
        self.run_id = run_id
        self.reason = reason


class SweepMismatch(ServiceError):
    """A config differs from the sweep it would resume or join: `changed`
    holds (key, logged value, new value); `sweep_id` is set when the sweep
    was named by its sweep id, else `run_id` named it."""

    def __init__(self, message, run_id, changed, sweep_id=None):
        super().__init__(message)
        self.run_id = run_id
        self.changed = tuple(changed)
        self.sweep_id = sweep_id


class RegisteredAlready(ServiceError):
    """A sweep is registered already, or being registered by `registrar`."""

    def __init__(self, message, run_id, registrar):
        super().__init__(message)
        self.run_id = run_id
        self.registrar = registrar


@dataclasses.dataclass(frozen=True)
class Holder:
    """Who holds a sweep's lease (`kg_service.tracking.lease`): what
    (e.g. "kg-train"), on which host, its pid, when it took the lease and
    when it last beat (Unix seconds)."""

    what: str
    host: str
    pid: int
    started: float
    heartbeat: float


class LeaseHeld(ServiceError):
    """Another process writes the sweep `run_id` (its `scope`: None for a
    whole sweep, e.g. "shard 1/2" for one job's slice): `holder`, whose
    lease goes stale `stale_after` seconds after its last heartbeat."""

    def __init__(self, run_id, holder, stale_after, scope=None, now=None):
        super().__init__(f"sweep run {run_id} is held by {holder.what} on {holder.host}")
        self.run_id = run_id
        self.holder = holder
        self.stale_after = stale_after
        self.scope = scope
        self.now = now


class LeaseLost(ServiceError):
    """This process's lease on sweep `run_id` was taken over (its heartbeat
    stopped for longer than the stale time): it stops before registering."""

    def __init__(self, run_id, holder):
        super().__init__(f"the lease on sweep run {run_id} was taken over")
        self.run_id = run_id
        self.holder = holder


class DiskFull(ServiceError):
    """A disk filled (or a file-size or quota limit hit) while the sweep
    wrote its exports, models or report: `message` says what and where;
    `run_id`, `kept` and `resume` as for `StoreUnavailable`."""

    def __init__(self, message, run_id=None, kept=None, resume=None):
        super().__init__(message)
        self.run_id = run_id
        self.kept = kept
        self.resume = resume
