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

One job of a sharded sweep runs `sweep.sharded.run_shard`; `kg report`
rebuilds a stored sweep's report with `sweep.rebuild.report_sweep`. Both
end as `run` does, through `finish` and `concluded`.
"""

import dataclasses
import pathlib
import time
from typing import Any

from kg_service.config import derived
from kg_service.sweep import looks as looks_lib
from kg_service.sweep import resume as resume_lib
from kg_service.sweep import roles
from kg_service.sweep import stages
from kg_service.sweep import tuning
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
    page_url: str = ""  # report.html in the store's UI (MLflow's), "" without one


class NoProgress:
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
    progress = progress or NoProgress()
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
        said = resume_lib.stopped(config, sweep_run_id, len(logged), error)
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
    schedule = derived.sequential(config)
    if schedule:
        looked = looks_lib.train_in_looks(
            derived.look_configs(config), schedule, pre, sweep_run_id, progress, logged, echo
        )
        config, trained, looks = looked.config, looked.trained, looked.looks
    else:
        trained = stages.train(config, pre, sweep_run_id, progress, logged)
    return config, pre, trained, looks


def concluded(config, pre, compared, registered, started):
    """The `SweepOutcome` of a sweep compared `started` (monotonic) ago."""
    from kg_service.analysis.reports import page  # scipy: the compare stage loaded it already

    return SweepOutcome(
        config=config,
        compared=compared,
        registered=registered,
        out_dir=pre.out_dir,
        tracking_uri=pre.tracking_uri,
        seconds=time.monotonic() - started,
        page_url=pre.store.report_page(page.HTML),
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
