"""keras_gelu at the edges of float32: huge inputs, the bottom of the
normal range, and torch's compiled / off-CPU path.

References are float64 scipy and mpmath (references.py), never keras_gelu.
"""

import functools

import keras
import numpy as np
import pytest
from keras import ops

import keras_gelu
from tests.keras_gelu import references as ref

FUSION = pytest.mark.parametrize("fusion", ref.FUSION_SETTINGS, ids=ref.FUSION_IDS)
MODES = ["none", "tanh", "sigmoid"]

FLOAT32_MAX = float(np.finfo(np.float32).max)  # 3.4028235e38
BFLOAT16_MAX = 3.3895313892515355e38  # (2 - 2**-7) * 2**127
FLOAT32_TINY = float(np.finfo(np.float32).tiny)  # smallest normal, 1.1755e-38
# Outside jax.jit, JAX evaluates a custom_jvp rule on concrete numpy values,
# so `1.702 * x` overflowing to -inf (sigmoid(-inf) = 0, as intended) warns.
NUMPY_OVERFLOW_OK = pytest.mark.filterwarnings(
    "ignore:overflow encountered:RuntimeWarning"
)


def _huge(dtype):
    big = BFLOAT16_MAX if dtype == "bfloat16" else FLOAT32_MAX
    return np.array([-big, -1e20, -1e19, 1e19, 1e20, big], np.float32)


def _input_grad(fn, x, dtype):
    """d sum(fn(x)) / dx at `x` cast to `dtype`, as float64 numpy.

    Returns (x as it was in `dtype`, the gradient), both float64.
    """
    x = ops.cast(ops.convert_to_tensor(np.asarray(x, np.float32)), dtype)
    if ref.BACKEND == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            tape.watch(x)
            y = fn(x)
        g = tape.gradient(y, x)
    elif ref.BACKEND == "jax":
        import jax
        import jax.numpy as jnp

        g = jax.grad(lambda v: jnp.sum(fn(v)).astype("float32"))(x)
    elif ref.BACKEND == "torch":
        import torch

        x = x.detach().requires_grad_(True)
        (g,) = torch.autograd.grad(fn(x).sum(), x)
    else:
        raise NotImplementedError(ref.BACKEND)
    assert keras.backend.standardize_dtype(g.dtype) == dtype
    return ref.numpy(x), ref.numpy(g)


# --- Finite gradients for every finite input. ---------------------------------


@NUMPY_OVERFLOW_OK
@FUSION
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("mode", MODES)
def test_gelu_gradient_is_exact_0_or_1_up_to_the_largest_float(
    fusion, dtype, mode
):
    # torch's native tanh kernel used to give NaN past |x| ~ 1.9e19 (x**3
    # overflows: inf * 0). GELU'(x) is 0 or 1 in float32 out there.
    with keras_gelu.xla_fusion(fusion):
        x, g = _input_grad(
            lambda v: keras_gelu.gelu(v, approximate=mode), _huge(dtype), dtype
        )
    np.testing.assert_array_equal(g, np.where(x > 0, 1.0, 0.0))


@NUMPY_OVERFLOW_OK
@FUSION
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("mode", MODES)
def test_geglu_gradient_is_finite_up_to_the_largest_float(fusion, dtype, mode):
    # GEGLU(approximate="tanh") on torch was NaN there too. Input
    # [value | gate] with value 1: d/d(gate) = f'(gate), d/d(value) =
    # f(gate) = max(gate, 0) in float32 at these gates.
    gate = _huge(dtype)
    layer = keras_gelu.GEGLU(approximate=mode, dtype=dtype)
    h = np.concatenate([np.ones_like(gate), gate])[None, :]
    with keras_gelu.xla_fusion(fusion):
        x, g = _input_grad(layer, h, dtype)
    x_value, x_gate = np.split(x[0], 2)
    g_value, g_gate = np.split(g[0], 2)
    np.testing.assert_array_equal(g_gate, np.where(x_gate > 0, 1.0, 0.0))
    np.testing.assert_array_equal(g_value, np.maximum(x_gate, 0.0))


@NUMPY_OVERFLOW_OK
@FUSION
@pytest.mark.parametrize("mode", MODES)
def test_gelu_gradient_stays_finite_under_a_large_incoming_gradient(
    fusion, mode
):
    # Autodiff of x * sigmoid(1.702 x) forms dy * x first: inf past
    # 3.4e38, then inf * sigmoid' = inf * 0 = NaN. The analytic
    # derivatives (TF fused, JAX, torch) never form it.
    if (ref.BACKEND, fusion, mode) == ("tensorflow", False, "sigmoid"):
        pytest.xfail("TF unfused differentiates the formula: NaN, documented")
    x = _huge("float32")
    with keras_gelu.xla_fusion(fusion):
        _, g = _input_grad(
            lambda v: 3.0 * keras_gelu.gelu(v, approximate=mode), x, "float32"
        )
    np.testing.assert_array_equal(g, np.where(x > 0, 3.0, 0.0))


# --- Exact mode: accurate wherever GELU is a normal float32. ------------------

# GELU(x) = x * Phi(x) leaves float32's normal range (|GELU| < 1.1755e-38)
# at x = -13.1462; Phi itself already at -12.95 and exp(-x**2/2) at
# -13.2164. The grid starts at the first float32 whose GELU is normal.
_WHOLE = np.linspace(-13.2, 12.0, 600_001).astype(np.float32)
NORMAL_GRID = _WHOLE[np.abs(ref.gelu(_WHOLE)) >= FLOAT32_TINY]
BEYOND = np.concatenate(
    [
        np.linspace(12.0, 100.0, 1001),
        np.geomspace(100.0, FLOAT32_MAX, 1001),
    ]
).astype(np.float32)


@FUSION
def test_exact_gelu_relative_error_below_1e5_wherever_gelu_is_normal(fusion):
    # The grid reaches down to where GELU leaves the normal range.
    assert -13.1463 < NORMAL_GRID[0] < -13.1461
    x = np.concatenate([NORMAL_GRID, BEYOND])
    with keras_gelu.xla_fusion(fusion):
        y = ref.numpy(keras_gelu.gelu(ops.convert_to_tensor(x)))
    ref.assert_relative_error_at_most(y, x, 1e-5)


@FUSION
def test_exact_gelu_at_the_bottom_of_the_normal_range_matches_mpmath(fusion):
    # tf.nn.gelu gets these; keras_gelu returned -0 on TF and JAX (Phi(x)
    # is subnormal there and XLA flushes it to zero).
    x = np.array([-12.95, -13.0, -13.05, -13.1, -13.146], np.float32)
    expected = np.array([ref.gelu_mpmath(v) for v in x])
    assert np.all(np.abs(expected) >= FLOAT32_TINY)
    with keras_gelu.xla_fusion(fusion):
        y = ref.numpy(keras_gelu.gelu(ops.convert_to_tensor(x)))
    np.testing.assert_allclose(y, expected, rtol=1e-5)
    assert ref.gelu_mpmath(-13.0) == pytest.approx(-7.9523137e-38, rel=1e-7)


@FUSION
def test_exact_gelu_below_the_normal_range_is_tiny_and_never_positive(fusion):
    x = np.array([-13.15, -13.2, -14.0, -20.0, -1e4, -FLOAT32_MAX], np.float32)
    with keras_gelu.xla_fusion(fusion):
        y = ref.numpy(keras_gelu.gelu(ops.convert_to_tensor(x)))
    # 0 where the backend flushes subnormals (XLA), subnormal elsewhere.
    assert np.all(y <= 0.0) and np.all(np.abs(y) < FLOAT32_TINY)


def test_exact_gelu_gradient_accurate_while_phi_is_a_normal_float32():
    # GELU'(x) = Phi(x) + x phi(x). Below x = -12.95 Phi is subnormal and
    # XLA flushes it: 1/x**2 of GELU' (0.6% at -13), traded for a 6-10%
    # faster derivative kernel (formulas._gelu_exact_grad). torch
    # differentiates its tail formula by autograd: its partials go
    # subnormal there too (2.7e-5).
    # Fused only: TensorFlow's unfused path (xla_fusion(False), for
    # export) differentiates the formula itself, and TensorFlow flushes
    # the subnormal partials of that chain (the one reaching the
    # rational's denominator is ~7e-39 at x = -12.5): 2.7% off there.
    x = np.linspace(-13.2, -8.0, 5201).astype(np.float32)
    g = ref.grad(keras_gelu.gelu, x)
    expected = ref.gelu_grad(x)
    phi_normal = x >= -12.94
    np.testing.assert_allclose(g[phi_normal], expected[phi_normal], rtol=1e-5)
    np.testing.assert_allclose(g, expected, rtol=1e-2)


# --- torch: no device sync, no graph break. -----------------------------------

torch_only = pytest.mark.skipif(
    ref.BACKEND != "torch", reason="torch backend only"
)
# Both tails, the native range's edges, NaN and the largest floats.
TORCH_GRID = np.concatenate(
    [
        np.linspace(-13.146, 12.0, 20_001),
        [-1.5, np.nextafter(-1.5, -2.0), 1e4, np.nextafter(1e4, 2e4)],
        [1e5, 1e20, FLOAT32_MAX, -1e20, -FLOAT32_MAX],
    ]
).astype(np.float32)


def _check_exact_gelu(y, grad):
    expected = ref.gelu(TORCH_GRID)
    y = y.detach().double().numpy()
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=0)
    g = grad.detach().double().numpy()
    np.testing.assert_allclose(
        g, ref.gelu_grad(TORCH_GRID), rtol=1e-5, atol=3e-7
    )


@torch_only
def test_torch_exact_gelu_off_the_cpu_path_syncs_nothing(monkeypatch):
    # On a GPU and under torch.compile the exact mode must not call
    # nonzero (a device-to-host sync; a graph break). The same code runs
    # here on the CPU when torch reports it is compiling.
    import torch

    def no_sync(*args, **kwargs):
        raise AssertionError("nonzero() called: a device sync")

    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    monkeypatch.setattr(torch.Tensor, "nonzero", no_sync)
    monkeypatch.setattr(torch, "nonzero", no_sync)
    x = torch.tensor(TORCH_GRID, requires_grad=True)
    y = keras_gelu.gelu(x)
    (g,) = torch.autograd.grad(y.sum(), x)
    _check_exact_gelu(y, g)


@functools.lru_cache(maxsize=None)
def _torch_compiled_modes():
    """GELU in every mode through ONE inductor compile: one function with
    a value per mode, fullgraph=True (a graph break in any mode raises),
    then each mode's gradient through the compiled backward. Compiling is
    most of the cost (three compiles were 20 + 4 + 3 s in CI, issue 17);
    each mode's test asks Dynamo first, for that mode alone, whether it
    breaks the graph, so a failure still names its mode.
    Returns {mode: (value, gradient)}."""
    import torch

    def fn(v):
        return tuple(keras_gelu.gelu(v, approximate=mode) for mode in MODES)

    torch._dynamo.reset()
    compiled = torch.compile(fn, fullgraph=True)  # inductor, needs gcc
    x = torch.tensor(TORCH_GRID, requires_grad=True)
    values = compiled(x)
    return {
        mode: (y, torch.autograd.grad(y.sum(), x, retain_graph=True)[0])
        for mode, y in zip(MODES, values)
    }


@torch_only
@pytest.mark.parametrize("mode", MODES)
def test_torch_gelu_compiles_as_one_graph(mode):
    import torch

    def fn(v):
        return keras_gelu.gelu(v, approximate=mode)

    torch._dynamo.reset()
    explanation = torch._dynamo.explain(fn)(torch.tensor(TORCH_GRID))
    assert explanation.graph_break_count == 0, explanation.break_reasons
    y, g = _torch_compiled_modes()[mode]
    if mode == "none":
        _check_exact_gelu(y, g)
    else:
        reference = {"tanh": ref.gelu_tanh, "sigmoid": ref.gelu_sigmoid}[mode]
        # The tail of the tanh form cancels (1 + tanh): absolute 1e-6.
        np.testing.assert_allclose(
            y.detach().double().numpy(),
            reference(TORCH_GRID),
            rtol=5e-6,
            atol=1e-6,
        )
        assert torch.isfinite(g).all()


@torch_only
@pytest.mark.skipif(
    not __import__("torch").cuda.is_available(), reason="needs a CUDA GPU"
)
@pytest.mark.parametrize("mode", MODES)
def test_torch_gelu_on_gpu_never_syncs(mode):
    import torch

    x = torch.tensor(TORCH_GRID, device="cuda", requires_grad=True)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        y = keras_gelu.gelu(x, approximate=mode)
        (g,) = torch.autograd.grad(y.sum(), x)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    if mode == "none":
        _check_exact_gelu(y.cpu(), g.cpu())


# --- Limits at +-inf (issue 15). ----------------------------------------------

# GELU(+inf) = +inf and GELU(-inf) = 0 in every mode (x * g(x), g -> 1 and
# 0), likewise silu; exact mode gave NaN at +inf (inf * 0 in its tail
# product) and every mode NaN at -inf. tf.nn.gelu / jax.nn.gelu give
# (NaN, inf), torch's exact kernel (NaN, NaN): the limits are the math's.
ELEMENTWISE_AT_INF = ["gelu", "gelu_tanh", "gelu_sigmoid", "silu"]
INF_INPUT = np.array([-np.inf, -3.0, np.nan, 0.0, 2.0, np.inf], np.float32)


def _limits(x):
    """max(x, 0) at +-inf and NaN at NaN: where the finite values are not
    compared (the accuracy tests do that)."""
    return np.where(np.isinf(x), np.maximum(x, 0.0), x)


@NUMPY_OVERFLOW_OK
@FUSION
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("name", ELEMENTWISE_AT_INF)
def test_gelu_modes_and_silu_reach_their_limits_at_infinity(fusion, dtype, name):
    fn = keras_gelu.get(name)
    with keras_gelu.xla_fusion(fusion):
        x, g = _input_grad(fn, INF_INPUT, dtype)
        y = ref.numpy(fn(ops.cast(ops.convert_to_tensor(INF_INPUT), dtype)))
    np.testing.assert_array_equal(np.isnan(y), np.isnan(x))
    infinite = np.isinf(x)
    np.testing.assert_array_equal(y[infinite], _limits(x)[infinite])
    # The derivative's limits: 0 at -inf, 1 at +inf; finite elsewhere.
    np.testing.assert_array_equal(g[infinite], np.where(x > 0, 1.0, 0.0)[infinite])
    assert np.all(np.isfinite(g[~np.isnan(x)]))


@NUMPY_OVERFLOW_OK
@FUSION
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("name", list(ref.GATED))
def test_gated_units_reach_their_limits_at_infinity(fusion, dtype, name):
    # [value | gate] with value 3: output 3 * gate(g), which is 3 * the
    # gate's limit at g = +-inf; d/d(gate) = 3 * gate'(g), finite for
    # every gate but the identity (Bilinear); d/d(value) = gate(g).
    gate = keras_gelu.activations.gate_function(name)
    limits = {"glu": (0.0, 1.0), "bilinear": (-np.inf, np.inf)}.get(
        name, (0.0, np.inf)
    )
    slopes = {"glu": (0.0, 0.0), "bilinear": (1.0, 1.0)}.get(name, (0.0, 1.0))
    g_in = np.array([-np.inf, np.nan, np.inf], np.float32)
    h = np.concatenate([np.full_like(g_in, 3.0), g_in])[None, :]
    with keras_gelu.xla_fusion(fusion):
        x, grad = _input_grad(keras_gelu.get(name), h, dtype)
        y = ref.numpy(keras_gelu.get(name)(ops.cast(ops.convert_to_tensor(h), dtype)))
    assert gate is not None
    np.testing.assert_array_equal(y[0], [3.0 * limits[0], np.nan, 3.0 * limits[1]])
    g_value, g_gate = np.split(grad[0], 2)
    np.testing.assert_array_equal(g_value[[0, 2]], limits)
    np.testing.assert_array_equal(g_gate[[0, 2]], [3.0 * s for s in slopes])


@NUMPY_OVERFLOW_OK
@pytest.mark.parametrize("name", ["GEGLU", "SwiGLU", "GELU"])
def test_mixed_float16_activation_of_an_overflowed_projection_is_not_nan(name):
    # Under mixed_float16 a projection past 65504 is +-inf. The activation
    # must give its limits (inf, or 0 below), never NaN: the loss scaler
    # skips a step with inf gradients but a NaN in the forward pass has
    # no such net. Value columns stay finite: v * gate(+-inf).
    keras.config.set_dtype_policy("mixed_float16")
    units = 2
    if name == "GELU":
        dense = keras.layers.Dense(units, use_bias=False)
        layer = keras.Sequential([dense, keras_gelu.GELU()])
        gate_columns = slice(0, units)
    else:
        layer = getattr(keras_gelu, name)(units, use_bias=False)
        gate_columns = slice(units, 2 * units)
    x = np.array([[1.0, -2.0, 0.5]], np.float32)
    layer.build(x.shape)
    (kernel,) = [w for w in layer.weights if len(w.shape) == 2]
    values = np.full(kernel.shape, 0.25, np.float32)
    values[1, gate_columns] = [-4e4, 4e4]  # x[1] = -2: +8e4 and -8e4
    kernel.assign(values)
    y = ref.numpy(ops.cast(layer(ops.convert_to_tensor(x)), "float32"))
    assert not np.any(np.isnan(y)), y
    assert np.isinf(y[0, 0]) and y[0, 1] == 0.0, y
