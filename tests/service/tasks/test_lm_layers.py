"""kg-train's own attention layer (tasks/language/lm_layers.py) against
Keras' MultiHeadAttention, the layer whose variables and results it keeps."""

import keras
import numpy as np

from kg_service.tasks.language.lm_layers import FusedSelfAttention


def _attention_pair():
    # Keras' MultiHeadAttention and the fused layer, built alike, the same weights.
    x = np.random.default_rng(0).normal(size=(3, 7, 16)).astype("float32")
    keras.utils.set_random_seed(1)
    reference = keras.layers.MultiHeadAttention(4, key_dim=4)
    reference(x, x, use_causal_mask=True)
    fused = FusedSelfAttention.from_config(reference.get_config())
    fused(x, x, use_causal_mask=True)
    fused.set_weights(reference.get_weights())
    return reference, fused, x


def test_fused_self_attention_computes_keras_multi_head_attention_with_its_variables():
    reference, fused, x = _attention_pair()
    assert [(w.path, w.shape) for w in fused.weights] == [
        (w.path, w.shape) for w in reference.weights]
    expected = np.asarray(reference(x, x, use_causal_mask=True))
    # The fused path itself, and the call that takes it.
    np.testing.assert_allclose(fused._fused_causal(x), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(fused(x, x, use_causal_mask=True), expected, rtol=1e-5, atol=1e-6)
    # Not causal: the first query sees every key, so the outputs differ.
    assert np.abs(np.asarray(fused(x, x)) - expected).max() > 1e-3
    # The probe's call with scores is MultiHeadAttention's own path.
    out, scores = fused(x, x, use_causal_mask=True, return_attention_scores=True)
    _, expected_scores = reference(x, x, use_causal_mask=True, return_attention_scores=True)
    np.testing.assert_allclose(scores, expected_scores, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


def test_fused_self_attention_trains_as_keras_multi_head_attention():
    # One SGD step through each: the same gradients reach the same variables.
    reference, fused, x = _attention_pair()
    target = np.random.default_rng(2).normal(size=x.shape).astype("float32")
    initial, updated = reference.get_weights(), []
    for layer in (reference, fused):
        inputs = keras.Input((7, 16))
        model = keras.Model(inputs, layer(inputs, inputs, use_causal_mask=True))
        model.compile(optimizer=keras.optimizers.SGD(0.5), loss="mse")
        model.train_on_batch(x, target)
        updated.append([np.asarray(w) for w in layer.weights])
    moved = max(np.abs(a - b).max() for a, b in zip(updated[0], initial))
    assert moved > 1e-4
    for a, b in zip(*updated):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
