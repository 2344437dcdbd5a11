"""torch-backend GELU kernels: torch's native ones, made safe at the edges.

Imported by `fusion` on the torch backend only. Why each exists, with
the measured numbers, is next to it.
"""

import torch
import torch.nn.functional as F

from keras_gelu.constants import SIGMOID_CLIP
from keras_gelu.constants import SIGMOID_SCALE
from keras_gelu.constants import TANH_CLIP

# torch's native exact GELU, 0.5 * x * (1 + erf(x / sqrt(2))), cancels in
# the lower tail: max relative error 7.2e-7 for x >= -1.5 but 2.0e-4 at -3
# and 100% below -5.5 (measured against scipy.special.ndtr); and it
# overflows to inf near float32's max (x * 2 before the halving).
NATIVE_EXACT_RANGE = (-1.5, 1e4)


def exact_gelu(x, formula, derivative):
    """Exact GELU: the native kernel inside its range, `formula` outside.

    Eager on the CPU, `formula` runs on just the elements outside (7% of
    a standard normal tensor), gathered with `nonzero` and put back with
    an out-of-place, differentiable `index_put`: eager torch runs the
    formula op by op, one full memory pass each, and over the whole
    tensor that measured 87x ReLU forward against 15x gathered. On the
    CPU `nonzero` reads host memory: no device sync.

    Everywhere else, both are computed over the whole tensor and combined
    with `torch.where`: on a GPU `nonzero` would make the host wait for
    the device on every call, and under `torch.compile` / `torch.export`
    its data-dependent shape breaks the graph; the compiler fuses the
    formula into one pass instead.

    Args:
        x: a float tensor.
        formula: keras_gelu's tail-accurate `f(x)`, in keras.ops.
        derivative: its `f'(x)`, in keras.ops.
    """
    low, high = NATIVE_EXACT_RANGE
    if x.device.type == "cpu" and not torch.compiler.is_compiling():
        tail = ((x < low) | (x > high)).nonzero(as_tuple=True)
        if not tail[0].numel():
            return F.gelu(x)
        return _GatheredTail.apply(x, tail, formula, derivative)
    native = (x >= low) & (x <= high)
    # The formula sees `low` where the native kernel answers, so no lane
    # of the unused branch holds inf or NaN (where's zero gradient times
    # inf would be NaN).
    tail = formula(torch.where(native, low, x))
    return torch.where(native, F.gelu(x), tail)


class _GatheredTail(torch.autograd.Function):
    """The native kernel with the tail elements put back, forward and back.

    autograd of `F.gelu(x).index_put(tail, ...)` runs the native backward
    on every element, tail included, and zeroes the tail afterwards; at
    x = +-inf that backward is inf * 0 = NaN, and 0 * NaN stays NaN
    (issue 15). Here the tail's gradient is put in place of the native
    one instead, from the analytic derivative.
    """

    @staticmethod
    def forward(x, tail, formula, derivative):
        return F.gelu(x).index_put(tail, formula(x[tail]))

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, tail, _, ctx.derivative = inputs
        ctx.save_for_backward(x, *tail)

    @staticmethod
    def backward(ctx, dy):
        x, *tail = ctx.saved_tensors
        # Differentiable ops only: double backward works through them.
        dx = torch.ops.aten.gelu_backward(dy, x).index_put(
            tuple(tail), dy[tuple(tail)] * ctx.derivative(x[tuple(tail)])
        )
        return dx, None, None, None


class _TanhGelu(torch.autograd.Function):
    """torch's native tanh GELU, exact at -inf, with finite gradients.

    The native kernel gives 0.5 * x * (1 + tanh) = -inf * 0 = NaN at
    x = -inf; it is -0 for every x below -10, so the forward runs at x
    clamped below at -10 (`clamp` keeps NaN; issue 15). The native
    backward forms x**3 unclipped: inf * 0 = NaN for |x| > 1.9e19
    (TensorFlow and JAX take the formula's derivative, which clips).
    Past |x| = 10 the derivative is exactly 1 or 0 in float32, its value
    at +-10, so the native backward runs at x clipped to [-10, 10].
    """

    @staticmethod
    def forward(x):
        return F.gelu(torch.clamp(x, min=-TANH_CLIP), approximate="tanh")

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, dy):
        (x,) = ctx.saved_tensors
        clipped = torch.clamp(x, -TANH_CLIP, TANH_CLIP)
        return torch.ops.aten.gelu_backward(dy, clipped, approximate="tanh")


def tanh_gelu(x):
    """Tanh GELU: torch's native kernel, finite gradient everywhere."""
    return _TanhGelu.apply(x)


class _SigmoidGelu(torch.autograd.Function):
    """x * sigmoid(1.702 x) with its analytic gradient.

    autograd's product rule forms dy * x first: past |dy * x| = 3.4e38
    that is inf, and inf * sigmoid'(1.702 x) = inf * 0 = NaN (measured:
    NaN at x = +-3.4e38 for dy = 3, e.g. a GEGLU gate there with value
    3). The derivative s + x * s * (1 - s) * 1.702 never leaves
    [-0.1, 1.1], so dy times it is finite. It is also cheaper: three
    kernels backward, with torch's native sigmoid_backward
    (benchmarks/bench_activations.py section d, torch --threads 1:
    forward+backward 4.1x ReLU against 4.8x for autograd of the formula,
    forward 4.8x both).
    """

    @staticmethod
    def forward(ctx, x):
        # x * s is -inf * 0 = NaN at x = -inf; it is -0 for every x below
        # -SIGMOID_CLIP, so clamp there (`clamp` keeps NaN; issue 15).
        x = torch.clamp(x, min=-SIGMOID_CLIP)
        s = torch.sigmoid(SIGMOID_SCALE * x)
        ctx.save_for_backward(x, s)
        return x * s

    @staticmethod
    def backward(ctx, dy):
        x, s = ctx.saved_tensors
        # At x = +inf, x * (1 - s) would be inf * 0; s is 1 from 128 up.
        x = torch.clamp(x, max=SIGMOID_CLIP)
        if torch.is_grad_enabled():
            # Double backward: s must be a function of x, not a constant.
            s = torch.sigmoid(SIGMOID_SCALE * x)
        # s + 1.702 * x * (1 - s) * s; torch's sigmoid_backward(x, s)
        # forms x * (1 - s) first: 0, not inf * 0, at either end.
        slope = torch.ops.aten.sigmoid_backward(x, s)
        return dy * torch.add(s, slope, alpha=SIGMOID_SCALE)


def sigmoid_gelu(x):
    """Sigmoid GELU with a gradient finite for every input and dy."""
    return _SigmoidGelu.apply(x)


class _Silu(torch.autograd.Function):
    """torch's native SiLU, exact at +-inf, with a finite gradient.

    F.silu(-inf) is -inf / (1 + inf) = NaN and its backward at +inf
    forms inf * 0 = NaN (issue 15). silu is -0 below -128 and its
    derivative 1 or 0 beyond +-128 in float32, so the native kernels run
    at x clamped there: one extra pass forward, one backward.
    """

    @staticmethod
    def forward(x):
        return F.silu(torch.clamp(x, min=-SIGMOID_CLIP))

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, dy):
        (x,) = ctx.saved_tensors
        clipped = torch.clamp(x, -SIGMOID_CLIP, SIGMOID_CLIP)
        return torch.ops.aten.silu_backward(dy, clipped)


def silu(x):
    """SiLU: torch's native kernel, exact and differentiable at +-inf."""
    return _Silu.apply(x)
