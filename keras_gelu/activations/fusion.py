"""The few places where one Keras backend needs its own code path.

Everything else in keras_gelu goes through `keras.ops`. Each choice here is
kept in one small function with the reason next to it, and each is covered
by the test suite on every backend.
"""

import contextlib
import functools
import os
import threading

import keras
from keras import ops

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


@contextlib.contextmanager
def _compiling():
    """Marks the tracing of a function into one XLA kernel (see `compiled`)."""
    previous = getattr(_state, "compiling", False)
    _state.compiling = True
    try:
        yield
    finally:
        _state.compiling = previous


def compiled(x):
    """Whether `x` is being traced into one compiled (XLA-fused) kernel.

    Why: a formula may then trade one op for several cheaper ones (the
    bit-level `exp` in `formulas.py`) that the compiler fuses into one
    pass; run op by op (TensorFlow without the fusion, eager JAX, torch)
    each op is a pass over memory, and the single op wins. True while
    `fused` traces a TensorFlow kernel, and for JAX tracers (`jax.jit`,
    which Keras uses to train and predict on JAX).
    """
    if getattr(_state, "compiling", False):
        return True
    if backend() == "jax":
        # Imported here: only the JAX backend has jax.
        import jax

        return isinstance(x, jax.core.Tracer)
    return False


def bits_of_float32(x):
    """The int32 with the bits of float32 `x` (a bitcast, no conversion).

    Per backend: `keras.ops.view` needs a static last dimension on
    TensorFlow, which a kernel traced for any batch size lacks.
    """
    return _bitcast(x, "int32")


def float32_of_bits(bits):
    """The float32 with the bits of int32 `bits` (a bitcast)."""
    return _bitcast(bits, "float32")


def _bitcast(x, dtype):
    name_of_backend = backend()
    if name_of_backend == "tensorflow":
        # Imported here: only the TensorFlow backend needs tensorflow.
        import tensorflow as tf

        return tf.bitcast(x, dtype)
    if name_of_backend == "jax":
        import jax  # the backend's own, only on the backend that runs

        return jax.lax.bitcast_convert_type(x, dtype)
    return ops.view(x, dtype)


_FUSED_CACHE = {}


def fused(name, forward, derivative):
    """Returns `forward` as one fused kernel with an analytic gradient.

    - TensorFlow (fusion enabled): a nested XLA kernel for the forward pass
      and one for the backward pass (see `xla_fusion_enabled`).
    - JAX: `jax.custom_jvp` with the analytic derivative; `jax.jit` fuses
      the chain already, but autodiff of the exact mode's rational costs
      more than its closed-form derivative (f+b 3.8x -> 2.6x ReLU,
      docs/benchmarks.md).
    - torch: its native GELU kernels where they are accurate (see
      `_torch_kernel`); eager torch runs a formula op by op, one full
      memory pass each (the exact mode measured 57x ReLU that way).
    - Otherwise `forward` itself.

    Args:
        name: cache key for the fused kernel.
        forward: `f(x)` written with `keras.ops`.
        derivative: `f'(x)` written with `keras.ops`.
    """
    name_of_backend = backend()
    if name_of_backend == "tensorflow" and xla_fusion_enabled():
        make = _tf_fused_kernel
    elif name_of_backend == "jax":
        make = _jax_kernel
    elif name_of_backend == "torch":
        make = functools.partial(_torch_kernel, name)
    else:
        return forward
    key = (name_of_backend, name)
    kernel = _FUSED_CACHE.get(key)
    if kernel is None:
        kernel = _FUSED_CACHE[key] = make(forward, derivative)
    return kernel


def _torch_kernel(name, forward, derivative):
    """torch's native kernels, with keras_gelu's formula only where needed.

    - tanh mode: torch's native kernel computes the same formula; its
      gradient is taken at the input clipped like the formula's, as on
      the other backends (`torch_kernels.tanh_gelu`).
    - exact mode: the native kernel on [-1.5, 1e4], where it is accurate,
      and keras_gelu's tail-accurate formula outside
      (`torch_kernels.exact_gelu`).
    - sigmoid mode: the formula with its analytic gradient
      (`torch_kernels.sigmoid_gelu`).
    - silu: the native kernels, clamped so that +-inf give their limits
      (`torch_kernels.silu`).
    """
    # Imported here: it imports torch, which only the torch backend has.
    from keras_gelu.activations import torch_kernels

    if name == "gelu_tanh":
        return torch_kernels.tanh_gelu
    if name == "gelu_sigmoid":
        return torch_kernels.sigmoid_gelu
    if name == "silu":
        return torch_kernels.silu
    if name != "gelu_none":
        return forward

    def exact(x):
        if isinstance(x, keras.KerasTensor):
            return forward(x)
        return torch_kernels.exact_gelu(x, forward, derivative)

    return exact


def _jax_kernel(forward, derivative):
    # Imported here: only the JAX backend has jax.
    import jax

    @jax.custom_jvp
    def kernel(x):
        return forward(x)

    @kernel.defjvp
    def kernel_jvp(primals, tangents):
        (x,), (dx,) = primals, tangents
        return forward(x), derivative(x) * dx

    def call(x):
        # Symbolic (Keras functional) tensors take the plain path.
        if isinstance(x, keras.KerasTensor):
            return forward(x)
        return kernel(x)

    return call


def fused_gated(name, forward, derivative):
    """Returns `split -> value * forward(gate)` as one fused kernel, or None.

    On TensorFlow (fusion enabled) the slice, the gate activation and the
    product run as one XLA kernel, forward and backward: a plain
    `tf.split` copies both halves of the wide projection first, which made
    a fused `GLU` 5-12% slower than two Dense layers (docs/benchmarks.md).
    Elsewhere None: the caller takes the plain path (XLA under `jax.jit`
    fuses the slice itself; torch's split is a view).

    Args:
        name: cache key for the kernel.
        forward: the gate `f(a)`, written with `keras.ops`.
        derivative: `f'(a)`, written with `keras.ops`.
    """
    if backend() != "tensorflow" or not xla_fusion_enabled():
        return None
    key = ("tensorflow-gated", name)
    kernel = _FUSED_CACHE.get(key)
    if kernel is None:
        # h = [value | gate], as keras.ops.glu and torch.nn.functional.glu.
        def gated_forward(h):
            value, gate = ops.split(h, 2, axis=-1)
            return value * forward(gate)

        def gated_backward(h, dy):
            value, gate = ops.split(h, 2, axis=-1)
            return ops.concatenate(
                [dy * forward(gate), dy * value * derivative(gate)], axis=-1
            )

        kernel = _FUSED_CACHE[key] = _tf_kernel(gated_forward, gated_backward)
    return kernel


def _tf_fused_kernel(forward, derivative):
    return _tf_kernel(forward, lambda x, dy: dy * derivative(x))


def _tf_kernel(forward, backward):
    """`forward` and `backward(x, dy)` as nested XLA kernels, glued by
    `tf.custom_gradient`.

    float16 and bfloat16 tensors go in and come out as they are: each
    kernel computes in float32 inside (`_in_float32`), so the two casts
    are part of its one pass over memory, not passes of their own around
    it (two forward, two backward: GELU's step under mixed_bfloat16,
    docs/benchmarks.md, issue 20 §3). The returned function says so to
    `activations._elementwise` with `computes_half_in_float32`."""
    # Imported here: only the TensorFlow backend needs tensorflow.
    import tensorflow as tf

    forward, backward = _in_float32(forward), _in_float32(backward)
    # reduce_retracing: one trace per dtype/rank, not one per batch size;
    # XLA still specialises on the concrete shape at run time.
    compile_options = dict(jit_compile=True, reduce_retracing=True, autograph=False)
    forward_xla = tf.function(_traced_as_compiled(forward), **compile_options)
    backward_xla = tf.function(_traced_as_compiled(backward), **compile_options)

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

    call.computes_half_in_float32 = True
    return call


def _in_float32(fn):
    """`fn(x, ...)` computed in float32 when `x` is float16 or bfloat16 (every
    argument cast up), its result cast back to `x`'s dtype; as it is
    otherwise. The same values as casting around `fn`: only where the
    casts run changes."""

    @functools.wraps(fn)
    def computed(x, *rest):
        dtype = keras.backend.standardize_dtype(x.dtype)
        if dtype not in ("float16", "bfloat16"):
            return fn(x, *rest)
        up = [ops.cast(v, "float32") for v in (x,) + rest]
        return ops.cast(fn(*up), dtype)

    return computed


class _traced_as_compiled:
    """`fn`, traced with `compiled()` True (tf.function traces it here).

    An object, not a closure over `fn`: tf.function counts traces for its
    "N out of the last N calls ... triggered tf.function retracing" warning
    by the traced function's code object (`__wrapped__` followed), which
    every gated unit's `gated_forward` shares, so glu-variants' five gated
    kernels, each traced once, read as one function retraced five times
    (issue 30 §24). A callable without `__code__` is counted by itself.
    """

    def __init__(self, fn):
        self._fn = fn
        self.__name__ = self.__qualname__ = getattr(fn, "__name__", "kernel")

    def __call__(self, *args):
        with _compiling():
            return self._fn(*args)
