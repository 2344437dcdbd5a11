"""keras_gelu inside a compiled function: `jax.jit` on JAX, a graph-mode
`tf.function` (keras_gelu's nested XLA kernels) on TensorFlow.

There the formulas take exp from its bits (`formulas._exp`, issue 20),
while eager calls run `ops.exp`; the other test files call eagerly, so on
JAX only these tests reach the compiled path. References are float64
numpy / scipy (references.py), never keras_gelu.
"""

import numpy as np
import pytest
from keras import ops

import keras_gelu
from tests.keras_gelu import references as ref

pytestmark = pytest.mark.skipif(
    ref.BACKEND == "torch",
    reason="torch runs the formulas op by op (ops.exp); its compiled path "
    "is test_numerics_edges.py::test_torch_gelu_compiles_as_one_graph",
)

FLOAT32_MAX = float(np.finfo(np.float32).max)
FLOAT32_TINY = float(np.finfo(np.float32).tiny)
# Every x whose exact GELU is a normal float32 (down to -13.146), the
# sigmoid forms' whole range and beyond, and the largest floats.
_GRID = np.concatenate(
    [
        np.linspace(-13.2, 12.0, 400_001),
        np.linspace(-130.0, 130.0, 20_001),
        np.geomspace(12.0, FLOAT32_MAX, 201),
        -np.geomspace(130.0, FLOAT32_MAX, 201),
    ]
).astype(np.float32)
EDGES = np.array([-np.inf, np.nan, np.inf, -0.0, 0.0], np.float32)


def compiled(fn):
    """`fn` as the backend compiles it for training and prediction."""
    if ref.BACKEND == "jax":
        import jax

        return jax.jit(fn)
    import tensorflow as tf

    return tf.function(fn, autograph=False)


def compiled_grad(fn, x):
    """d sum(fn(x)) / dx inside one compiled function, as numpy."""
    if ref.BACKEND == "jax":
        import jax
        import jax.numpy as jnp

        return np.asarray(jax.jit(jax.grad(lambda v: jnp.sum(fn(v))))(x))
    import tensorflow as tf

    @tf.function(autograph=False)
    def grad(v):
        with tf.GradientTape() as tape:
            tape.watch(v)
            y = fn(v)
        return tape.gradient(y, v)

    return grad(tf.constant(x)).numpy()


def test_compiled_exact_gelu_relative_error_below_1e5_wherever_gelu_is_normal():
    x = _GRID[np.abs(ref.gelu(_GRID)) >= FLOAT32_TINY]
    y = ref.numpy(compiled(keras_gelu.gelu)(ops.convert_to_tensor(x)))
    ref.assert_relative_error_at_most(y, x, 1e-5)


def test_compiled_exact_gelu_below_the_normal_range_is_tiny_and_never_positive():
    x = np.array([-13.15, -13.2, -14.0, -20.0, -1e4, -FLOAT32_MAX], np.float32)
    y = ref.numpy(compiled(keras_gelu.gelu)(ops.convert_to_tensor(x)))
    assert np.all(y <= 0.0) and np.all(np.abs(y) < FLOAT32_TINY)


def test_compiled_exact_gelu_gradient_within_1e5_while_phi_is_normal():
    x = np.linspace(-12.94, 12.0, 100_001).astype(np.float32)
    g = compiled_grad(keras_gelu.gelu, x)
    # atol: GELU' crosses 0 at x = -0.75179, where no relative bound holds.
    np.testing.assert_allclose(g, ref.gelu_grad(x), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize(
    "name, reference, grad_reference, rtol",
    [
        # The sigmoid forms: 1.3e-6 relative with ops.sigmoid (issue 6).
        ("gelu_sigmoid", ref.gelu_sigmoid, ref.gelu_sigmoid_grad, 5e-6),
        ("silu", ref.silu, None, 5e-6),
        # The tanh mode runs as x * sigmoid(2u) when compiled (issue 20);
        # its derivative is the tanh formula's (test_activations.py).
        # The reference as x * sigmoid(2u) too: float64's 1 + tanh(u)
        # cancels for u << 0 (at x = -7 it has 1 correct digit). 2e-5: the
        # float32 roundings of u's cubic, 9.5e-6 relative where the output
        # is ~1e-24 (where 1 + tanh(u) in float32, the formula before, is 0).
        ("gelu_tanh", lambda x: ref.f64(x) * ref.sigmoid(2.0 * ref.SQRT_2_OVER_PI * (
            ref.f64(x) + ref.TANH_CUBIC * ref.f64(x) ** 3)), None, 2e-5),
    ],
)
def test_compiled_sigmoid_forms_match_float64_with_their_derivative(
    name, reference, grad_reference, rtol
):
    fn = keras_gelu.get(name)
    y = ref.numpy(compiled(fn)(ops.convert_to_tensor(_GRID)))
    expected = reference(_GRID)
    # x * s(x): compared where the factor s and the product are normal;
    # where s is subnormal (x < -51 for gelu_sigmoid, XLA flushes it),
    # the output lies between 0 and the exact value.
    factor = np.abs(expected) / np.maximum(np.abs(_GRID), 1.0)
    normal = (factor >= FLOAT32_TINY) & (np.abs(expected) >= FLOAT32_TINY)
    np.testing.assert_allclose(y[normal], expected[normal], rtol=rtol, atol=0)
    beyond = ~normal
    assert np.all(np.abs(y[beyond]) <= np.abs(expected[beyond]) * (1 + rtol))
    assert np.all(y[beyond] * np.sign(_GRID[beyond]) >= 0)
    if grad_reference is not None:
        x = _GRID[np.abs(_GRID) <= 60.0]
        g = compiled_grad(fn, x)
        np.testing.assert_allclose(g, grad_reference(x), rtol=rtol, atol=1e-7)


@pytest.mark.parametrize("name", ["gelu", "gelu_tanh", "gelu_sigmoid", "silu"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_compiled_limits_at_infinity_and_nan(name, dtype):
    fn = keras_gelu.get(name)
    x = ops.cast(ops.convert_to_tensor(EDGES), dtype)
    y = ref.numpy(compiled(fn)(x))
    np.testing.assert_array_equal(y[[0, 2, 3, 4]], [0.0, np.inf, 0.0, 0.0])
    assert np.isnan(y[1])
    g = compiled_grad(fn, EDGES)
    np.testing.assert_array_equal(g[[0, 2]], [0.0, 1.0])


def test_compiled_forward_mills_rational_matches_scipy_on_the_clipped_range():
    # The compiled exact forward's (3, 4) rational (issue 20, fifth round)
    # against scipy's Mills ratio Phi(-t) / phi(t) = sqrt(pi / 2) erfcx(t /
    # sqrt 2), in float64: within its fit wherever t is not clipped, and
    # below R near GELU's minimum (x = -0.7518), as fitted.
    from scipy import special

    from keras_gelu.activations import formulas

    t = np.linspace(0.0, np.sqrt(176.0), 200_001)
    mills = np.sqrt(np.pi / 2.0) * special.erfcx(t / np.sqrt(2.0))
    fitted = np.polyval(formulas._MILLS_34_P[::-1], t) / np.polyval(
        formulas._MILLS_34_Q[::-1], t
    )
    relative = fitted / mills - 1.0
    assert np.max(np.abs(relative)) <= 5e-7
    near_minimum = (t >= 0.55) & (t <= 0.95)
    assert np.all(relative[near_minimum] <= -0.99e-7)


@pytest.mark.skipif(ref.BACKEND != "tensorflow", reason="TensorFlow's nested XLA kernels")
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", ["gelu", "gelu_tanh", "gelu_sigmoid", "silu", "geglu"])
def test_half_precision_is_cast_inside_the_nested_kernels(name, dtype):
    # A half-precision tensor enters the kernels as it is and each computes
    # in float32 inside (fusion._in_float32): the values and gradients of
    # casting to float32 around the activation, bit for bit, with no Cast
    # op of its own in the traced step (they were four passes over memory).
    import tensorflow as tf

    fn = keras_gelu.get(name)
    x = tf.cast(np.linspace(-9.0, 9.0, 2000, dtype=np.float32).reshape(2, 1000), dtype)
    width = 500 if name == "geglu" else 1000  # a gated unit halves the last axis
    dy = tf.cast(np.linspace(1.5, -1.5, 2 * width, dtype=np.float32).reshape(2, width), dtype)

    @tf.function(autograph=False)
    def step(v, g):
        with tf.GradientTape() as tape:
            tape.watch(v)
            y = fn(v)
        return y, tape.gradient(y, v, output_gradients=g)

    @tf.function(autograph=False)
    def around(v, g):  # float32 around the activation
        up = tf.cast(v, tf.float32)
        with tf.GradientTape() as tape:
            tape.watch(up)
            y = fn(up)
        dx = tape.gradient(y, up, output_gradients=tf.cast(g, tf.float32))
        return tf.cast(y, v.dtype), tf.cast(dx, v.dtype)

    (y, dx), (y_ref, dx_ref) = step(x, dy), around(x, dy)
    assert y.dtype == dx.dtype == x.dtype
    np.testing.assert_array_equal(ref.numpy(y).astype(np.float32), ref.numpy(y_ref).astype(np.float32))
    np.testing.assert_array_equal(ref.numpy(dx).astype(np.float32), ref.numpy(dx_ref).astype(np.float32))
    graph = step.get_concrete_function(x, dy).graph
    assert "Cast" not in {op.type for op in graph.get_operations()}
