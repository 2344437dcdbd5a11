"""Gated split functions: value and gradient against a float64 reference,
through the fused split-gate-multiply kernel (TensorFlow) and the plain
path alike."""

import numpy as np
import pytest

import keras_gelu
from tests.keras_gelu import references as ref

GATES = {
    "glu": ref.sigmoid,
    "geglu": ref.gelu,
    "swiglu": ref.silu,
    "reglu": ref.relu,
    "bilinear": ref.linear,
}


def _reference_grad(name, h):
    """d/dh sum(gate(a) * b) for h = [a, b], in float64."""
    a, b = np.split(ref.f64(h), 2, axis=-1)
    eps = 1e-6
    gate = GATES[name]
    d_gate = (gate(a + eps) - gate(a - eps)) / (2 * eps)
    return np.concatenate([d_gate * b, gate(a)], axis=-1)


@pytest.mark.parametrize("fusion", [True, False], ids=["fused", "unfused"])
@pytest.mark.parametrize("name", sorted(GATES))
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
    np.testing.assert_allclose(value, GATES[name](a) * b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(grad, _reference_grad(name, h), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", sorted(GATES))
def test_gated_function_keeps_half_precision_dtype_and_gives_no_nan(name, dtype):
    import keras

    # gate(a) * b may overflow float16 legitimately (|a * b| > 65504);
    # what must not happen is a NaN from a finite input.
    h = keras.ops.cast(np.linspace(-6e4, 6e4, 64).reshape(4, 16), dtype)
    out = keras_gelu.get(name)(h)
    assert keras.backend.standardize_dtype(out.dtype) == dtype
    values = ref.numpy(keras.ops.cast(out, "float32"))
    assert not np.any(np.isnan(values))
