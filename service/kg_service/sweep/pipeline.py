"""One sweep, end to end, as six stages:

    preflight -> train -> track -> compare -> export -> register

Each stage is one function that takes what the stages before it returned
and returns a small frozen dataclass; `run` reads as their sequence.
`track` runs as each activation's members finish training, so a crash, a
kill -9 or a power cut keeps every member already trained; `--resume`
(and any process that joins the same sweep) trains only what the store
does not hold yet. Data
moves one way. Everything that can fail on the user's side (tracking
store, export prerequisites, existing export folders) is checked in
`preflight`, before training, so a mistake costs nothing. The pipeline
talks to a `tracking.TrackingStore` (MLflow's in production), never to
MLflow itself.
"""

import dataclasses
import datetime
import logging
import os
import pathlib
import shlex
import subprocess
import sys
import time
from typing import Any
from typing import Mapping
from typing import Optional

from kg_service.config import derived
from kg_service.config import loading
from kg_service.config import schema
from kg_service.sweep import spool
from kg_service.config.loading import flatten
from kg_service.errors import ServiceError
from kg_service.errors import StoreUnavailable
from kg_service.errors import SweepInterrupted

log = logging.getLogger("kg-train")


# --- What each stage hands on. ---------------------------------------------


@dataclasses.dataclass(frozen=True)
class Preflight:
    """Everything checked and loaded before training."""

    task: Any  # kg_service.tasks.base.Task
    dataset: Any  # what task.load returned
    store: Any  # kg_service.tracking.store.TrackingStore
    tracking_uri: str
    resume: Optional[str]  # the sweep run id to continue, or None
    done: Mapping[tuple, tuple]  # (activation, seed) -> (run id, MemberResult)
    # Trained by an earlier try but kept locally, not in the store yet
    # (the store failed): (activation, seed) -> MemberResult.
    spooled: Mapping[tuple, Any]
    model_names: Mapping[str, str]  # activation -> registered model name
    out_dir: pathlib.Path
    resolved: Mapping[str, Any]  # the config as plain data
    params: Mapping[str, Any]  # flattened, for the tracking store
    tags: Mapping[str, Any]  # common to every run


@dataclasses.dataclass(frozen=True)
class Tracked:
    sweep_run_id: str
    run_ids: Mapping[tuple, str]  # (activation, seed) -> member run id


@dataclasses.dataclass(frozen=True)
class Trained:
    results: tuple  # MemberResult per (activation, seed), config order
    tracked: Tracked  # every member's run, this process's and earlier ones


@dataclasses.dataclass(frozen=True)
class Compared:
    summary: Any  # kg_service.analysis.comparisons.Summary (of the members that did not fail)
    report_paths: tuple
    champions: Mapping[str, Any]  # activation -> its selected MemberResult
    failed: tuple  # MemberResults that diverged, listed, never averaged


@dataclasses.dataclass(frozen=True)
class Exported:
    staged: Mapping[str, Any]  # activation -> export.StagedExport


@dataclasses.dataclass(frozen=True)
class RegisteredModel:
    activation: str
    name: str
    version: str
    member: Any  # MemberResult
    export_path: Optional[pathlib.Path]


@dataclasses.dataclass(frozen=True)
class Registered:
    models: tuple  # RegisteredModel, config order


# --- The sweep. --------------------------------------------------------------


def run(config, quiet=False, echo=print, store=None, resume=None):
    """Runs the sweep described by `config`; returns the exit code (0).

    Args:
        config: A validated `kg_service.config.schema.Config`.
        quiet: Log lines instead of a live progress line.
        echo: Prints one line of the final summary.
        store: A `tracking.TrackingStore`; default: MLflow at the
            configured tracking URI.
        resume: The parent run id of an interrupted sweep of the same
            config: only its missing members are trained.

    Raises:
        SweepInterrupted: on SIGINT/SIGTERM (KeyboardInterrupt), after
            marking the sweep KILLED; finished members stay in the store.
        StoreUnavailable: when the tracking store failed mid-sweep and
            stayed down past `tracking.retry_seconds`; trained members not
            in the store yet are kept in `spool`, for `--resume`.
    """
    started = time.monotonic()
    role = process_role(config, resume)
    if not role.chief:
        return run_worker(config, role, echo)
    from kg_service.cli.progress import SweepProgress  # heavy imports: a real run

    progress = SweepProgress(quiet=quiet)
    pre = preflight(config, store, resume)
    sweep_run_id = resume
    logged = dict(pre.done)  # (activation, seed) -> run id, as members land
    try:
        with pre.store.sweep_run(
            config.experiment,
            sweep_params(config, pre),
            {"kg.resumed": "true"} if resume else {**pre.tags, "kg.role": "sweep"},
            resume=resume,
        ) as sweep_run_id:
            echo(
                f"Sweep run {sweep_run_id}"
                + (f": resumed, {len(pre.done)} members already done" if resume else "")
                + (f", {len(pre.spooled)} kept locally to log" if pre.spooled else "")
            )
            if not resume:
                pre.store.log_dict(sweep_run_id, dict(pre.resolved), "config.json")
            trained = train(config, pre, sweep_run_id, progress, logged)
            # Never refused here (one process, a sweep not finished yet);
            # recorded so that `kg report --register` cannot register it again.
            pre.store.claim(sweep_run_id, REGISTRAR, registrar_token("kg-train"))
            compared, registered = conclude(config, pre, trained, progress)
            progress.close()
    except KeyboardInterrupt:
        progress.close()
        raise _interrupted(config, sweep_run_id, len(logged)) from None
    except StoreUnavailable as error:
        progress.close()
        raise _store_failed(config, sweep_run_id, len(logged), error) from None
    print_summary(
        echo,
        config,
        compared,
        registered,
        pre.out_dir,
        pre.tracking_uri,
        time.monotonic() - started,
    )
    return 0


def process_role(config, resume=None):
    """This process's `distribution.Role`; only the chief goes on to the
    store and the output folders.

    Raises:
        ServiceError: for a distribution the backend does not run, a bad
            TF_CONFIG, or `--resume` of a multi-worker sweep (the workers
            would not know which members the chief's store holds).
    """
    from kg_service.training import parallel as distribution

    if config.device.distribution == "none":
        # No backend to ask: preflight's cheap checks still come before
        # TensorFlow's start-up.
        return distribution.Role()
    import keras

    role = distribution.role(config.device, keras.backend.backend())
    if resume is not None and config.device.distribution == "multi_worker":
        raise ServiceError(
            f"--resume {resume} with device.distribution: multi_worker: the workers "
            "do not read the tracking store, so they cannot skip the members it "
            "holds. Resume on one machine (--set device.distribution=mirrored or "
            "none); the members already logged are kept."
        )
    return role


def run_worker(config, role, echo=print):
    """A non-chief process of a `multi_worker` sweep.

    It trains every member in lockstep with the chief (each step's
    gradients are all-reduced across the processes) and exits; the chief
    tracks, reports, registers and exports. It opens no tracking store and
    writes no file.
    """
    from kg_service.tasks import base as tasks
    from kg_service.training import device as device_lib
    from kg_service.training import loop as train_lib

    device_lib.describe_device(config.device)
    task = tasks.get(config.data.dataset)
    results = train_lib.train_sweep(task, task.load(config.data), config)
    echo(
        f"kg-train: {role}: trained {len(results)} members in lockstep with the "
        "chief, which tracks, registers and exports them."
    )
    return 0


def run_shard(config, shard, sweep_id=None, quiet=False, echo=print, store=None):
    """Runs one job's share of a sharded sweep; returns the exit code (0).

    Joins the sweep `sweep_id` (default: `shards.sweep_id(config)`, the
    same for every job started with this config) in the tracking store,
    opening its parent run if this job is the first, and trains the
    members of `shards.members(config, shard)` that the store does not
    hold yet: a restarted job resumes, and no member is trained twice.
    The job that, when it ends, finds every member of the grid in the
    store claims the sweep (`TrackingStore.claim`, a write-once param
    that exactly one job wins) and compares, exports and registers, as a
    single-machine sweep does; the others end after their share.

    Args:
        config: A validated `kg_service.config.schema.Config`; every job of a
            sweep runs the same one (outputs' places aside).
        shard: A `kg_service.sweep.shards.Shard`.
        sweep_id: The sweep's id, or None to derive it from the config.
        quiet, echo, store: as for `run`.

    Raises:
        ServiceError: as `run`'s pre-flight, or when `sweep_id` names a
            sweep of different settings.
        SweepInterrupted: on SIGINT/SIGTERM; the sweep is left running for
            the other jobs, this job's finished members stay.
    """
    from kg_service.sweep import shards
    from kg_service.cli.progress import SweepProgress

    started = time.monotonic()
    sweep_id = sweep_id or shards.sweep_id(config)
    pre = preflight(config, store)
    progress = SweepProgress(quiet=quiet)
    total = len(config.activations) * len(config.seeds)
    sweep_run_id = None
    try:
        sweep_run_id, created = pre.store.join_sweep(
            config.experiment,
            sweep_params(config, pre),
            {**pre.tags, "kg.role": "sweep", "kg.shards": shard.count},
            sweep_id,
        )
        if created:
            pre.store.log_dict(sweep_run_id, dict(pre.resolved), "config.json")
        else:
            _check_same_settings(
                f"--sweep-id {sweep_id}", pre.store, sweep_run_id, sweep_params(config, pre)
            )
        held = pre.store.member_keys(sweep_run_id)
        mine = shards.members(config, shard)
        todo = tuple(key for key in mine if key not in held)
        echo(
            f"Sweep {sweep_id} (run {sweep_run_id}), shard {shard}: "
            f"{len(todo)} of its {len(mine)} members to train; the store "
            f"holds {len(held)} of {total}"
        )
        train(config, pre, sweep_run_id, progress, members=todo)
        progress.close()
        held = pre.store.member_keys(sweep_run_id)
        if any(key not in held for key in shards.grid(config)):
            echo(
                f"Shard {shard} done in {time.monotonic() - started:.0f} s; the "
                f"sweep holds {len(held)} of {total} members. The job that "
                f"completes it compares and registers (or: kg report "
                f"--experiment {config.experiment} --sweep-id {sweep_id} --register)."
            )
            return 0
        # Claimed on the sweep's earliest parent run, read again now: should
        # two jobs have kept different parents at the start (see
        # `TrackingStore.join_sweep`), both claim on the same run here.
        sweep_run_id, _ = pre.store.join_sweep(
            config.experiment, {}, {}, sweep_id
        )
        token = registrar_token(f"kg-train --shard {shard}")
        if not pre.store.claim(sweep_run_id, REGISTRAR, token):
            _, params, status = pre.store.sweep_info(sweep_run_id)
            echo(
                f"Shard {shard} done in {time.monotonic() - started:.0f} s; the "
                f"sweep is complete, and compared and registered by "
                f"{params.get(REGISTRAR)} (sweep run {status}). To run this "
                f"config again as a new sweep, pass a new --sweep-id."
            )
            return 0
        compared, registered = finish(
            config, pre, stored_members(config, pre, sweep_run_id), progress
        )
    except KeyboardInterrupt:
        progress.close()
        raise SweepInterrupted(
            f"interrupted. Shard {shard}'s finished members are in the "
            f"tracking store (sweep {sweep_id}"
            + (f", run {sweep_run_id}" if sweep_run_id else "")
            + "); start the same command again to train the rest.",
            sweep_run_id,
        ) from None
    print_summary(
        echo, config, compared, registered, pre.out_dir, pre.tracking_uri,
        time.monotonic() - started,
    )
    return 0


# The write-once param on a sweep's parent run that names the process
# that compares and registers it: exactly one claim succeeds.
REGISTRAR = "kg.registered_by"


def registrar_token(what):
    """A claim value unique to this process: what, host, pid, random."""
    import socket
    import uuid

    return f"{what} on {socket.gethostname()} pid {os.getpid()} {uuid.uuid4().hex[:8]}"


def sweep_params(config, pre):
    return {**pre.params, "activations": list(config.activations), "seeds": list(config.seeds)}


def finish(config, pre, trained, progress):
    """Compares, exports and registers a sweep whose members are all in
    the store (`stored_members`), and marks its parent run FINISHED
    (FAILED on an error). The caller holds the sweep's `REGISTRAR` claim.

    Returns:
        `(Compared, Registered)`.
    """
    with pre.store.sweep_run(
        config.experiment, {}, {}, resume=trained.tracked.sweep_run_id
    ):
        return conclude(config, pre, trained, progress)


def report_sweep(
    experiment, tracking_uri, sweep_id=None, register=False, output_dir=None,
    quiet=False, echo=print, store=None,
):
    """`kg report`: a sweep's report, rebuilt from the tracking store alone.

    The sweep's config comes from its parent run's `config.json`, its
    members (metrics and models) from their runs; the data is generated
    again from the config. The same `compare` stage and report writer as
    a single-machine sweep make the report; with `register`, the same
    `finish` as the last shard's exports and registers it, once: the
    sweep's `REGISTRAR` claim refuses a second registration.

    Args:
        experiment: The MLflow experiment.
        tracking_uri: The tracking store.
        sweep_id: A sharded sweep's id, or any sweep's parent run id;
            default: the experiment's newest sweep.
        register: Also export and register the champions.
        output_dir: Where the report goes; default: the sweep's config's.

    Raises:
        ServiceError: for a missing experiment or sweep, a sweep with
            members missing, or one registered already.
    """
    import json
    import tempfile

    from kg_service.tracking import mlflow_store as tracking
    from kg_service.cli.progress import SweepProgress

    started = time.monotonic()
    tracking_uri = absolute_uri(tracking_uri)
    if store is None:
        store = tracking.Tracker(tracking_uri, experiment, create=False)
    found = store.find_sweeps(sweep_id)
    if not found:
        raise ServiceError(
            f"experiment {experiment!r} holds no kg-train sweep"
            + (f" with sweep id or run id {sweep_id!r}" if sweep_id else "")
            + f" in {tracking_uri}."
        )
    sweep_run_id = found[0]
    ran = store.load_dict(sweep_run_id, "config.json")
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp, "config.json")
        path.write_text(json.dumps(ran))
        config = loading.load_config(path)
    tracking_cfg = dataclasses.replace(config.tracking, uri=tracking_uri)
    config = dataclasses.replace(
        config,
        tracking=tracking_cfg,
        output_dir=output_dir or config.output_dir,
        source=f"config.json of sweep run {sweep_run_id}",
    )
    if not register:
        config = dataclasses.replace(
            config, registry=dataclasses.replace(config.registry, enabled=False)
        )
    # The report shows the config the sweep ran, not this rebuild's overrides.
    pre = dataclasses.replace(preflight(config, store), resolved=ran)
    if register and REGISTRAR in store.sweep_info(sweep_run_id)[1]:
        _refuse_registration(store, sweep_run_id)
    progress = SweepProgress(quiet=quiet)
    trained = stored_members(config, pre, sweep_run_id)
    registered = Registered(models=())
    if register:
        if not store.claim(sweep_run_id, REGISTRAR, registrar_token("kg report")):
            _refuse_registration(store, sweep_run_id)
        compared, registered = finish(config, pre, trained, progress)
    else:
        compared = compare(config, pre, trained)
    progress.close()
    print_summary(
        echo, config, compared, registered, pre.out_dir, pre.tracking_uri,
        time.monotonic() - started,
    )
    return 0


def _refuse_registration(store, sweep_run_id):
    _, params, status = store.sweep_info(sweep_run_id)
    raise ServiceError(
        f"sweep run {sweep_run_id} is registered already or being "
        f"registered (status {status}; {REGISTRAR}: {params.get(REGISTRAR)}). "
        f"If that process died before it finished, finish the sweep with: "
        f"kg-train --config <its config> --resume {sweep_run_id}"
    )


def stored_members(config, pre, sweep_run_id):
    """Every member of the sweep, from the tracking store, as `Trained`.

    Raises:
        ServiceError: if some member is not there yet.
    """
    from kg_service.sweep import shards

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
    )


def conclude(config, pre, trained, progress):
    """compare -> record -> export -> register; returns `(Compared, Registered)`."""
    compared = compare(config, pre, trained)
    record(pre, compared)
    exported = export(config, pre, compared, progress, trained.tracked.sweep_run_id)
    registered = register(config, pre, compared, trained.tracked, exported, progress)
    return compared, registered


def preflight(config, store=None, resume=None):
    """Loads the data and checks every outside dependency before training.

    With `resume`, also checks that the run is a sweep of this same
    config, and loads the members it already holds.

    Raises:
        ServiceError: for an unavailable device or batches its
            distribution cannot split, an unusable tracking
            store, missing export prerequisites, or an export folder the
            registry's next version would overwrite; for a report or
            export folder that is (or runs through) a file or cannot be
            written. Those folders are checked first, and the tracking
            store's files and server before MLflow opens it.
    """
    from kg_service.tracking import destinations

    # Absolute: MLflow caches stores by URI, so a relative sqlite path
    # would keep pointing at the first working directory's file.
    tracking_uri = absolute_uri(derived.resolve_tracking_uri(config))
    # First, before the heavy imports: a wrong path or a server that is
    # down costs a second, not TensorFlow's start-up.
    check_memory(config)
    destinations.check_run(config, tracking_uri)
    from kg_service.serving import export as export_lib
    from kg_service.tasks import base as tasks
    from kg_service.tracking import mlflow_store as tracking
    from kg_service.training import device as device_lib
    from kg_service.training import loop as train_lib

    names = {a: derived.registered_model_name(config, a) for a in config.activations}
    device = device_lib.describe_device(config.device)
    task = tasks.get(config.data.dataset)
    dataset = task.load(config.data)
    train_lib.check_distribution(task, dataset, config)
    if config.export.enabled:
        export_lib.check_can_export()
    if store is None:
        store = tracking.Tracker(
            tracking_uri, config.experiment, config.tracking.retry_seconds
        )
    resolved = loading.config_to_dict(config)
    params = flatten(
        {k: v for k, v in resolved.items() if k not in ("activations", "seeds")}
    )
    done, spooled = {}, {}
    if resume is not None:
        _check_resumable(config, store, resume, params)
        done = store.finished_members(resume)
        kept = spool.read(spool.folder(config.output_dir, resume))
        spooled = {key: result for key, result in kept.items() if key not in done}
    if config.registry.enabled and config.export.enabled:
        for name in names.values():
            target = export_lib.version_dir(
                config.export.dir, name, store.next_version(name)
            )
            if target.exists():
                raise ServiceError(
                    f"export folder {target} already exists, but the "
                    f"registry's next version of {name!r} would be written "
                    f"there. Move or delete it, or set export.dir to a new "
                    f"folder (--set export.dir=...)."
                )
    return Preflight(
        task=task,
        dataset=dataset,
        store=store,
        tracking_uri=tracking_uri,
        resume=resume,
        done=done,
        spooled=spooled,
        model_names=names,
        out_dir=pathlib.Path(config.output_dir)
        / f"{config.experiment}-{datetime.datetime.now():%Y%m%d-%H%M%S}",
        resolved=resolved,
        params=params,
        tags={
            **tracking.library_versions(),
            **{f"device.{k}": v for k, v in device.items()},
            "git_commit": git_commit(),
            "config_file": config.source,
            "dataset": config.data.dataset,
            **dataset.tags(),
        },
    )


def available_memory():
    """Bytes of memory this process can use now: the kernel's MemAvailable,
    within the cgroup's limit (a container); None where neither is known."""
    found = []
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    found.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            found.append(int(pathlib.Path(path).read_text().strip()))
        except (OSError, ValueError):  # absent, or "max"
            pass
    return min(found) if found else None


def check_memory(config, available=None):
    """Raises a ServiceError, before the data is loaded, when a run of
    `config` needs more memory than the machine has (`available` bytes;
    default: `available_memory()`, and no check if unknown)."""
    available = available_memory() if available is None else available
    needed = derived.memory_estimate(config)
    if available is None or needed <= available:
        return
    gib = 2**30
    raise ServiceError(
        f"this config needs about {needed / gib:,.1f} GiB of memory (data.n_samples "
        f"{config.data.n_samples:,}, {len(config.seeds)} seeds evaluated at once, "
        f"training.batch_size {config.training.batch_size:,}), but this machine has "
        f"{available / gib:,.1f} GiB available. Lower data.n_samples, the seeds or the "
        f"batch size (--set data.n_samples=...), or run it on a larger machine."
    )


def train(config, pre, sweep_run_id, progress, logged=None, members=None):
    """Trains every member the store does not hold yet (of `members`, if
    given: a shard's), tracking each activation's members as soon as they
    finish (`track`).

    Members an earlier try kept locally (`pre.spooled`) are logged first,
    not trained again. `logged`, if given, is updated with each member's
    run id as it lands in the store (what an interrupt leaves behind).
    Members that trained but could not be logged (the store stayed down,
    or an interrupt) are kept in `spool` before the error goes on.
    """
    from kg_service.training import loop as train_lib

    run_ids = {key: run_id for key, (run_id, _) in pre.done.items()}
    kept = spool.folder(config.output_dir, sweep_run_id)

    def on_trained(results):
        try:
            track(pre, results, progress, run_ids, logged)
        except (StoreUnavailable, KeyboardInterrupt):
            spool.write(kept, [r for r in results if (r.activation, r.seed) not in run_ids])
            raise
        finally:
            for result in results:
                if (result.activation, result.seed) in run_ids:
                    spool.discard(kept, result.activation, result.seed)

    if pre.spooled:
        on_trained(list(pre.spooled.values()))
    results = train_lib.train_sweep(
        pre.task,
        pre.dataset,
        config,
        progress=progress,
        done={
            **{key: result for key, (_, result) in pre.done.items()},
            **pre.spooled,
        },
        on_trained=on_trained,
        members=members,
    )
    progress.close()
    return Trained(
        results=tuple(results),
        tracked=Tracked(sweep_run_id=sweep_run_id, run_ids=dict(run_ids)),
    )


def track(pre, results, progress, run_ids, logged=None):
    """Logs members as child runs of the sweep's run (FAILED if diverged),
    one at a time: each run id goes into `run_ids` (and `logged`) as it
    lands, so a failure part-way says exactly which are in the store."""
    progress.stage(f"logging {len(results)} runs to {pre.tracking_uri}")
    member_params = {
        k: v for k, v in pre.params.items() if k.startswith(("model.", "training."))
    }
    for result in results:
        key = (result.activation, result.seed)
        run_ids[key] = pre.store.log_member(
            result, member_params, {**pre.tags, "kg.role": "member"}
        )
        if logged is not None:
            logged[key] = run_ids[key]


def _check_resumable(config, store, run_id, params):
    """Raises a ServiceError unless `run_id` is an unfinished sweep of
    this experiment with these settings."""
    experiment, _, _ = store.sweep_info(run_id)
    if experiment != config.experiment:
        raise ServiceError(
            f"--resume {run_id}: that sweep belongs to experiment "
            f"{experiment!r}, this config to {config.experiment!r}."
        )
    status = _check_same_settings(f"--resume {run_id}", store, run_id, params)
    if status == "FINISHED":
        raise ServiceError(
            f"--resume {run_id}: that sweep finished already; nothing to resume."
        )


def _check_same_settings(flag, store, run_id, params):
    """Raises a ServiceError unless the sweep `run_id` was logged with
    `params` (where its outputs go aside); returns its status."""
    from kg_service.sweep.shards import FREE_KEYS

    _, logged, status = store.sweep_info(run_id)
    changed = [
        f"{key}: was {logged[key]}, now {value}"
        for key, value in sorted(params.items())
        if key in logged
        and not key.startswith(FREE_KEYS)
        and logged[key] != store_param(value)
    ]
    if changed:
        raise ServiceError(
            f"{flag}: this config differs from the sweep's: "
            f"{'; '.join(changed)}. Run it with the config the sweep started with."
        )
    return status


def store_param(value):
    """A param value as the tracking store keeps it (text)."""
    from kg_service.tracking import store as tracking_store

    return tracking_store.param_text(value)


def _interrupted(config, sweep_run_id, held):
    if sweep_run_id is None:
        return SweepInterrupted(
            "interrupted before the sweep started; nothing was written.", None
        )
    return SweepInterrupted(
        f"interrupted. {_kept(config, sweep_run_id, held, 'marked KILLED')}; "
        f"nothing was registered or exported for unfinished work. Resume "
        f"with: {resume_command(config, sweep_run_id)}",
        sweep_run_id,
    )


def _store_failed(config, sweep_run_id, held, error):
    if sweep_run_id is None:
        return StoreUnavailable(
            f"{error} The sweep had not started: nothing was trained or "
            f"written. Run the same command again once the store is back."
        )
    return StoreUnavailable(
        f"{error} {_kept(config, sweep_run_id, held, 'left RUNNING')}. Once "
        f"the store is back, resume with: {resume_command(config, sweep_run_id)}",
        sweep_run_id,
    )


def _kept(config, sweep_run_id, held, run_state):
    """What a stopped sweep keeps: members in the store, and in the spool."""
    total = len(config.activations) * len(config.seeds)
    text = (
        f"{held} of {total} members are in the tracking store (sweep run "
        f"{sweep_run_id}, {run_state})"
    )
    where = spool.folder(config.output_dir, sweep_run_id)
    kept = spool.count(where)
    if kept:
        text += (
            f"; {kept} more trained members are kept in {where}, and --resume "
            f"logs them instead of training them again"
        )
    return text


def resume_command(config, sweep_run_id):
    """The command line that resumes sweep `sweep_run_id` of `config`.

    It names the tracking URI and the output folder (where members kept
    locally wait) when the config was given them; `--set` overrides are
    the user's to repeat (resume names any that differ).
    """
    words = ["kg-train", "--config", config.source or "<config>"]
    if config.tracking.uri:
        words += ["--tracking-uri", config.tracking.uri]
    if config.output_dir != schema.Config().output_dir:
        words += ["--output-dir", config.output_dir]
    return shlex.join([*words, "--resume", sweep_run_id])


def compare(config, pre, trained):
    """Statistics over seeds on the task's metric, the report files, and
    each activation's champion (by the task's selection metric). Writes
    nothing to the tracking store (`record` does)."""
    from kg_service.analysis import comparisons
    from kg_service.analysis import report
    from kg_service.analysis import stats

    ok = [r for r in trained.results if r.ok]
    failed = tuple(r for r in trained.results if not r.ok)
    if not any(r.activation == config.baseline for r in ok):
        raise ServiceError(
            f"every seed of the baseline {config.baseline!r} diverged (loss "
            f"not finite); no comparison is possible. They are logged as "
            f"FAILED runs. Lower training.learning_rate, or set another "
            f"baseline."
        )
    summary = comparisons.summarize(
        ok,
        config.baseline,
        metric=pre.task.compared.name,
        higher_is_better=pre.task.compared.higher_is_better,
        select_by=stats.Metric.of(
            pre.task.selects.name, pre.task.selects.higher_is_better
        ),
    )
    report_paths = report.write_report(
        summary,
        ok,
        pre.out_dir,
        title=f"{config.experiment}: {', '.join(config.activations)}",
        dataset=pre.dataset,
        config=config,
        figures=pre.task.figures,
        failed=failed,
        resolved=pre.resolved,
    )
    champions = {
        s.activation: best_member(summary, ok, s.activation)
        for s in summary.activations
    }
    return Compared(
        summary=summary,
        report_paths=tuple(report_paths),
        champions=champions,
        failed=failed,
    )


def record(pre, compared):
    """The summary's metrics, the winner and the report on the sweep's run."""
    from kg_service.analysis import plain

    pre.store.log_summary(
        plain.flat_metrics(compared.summary),
        {"winner": compared.summary.winner.activation},
        compared.report_paths,
    )


def export(config, pre, compared, progress, sweep_run_id=""):
    """Exports and verifies each champion's SavedModel into staging.

    Nothing is registered or promoted here; a failed verification discards
    every staged export and raises. Staging folders that an earlier,
    killed try of the same sweep left are removed first.
    """
    from kg_service.serving import export as export_lib

    staged = {}
    if not (config.registry.enabled and config.export.enabled):
        return Exported(staged=staged)
    progress.stage("exporting and verifying SavedModels")
    if sweep_run_id:
        for name in pre.model_names.values():
            export_lib.discard_leftovers(config.export.dir, name, sweep_run_id)
    try:
        for activation, member in compared.champions.items():
            staged[activation] = export_lib.stage(
                member.model,
                config.export.dir,
                pre.model_names[activation],
                pre.dataset.x_test,
                config.export.tolerance,
                owner=sweep_run_id,
            )
    except BaseException:  # an interrupt too: nothing half-exported stays
        for item in staged.values():
            export_lib.discard(item)
        raise
    return Exported(staged=staged)


def register(config, pre, compared, tracked, exported, progress):
    """Registers each champion, moves the alias, promotes its export."""
    from kg_service.serving import export as export_lib
    from kg_service.tracking import model_logging
    from kg_service.analysis import wording

    if not config.registry.enabled:
        return Registered(models=())
    progress.stage("registering models")
    selected_by = wording.shown(compared.summary.select_by.name).label
    models = []
    for activation, member in compared.champions.items():
        name = pre.model_names[activation]
        version = pre.store.register(
            tracked.run_ids[(activation, member.seed)],
            member.model,
            name,
            config.registry.alias,
            tags={
                "activation": activation,
                "seed": member.seed,
                "dataset": config.data.dataset,
                **{
                    metric.name: f"{getattr(member, metric.name):.6f}"
                    for metric in (pre.task.selects, pre.task.compared)
                },
                "test_accuracy": f"{member.test_accuracy:.6f}",
                "selected_by": f"final {selected_by}",
                "git_commit": pre.tags["git_commit"],
                "sweep_run_id": tracked.sweep_run_id,
            },
            description=registry_description(
                compared.summary, activation, member, config, pre.dataset
            ),
            pip_requirements=model_logging.pip_requirements(),
            metadata=pre.dataset.metadata(),
            serving=pre.task.serving,
        )
        export_path = None
        if activation in exported.staged:
            export_path = export_lib.promote(
                exported.staged[activation], config.export.dir, version
            )
            pre.store.set_version_tag(
                name, version, "saved_model", export_path.resolve()
            )
        models.append(
            RegisteredModel(
                activation=activation,
                name=name,
                version=version,
                member=member,
                export_path=export_path,
            )
        )
    return Registered(models=tuple(models))


def best_member(summary, results, activation):
    """The member of `activation` that the summary selected (best seed)."""
    (seed,) = [s.best_seed for s in summary.activations if s.activation == activation]
    for result in results:
        if result.activation == activation and result.seed == seed:
            return result
    raise AssertionError(f"no result for {activation} seed {seed}")


def registry_description(summary, activation, member, config, dataset):
    """The model version's description: what it takes, returns and scored."""
    from kg_service.analysis import wording

    selected_by = wording.shown(summary.select_by.name).label
    metric = summary.metric.name
    return (
        f"Input: {dataset.describe_inputs()} "
        f"Output: {dataset.describe_outputs()} "
        f"Best of {len(config.seeds)} seeds (by final {selected_by}, "
        f"seed {member.seed}) of a kg-train sweep on {config.data.dataset}: "
        f"{wording.shown(metric).label} {getattr(member, metric):.4f}. "
        f"{wording.comparison_sentence(summary, activation)}"
    )




def git_commit():
    """The commit of the kg-train code, or None outside a git checkout."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=os.path.dirname(os.path.abspath(__file__)),
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def absolute_uri(uri):
    """`sqlite:///mlflow.db` -> `sqlite:////abs/path/mlflow.db` (cwd-proof)."""
    prefix = "sqlite:///"
    if uri.startswith(prefix) and not uri.startswith(prefix + "/"):
        return prefix + os.path.abspath(uri[len(prefix) :])
    return uri


def kg_command():
    """`kg` as this interpreter's environment installed it: its full path
    when it sits beside the interpreter (a venv not on PATH), else `kg`."""
    beside = os.path.join(os.path.dirname(sys.executable), "kg")
    return shlex.quote(beside) if os.path.exists(beside) else "kg"


def print_summary(echo, config, compared, registered, out_dir, uri, seconds):
    from kg_service.analysis import tables
    from kg_service.analysis import wording

    summary = compared.summary
    uri = absolute_uri(uri)
    echo("")
    echo(tables.format_table(summary))
    echo("")
    if compared.failed:
        echo("Failed members (left out of the statistics):")
        for member in compared.failed:
            echo(f"  {member.activation}, seed {member.seed}: {member.failure}")
        echo("")
    if registered.models:
        selected = wording.shown(summary.select_by.name)  # "val acc", "val loss"
        echo(f"Registered models (alias @{config.registry.alias}):")
        for model in registered.models:
            line = (
                f"  models:/{model.name}/{model.version}  {model.activation}, "
                f"seed {model.member.seed}, {selected.header} "
                f"{getattr(model.member, summary.select_by.name):.4f}"
            )
            if model.export_path is not None:
                line += f"  SavedModel: {model.export_path}"
            echo(line)
        echo("")
    echo(f"Report:     {out_dir / 'report.md'}")
    # The venv's bin first: `mlflow models serve` needs its uvicorn on PATH.
    bin_dir = os.path.dirname(sys.executable)
    # Telemetry as in this process (off unless the user turned it on): the
    # printed commands run in the user's shell, not under kg_service.
    telemetry = os.environ.get("MLFLOW_DISABLE_TELEMETRY", "true")
    env = (
        f'PATH="{bin_dir}:$PATH" MLFLOW_TRACKING_URI={uri} '
        f"MLFLOW_DISABLE_TELEMETRY={telemetry}"
    )
    echo(f"MLflow UI:  {env} mlflow ui --backend-store-uri {uri}")
    if registered.models:
        (shown,) = [
            m for m in registered.models if m.activation == summary.winner.activation
        ] or registered.models[:1]
        name, export_path = shown.name, shown.export_path
        model_uri = f"models:/{name}@{config.registry.alias}"
        # kg serve answers a bad request (a CSV row too long, a header
        # only) with a 4xx and a JSON message; plain `mlflow models serve`
        # answers with a stack trace in the body (issue 15).
        echo(f"Serve:      {kg_command()} serve {model_uri} --tracking-uri {uri}")
        echo(
            f"  or MLflow's own: {env} mlflow models serve "
            f"-m {model_uri} --env-manager local -p 5001"
        )
        if export_path is not None:
            base = export_path.parent.resolve()
            echo(
                f"TF Serving: docker run -p 8501:8501 -v {base}:/models/{name} "
                f"-e MODEL_NAME={name} tensorflow/serving"
            )
    echo(f"Done in {seconds:.0f} s.")
