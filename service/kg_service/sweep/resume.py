"""Continuing a sweep: what the store holds, whether a config may join it,
who registers it, and what a stopped sweep keeps.

A sweep is resumed (`run(resume=...)`), joined by a shard, or rebuilt by
`rebuild.report_sweep` from its parent run in the tracking store. These checks
raise typed errors with data (`ResumeRefused`, `SweepMismatch`,
`RegisteredAlready`); `kg_service.cli.messages` names the flags.
"""

import errno
import functools
import os
import socket
import uuid

from kg_service.config import derived
from kg_service.config import schema as config_lib
from kg_service.errors import DiskFull
from kg_service.errors import Kept
from kg_service.errors import RegisteredAlready
from kg_service.errors import ResumeHint
from kg_service.errors import ResumeRefused
from kg_service.errors import ServiceError
from kg_service.errors import StoreUnavailable
from kg_service.errors import SweepInterrupted
from kg_service.errors import SweepMismatch
from kg_service.sweep import shards
from kg_service.tracking import spool
from kg_service.sweep.stages import Tracked
from kg_service.sweep.stages import Trained
from kg_service.tracking import lease as lease_lib
from kg_service.tracking import store as store_lib

# The write-once param on a sweep's parent run that names the process
# that compares and registers it: exactly one claim succeeds.
REGISTRAR = "kg.registered_by"


def registrar_token(what):
    """A claim value unique to this process: what, host, pid, random."""
    return f"{what} on {socket.gethostname()} pid {os.getpid()} {uuid.uuid4().hex[:8]}"


def check_resumable(config, store, run_id, params):
    """Raises unless `run_id` is an unfinished sweep of this experiment
    with these settings.

    Raises:
        ResumeRefused: another experiment's sweep, or a finished one.
        SweepMismatch: a sweep of other settings.
    """
    experiment, _, _ = store.sweep_info(run_id)
    if experiment != config.experiment:
        raise ResumeRefused(
            f"that sweep belongs to experiment {experiment!r}, this config "
            f"to {config.experiment!r}.",
            run_id,
            "experiment",
        )
    status = check_same_settings(store, run_id, params)
    if status == "FINISHED":
        raise ResumeRefused(
            "that sweep finished already; nothing to resume.", run_id, "finished"
        )


def check_same_settings(store, run_id, params, sweep_id=None):
    """Raises a `SweepMismatch` unless the sweep `run_id` (named by
    `sweep_id`, if given) was logged with `params`, where its outputs go
    aside; returns its status."""
    _, logged, status = store.sweep_info(run_id)
    changed = [
        (key, logged[key], value)
        for key, value in sorted(params.items())
        if key in logged
        and not key.startswith(shards.FREE_KEYS)
        and not store_lib.same_param(logged[key], value)
    ]
    if changed:
        shown = "; ".join(f"{key}: was {was}, now {now}" for key, was, now in changed)
        raise SweepMismatch(
            f"this config differs from the sweep's: {shown}. Run it with the "
            f"config the sweep started with.",
            run_id,
            changed,
            sweep_id=sweep_id,
        )
    return status


def refuse_registration(store, sweep_run_id):
    """Raises `RegisteredAlready` for the sweep `sweep_run_id`."""
    _, params, status = store.sweep_info(sweep_run_id)
    raise RegisteredAlready(
        f"sweep run {sweep_run_id} is registered already or being "
        f"registered (status {status}; {REGISTRAR}: {params.get(REGISTRAR)}).",
        sweep_run_id,
        params.get(REGISTRAR),
    )


def stored_members(config, pre, sweep_run_id):
    """Every member of the sweep, from the tracking store, as `Trained`.

    Raises:
        ServiceError: if some member is not there yet.
    """
    stored = pre.store.finished_members(sweep_run_id)
    grid = shards.grid(config)
    missing = [key for key in grid if key not in stored]
    if missing:
        shown = ", ".join(f"{a} seed {s}" for a, s in missing[:5])
        raise ServiceError(
            f"sweep run {sweep_run_id} holds {len(grid) - len(missing)} of its "
            f"{len(grid)} members; missing: {shown}"
            + (" ..." if len(missing) > 5 else "")
            + ". Run (or restart) the shards that train them first."
        )
    return Trained(
        results=tuple(stored[key][1] for key in grid),
        tracked=Tracked(
            sweep_run_id=sweep_run_id,
            run_ids={key: stored[key][0] for key in grid},
        ),
        in_store={key: stored[key] for key in grid},
    )


def kept(config, sweep_run_id, held, run_state):
    """What a stopped sweep keeps: members in the store, and in the spool."""
    where = spool.folder(config.output_dir, sweep_run_id)
    return Kept(
        held=held,
        total=len(config.activations) * derived.seed_budget(config),
        run_state=run_state,
        spooled=spool.count(where),
        spool_dir=str(where),
    )


def resume_hint(config, sweep_run_id):
    """What resuming sweep `sweep_run_id` of `config` takes.

    The tracking URI and the output folder (where members kept locally
    wait) go in when the config was given them; `--set` overrides are the
    user's to repeat (resume names any that differ).
    """
    return ResumeHint(
        run_id=sweep_run_id,
        config_path=config.source,
        tracking_uri=config.tracking.uri or None,
        output_dir=(
            config.output_dir
            if config.output_dir != config_lib.Config().output_dir
            else None
        ),
    )


def take_lease(config, store, sweep_run_id, scope=None, wait=False, echo=print):
    """This process's lease on the sweep `sweep_run_id` (its slice `scope`),
    `tracking.lease`: one writer. With `wait`, `echo` says once whom it
    waits for.

    Raises:
        LeaseHeld: another live process holds it (and not `wait`).
    """
    return lease_lib.take(
        store, sweep_run_id, what="kg-train", scope=scope, wait=wait,
        stale_after=config.tracking.lease_seconds,
        on_wait=lambda held: echo(f"Waiting: sweep run {sweep_run_id} is held by "
                                  f"{held.holder.what} on {held.holder.host} pid {held.holder.pid}"),
    )  # fmt: skip


# What a full disk, a quota or a file-size limit say, as errno and as the
# text TensorFlow's errors carry (a ResourceExhaustedError: "No space left
# on device", issue 30 §14).
FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
FULL_TEXTS = tuple(os.strerror(code) for code in FULL_ERRNOS)


def full_disk_reason(error):
    """The full disk's error text if `error` (or what caused it) is one, else None."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and error.errno in FULL_ERRNOS:
            return f"{os.strerror(error.errno)}: {error.filename or ''}".rstrip(": ")
        text = str(error)
        for known in FULL_TEXTS:
            if known in text:
                return next(line for line in text.splitlines() if known in line).strip()
        error = error.__cause__ or error.__context__
    return None


def stopped(config, sweep_run_id, held, error):
    """The `ServiceError` to raise for a sweep that `error` stopped with
    `held` members logged: an interrupt (`SweepInterrupted`), a store that
    stayed down (`StoreUnavailable`), a full disk (`DiskFull`), each with
    what the sweep kept and how to resume it; None for any other error (a
    bug: its traceback)."""
    if isinstance(error, KeyboardInterrupt):
        state, make = "KILLED", SweepInterrupted
    elif isinstance(error, StoreUnavailable):
        state, make = "RUNNING", functools.partial(StoreUnavailable, str(error), in_sweep=True)
    elif isinstance(error, Exception) and full_disk_reason(error) is not None:
        message = (
            f"a disk is full: {full_disk_reason(error)} (export.dir {config.export.dir}, "
            f"output_dir {config.output_dir}). No SavedModel was left half-written."
        )
        state, make = "FAILED", functools.partial(DiskFull, message)
    else:
        return None
    if sweep_run_id is None:
        return make(None)
    hint = resume_hint(config, sweep_run_id)
    return make(sweep_run_id, kept=kept(config, sweep_run_id, held, state), resume=hint)
