"""Independent references for the keras_gelu tests.

Everything here is float64 numpy/scipy (or mpmath) written from the
formulas in ../shared/reference/papers.md, never from keras_gelu's code.
The per-backend gradient helpers are the only backend-specific code the
tests need.
"""

import math

import keras
import numpy as np
from scipy import special

BACKEND = keras.backend.backend()

# `keras_gelu.xla_fusion` switches TensorFlow's nested XLA kernels on and
# off; every other backend reads neither setting (fusion.py checks
# `backend() == "tensorflow"` before it looks), so there a test run
# under both settings runs the same code twice. Tests parametrized over
# the setting take it from here: both on TensorFlow, the default
# elsewhere; test_activations checks that off TensorFlow the setting
# changes no output bit.
FUSION_SETTINGS = [True, False] if BACKEND == "tensorflow" else [True]
FUSION_IDS = ["fused", "unfused"] if BACKEND == "tensorflow" else ["default"]

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
TANH_CUBIC = 0.044715
SIGMOID_SCALE = 1.702


def f64(x):
    return np.asarray(x, dtype=np.float64)


def normal_pdf(x):
    x = f64(x)
    return np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)


def sigmoid(x):
    return special.expit(f64(x))


# --- Forward references (float64). --------------------------------------------


def gelu(x):
    """x * Phi(x); scipy's ndtr is accurate to ~1e-15 relative in the tail."""
    x = f64(x)
    return x * special.ndtr(x)


def gelu_tanh(x):
    x = f64(x)
    return 0.5 * x * (1.0 + np.tanh(SQRT_2_OVER_PI * (x + TANH_CUBIC * x**3)))


def gelu_sigmoid(x):
    x = f64(x)
    return x * sigmoid(SIGMOID_SCALE * x)


def relu(x):
    return np.maximum(f64(x), 0.0)


def leaky_relu(x, slope=0.01):
    x = f64(x)
    return np.where(x >= 0, x, slope * x)


def silu(x):
    x = f64(x)
    return x * sigmoid(x)


def mish(x):
    x = f64(x)
    return x * np.tanh(np.logaddexp(0.0, x))


def elu(x, alpha=1.0):
    x = f64(x)
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0.0)))


def linear(x):
    return f64(x)



# Every gated unit in keras_gelu's name table -> the float64 reference of its
# gate: `value * gate(gate_half)`, value first. The one copy the tests share.
GATED = {
    "glu": sigmoid,
    "geglu": gelu,
    "geglu_tanh": gelu_tanh,
    "swiglu": silu,
    "reglu": relu,
    "bilinear": linear,
}


def gelu_mpmath(x, dps=40):
    """GELU at 40 digits, for spot values independent of scipy too."""
    import mpmath

    with mpmath.workdps(dps):
        return float(mpmath.mpf(float(x)) * mpmath.ncdf(mpmath.mpf(float(x))))


# --- Derivatives (float64). ---------------------------------------------------


def gelu_grad(x):
    x = f64(x)
    return special.ndtr(x) + x * normal_pdf(x)


def gelu_second_grad(x):
    x = f64(x)
    return normal_pdf(x) * (2.0 - x * x)


def gelu_tanh_grad(x):
    x = f64(x)
    t = np.tanh(SQRT_2_OVER_PI * (x + TANH_CUBIC * x**3))
    d_inner = SQRT_2_OVER_PI * (1.0 + 3.0 * TANH_CUBIC * x * x)
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * d_inner


def gelu_sigmoid_grad(x):
    x = f64(x)
    s = sigmoid(SIGMOID_SCALE * x)
    return s + SIGMOID_SCALE * x * s * (1.0 - s)


# --- Gradients through each backend's own autodiff. ---------------------------


def grad(fn, x):
    """Elementwise derivative of `fn` at the float32 points `x`, as numpy.

    `fn` must be elementwise, so the gradient of sum(fn(x)) is fn'(x).
    """
    x = np.asarray(x, dtype=np.float32)
    if BACKEND == "tensorflow":
        import tensorflow as tf

        xt = tf.constant(x)
        with tf.GradientTape() as tape:
            tape.watch(xt)
            y = fn(xt)
        return tape.gradient(y, xt).numpy()
    if BACKEND == "jax":
        import jax
        import jax.numpy as jnp

        return np.asarray(jax.grad(lambda v: jnp.sum(fn(v)))(x))
    if BACKEND == "torch":
        import torch

        xt = torch.tensor(x, requires_grad=True)
        (g,) = torch.autograd.grad(fn(xt).sum(), xt)
        return g.detach().numpy()
    raise NotImplementedError(BACKEND)


def second_grad(fn, x):
    """Elementwise second derivative of `fn` at `x`, as numpy."""
    x = np.asarray(x, dtype=np.float32)
    if BACKEND == "tensorflow":
        import tensorflow as tf

        xt = tf.constant(x)
        with tf.GradientTape() as outer:
            outer.watch(xt)
            with tf.GradientTape() as inner:
                inner.watch(xt)
                y = fn(xt)
            g = inner.gradient(y, xt)
        return outer.gradient(g, xt).numpy()
    if BACKEND == "jax":
        import jax
        import jax.numpy as jnp

        first = jax.grad(lambda v: jnp.sum(fn(v)))
        return np.asarray(jax.grad(lambda v: jnp.sum(first(v)))(x))
    if BACKEND == "torch":
        import torch

        xt = torch.tensor(x, requires_grad=True)
        (g,) = torch.autograd.grad(fn(xt).sum(), xt, create_graph=True)
        (h,) = torch.autograd.grad(g.sum(), xt)
        return h.detach().numpy()
    raise NotImplementedError(BACKEND)


def assert_relative_error_at_most(y, x, bound):
    """|y / gelu(x) - 1| <= bound wherever exact GELU(x) is not 0, and y
    is 0 exactly where it is (only x = 0); names the worst x otherwise."""
    expected = gelu(x)
    nonzero = expected != 0
    assert np.all(y[~nonzero] == 0)  # only x = 0
    rel = np.abs(y[nonzero] - expected[nonzero]) / np.abs(expected[nonzero])
    worst = np.argmax(rel)
    assert (
        rel[worst] <= bound
    ), f"rel error {rel[worst]:.4g} at x={x[nonzero][worst]}"


def numpy(x):
    """Backend tensor -> float64 numpy (through float32 for half types)."""
    x = keras.ops.convert_to_tensor(x)
    if keras.backend.standardize_dtype(x.dtype) in ("float16", "bfloat16"):
        x = keras.ops.cast(x, "float32")
    return keras.ops.convert_to_numpy(x).astype(np.float64)


def tf_only(reason):
    import pytest

    return pytest.mark.skipif(
        BACKEND != "tensorflow", reason=f"TensorFlow backend only: {reason}"
    )
