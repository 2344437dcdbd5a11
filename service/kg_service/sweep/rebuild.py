"""A sweep's report, rebuilt from the tracking store alone: `kg report`.

The sweep's config and members come back from the store; the report is
made by the same `compare` stage, and `--register` registers through the
same `pipeline.finish`, as a sweep that has just trained.
"""

import dataclasses
import json
import pathlib
import tempfile
import time

from kg_service.config import loading
from kg_service.errors import ServiceError
from kg_service.sweep import looks as looks_lib
from kg_service.sweep import resume as resume_lib
from kg_service.sweep import stages
from kg_service.sweep import tuning
from kg_service.sweep.pipeline import NoProgress
from kg_service.sweep.pipeline import concluded
from kg_service.sweep.pipeline import finish
from kg_service.sweep.preflight import absolute_uri
from kg_service.sweep.preflight import preflight
from kg_service.sweep.resume import REGISTRAR


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
    progress = progress or NoProgress()
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
