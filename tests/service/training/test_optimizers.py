"""training/optimizers.py: the learnable leaky ReLU's slope is out of weight
decay (issue 19 item 4), every other weight decays as Keras decays it."""

import keras
import numpy as np
import pytest

from keras_gelu.layers import LearnableLeakyReLU
from kg_service.config.schema import TrainingConfig
from kg_service.training.optimizers import make_optimizer


@pytest.mark.parametrize("name", ["adamw", "adam", "sgd"])
def test_weight_decay_skips_the_slope_and_shrinks_the_kernel(name):
    layer = LearnableLeakyReLU()
    layer.build((None, 4))
    kernel = keras.Variable(np.ones((4, 4), "float32"), name="kernel")
    (slope,) = layer.weights
    optimizer = make_optimizer(TrainingConfig(optimizer=name, learning_rate=0.1,
                                              weight_decay=0.5))
    before = float(np.mean(keras.ops.convert_to_numpy(slope)))
    zeros = [keras.ops.zeros_like(v) for v in (kernel, slope)]
    for _ in range(3):
        optimizer.apply_gradients(zip(zeros, [kernel, slope]))
    # Zero gradients: only the decay moves a weight, by (1 - lr * wd) a step.
    np.testing.assert_allclose(keras.ops.convert_to_numpy(kernel), (1 - 0.1 * 0.5) ** 3,
                               rtol=1e-6)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(slope), before, rtol=0)


def test_adamws_default_decay_skips_the_slope_too():
    layer = LearnableLeakyReLU()
    layer.build((None, 4))
    (slope,) = layer.weights
    optimizer = make_optimizer(TrainingConfig(optimizer="adamw", learning_rate=0.1))
    assert optimizer.weight_decay > 0  # Keras's AdamW default
    before = keras.ops.convert_to_numpy(slope).copy()
    optimizer.apply_gradients([(keras.ops.zeros_like(slope), slope)])
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(slope), before)
