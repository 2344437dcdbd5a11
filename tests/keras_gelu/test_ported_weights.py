"""Weights ported from keras-hub keep their meaning in keras_gelu.

keras-hub stores a gated FFN as three matrices (gate, up, down); the
documented recipe `FeedForward.set_gated_weights` loads them, and the
block's output must equal keras-hub's own decoder block's. The decoder
blocks' attention is switched off (output projection zeroed), so their
output is `x + FFN(norm(x))`, computed by keras-hub's code throughout.
"""

import numpy as np
import pytest

import keras_gelu
from tests.keras_gelu import references as ref

keras_hub = pytest.importorskip("keras_hub")

D_MODEL, SEQ = 16, 5


def _inputs():
    return np.random.default_rng(0).normal(size=(2, SEQ, D_MODEL)).astype("float32")


def _randomize(variables, seed):
    rng = np.random.default_rng(seed)
    for v in variables:
        v.assign(rng.normal(scale=0.5, size=v.shape).astype("float32"))


def test_gemma_ffn_loads_into_feedforward_geglu_tanh():
    from keras_hub.src.models.gemma.gemma_decoder_block import GemmaDecoderBlock

    block = GemmaDecoderBlock(
        hidden_dim=D_MODEL,
        intermediate_dim=2 * 24,  # Gemma's FFN width is intermediate_dim // 2
        head_dim=8,
        num_query_heads=2,
        num_key_value_heads=1,
    )
    x = _inputs()
    block(x)
    _randomize(block.pre_ffw_norm.weights, seed=1)
    block.attention.output_dense.kernel.assign(
        np.zeros(block.attention.output_dense.kernel.shape, "float32")
    )
    expected = ref.numpy(block(x))

    ffn = keras_gelu.FeedForward(24, activation="geglu_tanh", use_bias=False)
    ffn.set_gated_weights(
        gate_kernel=block.gating_ffw.kernel,
        up_kernel=block.gating_ffw_2.kernel,
        down_kernel=block.ffw_linear.kernel,
    )
    ours = x + ref.numpy(ffn(block.pre_ffw_norm(x)))
    np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-5)


def test_llama_ffn_loads_into_feedforward_swiglu():
    from keras_hub.src.models.llama.llama_decoder import (
        LlamaTransformerDecoder,
    )

    block = LlamaTransformerDecoder(
        intermediate_dim=24, num_query_heads=2, num_key_value_heads=1
    )
    x = _inputs()
    block(x)
    _randomize(block._feedforward_layernorm.weights, seed=2)
    output_dense = block._self_attention_layer._output_dense
    output_dense.kernel.assign(np.zeros(output_dense.kernel.shape, "float32"))
    expected = ref.numpy(block(x))

    ffn = keras_gelu.FeedForward(24, activation="swiglu", use_bias=False)
    ffn.set_gated_weights(
        gate_kernel=block._feedforward_gate_dense.kernel,
        up_kernel=block._feedforward_intermediate_dense.kernel,
        down_kernel=block._feedforward_output_dense.kernel,
    )
    ours = x + ref.numpy(ffn(block._feedforward_layernorm(x)))
    np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-5)


def test_swapping_gate_and_up_would_be_caught():
    # The test above can fail: loading the matrices the other way round
    # gives a different block.
    rng = np.random.default_rng(3)
    gate, up = (rng.normal(size=(D_MODEL, 24)).astype("float32") for _ in range(2))
    down = rng.normal(size=(24, D_MODEL)).astype("float32")
    right = keras_gelu.FeedForward(24, activation="swiglu", use_bias=False)
    right.set_gated_weights(gate, up, down)
    swapped = keras_gelu.FeedForward(24, activation="swiglu", use_bias=False)
    swapped.set_gated_weights(up, gate, down)
    x = _inputs()
    assert not np.allclose(ref.numpy(right(x)), ref.numpy(swapped(x)), atol=1e-3)
    manual = (ref.f64(x) @ up) * ref.silu(ref.f64(x) @ gate) @ down
    np.testing.assert_allclose(ref.numpy(right(x)), manual, rtol=1e-4, atol=1e-4)


def test_set_gated_weights_with_biases_and_shape_errors():
    rng = np.random.default_rng(4)
    ffn = keras_gelu.FeedForward(6, activation="geglu", output_dim=3)
    gate, up = (rng.normal(size=(4, 6)).astype("float32") for _ in range(2))
    down = rng.normal(size=(6, 3)).astype("float32")
    gb, ub, db = (rng.normal(size=(n,)).astype("float32") for n in (6, 6, 3))
    ffn.set_gated_weights(gate, up, down, gb, ub, db)
    x = rng.normal(size=(5, 4)).astype("float32")
    manual = ((ref.f64(x) @ up + ub) * ref.gelu(ref.f64(x) @ gate + gb)) @ down + db
    np.testing.assert_allclose(ref.numpy(ffn(x)), manual, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="needs both biases"):
        ffn.set_gated_weights(gate, up, down)
    with pytest.raises(ValueError, match="kernels of shape"):
        ffn.set_gated_weights(gate[:, :5], up[:, :5], down, gb, ub, db)
    with pytest.raises(ValueError, match="needs a gated activation"):
        keras_gelu.FeedForward(6, activation="gelu").set_gated_weights(gate, up, down)
