"""Activation functions and the one table of their names.

Every function here takes a tensor and returns a tensor of the same dtype.
float16/bfloat16 inputs are computed in float32 and cast back, so no finite
input gives inf or NaN (the tanh form's x**3 overflows float16 at |x| > 40).

`ACTIVATIONS` is the single source of every name a config or a string may
use; `get()` resolves a name, a Keras identifier, a config dict or a
callable.
"""

import math
import sys

import keras
from keras import ops

from keras_gelu import _backend
from keras_gelu import _names
from keras_gelu._names import closest

_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_TANH_SCALE = math.sqrt(2.0 / math.pi)
_TANH_CUBIC = 0.044715
_SIGMOID_SCALE = 1.702

APPROXIMATIONS = ("none", "tanh", "sigmoid")

register = keras.saving.register_keras_serializable(package="keras_gelu")


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
    y = kernel(ops.cast(x, compute) if compute != dtype else x)
    return ops.cast(y, dtype) if compute != dtype else y


# --- The math: each GELU mode as f(x) and f'(x), in keras.ops only. -------


def _saturating(formula, bound):
    """`formula` made exact at +-inf: f(x) = x above `bound`, -0 below.

    Every f here is x * g(x) with g = 1 above `bound` and g = 0 below
    `-bound` in float32, so f(clip(x)) is f(x) for every finite x. At
    +-inf the formula itself gives inf * 0 = NaN (issue 15: GELU(+inf)
    was NaN in the exact mode, GELU(-inf) in every mode); clipped, it
    gives -0 at -inf, and the `where` passes x (inf, or NaN for NaN)
    through above. Autodiff through it stays finite too: the clipped
    lanes and the unused branch get zero gradient, never inf * 0. Inside
    the fused kernels this is a clip, a compare and a select, measured in
    docs/benchmarks.md (issue 15).
    """

    def forward(x):
        return ops.where(x <= bound, formula(ops.clip(x, -bound, bound)), x)

    return forward


def _clipped(derivative, bound):
    """`derivative` at x clipped to +-bound: f' is exactly 1 or 0 beyond."""

    def grad(x):
        return derivative(ops.clip(x, -bound, bound))

    return grad



# Mills ratio R(t) = Phi(-t) / phi(t) for t >= 0 as a (4, 5) rational
# function, fitted here for minimax relative error (7e-9 in float64, 4e-7
# evaluated in float32, on [0, 16]). Q has positive coefficients: no pole.
_MILLS_P = (
    1.2533141461512733,
    1.1056872405905365,
    0.4645457154621001,
    0.10362647528744941,
    0.01058306574059824,
)
_MILLS_Q = (
    1.0,
    1.680095836035833,
    1.2111707967767669,
    0.4749946656711991,
    0.10363201547629125,
    0.010582967851537204,
)
# phi(t) * R(t) = exp(-t**2 / 2) * P(t) / Q(t) with 1/sqrt(2 pi) folded in.
_MILLS_P_PDF = tuple(c * _INV_SQRT_2PI for c in _MILLS_P)


def _horner(t, coefficients):
    result = coefficients[-1]
    for c in reversed(coefficients[:-1]):
        result = result * t + c
    return result


# exp(-x**2 / 2) is 0 in float32 past |x| = 14.4 (subnormals included), so
# GELU(x) is x above 20 and -0 below -20, and GELU'(x) is 1 or 0.
_EXACT_CLIP = 20.0


def _gaussian_and_mills(x):
    """Returns (t, exp(-t**2 / 2), m), t = min(|x|, 20), Phi(-t) = exp(-t**2 / 2) * m.

    `0.5 * (1 + erf(x / sqrt(2)))` cancels to 0 below x ~ -5.5, and even
    erfc loses ~1.4e-5 relative at x = -12 to the rounding of x / sqrt(2)
    (measured on every backend). Here Phi(-|x|) = phi(x) * R(|x|): one exp
    and one rational, no cancellation, and less work than an erfc kernel,
    which evaluates two branches under XLA.

    The two factors come back apart, not as Phi: Phi(x) itself is
    subnormal below x = -12.95 (Phi(-13) = 6.1e-39), and XLA flushes
    subnormals to zero, which made GELU(-13) = -7.95e-38 come out -0 on
    TensorFlow and JAX. Multiplying t * m (about 0.4) first keeps every
    intermediate normal wherever GELU(x) is (down to x = -13.146; the
    Gaussian stays normal down to -13.216).

    Everything is a function of t, never of x: at x = +-inf, x * exp(...)
    was inf * 0 = NaN (issue 15: GELU(+inf) was NaN), while t is 20 there
    and every factor finite, for autodiff too. t**2 is x**2 wherever the
    Gaussian is not 0, and t**5 never reaches inf / inf.
    """
    # where(), not abs(): abs' derivative at 0 is sign(0) = 0, which made
    # Phi'(0) come out 0 instead of phi(0), so GELU''(0) was 0 (or phi(0)
    # with the fused derivative) instead of 2 phi(0).
    t = ops.minimum(ops.where(x < 0, -x, x), _EXACT_CLIP)
    gaussian = ops.exp(-0.5 * t * t)
    return t, gaussian, _horner(t, _MILLS_P_PDF) / _horner(t, _MILLS_Q)


def _gelu_exact(x):
    t, gaussian, mills = _gaussian_and_mills(x)
    # |x| * Phi(-|x|), in the order that never goes subnormal (see above);
    # 0 at +-inf, so x - tail is inf there and NaN for NaN.
    tail = (t * mills) * gaussian
    return ops.where(x < 0, -tail, x - tail)


def _gelu_exact_grad(x):
    # Phi(x) + x phi(x). Below x = -12.95 the subnormal Phi flushes to 0
    # under XLA, 1/x**2 of a derivative that is < 1.1e-36 there (0.6% at
    # -13). The flush-free form exp(-x**2/2) * (m + x / sqrt(2 pi)) made
    # the derivative kernel 6-10% slower under XLA on TensorFlow (three
    # runs of 40-80 interleaved rounds), for gradients no float32 sum
    # can see. x phi(x) as +-t phi(t): finite (0) at +-inf.
    t, gaussian, mills = _gaussian_and_mills(x)
    lower_tail = gaussian * mills
    density = _INV_SQRT_2PI * t * gaussian
    return ops.where(x < 0, lower_tail - density, (1.0 - lower_tail) + density)


# Past |x| = 10 the tanh is exactly +-1 in float32, so clipping its
# argument changes no value while keeping x**3 finite: no inf * 0 = NaN in
# the gradient for huge inputs.
_TANH_CLIP = 10.0


def _gelu_tanh_formula(x):
    inner = _TANH_SCALE * x * (1.0 + _TANH_CUBIC * x * x)
    return 0.5 * x * (1.0 + ops.tanh(inner))


def _gelu_tanh_grad_formula(x):
    x2 = x * x
    t = ops.tanh(_TANH_SCALE * x * (1.0 + _TANH_CUBIC * x2))
    d_inner = _TANH_SCALE * (1.0 + 3.0 * _TANH_CUBIC * x2)
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * d_inner


_gelu_tanh = _saturating(_gelu_tanh_formula, _TANH_CLIP)
_gelu_tanh_grad = _clipped(_gelu_tanh_grad_formula, _TANH_CLIP)

# sigmoid(z) is exactly 0 below z = -104 in float32 (subnormals included)
# and 1 above z = 17, so x * sigmoid(x) and x * sigmoid(1.702 x) are -0
# below -128 and x above 128 (and their derivatives 0 and 1).
_SIGMOID_CLIP = 128.0


def _gelu_sigmoid_formula(x):
    return x * ops.sigmoid(_SIGMOID_SCALE * x)


def _gelu_sigmoid_grad_formula(x):
    s = ops.sigmoid(_SIGMOID_SCALE * x)
    return s + x * s * (1.0 - s) * _SIGMOID_SCALE


_gelu_sigmoid = _saturating(_gelu_sigmoid_formula, _SIGMOID_CLIP)
_gelu_sigmoid_grad = _clipped(_gelu_sigmoid_grad_formula, _SIGMOID_CLIP)


_GELU_KERNELS = {
    "none": (_gelu_exact, _gelu_exact_grad),
    "tanh": (_gelu_tanh, _gelu_tanh_grad),
    "sigmoid": (_gelu_sigmoid, _gelu_sigmoid_grad),
}


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
    forward, derivative = _GELU_KERNELS[mode]
    kernel = _backend.fused(f"gelu_{mode}", forward, derivative)
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
    kernel = _backend.fused("silu", _silu_forward, _silu_grad)
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
        fused = _backend.fused_gated(gate.__name__, *kernels)
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


# Gate math for the fused split-gate-multiply kernel: f(g) and f'(g).
def _sigmoid_grad(x):
    s = ops.sigmoid(x)
    return s * (1.0 - s)


def _silu_formula(x):
    return x * ops.sigmoid(x)


def _silu_grad_formula(x):
    s = ops.sigmoid(x)
    return s + x * s * (1.0 - s)


_silu_forward = _saturating(_silu_formula, _SIGMOID_CLIP)
_silu_grad = _clipped(_silu_grad_formula, _SIGMOID_CLIP)


def _relu_grad(x):
    return ops.cast(x > 0, x.dtype)


_GATE_KERNELS = {
    gelu: _GELU_KERNELS["none"],
    gelu_tanh: _GELU_KERNELS["tanh"],
    gelu_sigmoid: _GELU_KERNELS["sigmoid"],
    sigmoid: (ops.sigmoid, _sigmoid_grad),
    silu: (_silu_forward, _silu_grad),
    relu: (ops.relu, _relu_grad),
    linear: (lambda x: x, ops.ones_like),
}


# --- The name table. -------------------------------------------------------

_FUNCTIONS = {
    f.__name__: f
    for f in (
        gelu, gelu_tanh, gelu_sigmoid, relu, leaky_relu, silu, mish, elu,
        sigmoid, linear,
    )
}
_GATED_FUNCTIONS = {
    "glu": glu,
    "geglu": geglu,
    "geglu_tanh": geglu_tanh,
    "swiglu": swiglu,
    "reglu": reglu,
    "bilinear": bilinear,
}


def _bind(name, entry_kind, target):
    if entry_kind == "layer":
        return target  # the class name; layers.py imports this module
    return _FUNCTIONS[target]


# Every name a config or a string may use, bound to its function: the
# table itself (and the name clean-up) lives in `_names.py`, which imports
# nothing, so kg-train validates configs against it without Keras.
#   "elementwise": the function; "gated": the gate function (the split
#   function is `get(name)`); "layer": the keras_gelu layer class name.
ACTIVATIONS = {
    name: (entry_kind, _bind(name, entry_kind, target))
    for name, (entry_kind, target) in _names.TABLE.items()
}
if set(_GATED_FUNCTIONS) != set(_names.names("gated")):
    raise ImportError("keras_gelu: every gated name needs its split function")

names = _names.names
standardize_name = _names.standardize
kind = _names.kind


def gated_name(activation):
    """The table name of a gated split function (`geglu` -> "geglu"), else None.

    Lets layers that make their own projection accept `keras_gelu.geglu`
    as well as `"geglu"`.
    """
    for name, function in _GATED_FUNCTIONS.items():
        if activation is function:
            return name
    return None


def gate_function(name):
    """Returns the gate function of a gated name (`"geglu"` -> `gelu`)."""
    key = standardize_name(name)
    entry_kind, target = ACTIVATIONS[key]
    if entry_kind != "gated":
        gated_names = ", ".join(names("gated"))
        raise ValueError(
            f"keras_gelu: {name!r} is not a gated unit. Gated units: "
            f"{gated_names}."
        )
    return target


def get(identifier):
    """Resolves an activation: a name, a Keras identifier, dict or callable.

    Names come from `ACTIVATIONS` (case-insensitive, `-` or `_`, spaces
    around ignored); other Keras names (`"tanh"`, `"softplus"`...) and
    serialized config dicts go through `keras.activations.get`. A gated
    name returns the split function (`geglu` etc.);
    `"learnable_leaky_relu"` returns a new `LearnableLeakyReLU` layer.

    Args:
        identifier: `None` (linear), a string, a dict or a callable.

    Returns:
        A callable.

    Raises:
        ValueError: for an unknown name, with the valid names and the
            closest match.

    Example:

    >>> import keras_gelu
    >>> keras_gelu.get("gelu_tanh") is keras_gelu.gelu_tanh
    True
    """
    if identifier is None:
        return linear
    if callable(identifier):
        return identifier
    if isinstance(identifier, dict):
        return keras.activations.get(identifier)
    if isinstance(identifier, str):
        key = _names.lookup(identifier)
        if key is not None:
            entry_kind, target = ACTIVATIONS[key]
            if entry_kind == "gated":
                return _GATED_FUNCTIONS[key]
            if entry_kind == "layer":
                from keras_gelu import layers

                return getattr(layers, target)()
            return target
        try:
            return keras.activations.get(identifier)
        except (ValueError, TypeError):
            standardize_name(identifier)  # raises with the closest name
    raise ValueError(
        f"keras_gelu: cannot interpret {identifier!r} as an activation. "
        f"Expected a name ({', '.join(names())}), a Keras config dict or a "
        f"callable."
    )
