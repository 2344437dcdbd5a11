"""A member of a stacked language-model fit against the same member
trained alone (`train.train_one_by_one`), for the stacking tests of
test_language.py (seeds of one activation) and test_mixed_stacking.py
(activations of one architecture)."""

import keras
import numpy as np
import pytest


def assert_trained_as_alone(result, alone):
    """`result` equals `alone` up to float rounding: every recorded series
    but tokens/s, the test loss and every weight."""
    h = result.history
    assert sorted(h) == sorted(alone.history)
    for key in h:
        if key != "tokens_per_second":
            np.testing.assert_allclose(h[key], alone.history[key], rtol=2e-4, atol=2e-5,
                                       err_msg=key)
    assert result.test_loss == pytest.approx(alone.test_loss, rel=1e-5)
    assert len(result.model.weights) == len(alone.model.weights)
    for mine, theirs in zip(result.model.weights, alone.model.weights):
        np.testing.assert_allclose(keras.ops.convert_to_numpy(mine),
                                   keras.ops.convert_to_numpy(theirs), rtol=1e-3, atol=1e-4,
                                   err_msg=mine.path)
