"""Which process of a sweep this is: the chief (it tracks, reports and
registers) or a worker of a `multi_worker` sweep (it only trains)."""

import dataclasses
from typing import Any

from kg_service.errors import ResumeRefused


@dataclasses.dataclass(frozen=True)
class WorkerOutcome:
    """A non-chief process of a multi-worker sweep, done."""

    role: Any  # kg_service.training.parallel.Role
    members: int


def process_role(config, resume=None):
    """This process's `parallel.Role`; only the chief goes on to the
    store and the output folders.

    Raises:
        ServiceError: for a distribution the backend does not run, a bad
            TF_CONFIG; ResumeRefused for a resume of a multi-worker sweep
            (the workers would not know which members the chief's store
            holds).
    """
    from kg_service.training import parallel  # TensorFlow: after the cheap checks

    if config.device.distribution == "none":
        # No backend to ask: preflight's cheap checks still come before
        # TensorFlow's start-up.
        return parallel.Role()
    import keras  # the backend's start-up: only for a distributed run

    role = parallel.role(config.device, keras.backend.backend())
    if resume is not None and config.device.distribution == "multi_worker":
        raise ResumeRefused(
            "device.distribution: multi_worker: the workers "
            "do not read the tracking store, so they cannot skip the members it "
            "holds. Resume on one machine (--set device.distribution=mirrored or "
            "none); the members already logged are kept.",
            resume,
            "multi_worker",
        )
    return role


def run_worker(config, role):
    """A non-chief process of a `multi_worker` sweep.

    It trains every member in lockstep with the chief (each step's
    gradients are all-reduced across the processes) and returns a
    `WorkerOutcome`; the chief tracks, reports, registers and exports. It
    opens no tracking store and writes no file.
    """
    # TensorFlow: after the cheap checks.
    from kg_service.tasks import base as tasks
    from kg_service.training import device as device_lib  # TensorFlow: after the cheap checks
    from kg_service.training import loop as train_lib  # TensorFlow: after the cheap checks

    task = tasks.get(config.data.dataset)
    device_lib.describe_device(config.device)
    results = train_lib.train_sweep(task, task.load(config.data), config)
    return WorkerOutcome(role=role, members=len(results))
