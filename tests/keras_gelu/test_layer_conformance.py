"""Keras's own layer conformance harness over every keras_gelu layer.

`keras.src.testing.TestCase.run_layer_test` is what Keras and keras-hub
run on their layers: build, symbolic and eager calls, output shape and
dtype, weight counts, masking, a training step, mixed precision and a
serialization round trip. One table of cases below covers every layer in
keras_gelu (issue 15: an outside check ran these 24 cases on TF, JAX and
torch); the suite runs it on whichever backend KERAS_BACKEND selects.
"""

import inspect

import keras
import pytest

import keras_gelu
from keras_gelu import stacking
from tests.keras_gelu import layer_harness

# (case id, layer class, init kwargs, input shape, expected output shape,
#  trainable weights, supports_masking)
CASES = [
    ("gelu_exact", keras_gelu.GELU, {}, (2, 3, 4), (2, 3, 4), 0, True),
    ("gelu_tanh", keras_gelu.GELU, {"approximate": "tanh"}, (2, 4), (2, 4), 0, True),
    ("gelu_sigmoid", keras_gelu.GELU, {"approximate": "sigmoid"}, (2, 4), (2, 4), 0, True),
    ("glu_units", keras_gelu.GLU, {"units": 5}, (2, 3, 4), (2, 3, 5), 2, True),
    ("glu_split", keras_gelu.GLU, {}, (2, 3, 4), (2, 3, 2), 0, True),
    ("glu_split_time", keras_gelu.GLU, {"axis": 1}, (2, 4, 3), (2, 2, 3), 0, True),
    ("glu_gelu_gate", keras_gelu.GLU, {"units": 3, "activation": "gelu"}, (2, 4), (2, 3), 2, True),
    ("glu_no_bias", keras_gelu.GLU, {"units": 3, "use_bias": False}, (2, 4), (2, 3), 1, True),
    ("geglu", keras_gelu.GEGLU, {"units": 5}, (2, 3, 4), (2, 3, 5), 2, True),
    ("geglu_tanh", keras_gelu.GEGLU, {"units": 5, "approximate": "tanh"}, (2, 4), (2, 5), 2, True),
    ("geglu_split", keras_gelu.GEGLU, {}, (2, 6), (2, 3), 0, True),
    ("swiglu", keras_gelu.SwiGLU, {"units": 5}, (2, 3, 4), (2, 3, 5), 2, True),
    ("swiglu_split", keras_gelu.SwiGLU, {}, (2, 6), (2, 3), 0, True),
    ("reglu", keras_gelu.ReGLU, {"units": 5}, (2, 4), (2, 5), 2, True),
    ("reglu_split", keras_gelu.ReGLU, {}, (2, 6), (2, 3), 0, True),
    ("bilinear", keras_gelu.Bilinear, {"units": 5}, (2, 4), (2, 5), 2, True),
    ("bilinear_split", keras_gelu.Bilinear, {}, (2, 6), (2, 3), 0, True),
    ("leaky_scalar", keras_gelu.LearnableLeakyReLU, {}, (2, 3, 4), (2, 3, 4), 1, True),
    ("leaky_per_channel", keras_gelu.LearnableLeakyReLU, {"per_channel": True}, (2, 3, 4), (2, 3, 4), 1, True),
    ("leaky_shared_axes", keras_gelu.LearnableLeakyReLU, {"shared_axes": [1]}, (2, 3, 4), (2, 3, 4), 1, True),
    ("ffn_gelu", keras_gelu.FeedForward, {"hidden_dim": 8}, (2, 3, 4), (2, 3, 4), 4, True),
    ("ffn_geglu", keras_gelu.FeedForward, {"hidden_dim": 8, "activation": "geglu"}, (2, 4), (2, 4), 4, True),
    ("ffn_swiglu_matched", keras_gelu.FeedForward, {"hidden_dim": 12, "activation": "swiglu", "match_params": True}, (2, 4), (2, 4), 4, True),
    ("ffn_leaky", keras_gelu.FeedForward, {"hidden_dim": 8, "activation": "learnable_leaky_relu"}, (2, 4), (2, 4), 5, True),
    # keras_gelu.stacking: M members side by side on axis 1.
    ("stacked_dense", stacking.StackedDense, {"members": 2, "units": 5}, (3, 2, 4), (3, 2, 5), 2, False),
    ("stacked_leaky", stacking.StackedLearnableLeakyReLU, {"members": 2, "plain_config": {"per_channel": True}}, (3, 2, 4), (3, 2, 4), 1, False),
    # Members of different activations in one stack (issues 17, 20).
    ("stacked_dense_mixed", stacking.StackedDense, {"members": 2, "units": 5, "activation": ["relu", "gelu"]}, (3, 2, 4), (3, 2, 5), 2, False),
    ("stacked_gates", stacking.StackedGates, {"gates": ["sigmoid", "gelu"]}, (3, 2, 6), (3, 2, 3), 0, True),
    ("stacked_activation", stacking.StackedActivation, {"functions": ["relu", "gelu"]}, (3, 2, 4), (3, 2, 4), 0, True),
]


def _layers():
    return {
        obj
        for module in (keras_gelu, stacking)
        for obj in vars(module).values()
        if inspect.isclass(obj) and issubclass(obj, keras.layers.Layer)
        and obj.__module__.startswith("keras_gelu")
    }


def test_every_keras_gelu_layer_has_a_conformance_case():
    assert _layers() <= {case[1] for case in CASES}


@pytest.mark.parametrize(
    "case", CASES, ids=[case[0] for case in CASES]
)
def test_layer_passes_keras_run_layer_test(case):
    _, layer_cls, kwargs, input_shape, output_shape, trainable, masking = case
    layer_harness.run_layer_test(
        layer_cls, kwargs, input_shape, output_shape, trainable, masking
    )
