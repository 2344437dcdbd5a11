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


def _compiled_float32(x):
    return keras.backend.standardize_dtype(x.dtype) == "float32" and (
        fusion.compiled(x)
    )


def _gaussian_and_mills(x):
    """Returns (t, g, m, c): t = min(|x|, clip), Phi(-t) = g * m, phi(t) = c * g.

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
    was inf * 0 = NaN (issue 15: GELU(+inf) was NaN), while t is clipped
    there and every factor finite, for autodiff too. t**2 is x**2 wherever
    the Gaussian is not 0, and t**5 never reaches inf / inf.

    Inside a compiled float32 kernel the factors come from
    `_compiled_gaussian_and_mills`, scaled by a constant (g by K, m and c
    by 1 / k, the products unchanged).
    """
    # where(), not abs(): abs' derivative at 0 is sign(0) = 0, which made
    # Phi'(0) come out 0 instead of phi(0), so GELU''(0) was 0 (or phi(0)
    # with the fused derivative) instead of 2 phi(0).
    t = ops.where(x < 0, -x, x)
    if _compiled_float32(x):
        return _compiled_gaussian_and_mills(t)
    t = ops.minimum(t, _EXACT_CLIP)
    gaussian = ops.exp(-0.5 * t * t)
    mills = _horner(t, _MILLS_P_PDF) / _horner(t, _MILLS_Q)
    return t, gaussian, mills, _INV_SQRT_2PI


# The compiled kernel's own exp(-t**2 / 2) and Mills rational (issue 20,
# third round: measured in docs/benchmarks.md, section f):
# - t clipped at sqrt(2 * 88) = 13.27, not 20: -t**2 / 2 >= -88, so
#   n = round(-t**2 / (2 ln2)) is in [-127, 0], 2**n is the bits
#   (n + 127) << 23 with no clip (n = -127: +0, as exp(-88) flushes to 0
#   under XLA anyway), and GELU(x) is x or -0 beyond, as with 20.
# - the rounder holds n + 127 in its low bits, so shifting its bits left by
#   23 gives 2**n at once (the rounder's own bits shift out);
# - the reduction works on s = t**2: r = -s / 2 - n ln2 = r2 / 2 with
#   r2 = -2 n ln2 - s, the 1/2 folded into the polynomial's coefficients
#   (exact: powers of 2);
# - the forward's exp polynomial is of degree 5 with minimax relative
#   error on |r| <= ln2 / 2 (9e-8 in float64; the generic `_exp`'s degree-6
#   Taylor polynomial: 1.2e-7, which the derivative keeps, see below); the
#   Mills rational stays (4, 5): with a (3, 4) one the derivative tests
#   failed (section f's candidate row);
# - Q and the exp polynomial are made monic (one multiply fewer each):
#   g = K exp(-t**2 / 2) with K = 2**d / c_d for the polynomial's leading
#   coefficient c_d (3860 forward, 46080 derivative), m = R(t) phi(0) / K,
#   P / Q as (P / (Q_5 K)) / (Q / Q_5). K > 1 keeps g and g * (m - c t)
#   normal as far down as before (a factor below 1 made the derivative
#   flush to 0 from x = -13.15 on, where it is -7.6e-38).
# XLA compiles a * b + c as two operations (no FMA contraction by
# default), so each operation saved is one vector instruction a lane.
_GAUSS_CLIP = math.sqrt(2.0 * 88.0)
_ROUNDER_127 = _ROUNDER + 127.0
_ROUNDER_127_BITS = _ROUNDER_BITS + 127
_EXP_MINIMAX_5 = (
    1.0,
    0.9999997071884889,
    0.499991495297584,
    0.16667636197782498,
    0.041897929387382606,
    0.008290314529051447,
)


# The forward's Mills rational: (3, 4), fitted by linear programming for
# minimax relative error on [0, sqrt(176)] (the clipped t), constrained to
# lie 1e-7 below R on [0.55, 0.95]: 4.4e-7 in float64 (the (4, 5): 7e-9),
# about 7e-7 evaluated in float32. Unconstrained, the float32 kernel
# rounded GELU's minimum (x = -0.7518) 4 ulps low, past the 3 ulps that
# test_activations.py allows; with it, it lands on the published value.
# Four operations a lane fewer; GELU's largest relative error 4.1e-6 ->
# 4.4e-6 (issue 20, fifth round: docs/benchmarks.md, section h). The
# derivative keeps (4, 5): its tests bound the gradient to 2e-7 absolute,
# which a (3, 4) rational misses (section f).
_MILLS_34_P = (
    1.2533136120143198,
    0.8993375626056347,
    0.2950045765280201,
    0.04164863782937603,
)
_MILLS_34_Q = (
    1.0,
    1.515432840065487,
    0.9446627254286434,
    0.294776238025019,
    0.04165450683763294,
)


def _gauss_constants(exp_polynomial, mills_p=_MILLS_P, mills_q=_MILLS_Q):
    """(K, the exp polynomial's monic coefficients in r2, P / (Q_n K), Q / Q_n)
    for the Mills rational P / Q (default: the (4, 5) one)."""
    degree = len(exp_polynomial) - 1
    k = 1.0 / (exp_polynomial[-1] * 0.5**degree)
    monic = tuple(c * 0.5**i * k for i, c in enumerate(exp_polynomial[:-1]))
    p_pdf = tuple(c * _INV_SQRT_2PI / (mills_q[-1] * k) for c in mills_p)
    return k, monic, p_pdf, tuple(c / mills_q[-1] for c in mills_q[:-1])


# The forward's exp: the degree-5 minimax polynomial. The derivative's:
# degree-6 Taylor, whose own derivative (autodiff of f' for f'', e.g. JAX's
# second derivative) is 2.4e-6 accurate, while the minimax one's made
# GELU''(1.44) 1.6e-6 off (test_activations.py: atol 1e-6).
_GAUSS_FORWARD = _gauss_constants(_EXP_MINIMAX_5, _MILLS_34_P, _MILLS_34_Q)
_GAUSS_DERIVATIVE = _gauss_constants(_EXP_TAYLOR)


def _horner_monic(t, coefficients):
    """t**n + c[n-1] t**(n-1) + ... + c[0], for c = `coefficients`."""
    result = t + coefficients[-1]
    for c in reversed(coefficients[:-1]):
        result = result * t + c
    return result


def _compiled_gaussian_and_mills(t, constants=_GAUSS_DERIVATIVE):
    """`_gaussian_and_mills` for t = |x| inside a compiled float32 kernel,
    with `constants` from `_gauss_constants`."""
    k, exp_monic, mills_p, mills_q = constants
    t = ops.minimum(t, _GAUSS_CLIP)
    s = t * t
    z = s * (-0.5 * _LOG2E) + _ROUNDER_127
    z_bits = fusion.bits_of_float32(z)
    n = ops.cast(z_bits - _ROUNDER_127_BITS, "float32")
    r2 = (n * (-2.0 * _LN2_HIGH) - s) + n * (-2.0 * _LN2_LOW)
    scale = fusion.float32_of_bits(ops.left_shift(z_bits, 23))
    gaussian = _horner_monic(r2, exp_monic) * scale
    mills = _horner(t, mills_p) / _horner_monic(t, mills_q)
    return t, gaussian, mills, _INV_SQRT_2PI / k


def _gelu_exact(x):
    if _compiled_float32(x):
        # No autodiff reaches this forward (the kernel's gradient is
        # `_gelu_exact_grad`), so |x| as abs, and x - tail for x >= 0, -tail
        # below, as max(x, 0) - tail: two operations fewer than the select.
        t, gaussian, mills, _ = _compiled_gaussian_and_mills(
            ops.abs(x), _GAUSS_FORWARD
        )
        return ops.maximum(x, 0.0) - (t * mills) * gaussian
    t, gaussian, mills, _ = _gaussian_and_mills(x)
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
    t, gaussian, mills, density_scale = _gaussian_and_mills(x)
    if _compiled_float32(x):
        # Phi(-t) - t phi(t) = g (m - c t): two operations fewer.
        below = gaussian * (mills - density_scale * t)
        return ops.where(x < 0, below, 1.0 - below)
    lower_tail = gaussian * mills
    density = density_scale * t * gaussian
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


_gelu_tanh_saturating = _saturating(_gelu_tanh_formula, TANH_CLIP)


# 2**w inside a compiled float32 kernel, for the tanh and sigmoid modes'
# forward (issue 20): w rounds to n in the rounder's low bits, 2**n is
# those bits shifted into the exponent (as `_compiled_gaussian_and_mills`
# does), and 2**f for f = w - n in [-1/2, 1/2] (exact) is a degree-5
# polynomial with minimax relative error 6.8e-8 (fitted by linear
# programming on 4,001 points, constant term 1). Five operations fewer
# than `_exp`'s reduction: no split ln 2 (w's own rounding, 2.6e-6
# relative at |w| = 127, is where the product is far below what the
# modes' tests resolve), no clip of its own beyond w's.
_EXP2_MINIMAX_5 = (
    1.0,
    0.6931465959152436,
    0.24022166008351833,
    0.05551047382506897,
    0.009674951930205714,
    0.0013202982320091221,
)


def _exp2(w, polynomial=_EXP2_MINIMAX_5):
    """2**w for w in [-127, 128] (w = -127 gives +0, 128 gives +inf), with
    `polynomial` for 2**f on [-1/2, 1/2]."""
    z_bits = fusion.bits_of_float32(w + _ROUNDER_127)
    n = ops.cast(z_bits - _ROUNDER_127_BITS, "float32")
    scale = fusion.float32_of_bits(ops.left_shift(z_bits, 23))
    return _horner(w - n, polynomial) * scale


# The tanh mode as x * sigmoid(2u) = x / (1 + exp(-2u)), the same function
# (0.5 (1 + tanh(u)) = sigmoid(2u)), with exp(-2u) = 2**w: w = x (A + B x**2)
# with the constants folded. Clipped at x >= -11 (w <= 162, clipped to 128:
# +inf, so x / inf = -0 there as the tanh formula's 1 + tanh(u) = 0, and -0
# at -inf); at +inf, w = -inf clips to -127 (2**w = 0) and x / 1 = inf.
# 1.49 -> 1.21x ReLU forward (TF, 4M float32, docs/benchmarks.md).
_TANH_W_LINEAR = -2.0 * _TANH_SCALE * _LOG2E
_TANH_W_CUBIC = _TANH_W_LINEAR * _TANH_CUBIC


def _gelu_tanh(x):
    if not _compiled_float32(x):
        return _gelu_tanh_saturating(x)
    x = ops.maximum(x, -11.0)
    w = ops.clip(x * (_TANH_W_LINEAR + _TANH_W_CUBIC * (x * x)), -127.0, 128.0)
    return x / (1.0 + _exp2(w))


_gelu_tanh_grad = _clipped(_gelu_tanh_grad_formula, TANH_CLIP)

# The sigmoid forms are exact at +-SIGMOID_CLIP (128) already: see
# `keras_gelu/constants.py`.


def _gelu_sigmoid_formula(x):
    return x * _sigmoid(SIGMOID_SCALE * x)


def _gelu_sigmoid_grad_formula(x):
    s = _sigmoid(SIGMOID_SCALE * x)
    return s + x * s * (1.0 - s) * SIGMOID_SCALE


_gelu_sigmoid_saturating = _saturating(_gelu_sigmoid_formula, SIGMOID_CLIP)


def _gelu_sigmoid(x):
    """x / (1 + 2**w), w = -1.702 x log2(e): `_exp2`, the division at once.
    Clipped at x >= -128 as the formula, and w to [-127, 128] (-0 below
    x = -52, x above 51.7). 1.27 -> 1.20x ReLU forward (docs/benchmarks.md)."""
    if not _compiled_float32(x):
        return _gelu_sigmoid_saturating(x)
    x = ops.maximum(x, -SIGMOID_CLIP)
    return x / (1.0 + _exp2(ops.clip(x * (-SIGMOID_SCALE * _LOG2E), -127.0, 128.0)))
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
