"""The sentences for the core's typed errors, and the commands in them.

The core raises `kg_service.errors` exceptions with data (a run id, what
a stopped sweep kept, what resuming it takes); this module writes what
the user reads, with the flags spelled as the CLI spells them.
"""

import datetime
import shlex

from kg_service.errors import DiskFull
from kg_service.errors import LeaseHeld
from kg_service.errors import LeaseLost
from kg_service.errors import RegisteredAlready
from kg_service.errors import ResumeRefused
from kg_service.errors import StoreUnavailable
from kg_service.errors import sentence
from kg_service.errors import SweepInterrupted
from kg_service.errors import SweepMismatch


def describe(error):
    """The paragraph a user reads for `error` (a `ServiceError`)."""
    if isinstance(error, SweepInterrupted):
        return interrupted(error)
    if isinstance(error, StoreUnavailable) and error.in_sweep:
        return store_failed(error)
    if isinstance(error, ResumeRefused):
        joiner = " with " if error.reason == "multi_worker" else ": "
        return f"--resume {error.run_id}{joiner}{error}"
    if isinstance(error, SweepMismatch):
        flag = f"--sweep-id {error.sweep_id}" if error.sweep_id else f"--resume {error.run_id}"
        return f"{flag}: {error}"
    if isinstance(error, DiskFull) and error.run_id is not None:
        return (
            f"{error} {kept(error.kept, error.run_id)}. Free some space (or point "
            f"--set export.dir=... / --output-dir at a disk with room), then resume with: "
            f"{resume_command(error.resume)}"
        )
    if isinstance(error, LeaseHeld):
        return lease_held(error)
    if isinstance(error, LeaseLost):
        return (
            f"sweep run {error.run_id} was taken over by {holder(error.holder)} while this "
            f"process's heartbeat was late; this process stopped before registering "
            f"anything, and that one finishes the sweep."
        )
    if isinstance(error, RegisteredAlready):
        return (
            f"{sentence(error)} If that process died before it finished, finish the sweep "
            f"with: kg-train --config <its config> --resume {error.run_id}"
        )
    return str(error)


def utc(seconds):
    """Unix seconds as `2026-12-03 13:20:05 UTC`."""
    moment = datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)
    return f"{moment:%Y-%m-%d %H:%M:%S} UTC"


def holder(who):
    """A lease's holder (a `kg_service.errors.Holder`), in words."""
    return f"{who.what} on host {who.host} pid {who.pid} (started {utc(who.started)})"


def lease_held(error):
    """The paragraph for a sweep (or a shard's slice) another process writes."""
    what = f"sweep run {error.run_id}"
    if error.scope is not None:
        what = f"{error.scope.replace('-of-', '/').replace('shard-', 'shard ')} of {what}"
    ago = max(0, round(error.now - error.holder.heartbeat))
    return (
        f"{what} is being written by another process: {holder(error.holder)}, last "
        f"heartbeat {ago} s ago. A sweep has one writer. Add --wait to wait for it to "
        f"finish; if that process is gone, its lease goes stale at "
        f"{utc(error.holder.heartbeat + error.stale_after)} ({error.stale_after:g} s after "
        f"its last heartbeat, tracking.lease_seconds) and the same command takes the "
        f"sweep over then (a holder on this host that no longer runs is taken over at once)."
    )


def interrupted(error):
    if error.shard is not None:
        return (
            f"interrupted. Shard {error.shard}'s finished members are in the "
            f"tracking store (sweep {error.sweep_id}"
            + (f", run {error.run_id}" if error.run_id else "")
            + "); start the same command again to train the rest."
        )
    if error.run_id is None:
        return "interrupted before the sweep started; nothing was written."
    return (
        f"interrupted. {kept(error.kept, error.run_id)}; nothing was registered or exported "
        f"for unfinished work. Resume with: {resume_command(error.resume)}"
    )


def store_failed(error):
    if error.run_id is None:
        return (
            f"{sentence(error)} The sweep had not started: nothing was trained or "
            f"written. Run the same command again once the store is back."
        )
    return (
        f"{sentence(error)} {kept(error.kept, error.run_id)}. Once the store is back, resume with: "
        f"{resume_command(error.resume)}"
    )


# What became of a stopped sweep's parent run, by its status.
RUN_STATES = {"KILLED": "marked KILLED", "RUNNING": "left RUNNING", "FAILED": "marked FAILED"}


def kept(what, run_id):
    """What a stopped sweep keeps (a `kg_service.errors.Kept`), in words."""
    text = (
        f"{what.held} of {what.total} members are in the tracking store (sweep run "
        f"{run_id}, {RUN_STATES[what.run_state]})"
    )
    if what.spooled:
        text += (
            f"; {what.spooled} more trained members are kept in {what.spool_dir}, "
            f"and --resume logs them instead of training them again"
        )
    return text


def resume_command(hint):
    """The command line that resumes a sweep (a `kg_service.errors.ResumeHint`).

    It names the tracking URI and the output folder when the config was
    given them, and repeats the `--set` values and `--smoke` it ran with.
    """
    words = ["kg-train", "--config", hint.config_path or "<config>"]
    if hint.tracking_uri:
        words += ["--tracking-uri", hint.tracking_uri]
    if hint.output_dir is not None:
        words += ["--output-dir", hint.output_dir]
    for value in hint.sets:
        words += ["--set", value]
    if hint.smoke:
        words.append("--smoke")
    return shlex.join([*words, "--resume", hint.run_id])
