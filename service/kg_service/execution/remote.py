"""A Ray task's side: train one group's members and log each run once.

`train_and_log` runs in a Ray worker on any node. Before it trains, it
asks the store which of its members a try before it logged (Ray runs a
task again when its worker or node died, `execution.max_retries`): those
are not trained again, and a run an earlier try left half-logged is
replaced by `TrackingStore.log_member`, so the store holds each member
once however many tries it took. It returns each member's `Landed`: the
run id and the member's numbers without its model (the driver reads a
champion's model from its run).
"""

import dataclasses
from typing import Any
from typing import Mapping
from typing import Optional

from kg_service.errors import ServiceError
from kg_service.execution import cluster


@dataclasses.dataclass(frozen=True)
class MemberLog:
    """How a task logs its members: where, under which sweep, with what."""

    tracking_uri: str
    experiment: str
    retry_seconds: float
    sweep_run_id: str
    params: Mapping[str, Mapping[str, Any]]  # activation -> its member runs' params
    tags: Mapping[str, Any]  # every member run's (kg.role among them)
    final: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # added to each member's
    keep_model: bool = True  # False: a tuning member, scored only
    backend: Optional[str] = None  # the driver's Keras backend: a worker on another refuses


@dataclasses.dataclass(frozen=True)
class Landed:
    """One member as its task hands it back to the driver."""

    key: tuple  # (activation, seed)
    run_id: str
    result: Any  # its MemberResult without the model; None if an earlier try logged it
    node: Optional[str] = None


def train_and_log(task, dataset, config, pairs, log):
    """Trains the `pairs` (activation, seed) of one group that the store
    does not hold yet and logs each; returns a `Landed` per pair."""
    # In the worker, which imports them once and is reused:
    from kg_service.tracking import mlflow_store  # MLflow: in the worker
    from kg_service.training import device  # TensorFlow: in the worker
    from kg_service.training import loop  # TensorFlow: in the worker

    store = mlflow_store.Tracker(log.tracking_uri, log.experiment, log.retry_seconds, create=False)
    store.parent_run_id = log.sweep_run_id
    held = store.member_keys(log.sweep_run_id)
    todo = tuple(key for key in pairs if key not in held)
    landed = [Landed(key, held[key], None) for key in pairs if key in held]
    if not todo:
        return landed
    check_backend(log.backend)
    # This node's device, not the driver's: the runs say what trained them.
    here = {f"device.{k}": v for k, v in device.describe_device(config.device).items()}
    with device.quiet_retracing_warnings():
        results = loop.train_group(task, dataset, config, todo, lambda epoch, values: None)
    node = cluster.node_tags()
    for result in results:
        result.final = {**result.final, **log.final}
        if not log.keep_model:
            result.model = None
        run_id = store.log_member(result, log.params[result.activation], {**log.tags, **here, **node})
        result.model = None  # the driver reads it from the run, if it needs it
        landed.append(Landed((result.activation, result.seed), run_id, result, node["kg.node"]))
    return landed


def check_backend(backend):
    """Raises unless this worker's Keras backend is the driver's `backend`."""
    import keras  # Keras: the worker's, after the store answered

    if backend is not None and keras.backend.backend() != backend:
        raise ServiceError(
            f"a Ray worker runs Keras on {keras.backend.backend()}, the driver on "
            f"{backend}: its members would train other numbers. Start the cluster's "
            f"nodes with KERAS_BACKEND={backend}."
        )
