"""Activation functions: one public function per activation.

Every function here takes a tensor and returns a tensor of the same dtype.
float16/bfloat16 inputs are computed in float32 and cast back, so no finite
input gives inf or NaN (the tanh form's x**3 overflows float16 at |x| > 40).
The formulas and their derivatives are in `formulas.py`; `fusion.py` makes
one kernel of each per backend. Names resolve in `keras_gelu.activations`
(the package's `get`).
"""

import sys

import keras
from keras import ops

from keras_gelu.activations import formulas
from keras_gelu.activations import fusion
from keras_gelu_names import closest
from keras_gelu.serialization import register

APPROXIMATIONS = ("none", "tanh", "sigmoid")


def _compute_dtype(dtype):
    # Half precision: compute in float32 (overflow, accuracy); cast back.
    return "float32" if dtype in ("float16", "bfloat16") else dtype


def _elementwise(x, kernel):
    """Applies `kernel` in a safe compute dtype and casts back."""
    x = ops.convert_to_tensor(x)
    dtype = keras.backend.standardize_dtype(x.dtype)
    if not dtype.startswith(("float", "bfloat")):
        dtype = keras.config.floatx()
        x = ops.cast(x, dtype)
    compute = _compute_dtype(dtype)
    if compute != dtype and getattr(kernel, "computes_half_in_float32", False):
        return kernel(x)  # the casts inside the kernel's one pass (fusion._tf_kernel)
    y = kernel(ops.cast(x, compute) if compute != dtype else x)
    return ops.cast(y, dtype) if compute != dtype else y


def standardize_approximate(approximate):
    """Maps True/False/"none"/"tanh"/"sigmoid"/"exact"/"erf" to a mode."""
    if approximate is True:
        return "tanh"
    if approximate is False or approximate is None:
        return "none"
    mode = str(approximate).lower()
    mode = {"exact": "none", "erf": "none", "quick": "sigmoid"}.get(mode, mode)
    if mode not in APPROXIMATIONS:
        raise ValueError(
            f"keras_gelu: unknown GELU approximation {approximate!r}. "
            f"Expected one of {list(APPROXIMATIONS)} (or True for 'tanh', "
            f"False for 'none').{closest(mode, APPROXIMATIONS)}"
        )
    return mode


# --- Public functions. ---------------------------------------------------


@register
def gelu(x, approximate="none"):
    """Gaussian error linear unit, GELU(x) = x * Phi(x).

    Phi is the standard normal CDF. Modes:

    - `"none"` (exact): `x * Phi(x)`, relative error <= 1e-5 in float32
      for every x whose GELU is a normal float32 (x >= -13.146246), far
      negative tail included (largest measured 4.22e-6,
      docs/keras_gelu.md); below that, 0 or subnormal.
    - `"tanh"`: `0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))`,
      max |deviation| from exact 4.73e-4 at |x| ~= 2.70 (BERT, GPT-2).
    - `"sigmoid"`: `x * sigmoid(1.702 x)` ("QuickGELU", CLIP), max
      |deviation| 0.0203 at |x| ~= 2.27.

    Unlike `keras.ops.gelu` (tanh by default) and `keras.activations.gelu`
    (exact by default), the default here is always stated: exact.

    Args:
        x: Input tensor.
        approximate: `"none"`, `"tanh"` or `"sigmoid"`; `True` means
            `"tanh"` and `False` means `"none"`. Anything else raises a
            `ValueError` naming the valid modes.

    Returns:
        A tensor of the same shape and dtype as `x`.

    Example:

    >>> import keras_gelu
    >>> y = keras_gelu.gelu([-1.0, 0.0, 1.0])  # [-0.1587, 0.0, 0.8413]
    """
    mode = standardize_approximate(approximate)
    forward, derivative = formulas.GELU_KERNELS[mode]
    kernel = fusion.fused(f"gelu_{mode}", forward, derivative)
    return _elementwise(x, kernel)


@register
def gelu_tanh(x):
    """GELU, tanh approximation (BERT, GPT-2): `gelu(x, "tanh")`.

    Example:

    >>> import keras_gelu
    >>> y = keras_gelu.gelu_tanh([1.0])  # [0.8412]
    """
    return gelu(x, approximate="tanh")


@register
def gelu_sigmoid(x):
    """GELU, sigmoid approximation `x * sigmoid(1.702 x)` ("QuickGELU").

    Example:

    >>> import keras_gelu
    >>> y = keras_gelu.gelu_sigmoid([1.0])  # [0.8458]
    """
    return gelu(x, approximate="sigmoid")


quick_gelu = gelu_sigmoid


@register
def relu(x):
    """Rectified linear unit, `max(x, 0)` (the comparison baseline)."""
    return ops.relu(x)


@register
def leaky_relu(x, negative_slope=0.01):
    """Leaky ReLU with a fixed slope: `x if x >= 0 else negative_slope * x`.

    For a learnable slope use the `LearnableLeakyReLU` layer.
    """
    return _elementwise(
        x, lambda v: ops.leaky_relu(v, negative_slope=negative_slope)
    )


@register
def silu(x):
    """SiLU / Swish, `x * sigmoid(x)`.

    silu(+inf) = +inf and silu(-inf) = 0, with derivatives 1 and 0 (the
    backends' own silu give NaN there: inf * 0), so SwiGLU keeps its limits.
    """
    kernel = fusion.fused("silu", *formulas.SILU_KERNELS)
    return _elementwise(x, kernel)


swish = silu


@register
def mish(x):
    """Mish, `x * tanh(softplus(x))`."""
    return _elementwise(x, lambda v: v * ops.tanh(ops.softplus(v)))


@register
def elu(x, alpha=1.0):
    """Exponential linear unit, `x if x > 0 else alpha * (exp(x) - 1)`."""
    return _elementwise(x, lambda v: ops.elu(v, alpha=alpha))


@register
def sigmoid(x):
    """Logistic sigmoid, `1 / (1 + exp(-x))` (the gate of plain GLU)."""
    return _elementwise(x, ops.sigmoid)


@register
def linear(x):
    """Identity (the gate of the Bilinear unit)."""
    return x


# --- Gated linear units as functions of a doubled input. ------------------


def _gated_error(fn_name):
    return ValueError(
        f"keras_gelu: {fn_name} is a gated unit: it splits its input in two "
        f"halves and returns half the width, so it cannot be the activation "
        f"of a Keras layer that assumes an elementwise one (the layer would "
        f"report the full width). Use keras_gelu.GLU(units, "
        f'activation=...), keras_gelu.GEGLU/SwiGLU/ReGLU(units) or '
        f'keras_gelu.FeedForward(hidden_dim, activation="{fn_name}"), which '
        f"make their own doubled projection."
    )


def _check_not_elementwise_slot(function):
    """Raises if `function` was called as a Keras layer's `activation`.

    `Dense(8, activation=geglu)` (and Conv, EinsumDense, Activation...)
    declare an output shape as if the activation were elementwise, so the
    next layer would see half the width it was told. Keras never runs the
    activation while building a model, so the first call is the earliest
    moment to catch it: the caller's frame is that layer's `call`.
    """
    caller = sys._getframe(2).f_locals.get("self")
    if (
        isinstance(caller, keras.layers.Layer)
        and getattr(caller, "activation", None) is function
        and type(caller).__module__.startswith("keras.")
    ):
        raise _gated_error(function.__name__)


def gated(x, gate, axis=-1):
    """Splits `x` in two halves `value, g` along `axis`: `value * gate(g)`.

    The value half comes first and the gate half second, as in
    `keras.ops.glu`, `torch.nn.functional.glu` and x-transformers, so
    weights ported from them keep their meaning.

    Raises:
        ValueError: if the size of `axis` is odd (or unknown).
    """
    x = ops.convert_to_tensor(x) if not isinstance(x, keras.KerasTensor) else x
    size = x.shape[axis]
    if size is None or size % 2:
        raise ValueError(
            f"keras_gelu: a gated unit splits its input in two equal halves "
            f"along axis {axis}, but that axis has size {size}. Give it an "
            f"even size (e.g. Dense(2 * units) before it), or use "
            f"keras_gelu.GLU(units) which makes its own projection."
        )
    kernels = _GATE_KERNELS.get(gate)
    if kernels is not None and axis in (-1, len(x.shape) - 1):
        fused = fusion.fused_gated(gate.__name__, *kernels)
        if fused is not None:
            return _elementwise(x, fused)
    value, gate_half = ops.split(x, 2, axis=axis)
    return value * gate(gate_half)


@register
def glu(x, axis=-1):
    """GLU (Dauphin et al. 2017, https://arxiv.org/abs/1612.08083).

    `a * sigmoid(b)` for `a, b = split(x, 2, axis)`: value first, gate
    second, exactly `keras.ops.glu` and `torch.nn.functional.glu`.

    Example:

    >>> import keras_gelu
    >>> y = keras_gelu.glu([1.0, -2.0, 0.5, 3.0])  # [0.6225, -1.9051]
    """
    _check_not_elementwise_slot(glu)
    return gated(x, sigmoid, axis)


@register
def geglu(x, axis=-1):
    """GEGLU (Shazeer 2020, https://arxiv.org/abs/2002.05202).

    `a * gelu(b)` (exact GELU) for `a, b = split(x, 2, axis)`.
    """
    _check_not_elementwise_slot(geglu)
    return gated(x, gelu, axis)


@register
def geglu_tanh(x, axis=-1):
    """GEGLU with the tanh-approximate GELU gate, as in Gemma.

    `a * gelu_tanh(b)` for `a, b = split(x, 2, axis)`.
    """
    _check_not_elementwise_slot(geglu_tanh)
    return gated(x, gelu_tanh, axis)


@register
def swiglu(x, axis=-1):
    """SwiGLU (Shazeer 2020, https://arxiv.org/abs/2002.05202; Llama).

    `a * silu(b)` for `a, b = split(x, 2, axis)`.
    """
    _check_not_elementwise_slot(swiglu)
    return gated(x, silu, axis)


@register
def reglu(x, axis=-1):
    """ReGLU (Shazeer 2020, https://arxiv.org/abs/2002.05202).

    `a * relu(b)` for `a, b = split(x, 2, axis)`.
    """
    _check_not_elementwise_slot(reglu)
    return gated(x, relu, axis)


@register
def bilinear(x, axis=-1):
    """Bilinear (Shazeer 2020, https://arxiv.org/abs/2002.05202).

    `a * b` for `a, b = split(x, 2, axis)`.
    """
    _check_not_elementwise_slot(bilinear)
    return gated(x, linear, axis)


# Gate function -> its (f, f') for the fused split-gate-multiply kernel.
# Keyed by the function itself: another callable named "gelu" (Keras's own)
# takes the plain path.
_GATE_KERNELS = {
    gate: formulas.GATE_KERNELS[gate.__name__]
    for gate in (gelu, gelu_tanh, gelu_sigmoid, sigmoid, silu, relu, linear)
}
