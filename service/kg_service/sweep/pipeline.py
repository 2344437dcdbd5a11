"""One sweep, end to end, as six stages (seven with a tuning block,
`sweep.tuning`, before train):

    preflight -> [tune ->] train -> track -> compare -> export -> register

Each stage is one function (`sweep.preflight`, `sweep.stages`) that takes
what the stages before it returned and returns a small frozen dataclass;
`run` reads as their sequence and returns a `SweepOutcome`, which
`kg_service.cli.summary` prints. `track` runs as each activation's members
finish training, so a crash, a kill -9 or a power cut keeps every member
already trained; a resumed sweep (and any process that joins the same
sweep) trains only what the store does not hold yet (`sweep.resume`).
Data moves one way. Everything that can fail on the user's side is
checked in `preflight`, before training, so a mistake costs nothing. The
pipeline talks to a `tracking.TrackingStore` (MLflow's in production),
never to MLflow itself.

The caller passes in `progress` (a callable taking training events, with
`stage(message)` and `close()`; the CLI's bar is
`kg_service.cli.progress.SweepProgress`) and `echo`, which prints the
lines a user reads while the sweep runs.
"""

import dataclasses
import json
import pathlib
import tempfile
import time
from typing import Any
from typing import Optional

from kg_service.config import derived
from kg_service.config import loading
from kg_service.errors import ServiceError
from kg_service.errors import StoreUnavailable
from kg_service.errors import SweepInterrupted
from kg_service.sweep import looks as looks_lib
from kg_service.sweep import resume as resume_lib
from kg_service.sweep import roles
from kg_service.sweep import shards
from kg_service.sweep import stages
from kg_service.sweep import tuning
from kg_service.sweep.preflight import absolute_uri
from kg_service.sweep.preflight import preflight
from kg_service.sweep.resume import REGISTRAR

# --- What a run returns. -----------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SweepOutcome:
    """A sweep compared (and, if configured, exported and registered)."""

    config: Any  # kg_service.config.schema.Config
    compared: stages.Compared
    registered: stages.Registered
    out_dir: pathlib.Path
    tracking_uri: str
    seconds: float


@dataclasses.dataclass(frozen=True)
class ShardOutcome:
    """A shard that ended without comparing the sweep: other jobs' members
    are not all in (`complete` False, `held` < `total`), or another job
    won the claim to register it (`registrar`, with the sweep run's
    `status`)."""

    shard: Any  # kg_service.sweep.shards.Shard
    sweep_id: str
    experiment: str
    held: int
    total: int
    seconds: float
    complete: bool = False
    registrar: Optional[str] = None
    status: Optional[str] = None


class _NoProgress:
    """The default `progress`: shows nothing."""

    def __call__(self, event):
        pass

    def stage(self, message):
        pass

    def close(self):
        pass


# --- The sweep. --------------------------------------------------------------


def run(config, *, claimant, progress=None, echo=print, store=None, resume=None, wait=False):
    """Runs the sweep described by `config`.

    Args:
        config: A validated `kg_service.config.schema.Config`.
        progress: Shows training events and stages (module docstring).
        claimant: Who registers the sweep (the command line, e.g.); kept
            in the sweep's `REGISTRAR` param.
        echo: Prints one line for the user.
        store: A `tracking.TrackingStore`; default: MLflow at the
            configured tracking URI.
        resume: The parent run id of an interrupted sweep of the same
            config: only its missing members are trained.
        wait: With `resume`, wait for another process that holds the
            sweep's lease (`tracking.lease`) instead of raising LeaseHeld.

    Returns:
        A `SweepOutcome`; a `WorkerOutcome` in a non-chief process.

    Raises:
        SweepInterrupted: on SIGINT/SIGTERM (KeyboardInterrupt), after
            marking the sweep KILLED; finished members stay in the store.
        StoreUnavailable: when the tracking store failed mid-sweep and
            stayed down past `tracking.retry_seconds`; trained members not
            in the store yet are kept in `spool`, for a resume.
    """
    started = time.monotonic()
    progress = progress or _NoProgress()
    looks_lib.check_supported(config)
    tuning.check_supported(config)
    role = roles.process_role(config, resume)
    if not role.chief:
        return roles.run_worker(config, role)
    pre = preflight(config, store, resume, wait=wait, echo=echo)
    sweep_run_id = resume
    logged = dict(pre.done)  # (activation, seed) -> run id, as members land
    lease = pre.lease  # a resume's: taken before it read what the sweep holds
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
                lease = resume_lib.take_lease(config, pre.store, sweep_run_id)
                pre.store.log_dict(sweep_run_id, dict(pre.resolved), "config.json")
            config, pre, trained, looks = train_all(config, pre, sweep_run_id, progress, logged, echo)
            lease.confirm()  # still the one writer: nobody took a stale lease over
            # Never refused here (one process, a sweep not finished yet);
            # recorded so that a rebuilt report cannot register it again.
            pre.store.claim(sweep_run_id, REGISTRAR, resume_lib.registrar_token(claimant))
            compared, registered = stages.conclude(config, pre, trained, progress, looks)
            progress.close()
    except BaseException as error:
        said = stopped(config, sweep_run_id, len(logged), error)
        if said is None:
            raise  # a bug: its traceback
        progress.close()
        raise said from None
    finally:
        if lease is not None:  # after the run's status: a --wait wakes to FINISHED
            lease.release()
    return concluded(config, pre, compared, registered, started)


def train_all(config, pre, sweep_run_id, progress, logged, echo):
    """Tunes (with a tuning block: each activation's value, before the
    comparison), then trains the members not in the store, in looks for a
    sequential sweep. Returns `(config, pre, trained, looks)`."""
    looks = None
    if config.tuning is not None:
        pre = tuning.tune(config, pre, sweep_run_id, progress, echo)
    if derived.sequential(config):
        looked = looks_lib.train_in_looks(config, pre, sweep_run_id, progress, logged, echo)
        config, trained, looks = looked.config, looked.trained, looked.looks
    else:
        trained = stages.train(config, pre, sweep_run_id, progress, logged)
    return config, pre, trained, looks


def stopped(config, sweep_run_id, held, error):
    """The `ServiceError` to raise for a sweep that `error` stopped with
    `held` members logged: an interrupt, a store that stayed down, a full
    disk (each saying what is kept and how to resume); None for a bug."""
    if isinstance(error, KeyboardInterrupt):
        return interrupted(config, sweep_run_id, held)
    if isinstance(error, StoreUnavailable):
        return store_failed(config, sweep_run_id, held, error)
    if isinstance(error, Exception):
        return resume_lib.disk_full(config, sweep_run_id, held, error)
    return None


def concluded(config, pre, compared, registered, started):
    """The `SweepOutcome` of a sweep compared `started` (monotonic) ago."""
    return SweepOutcome(
        config=config,
        compared=compared,
        registered=registered,
        out_dir=pre.out_dir,
        tracking_uri=pre.tracking_uri,
        seconds=time.monotonic() - started,
    )


def interrupted(config, sweep_run_id, held):
    """The `SweepInterrupted` of a sweep stopped with `held` members logged."""
    if sweep_run_id is None:
        return SweepInterrupted(None)
    return SweepInterrupted(
        sweep_run_id,
        kept=resume_lib.kept(config, sweep_run_id, held, "KILLED"),
        resume=resume_lib.resume_hint(config, sweep_run_id),
    )


def store_failed(config, sweep_run_id, held, error):
    """`error` (a `StoreUnavailable`) with what the sweep kept."""
    if sweep_run_id is None:
        return StoreUnavailable(str(error), in_sweep=True)
    return StoreUnavailable(
        str(error),
        sweep_run_id,
        kept=resume_lib.kept(config, sweep_run_id, held, "RUNNING"),
        resume=resume_lib.resume_hint(config, sweep_run_id),
        in_sweep=True,
    )


def sweep_params(config, pre):
    """The params of a sweep's parent run (sequential seeds: the mapping)."""
    return {**pre.params, "activations": list(config.activations), "seeds": pre.resolved["seeds"]}


def finish(config, pre, trained, progress, looks=None):
    """Compares, exports and registers a sweep whose members are all in
    the store (`resume.stored_members`), and marks its parent run FINISHED
    (FAILED on an error). The caller holds the sweep's `REGISTRAR` claim.

    Returns:
        `(Compared, Registered)`.
    """
    with pre.store.sweep_run(
        config.experiment, {}, {}, resume=trained.tracked.sweep_run_id
    ):
        return stages.conclude(config, pre, trained, progress, looks)


# --- A sharded sweep: one job's share, and the job that completes it. --------


def run_shard(
    config, shard, sweep_id=None, *, claimant, progress=None, echo=print, store=None, wait=False
):
    """Runs one job's share of a sharded sweep.

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
        claimant: Who claims the sweep, should this job complete it (the
            command line, e.g.); kept in the sweep's `REGISTRAR` param.
        progress, echo, store: as for `run`.
        wait: Wait for another job that runs this same shard (holds its
            slice's lease, `tracking.lease`) instead of raising LeaseHeld.

    Returns:
        A `SweepOutcome` if this job compared the sweep, else a `ShardOutcome`.

    Raises:
        ServiceError: as `run`'s pre-flight; SweepMismatch when `sweep_id`
            names a sweep of different settings.
        SweepInterrupted: on SIGINT/SIGTERM; the sweep is left running for
            the other jobs, this job's finished members stay.
    """
    started = time.monotonic()
    progress = progress or _NoProgress()
    looks_lib.check_supported(config, shard)
    tuning.check_supported(config)
    sweep_id = sweep_id or shards.sweep_id(config)
    pre = preflight(config, store)
    total = len(config.activations) * len(config.seeds)
    sweep_run_id = None

    def ended(held, complete=False, registrar=None, status=None):
        return ShardOutcome(
            shard=shard, sweep_id=sweep_id, experiment=config.experiment,
            held=held, total=total, seconds=time.monotonic() - started,
            complete=complete,
            registrar=registrar, status=status,
        )  # fmt: skip

    lease = None
    try:
        sweep_run_id = join(config, pre, shard, sweep_id)
        lease = resume_lib.take_lease(config, pre.store, sweep_run_id, shard.scope, wait, echo)
        train_share(config, pre, shard, sweep_id, sweep_run_id, progress, echo)
        held = pre.store.member_keys(sweep_run_id)
        held = [key for key in shards.grid(config) if key in held]  # tuning members aside
        if len(held) < total:
            return ended(len(held))
        # Claimed on the sweep's earliest parent run, read again now: should
        # two jobs have kept different parents at the start (see
        # `TrackingStore.join_sweep`), both claim on the same run here.
        sweep_run_id, _ = pre.store.join_sweep(config.experiment, {}, {}, sweep_id)
        if not pre.store.claim(sweep_run_id, REGISTRAR, resume_lib.registrar_token(claimant)):
            _, params, status = pre.store.sweep_info(sweep_run_id)
            return ended(len(held), True, params.get(REGISTRAR), status)
        trained = resume_lib.stored_members(config, pre, sweep_run_id)
        # Every activation's claimed choice, whichever job made it.
        pre = dataclasses.replace(pre, tuning=tuning.stored(config, pre, sweep_run_id))
        compared, registered = finish(config, pre, trained, progress)
    except KeyboardInterrupt:
        progress.close()
        raise SweepInterrupted(sweep_run_id, shard=str(shard), sweep_id=sweep_id) from None
    finally:
        if lease is not None:
            lease.release()
    return concluded(config, pre, compared, registered, started)


def join(config, pre, shard, sweep_id):
    """Joins (or opens) the sweep `sweep_id`; returns its parent run id.

    Raises:
        SweepMismatch: when the sweep was started with other settings.
    """
    params = sweep_params(config, pre)
    sweep_run_id, created = pre.store.join_sweep(
        config.experiment,
        params,
        {**pre.tags, "kg.role": "sweep", "kg.shards": shard.count},
        sweep_id,
    )
    if created:
        pre.store.log_dict(sweep_run_id, dict(pre.resolved), "config.json")
    else:
        resume_lib.check_same_settings(pre.store, sweep_run_id, params, sweep_id=sweep_id)
    return sweep_run_id


def train_share(config, pre, shard, sweep_id, sweep_run_id, progress, echo):
    """Trains the members of `shard` that the store does not hold yet;
    with a tuning block, each of their activations at its tuned value
    (`tuning.tune`: whoever claimed the choice first; never waiting for
    another job)."""
    held = pre.store.member_keys(sweep_run_id)
    mine = shards.members(config, shard)
    todo = tuple(key for key in mine if key not in held)
    held = [key for key in shards.grid(config) if key in held]  # tuning members aside
    echo(
        f"Sweep {sweep_id} (run {sweep_run_id}), shard {shard}: "
        f"{len(todo)} of its {len(mine)} members to train; the store "
        f"holds {len(held)} of {len(shards.grid(config))}"
    )
    if config.tuning is not None and todo:
        pre = tuning.tune(
            config, pre, sweep_run_id, progress, echo,
            activations=tuple(a for a in config.activations if any(k[0] == a for k in todo)),
            # Claimed on the sweep's earliest parent, read again each time, as
            # the REGISTRAR claim: two jobs that kept different parents at
            # the start claim on the same run.
            claim_on=lambda: pre.store.join_sweep(config.experiment, {}, {}, sweep_id)[0],
        )
    stages.train(config, pre, sweep_run_id, progress, members=todo)
    progress.close()


# --- A sweep's report, rebuilt from the tracking store. ----------------------


def report_sweep(
    experiment, tracking_uri, *, claimant, sweep_id=None, register=False,
    output_dir=None, progress=None, store=None,
):  # fmt: skip
    """A sweep's report, rebuilt from the tracking store alone.

    The sweep's config comes from its parent run's `config.json`, its
    members (metrics and models) from their runs; the data is generated
    again from the config. The same `compare` stage and report writer as
    a single-machine sweep make the report; with `register`, the same
    `finish` as the last shard's exports and registers it, once: the
    sweep's `REGISTRAR` claim refuses a second registration.

    Args:
        experiment: The MLflow experiment.
        tracking_uri: The tracking store.
        claimant: Who registers (with `register`), as for `run_shard`.
        sweep_id: A sharded sweep's id, or any sweep's parent run id;
            default: the experiment's newest sweep.
        register: Also export and register the champions.
        output_dir: Where the report goes; default: the sweep's config's.
        progress, store: as for `run`.

    Returns:
        A `SweepOutcome`.

    Raises:
        ServiceError: for a missing experiment or sweep, a sweep with
            members missing; RegisteredAlready for one registered already.
    """
    started = time.monotonic()
    progress = progress or _NoProgress()
    tracking_uri = absolute_uri(tracking_uri)
    if store is None:
        from kg_service.tracking import mlflow_store as tracking  # MLflow: a real run only

        store = tracking.Tracker(tracking_uri, experiment, create=False)
    sweep_run_id, ran = find_sweep(store, experiment, sweep_id, tracking_uri)
    config = sweep_config(ran, sweep_run_id, tracking_uri, output_dir, register)
    # The report shows the config the sweep ran, not this rebuild's overrides.
    pre = dataclasses.replace(preflight(config, store), resolved=ran)
    if register and REGISTRAR in store.sweep_info(sweep_run_id)[1]:
        resume_lib.refuse_registration(store, sweep_run_id)
    pre = dataclasses.replace(pre, tuning=tuning.stored(config, pre, sweep_run_id))
    config, replay = looks_lib.stored_seeds(config, pre, sweep_run_id)
    trained = resume_lib.stored_members(config, pre, sweep_run_id)
    looks = replay(trained) if replay else None
    registered = stages.Registered(models=())
    if register:
        if not store.claim(sweep_run_id, REGISTRAR, resume_lib.registrar_token(claimant)):
            resume_lib.refuse_registration(store, sweep_run_id)
        compared, registered = finish(config, pre, trained, progress, looks)
    else:
        compared = stages.compare(config, pre, trained, looks)
    progress.close()
    return concluded(config, pre, compared, registered, started)


def find_sweep(store, experiment, sweep_id, tracking_uri):
    """`(parent run id, config as it ran)` of the sweep to report."""
    found = store.find_sweeps(sweep_id)
    if not found:
        raise ServiceError(
            f"experiment {experiment!r} holds no kg-train sweep"
            + (f" with sweep id or run id {sweep_id!r}" if sweep_id else "")
            + f" in {tracking_uri}."
        )
    return found[0], store.load_dict(found[0], "config.json")


def sweep_config(ran, sweep_run_id, tracking_uri, output_dir, register):
    """The `Config` of a sweep's `config.json` (`ran`), read back through
    the same validation, with this report's tracking URI and output folder."""
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp, "config.json")
        path.write_text(json.dumps(ran))
        config = loading.load_config(path)
    config = dataclasses.replace(
        config,
        tracking=dataclasses.replace(config.tracking, uri=tracking_uri),
        output_dir=output_dir or config.output_dir,
        source=f"config.json of sweep run {sweep_run_id}",
    )
    if not register:
        config = dataclasses.replace(
            config, registry=dataclasses.replace(config.registry, enabled=False)
        )
    return config
