"""Pre-flight: everything that can fail on the user's side, checked before
training so that a mistake costs nothing.

The cheap checks (memory, the report and export folders, the tracking
store's files and server) come first, before TensorFlow's start-up; then
the data is loaded, the device and the distribution checked, the store
opened, and a resumed sweep's members read back.
"""

import dataclasses
import datetime
import os
import pathlib
import subprocess
from typing import Any
from typing import Mapping
from typing import Optional

from kg_service import redact
from kg_service.config import derived
from kg_service.config import loading
from kg_service.config.loading import flatten
from kg_service.errors import ServiceError
from kg_service.sweep import resume as resume_lib
from kg_service.tracking import spool
from kg_service.tracking import destinations
from kg_service.tracking import lease as lease_lib
from kg_service.tracking import versions


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
    # Set by the tuning stage (kg_service.sweep.tuning): activation -> {the
    # tuned key: its chosen value}, logged as its members' param; and what
    # the stage found (kg_service.analysis.reports.tuning.Tuning), for the report.
    tuned: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    tuning: Any = None
    # A resume's lease on the sweep (kg_service.tracking.lease.Lease),
    # taken before reading what it holds; the pipeline releases it.
    lease: Any = None


def preflight(config, store=None, resume=None, wait=False, echo=print):
    """Loads the data and checks every outside dependency before training.

    With `resume`, also checks that the run is a sweep of this same
    config, takes its lease (one writer; `wait`: for the process that
    holds it, `echo` saying so) and loads the members it already holds.

    Raises:
        ServiceError: for an unavailable device or batches its
            distribution cannot split, an unusable tracking
            store, missing export prerequisites, or an export folder the
            registry's next version would overwrite; for a report or
            export folder that is (or runs through) a file or cannot be
            written. Those folders are checked first, and the tracking
            store's files and server before MLflow opens it. LeaseHeld for
            a resume of a sweep another process writes (and not `wait`).
    """
    # Absolute: MLflow caches stores by URI, so a relative sqlite path
    # would keep pointing at the first working directory's file.
    tracking_uri = absolute_uri(derived.resolve_tracking_uri(config))
    names = {a: derived.registered_model_name(config, a) for a in config.activations}
    exported = names.values() if config.registry.enabled and config.export.enabled else ()
    # First, before the heavy imports: a wrong path or a server that is
    # down costs a second, not TensorFlow's start-up.
    derived.check_memory(config, available_memory())
    destinations.check_run(config.output_dir, tracking_uri, config.export.dir, exported)
    # An unreachable Ray cluster costs seconds too.
    check_cluster(config, tracking_uri, destinations.on_this_machine(tracking_uri))
    # TensorFlow, MLflow: only once the cheap checks above passed.
    from kg_service.serving import export as export_lib
    from kg_service.tasks import base as tasks  # TensorFlow: after the cheap checks
    from kg_service.training import device as device_lib  # TensorFlow: after the cheap checks
    from kg_service.training import loop as train_lib  # TensorFlow: after the cheap checks
    from kg_service.tracking import mlflow_store as tracking  # MLflow: after the cheap checks

    task = tasks.get(config.data.dataset)
    device = device_lib.describe_device(config.device)
    dataset = task.load(config.data)
    train_lib.check_distribution(task, dataset, config)
    if config.export.enabled:
        export_lib.check_can_export()
    if store is None:
        store = tracking.Tracker(tracking_uri, config.experiment, config.tracking.retry_seconds)
    # Logged (params, config.json, the report): never a URI's password.
    resolved = loading.config_to_dict(config)
    resolved["tracking"]["uri"] = redact.uri(resolved["tracking"]["uri"])
    params = flatten(
        {k: v for k, v in resolved.items() if k not in ("activations", "seeds")}
    )
    # Activations and seeds too, as a shard's (`sharded.join`): other seeds
    # were trained under the old params, a dropped activation went unsaid.
    checked = {**params, "activations": list(config.activations), "seeds": resolved["seeds"]}
    done, spooled, lease = previous_members(config, store, resume, checked, wait, echo)
    if config.registry.enabled and config.export.enabled:
        with lease_lib.released_on_error(lease):  # the holder's versions counted
            check_export_folders(config, store, names.values())
    return Preflight(
        lease=lease,
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
            **versions.library_versions(),
            **{f"device.{k}": v for k, v in device.items()},
            "git_commit": git_commit(),
            "config_file": config.source,
            "dataset": config.data.dataset,
            **dataset.tags(),
            **study_tags(config, task),
        },
    )


def check_cluster(config, tracking_uri, on_disk):
    """With `execution.engine: ray`, connects to the cluster (or starts a
    local Ray) and checks that its nodes can reach the store (not one
    `on_disk` of this machine, for more than one node)."""
    if config.execution.engine == "ray":
        from kg_service.execution import cluster  # Ray: only for execution.engine ray

        cluster.connect(config.execution, tracking_uri, on_disk)


def study_tags(config, task):
    """What `kg report --study` finds a sweep by and reads it with: the
    study's name and the task's compared metric (none without a study)."""
    if config.study is None:
        return {}
    return {
        "kg.study": config.study,
        "kg.metric": task.compared.name,
        "kg.higher_is_better": str(task.compared.higher_is_better).lower(),
    }


def previous_members(config, store, resume, params, wait=False, echo=print):
    """What an earlier try of sweep `resume` left: `(done, spooled, lease)`,
    the members in the store and those kept locally only (empty without
    `resume`), and the sweep's lease, taken before reading them. Checks
    that the sweep may be resumed with `config` before and after taking
    the lease (a --wait may have waited for another process to finish it)."""
    if resume is None:
        return {}, {}, None
    resume_lib.check_resumable(config, store, resume, params)
    lease = resume_lib.take_lease(config, store, resume, wait=wait, echo=echo)
    with lease_lib.released_on_error(lease):
        resume_lib.check_resumable(config, store, resume, params)
        done, spooled = kept_members(config, store, resume)
    return done, spooled, lease


def kept_members(config, store, resume):
    """`(done, spooled)` of sweep `resume`: its members in the store, and
    those kept locally only (a store failure cut their logging)."""
    done = store.finished_members(resume)
    where = spool.folder(config.output_dir, resume)
    kept = spool.read(where)
    for activation, seed in set(kept) & set(done):
        # Whole in the store though its last call failed (the run's end, cut
        # by the outage): the store's copy counts, the local one goes.
        spool.discard(where, activation, seed)
    return done, {key: result for key, result in kept.items() if key not in done}


def check_export_folders(config, store, names):
    """Raises a ServiceError if the registry's next version of a model in
    `names` would be exported into a folder that exists already."""
    from kg_service.serving import export as export_lib  # TensorFlow: a real run only

    for name in names:
        target = export_lib.version_dir(config.export.dir, name, store.next_version(name))
        if target.exists():
            raise ServiceError(
                f"export folder {target} already exists, but the "
                f"registry's next version of {name!r} would be written "
                f"there. Move or delete it, or set export.dir to a new "
                f"folder (--set export.dir=...)."
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
