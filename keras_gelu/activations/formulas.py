"""The math: each activation as f(x) and its derivative f'(x).

Written in `keras.ops` only, so every backend runs them. `activations.py`
hands each pair to `fusion.fused`, which makes one kernel of it with this
analytic gradient; the reason for every form is next to it, with the
measured number.
"""

import math

import keras
from keras import ops

from keras_gelu.activations import fusion
from keras_gelu.constants import SIGMOID_CLIP
from keras_gelu.constants import SIGMOID_SCALE
from keras_gelu.constants import TANH_CLIP

_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_TANH_SCALE = math.sqrt(2.0 / math.pi)
_TANH_CUBIC = 0.044715


# exp(y) from its bits, for kernels that XLA compiles (issue 20): y = n ln2
# + r, |r| <= ln2 / 2, exp(y) = 2**n * p(r) with p the degree-6 Taylor
# polynomial (error 1.2e-7) and 2**n put into the exponent bits. XLA's own
# exp does the same with a float->int conversion and range checks; with
# this one the exact GELU kernel went 1.79 -> 1.69x ReLU forward and 1.69
# -> 1.54x forward+backward (TF, 4M float32, 20 interleaved rounds,
# docs/benchmarks.md section e); 2.3e-7 relative on [-87.3, 88].
# Adding 1.5 * 2**23 rounds y / ln2 to the integer n in the low mantissa
# bits; n is read back from the bits, not as z - 1.5 * 2**23, which XLA
# simplifies to y / ln2.
_LOG2E = 1.4426950408889634
_LN2_HIGH = 0.693145751953125  # 16 bits: n * _LN2_HIGH is exact for |n| < 256
_LN2_LOW = 1.4286067653301870e-06
_ROUNDER = 12582912.0  # 1.5 * 2**23
_ROUNDER_BITS = 0x4B400000
_EXP_TAYLOR = (1.0, 1.0, 1 / 2, 1 / 6, 1 / 24, 1 / 120, 1 / 720)
# exp(-88) is subnormal (2**n with n = -127: the bits of +0) and exp(89) is
# past float32's max (n = 128: the bits of +inf); NaN stays NaN through p.
_EXP_RANGE = (-88.0, 89.0)


def _exp(y):
    """exp(y): from its bits inside a compiled float32 kernel, else ops.exp.

    Limits as ops.exp: 0 for y <= -88 (the subnormals flush to 0, as XLA
    flushes them anyway), inf above 88.7, NaN for NaN.
    """
    if keras.backend.standardize_dtype(y.dtype) != "float32" or not (
        fusion.compiled(y)
    ):
        return ops.exp(y)
    y = ops.clip(y, *_EXP_RANGE)
    n_bits = fusion.bits_of_float32(y * _LOG2E + _ROUNDER) - _ROUNDER_BITS
    n = ops.cast(n_bits, "float32")
    r = (y - n * _LN2_HIGH) - n * _LN2_LOW
    scale = fusion.float32_of_bits(ops.left_shift(n_bits + 127, 23))
    return _horner(r, _EXP_TAYLOR) * scale


def _sigmoid(z):
    """1 / (1 + exp(-z)), with `_exp` (ops.sigmoid where that is ops.exp)."""
    if keras.backend.standardize_dtype(z.dtype) != "float32" or not (
        fusion.compiled(z)
    ):
        return ops.sigmoid(z)
    return 1.0 / (1.0 + _exp(-z))


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
    gaussian = _exp(-0.5 * t * t)
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


# The tanh forms are exact at +-TANH_CLIP (10): see `keras_gelu/constants.py`.


def _gelu_tanh_formula(x):
    inner = _TANH_SCALE * x * (1.0 + _TANH_CUBIC * x * x)
    return 0.5 * x * (1.0 + ops.tanh(inner))


def _gelu_tanh_grad_formula(x):
    x2 = x * x
    t = ops.tanh(_TANH_SCALE * x * (1.0 + _TANH_CUBIC * x2))
    d_inner = _TANH_SCALE * (1.0 + 3.0 * _TANH_CUBIC * x2)
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * d_inner


_gelu_tanh = _saturating(_gelu_tanh_formula, TANH_CLIP)
_gelu_tanh_grad = _clipped(_gelu_tanh_grad_formula, TANH_CLIP)

# The sigmoid forms are exact at +-SIGMOID_CLIP (128) already: see
# `keras_gelu/constants.py`.


def _gelu_sigmoid_formula(x):
    return x * _sigmoid(SIGMOID_SCALE * x)


def _gelu_sigmoid_grad_formula(x):
    s = _sigmoid(SIGMOID_SCALE * x)
    return s + x * s * (1.0 - s) * SIGMOID_SCALE


_gelu_sigmoid = _saturating(_gelu_sigmoid_formula, SIGMOID_CLIP)
_gelu_sigmoid_grad = _clipped(_gelu_sigmoid_grad_formula, SIGMOID_CLIP)


GELU_KERNELS = {
    "none": (_gelu_exact, _gelu_exact_grad),
    "tanh": (_gelu_tanh, _gelu_tanh_grad),
    "sigmoid": (_gelu_sigmoid, _gelu_sigmoid_grad),
}


# Gate math for the fused split-gate-multiply kernel: f(g) and f'(g).
def _sigmoid_grad(x):
    s = ops.sigmoid(x)
    return s * (1.0 - s)


def _silu_formula(x):
    return x * _sigmoid(x)


def _silu_grad_formula(x):
    s = _sigmoid(x)
    return s + x * s * (1.0 - s)


_silu_forward = _saturating(_silu_formula, SIGMOID_CLIP)
_silu_grad = _clipped(_silu_grad_formula, SIGMOID_CLIP)


def _relu_grad(x):
    return ops.cast(x > 0, x.dtype)


SILU_KERNELS = (_silu_forward, _silu_grad)

# Gate name -> (f, f') for the split-gate-multiply kernel.
GATE_KERNELS = {
    "gelu": GELU_KERNELS["none"],
    "gelu_tanh": GELU_KERNELS["tanh"],
    "gelu_sigmoid": GELU_KERNELS["sigmoid"],
    "sigmoid": (ops.sigmoid, _sigmoid_grad),
    "silu": SILU_KERNELS,
    "relu": (ops.relu, _relu_grad),
    "linear": (lambda x: x, ops.ones_like),
}
