"""A sharded sweep: one job's share, and the job that completes it.

`run_shard` is `pipeline.run` for one job of several (`--shard I/N`):
it joins the sweep in the tracking store, trains the members of its
slice (`sweep.shards`) the store does not hold yet, and the job that
finds every member in claims the sweep and finishes it with the same
`pipeline.finish` a single-machine sweep ends with.
"""

import dataclasses
import time
from typing import Any
from typing import Optional

from kg_service.errors import SweepInterrupted
from kg_service.sweep import looks as looks_lib
from kg_service.sweep import resume as resume_lib
from kg_service.sweep import shards
from kg_service.sweep import stages
from kg_service.sweep import tuning
from kg_service.sweep.pipeline import NoProgress
from kg_service.sweep.pipeline import concluded
from kg_service.sweep.pipeline import finish
from kg_service.sweep.pipeline import sweep_params
from kg_service.sweep.preflight import preflight
from kg_service.sweep.resume import REGISTRAR


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
    progress = progress or NoProgress()
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
