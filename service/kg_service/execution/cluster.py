"""Connecting to Ray: the address checked in seconds, a local Ray started
when none is given, and a store every node can reach.

`connect` runs in pre-flight, before TensorFlow starts: an address that
does not answer is a `ServiceError` naming it (kg-train's exit 2), not
Ray's minute-long retries; a cluster of more than one node refuses a
store that lives on the driver's disk (sqlite, a file store), which the
other nodes would each create afresh on their own disk, so their members
would silently never reach the sweep. Once connected, it starts a worker
on each node that imports the training code (`warm_up`) while the driver
prepares the sweep: the import is Ray's per-job fixed cost.
"""

import os
import socket
import urllib.parse

from kg_service.errors import ServiceError

CONNECT_SECONDS = 3.0  # a head that does not accept a TCP connection by then is down
NAMESPACE = "kg-train"  # the Ray namespace of kg-train's jobs
# Passed to every task where the driver has them: a worker on another
# backend would train other numbers silently (remote.check_backend refuses
# it); groups that share a GPU (num_gpus 0.5) need TensorFlow to grow its
# memory (JAX: not preallocate it) instead of taking the whole GPU each.
FORWARDED_ENV = ("KERAS_BACKEND", "TF_CPP_MIN_LOG_LEVEL", "TF_FORCE_GPU_ALLOW_GROWTH",
                 "XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION")


def connect(execution, tracking_uri, on_disk):
    """Connects this process to the Ray cluster of `execution` (an
    `ExecutionConfig`), or starts a local Ray when `address` is null.
    `on_disk`: whether the store `tracking_uri` is a file on this
    machine (`destinations.on_this_machine`).

    Returns:
        The number of alive nodes.

    Raises:
        ServiceError: the address does not answer, Ray is not installed,
            or a multi-node cluster was given a machine-local store.
    """
    address = execution.address
    if address not in (None, "auto"):
        check_reachable(address)  # before Ray's import: a wrong address costs nothing
    ray = import_ray()
    env = {name: os.environ[name] for name in FORWARDED_ENV if name in os.environ}
    kwargs = dict(namespace=NAMESPACE, ignore_reinit_error=True, log_to_driver=False,
                  runtime_env={"env_vars": env} if env else None)
    if address is None:  # as ray.init() does: RAY_ADDRESS's cluster, else a new local one
        kwargs["include_dashboard"] = False
    try:
        ray.init(address=address, **kwargs)
    except ConnectionError as error:
        raise ServiceError(
            f"execution.address {address}: no Ray cluster found there ({error}). "
            "Start one (`ray start --head`), or give its address (host:6379 or "
            "ray://host:10001), or leave execution.address null for a local Ray."
        ) from None
    nodes = alive_nodes(ray)
    check_store(nodes, tracking_uri, on_disk, address)
    warm_up(ray, execution.group_resources, nodes)
    return nodes


WARM_UP_NAME = "kg-train warm-up"
WARM_UP_SECONDS = 300.0  # the most the first tasks wait for the warm-up
_warming = []  # this process's warm-up tasks not yet waited for


def warm_up(ray, resources, nodes):
    """Starts a worker on each node that imports what a group's task needs
    (TensorFlow, MLflow, the training loop) while the driver still prepares
    the sweep (its pre-flight, its run, the data). `warmed` waits for them
    before the first tasks go out: a task submitted while they still
    import would start a cold worker of its own where a CPU is free, and
    Ray hands a task to an idle warm worker of its job. A warm-up that
    fails costs nothing: its node's first task imports as before."""
    task = ray.remote(_import_training).options(
        name=WARM_UP_NAME, num_cpus=resources.num_cpus, num_gpus=resources.num_gpus,
        scheduling_strategy="SPREAD", max_retries=0)
    _warming[:] = [task.remote() for _ in range(nodes)]


def warmed(ray):
    """Waits (at most WARM_UP_SECONDS) until `warm_up`'s workers have
    imported, once per process."""
    if _warming:
        ray.wait(list(_warming), num_returns=len(_warming), timeout=WARM_UP_SECONDS)
        _warming.clear()


def _import_training():
    # What `remote.train_and_log` imports first (not `remote` itself, which
    # imports this module: the task's unpickling brings it, a small file).
    from kg_service.tracking import mlflow_store  # noqa: F401  MLflow, in the worker
    from kg_service.training import loop  # noqa: F401  TensorFlow, in the worker


def check_supported(config, shard=None):
    """Raises a ServiceError for engine ray with shards (`--shard`): the
    driver already spreads the members over the cluster, and a job that
    trains a fixed slice has nothing to hand to it."""
    if shard is not None and config.execution.engine == "ray":
        raise ServiceError(
            "execution.engine is ray, and --shard/--sweep-id split the sweep into "
            "jobs of their own: use one or the other. With Ray, run one kg-train "
            "(the driver) and let it place the members on the cluster; with shards, "
            "set execution.engine: local in each job."
        )


def import_ray():
    """The `ray` module, or a ServiceError saying how to install it."""
    try:
        import ray  # Ray: only for execution.engine ray, and it is an extra
    except ImportError:
        raise ServiceError(
            "execution.engine is ray, and Ray is not installed here; install it "
            "with `pip install \"keras-gelu[service,ray]\"` (or set execution.engine: local)."
        ) from None
    return ray


def check_reachable(address):
    """Raises a ServiceError unless `address`'s host accepts a TCP
    connection within `CONNECT_SECONDS`."""
    host, port = host_port(address)
    try:
        with socket.create_connection((host, port), timeout=CONNECT_SECONDS):
            return
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise ServiceError(
            f"execution.address {address}: the Ray cluster does not answer ({reason} "
            f"on {host}:{port} within {CONNECT_SECONDS:g} s). Check the head's address "
            "and port (ray start --head prints it; Ray Client listens on 10001), or "
            "leave execution.address null for a local Ray."
        ) from None


def host_port(address):
    """`(host, port)` of `host:port` or `ray://host:port`."""
    parts = urllib.parse.urlsplit(address if "://" in address else f"ray://{address}")
    return parts.hostname, parts.port


def alive_nodes(ray):
    return sum(1 for node in ray.nodes() if node.get("Alive"))


def check_store(nodes, tracking_uri, on_disk, address):
    """Raises a ServiceError for a store `on_disk` of this machine on a
    cluster of more than one node (module docstring)."""
    if nodes > 1 and on_disk:
        raise ServiceError(
            f"execution.engine ray: the cluster at {address or 'auto'} has {nodes} nodes, and "
            f"the tracking store {tracking_uri} is a file on this machine: the "
            "other nodes cannot log their members into it. Give a tracking server "
            "every node reaches (--tracking-uri http://HOST:5000, or a "
            "postgresql:// store); sqlite and file stores suit a one-node cluster only."
        )


def node_tags():
    """The tags a member's run carries about the node that trained it."""
    import ray  # Ray: in a task, on the node

    return {"kg.node": ray.get_runtime_context().get_node_id(),
            "kg.node_ip": ray.util.get_node_ip_address()}
