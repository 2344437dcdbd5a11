"""The sentences for the core's typed errors, and the commands in them.

The core raises `kg_service.errors` exceptions with data (a run id, what
a stopped sweep kept, what resuming it takes); this module writes what
the user reads, with the flags spelled as the CLI spells them.
"""

import shlex

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
    if isinstance(error, RegisteredAlready):
        return (
            f"{sentence(error)} If that process died before it finished, finish the sweep "
            f"with: kg-train --config <its config> --resume {error.run_id}"
        )
    return str(error)


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
RUN_STATES = {"KILLED": "marked KILLED", "RUNNING": "left RUNNING"}


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
    given them; `--set` overrides are the user's to repeat (resume names
    any that differ).
    """
    words = ["kg-train", "--config", hint.config_path or "<config>"]
    if hint.tracking_uri:
        words += ["--tracking-uri", hint.tracking_uri]
    if hint.output_dir is not None:
        words += ["--output-dir", hint.output_dir]
    return shlex.join([*words, "--resume", hint.run_id])
