"""The few places where one Keras backend needs its own code path.

Everything else in keras_gelu goes through `keras.ops`. Each choice here is
kept in one small function with the reason next to it, and each is covered
by the test suite on every backend.
"""

import contextlib
import os
import threading

import keras

_state = threading.local()


def backend():
    return keras.backend.backend()


def xla_fusion_enabled():
    """Whether TensorFlow-backend activations run as one XLA-fused kernel.

    Why: without XLA, TensorFlow runs GELU as ~10 separate kernels, each a
    full pass over memory (3.4x the time of ReLU on CPU, issue #2). A
    nested `tf.function(jit_compile=True)` fuses them into one pass, even
    inside a `model.fit` graph that is not itself compiled.

    Off by `KERAS_GELU_XLA_FUSION=0` or inside `keras_gelu.xla_fusion(False)`
    (the service turns it off while exporting SavedModels, so that they hold
    plain TensorFlow ops that any TF Serving build runs).
    """
    override = getattr(_state, "xla_fusion", None)
    if override is not None:
        return override
    return os.environ.get("KERAS_GELU_XLA_FUSION", "1") not in ("0", "false")


@contextlib.contextmanager
def xla_fusion(enabled):
    """Context manager that turns the TensorFlow XLA fusion on or off.

    Args:
        enabled: bool. Inside the block, TensorFlow-backend activations are
            (True) or are not (False) compiled as one fused XLA kernel.

    Example:

    >>> import keras_gelu
    >>> with keras_gelu.xla_fusion(False):
    ...     pass  # e.g. model.export(...) with plain TF ops
    """
    previous = getattr(_state, "xla_fusion", None)
    _state.xla_fusion = bool(enabled)
    try:
        yield
    finally:
        _state.xla_fusion = previous


_FUSED_CACHE = {}


def fused(name, forward, derivative):
    """Returns `forward` as one fused kernel with an analytic gradient.

    Only the TensorFlow backend (with fusion enabled, on concrete tensors)
    gets a fused version; every other case returns `forward` itself, since
    JAX and torch-compiled graphs already fuse elementwise chains.

    Args:
        name: cache key for the fused kernel.
        forward: `f(x)` written with `keras.ops`.
        derivative: `f'(x)` written with `keras.ops`.
    """
    if backend() != "tensorflow" or not xla_fusion_enabled():
        return forward
    kernel = _FUSED_CACHE.get(name)
    if kernel is None:
        kernel = _FUSED_CACHE[name] = _tf_fused_kernel(forward, derivative)
    return kernel


def _tf_fused_kernel(forward, derivative):
    import tensorflow as tf

    # reduce_retracing: one trace per dtype/rank, not one per batch size;
    # XLA still specialises on the concrete shape at run time.
    compile_options = dict(jit_compile=True, reduce_retracing=True, autograph=False)
    forward_xla = tf.function(forward, **compile_options)
    backward_xla = tf.function(lambda x, dy: dy * derivative(x), **compile_options)

    @tf.custom_gradient
    def kernel(x):
        def grad(dy):
            return backward_xla(x, dy)

        return forward_xla(x), grad

    def call(x):
        # Symbolic (Keras functional) tensors take the plain path.
        if not tf.is_tensor(x) or isinstance(x, keras.KerasTensor):
            return forward(x)
        return kernel(x)

    return call
