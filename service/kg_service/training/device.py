"""The device a sweep trains on, its dtype policy, and TensorFlow's noise.

`describe_device` applies `device.type` (hiding the GPUs for "cpu") and
says what the sweep runs on (and warns where `mixed_bfloat16` would make a
CPU sweep slower); `dtype_policy` sets the mixed-precision
policy around model building. Both tasks' training use them.
"""

import contextlib
import logging
import platform

import keras

from kg_service.errors import ServiceError
from kg_service.training import parallel


def _tensorflow_gpus(hide):
    import tensorflow as tf  # the backend's own, only on the backend that runs

    gpus = tf.config.get_visible_devices("GPU")
    if hide and gpus:
        try:
            tf.config.set_visible_devices([], "GPU")
        except RuntimeError:  # TensorFlow has already set them up.
            raise ServiceError(
                "device.type: cpu, but TensorFlow is already using the GPU in "
                "this process. Run with CUDA_VISIBLE_DEVICES= (empty) instead."
            ) from None
        return []
    return [
        tf.config.experimental.get_device_details(gpu).get(
            "device_name", gpu.name
        )
        for gpu in gpus
    ]


def _jax_gpus(hide):
    import jax  # the backend's own, only on the backend that runs

    try:
        gpus = jax.devices("gpu")
    except RuntimeError:  # No GPU backend.
        gpus = []
    if hide and gpus:
        jax.config.update("jax_default_device", jax.devices("cpu")[0])
        return []
    return [gpu.device_kind for gpu in gpus]


def _torch_gpus(hide):
    import torch  # the backend's own, only on the backend that runs

    if hide or not torch.cuda.is_available():
        return []
    return [
        torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())
    ]


# One line per Keras backend: hide=bool -> names of the GPUs it will use.
# Each probe imports its backend when called: only the configured one is
# loaded (and the others need not be installed).
_GPU_PROBES = {
    "tensorflow": _tensorflow_gpus,
    "jax": _jax_gpus,
    "torch": _torch_gpus,
}


log = logging.getLogger("kg-train")

# CPU flags of bfloat16 matmul units (Intel AMX, AVX512-BF16); oneDNN
# (TensorFlow, torch) runs bfloat16 matmuls on them.
_BFLOAT16_UNITS = ("amx_bf16", "avx512_bf16")
_WARNED = set()


def cpu_flags():
    """The CPU's feature flags from /proc/cpuinfo, or None where unreadable."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return None


def slow_bfloat16(policy, backend, flags):
    """Why `policy` trains slower than float32 on this CPU, or None.

    Args:
        policy: `device.mixed_precision` (None, "mixed_float16", ...).
        backend: The Keras backend's name.
        flags: `cpu_flags()`: a set of flags, or None (unknown: no reason).
    """
    if policy != "mixed_bfloat16":
        return None
    if backend == "jax":
        return ("JAX's XLA:CPU runs bfloat16 matmuls slower than float32 ones "
                "(1.5x the time on an AMX CPU)")
    if flags is not None and not flags.intersection(_BFLOAT16_UNITS):
        return ("this CPU has no bfloat16 matmul units (neither amx_bf16 nor "
                "avx512_bf16 in /proc/cpuinfo)")
    return None


def describe_device(device_cfg):
    """Applies `device_cfg.type` and says what the sweep will run on.

    `"cpu"` hides the GPUs from the backend (TensorFlow: only before it
    first touches them); `"gpu"` requires one; `"auto"` uses one if any.

    Args:
        device_cfg: A `kg_service.config.schema.DeviceConfig`.

    Returns:
        A dict: `device` ("cpu" or "gpu"), `device_name`, `backend` (the
        Keras backend), `mixed_precision` (policy name or None), `xla`,
        `distribution` and `replicas` (how many devices share each batch;
        `kg_service.training.parallel` makes its engine here, once the GPUs
        are hidden or not).

    Raises:
        ServiceError: for `type: gpu` when the backend sees no GPU; for a
            distribution the backend does not run.

    Example:

    >>> from kg_service.config.schema import DeviceConfig
    >>> describe_device(DeviceConfig(type="cpu"))["device"]
    'cpu'
    """
    backend = keras.backend.backend()
    probe = _GPU_PROBES.get(backend, lambda hide: [])
    gpus = probe(device_cfg.type == "cpu")
    if device_cfg.type == "gpu" and not gpus:
        raise ServiceError(
            f"device.type: gpu, but the {backend} backend sees no GPU. Set "
            f"device.type to auto or cpu, or check the CUDA installation "
            f"(nvidia-smi, and a GPU build of {backend})."
        )
    on_gpu = bool(gpus)
    reason = None
    if not on_gpu and device_cfg.mixed_precision == "mixed_bfloat16":  # read /proc only then
        reason = slow_bfloat16(device_cfg.mixed_precision, backend, cpu_flags())
    if reason and reason not in _WARNED:  # once a process: preflight and training both ask
        _WARNED.add(reason)
        log.warning(
            "device.mixed_precision: mixed_bfloat16 on the CPU: %s, so it trains "
            "slower than float32 here (set device.mixed_precision: null; "
            "docs/benchmarks.md, 'round 9').", reason)
    return {
        "device": "gpu" if on_gpu else "cpu",
        "device_name": gpus[0] if on_gpu else (platform.processor() or "cpu"),
        "backend": backend,
        "mixed_precision": device_cfg.mixed_precision,
        "xla": bool(device_cfg.xla),
        "distribution": device_cfg.distribution,
        "replicas": parallel.replicas(device_cfg),
    }


@contextlib.contextmanager
def dtype_policy(name):
    """Sets the global dtype policy inside the block (None: unchanged)."""
    if not name:
        yield
        return
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(name)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)


class _DropRetracingWarnings(logging.Filter):
    def filter(self, record):
        return "triggered tf.function retracing" not in record.getMessage()


@contextlib.contextmanager
def quiet_retracing_warnings():
    """Drops TensorFlow's "excessive retracing" warning inside the block.

    Each activation builds new models, whose tf.functions share their
    code with the previous models'; TensorFlow counts each new model's
    first traces as retracing and warns, wrongly, from the third
    activation on.
    """
    logger = logging.getLogger("tensorflow")
    quiet = _DropRetracingWarnings()
    logger.addFilter(quiet)
    try:
        yield
    finally:
        logger.removeFilter(quiet)
