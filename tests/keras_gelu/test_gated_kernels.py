"""Gated split functions: `value * gate(g)` for `value, g = split(x, 2)`.

Checked against a float64 reference, through the fused split-gate-multiply
kernel (TensorFlow) and the plain path alike, and against the
implementations users port weights from: `keras.ops.glu` and
`torch.nn.functional.glu` (value first, gate second).
"""

import keras
import numpy as np
import pytest

import keras_gelu
from tests.keras_gelu import references as ref



def _reference_grad(name, h):
    """d/dh sum(a * gate(b)) for h = [a, b], in float64."""
    a, b = np.split(ref.f64(h), 2, axis=-1)
    eps = 1e-6
    gate = ref.GATED[name]
    d_gate = (gate(b + eps) - gate(b - eps)) / (2 * eps)
    return np.concatenate([gate(b), a * d_gate], axis=-1)


def test_every_gated_name_is_checked_here():
    assert sorted(ref.GATED) == keras_gelu.names("gated")


@pytest.mark.parametrize("fusion", ref.FUSION_SETTINGS, ids=ref.FUSION_IDS)
@pytest.mark.parametrize("name", sorted(ref.GATED))
def test_gated_function_value_and_gradient_match_float64_reference(name, fusion):
    rng = np.random.default_rng(0)
    # Keep clear of relu's kink at 0, where a finite difference is undefined.
    h = rng.normal(scale=2.0, size=(16, 12)).astype("float32")
    h[np.abs(h) < 1e-2] = 0.5
    fn = keras_gelu.get(name)
    a, b = np.split(ref.f64(h), 2, axis=-1)
    with keras_gelu.xla_fusion(fusion):
        value = ref.numpy(fn(h))
        grad = ref.grad(fn, h)
    np.testing.assert_allclose(value, a * ref.GATED[name](b), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(grad, _reference_grad(name, h), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("fusion", ref.FUSION_SETTINGS, ids=ref.FUSION_IDS)
def test_glu_equals_keras_ops_glu(fusion):
    x = np.random.default_rng(1).normal(size=(5, 3, 8)).astype("float32")
    with keras_gelu.xla_fusion(fusion):
        ours = ref.numpy(keras_gelu.glu(x))
        layer = ref.numpy(keras_gelu.GLU()(x))
    theirs = ref.numpy(keras.ops.glu(x))
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(layer, theirs, rtol=1e-6, atol=1e-7)
    # The example: keras.activations.glu([1, -2, .5, 3]).
    np.testing.assert_allclose(
        ref.numpy(keras_gelu.glu(np.array([1.0, -2.0, 0.5, 3.0], "float32"))),
        [0.6224593, -1.9051483],
        rtol=1e-6,
    )


# torch's own gated units, written as PyTorch users and x-transformers
# write them: a, b = x.chunk(2, -1); a * act(b).
def _torch_reference(name, x):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    t = torch.from_numpy(x.astype("float64"))
    if name == "glu":
        return F.glu(t, dim=-1).numpy()
    a, b = t.chunk(2, dim=-1)
    gate = {
        "geglu": lambda v: F.gelu(v),
        "geglu_tanh": lambda v: F.gelu(v, approximate="tanh"),
        "swiglu": F.silu,
        "reglu": F.relu,
        "bilinear": lambda v: v,
    }[name]
    return (a * gate(b)).numpy()


@pytest.mark.parametrize("axis", [-1, 1])
@pytest.mark.parametrize("name", sorted(ref.GATED))
def test_gated_function_equals_torch(name, axis):
    x = np.random.default_rng(2).normal(scale=2.0, size=(4, 6, 6)).astype("float32")
    ours = ref.numpy(keras_gelu.get(name)(x, axis=axis))
    moved = np.moveaxis(x, axis, -1)
    theirs = np.moveaxis(_torch_reference(name, moved), -1, axis)
    # atol: float32's 1 + tanh in the tanh form's negative tail (float64 here).
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=5e-6)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", sorted(ref.GATED))
def test_gated_function_keeps_half_precision_dtype_and_gives_no_nan(name, dtype):
    # a * gate(b) may overflow float16 legitimately (|a * b| > 65504);
    # what must not happen is a NaN from a finite input.
    h = keras.ops.cast(np.linspace(-6e4, 6e4, 64).reshape(4, 16), dtype)
    out = keras_gelu.get(name)(h)
    assert keras.backend.standardize_dtype(out.dtype) == dtype
    values = ref.numpy(keras.ops.cast(out, "float32"))
    assert not np.any(np.isnan(values))


@pytest.mark.skipif(ref.BACKEND != "tensorflow", reason="TensorFlow's nested XLA kernels")
def test_every_gated_kernel_traced_once_is_not_reported_as_retracing(caplog):
    # Issue 30 §24: glu-variants printed TensorFlow's "5 out of the last 5
    # calls to <function fused_gated.<locals>.gated_forward> triggered
    # tf.function retracing": five gated kernels, each traced once, were
    # counted as one function (they share gated_forward's code). Kernels
    # made anew here, so each traces now whatever ran before in this process.
    from keras_gelu.activations import fusion  # the kernel cache: TensorFlow only

    fusion._FUSED_CACHE.clear()
    h = np.random.default_rng(2).normal(size=(4, 8)).astype("float32")
    with caplog.at_level("WARNING", logger="tensorflow"), keras_gelu.xla_fusion(True):
        for name in sorted(ref.GATED) * 2:
            ref.numpy(keras_gelu.get(name)(h))
    assert not [r.getMessage() for r in caplog.records if "retracing" in r.getMessage()]
