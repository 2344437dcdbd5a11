"""Data-parallel training on the backend's own engine.

`device.distribution` picks one (docs/distribution.md):

    none          one device.
    mirrored      one process, synchronous replicas on this machine's
                  devices: TensorFlow's `tf.distribute.MirroredStrategy`,
                  JAX's `keras.distribution.DataParallel`.
    multi_worker  one process per machine, the same replicas across
                  them: TensorFlow's `tf.distribute.MultiWorkerMirroredStrategy`,
                  its cluster read from `TF_CONFIG`.

Each step, every replica takes its slice of the global batch
(`training.batch_size`, as Keras and TensorFlow count it) and the
gradients are all-reduced, so the weights are those of one device
trained on the same batches, to float rounding.

Every process of a `multi_worker` run trains the same members in
lockstep; only the chief tracks, reports, registers and exports. `role`
says which process this one is from the environment alone, before the
backend starts. `engine` makes the strategy or distribution once per
process, before the backend first runs an op (MultiWorkerMirroredStrategy
must exist before TensorFlow's runtime starts); `scope` is where models,
optimizers and `fit` use it.

Importing this module imports no backend.
"""

import contextlib
import dataclasses
import json
import os

from kg_service.errors import ServiceError

_TF_CONFIG_EXAMPLE = (
    'TF_CONFIG=\'{"cluster": {"worker": ["10.0.0.1:12345", "10.0.0.2:12345"]}, '
    '"task": {"type": "worker", "index": 0}}\' (index 1 on the second machine)'
)


@dataclasses.dataclass(frozen=True)
class Role:
    """This process's place in a data-parallel run.

    Attributes:
        chief: Whether it tracks, registers and exports (the only process
            unless `multi_worker`).
        index: Its rank, 0 for the chief.
        count: How many processes train together.
    """

    chief: bool = True
    index: int = 0
    count: int = 1

    def __str__(self):
        if self.count == 1:
            return "the only process"
        what = "chief" if self.chief else "worker"
        return f"{what} (process {self.index} of {self.count})"


def role(device_cfg, backend, environ=None):
    """Which process of the run this one is; reads no backend state.

    Args:
        device_cfg: A `kg_service.config.schema.DeviceConfig`.
        backend: The Keras backend's name.
        environ: The environment (default `os.environ`): `TF_CONFIG` for
            TensorFlow's `multi_worker`.

    Returns:
        A `Role`: the chief is TF_CONFIG's `chief` task, or worker 0 of a
        cluster without one (TensorFlow's convention).

    Raises:
        ServiceError: for a distribution the backend does not run, or a
            missing or malformed TF_CONFIG.
    """
    environ = os.environ if environ is None else environ
    kind = device_cfg.distribution
    if kind == "none":
        return Role()
    if backend not in _ENGINES.get(kind, {}):
        raise ServiceError(_unsupported(kind, backend))
    if kind == "multi_worker":
        return _tf_config_role(environ.get("TF_CONFIG", ""))
    return Role()


def _unsupported(kind, backend):
    if kind == "multi_worker" and backend == "jax":
        return (
            "device.distribution: multi_worker runs on the TensorFlow backend "
            "(MultiWorkerMirroredStrategy); on JAX, kg-train does not set up "
            "jax.distributed across processes. Run with KERAS_BACKEND=tensorflow, or "
            "use distribution: mirrored (keras.distribution.DataParallel over this "
            "machine's devices). See docs/distribution.md."
        )
    return (
        f"device.distribution: {kind} has no engine on the {backend} backend; it runs "
        f"on {' and '.join(sorted(_ENGINES[kind]))}. Set KERAS_BACKEND accordingly, or "
        "distribution: none. See docs/distribution.md."
    )


def _tf_config_role(text):
    where = "TF_CONFIG (device.distribution: multi_worker)"
    if not text.strip():
        raise ServiceError(
            f"{where}: not set. MultiWorkerMirroredStrategy reads the cluster from it "
            f"on every machine, e.g. {_TF_CONFIG_EXAMPLE}. See docs/distribution.md."
        )
    try:
        spec = json.loads(text)
    except ValueError as error:
        raise ServiceError(
            f"{where}: not valid JSON ({error}); expected e.g. {_TF_CONFIG_EXAMPLE}."
        ) from None
    cluster = spec.get("cluster") if isinstance(spec, dict) else None
    task = spec.get("task") if isinstance(spec, dict) else None
    if not isinstance(cluster, dict) or not isinstance(task, dict):
        raise ServiceError(
            f'{where}: expected a JSON object with "cluster" and "task", e.g. '
            f"{_TF_CONFIG_EXAMPLE}."
        )
    other = sorted(set(cluster) - {"chief", "worker"})
    if other or not cluster:
        raise ServiceError(
            f"{where}: the cluster has jobs {sorted(cluster)}; MultiWorkerMirroredStrategy "
            'takes "worker" (and at most one "chief"), every one training.'
        )
    for job, addresses in cluster.items():
        if not (
            isinstance(addresses, list)
            and addresses
            and all(isinstance(a, str) and ":" in a for a in addresses)
        ):
            raise ServiceError(
                f'{where}: cluster.{job} must be a non-empty list of "host:port" '
                f"strings; got {json.dumps(addresses)}."
            )
    if len(cluster.get("chief", [])) > 1:
        raise ServiceError(f"{where}: cluster.chief lists several; expected one.")
    kind, index = task.get("type"), task.get("index", 0)
    if kind not in cluster or not isinstance(index, int) or isinstance(index, bool):
        raise ServiceError(
            f"{where}: task {json.dumps(task)} is not in the cluster; expected "
            f'"type" one of {sorted(cluster)} and an integer "index".'
        )
    if not 0 <= index < len(cluster[kind]):
        raise ServiceError(
            f"{where}: task index {index} is out of range; cluster.{kind} has "
            f"{len(cluster[kind])} address(es), indexes 0 to {len(cluster[kind]) - 1}."
        )
    chiefs = len(cluster.get("chief", []))
    rank = 0 if kind == "chief" else chiefs + index
    return Role(chief=rank == 0, index=rank, count=chiefs + len(cluster.get("worker", [])))


# --- The engines. ------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Engine:
    """A backend's data-parallel engine, made once per process.

    Attributes:
        scope: A callable returning a context manager: inside it, new
            variables are replicated and `fit` splits each batch.
        replicas: How many replicas share each batch (every process's).
        devices: This process's replica devices, as the backend names them.
    """

    scope: object
    replicas: int
    devices: tuple


def _tensorflow_devices(listed):
    import tensorflow as tf  # TensorFlow: on that backend only

    available = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")
    if not listed:
        return tuple(d.name for d in available)
    known = {}
    for device in tf.config.list_logical_devices():
        spec = tf.DeviceSpec.from_string(device.name)
        known[(spec.device_type, spec.device_index)] = device.name
    chosen = []
    for name in listed:
        try:
            spec = tf.DeviceSpec.from_string(name)
        except ValueError:
            spec = None
        found = spec and known.get(((spec.device_type or "").upper(), spec.device_index or 0))
        if not found:
            raise ServiceError(
                f"device.devices: TensorFlow has no device {name!r}; it has "
                f"{', '.join(sorted(known.values()))}. Name them as TensorFlow does, e.g. "
                '"/gpu:0", or set device.devices to null for every GPU.'
            )
        chosen.append(found)
    return tuple(chosen)


def _tensorflow_mirrored(device_cfg):
    import tensorflow as tf  # TensorFlow: on that backend only

    devices = _tensorflow_devices(device_cfg.devices)
    strategy = tf.distribute.MirroredStrategy(list(devices))
    return Engine(strategy.scope, strategy.num_replicas_in_sync, devices)


def _tensorflow_multi_worker(device_cfg):
    import tensorflow as tf  # TensorFlow: on that backend only

    class MultiWorkerMirroredStrategy(tf.distribute.MultiWorkerMirroredStrategy):
        """TensorFlow's, with `reduce` as Keras 3.15's `fit` calls it.

        `fit` reduces its first (x, y) batch in one call, to find the input
        shapes, where TF 2.21's MultiWorkerMirroredStrategy takes a single
        value only ("Attempt to convert a value (PerReplica...) to a
        Tensor", keras-team/keras#20585): each value is reduced on its own,
        in the same order on every worker. And each step's logs (scalars)
        are averaged with `axis=0`, which a scalar does not have ("Invalid
        reduction dimension 0 for input with 0 dimensions",
        tensorflow/tensorflow#72388): a scalar is averaged across the
        replicas as is.
        """

        def reduce(self, reduce_op, value, axis=None):
            parent = super(MultiWorkerMirroredStrategy, self)

            def one(v):
                local = self.experimental_local_results(v)[0]
                scalar = axis is not None and local.shape.rank == 0
                return parent.reduce(reduce_op, v, None if scalar else axis)

            return tf.nest.map_structure(one, value)

    try:
        strategy = MultiWorkerMirroredStrategy()
    except RuntimeError as error:  # the runtime started before the strategy
        raise ServiceError(
            f"device.distribution: multi_worker: TensorFlow refused to start the "
            f"strategy ({error}). It must be created before TensorFlow runs any op: "
            "run kg-train as its own process on each machine."
        ) from None
    devices = tuple(strategy.extended.worker_devices)
    return Engine(strategy.scope, strategy.num_replicas_in_sync, devices)


def _jax_listed(kind):
    import keras  # Keras: seconds, not at --dry-run

    try:
        return list(keras.distribution.list_devices(kind))
    except RuntimeError:  # JAX has no such platform
        return []


def _jax_devices(listed):
    available = _jax_listed("gpu") or _jax_listed("cpu")
    if not listed:
        return tuple(available)
    every = _jax_listed("gpu") + _jax_listed("cpu")
    unknown = [name for name in listed if name.lower() not in every]
    if unknown:
        raise ServiceError(
            f"device.devices: JAX has no device {unknown[0]!r}; it has "
            f"{', '.join(every)} (keras.distribution.list_devices()). Set device.devices "
            "to null for every GPU."
        )
    return tuple(name.lower() for name in listed)


def _jax_mirrored(device_cfg):
    import keras  # Keras: seconds, not at --dry-run

    devices = _jax_devices(device_cfg.devices)
    distribution = keras.distribution.DataParallel(devices=list(devices))
    return Engine(distribution.scope, len(devices), devices)


# distribution -> backend -> a function of the DeviceConfig returning its Engine.
_ENGINES = {
    "mirrored": {"tensorflow": _tensorflow_mirrored, "jax": _jax_mirrored},
    "multi_worker": {"tensorflow": _tensorflow_multi_worker},
}
_MADE = {}


def engine(device_cfg):
    """The process's data-parallel `Engine`, or None for `distribution: none`.

    Made on the first call and kept: TensorFlow allows one
    MultiWorkerMirroredStrategy per process. Call it after
    `device.type: cpu` has hidden the GPUs and before the backend runs an
    op.

    Raises:
        ServiceError: for a distribution the backend does not run, or a
            device the backend does not have.
    """
    import keras  # Keras: seconds, not at --dry-run

    kind = device_cfg.distribution
    if kind == "none":
        return None
    backend = keras.backend.backend()
    make = _ENGINES[kind].get(backend)
    if make is None:
        raise ServiceError(_unsupported(kind, backend))
    key = (kind, device_cfg.devices, backend)
    if key not in _MADE:
        _MADE[key] = make(device_cfg)
    return _MADE[key]


def scope(device_cfg):
    """Inside it, models built and trained are data-parallel (a no-op for
    `distribution: none`)."""
    made = engine(device_cfg)
    return contextlib.nullcontext() if made is None else made.scope()


def replicas(device_cfg):
    """How many replicas share each batch (1 for `distribution: none`)."""
    made = engine(device_cfg)
    return 1 if made is None else made.replicas


def check_supported(task):
    """Raises for a task that trains without the distribution engines.

    A task says so itself (`Task.data_parallel`): the language model, for
    one, trains its members one after another with a plain `fit`, not in
    a strategy scope.
    """
    if not task.data_parallel:
        raise ServiceError(
            f"device.distribution: the {task.name} task trains on one device; "
            f"data-parallel training covers the classification tasks. Set "
            f"device.distribution: none."
        )


def check_batches(device_cfg, batches):
    """Raises unless every batch splits evenly where the engine needs it.

    JAX's DataParallel shards each batch into equal parts, one per device
    (an uneven one fails deep in XLA: "IndivisibleError"). tf.distribute
    gives the replicas unequal slices of an uneven batch, but Keras 3.15's
    `fit` averages its first batch across the replicas to find the input
    shapes, which fails on unequal ones ("Inputs to operation AddN ...
    must have the same size and shape"): there the full training batch
    must divide, and a last partial batch may not.

    Args:
        device_cfg: A `kg_service.config.schema.DeviceConfig`.
        batches: `{what: size}` of every batch the model sees, the full
            training batch first, e.g. `loop.batch_sizes(...)`.

    Raises:
        ServiceError: naming each size that does not divide.
    """
    import keras  # Keras: seconds, not at --dry-run

    if device_cfg.distribution == "none":
        return
    backend = keras.backend.backend()
    if backend != "jax":
        batches = dict(list(batches.items())[:1])
    n = replicas(device_cfg)
    uneven = [f"{what} ({size})" for what, size in batches.items() if size % n]
    if not uneven:
        return
    verb = "is" if len(uneven) == 1 else "are"
    if backend == "jax":
        raise ServiceError(
            f"device.distribution: {device_cfg.distribution} on JAX splits every batch "
            f"into {n} equal parts, one per device, but {', '.join(uneven)} {verb} not a "
            f"multiple of {n}. Pick training.batch_size and data.n_samples so that they "
            "are (the dry run shows the split sizes), or train on TensorFlow, which "
            "splits any batch but the first."
        )
    (size,) = batches.values()
    raise ServiceError(
        f"device.distribution: {device_cfg.distribution} splits each training batch "
        f"across {n} replicas, and Keras needs the first one in equal slices, but "
        f"{uneven[0]} is not a multiple of {n}. Set training.batch_size to a multiple "
        f"of {n}, e.g. --set training.batch_size={n * max(1, round(size / n))}."
    )
