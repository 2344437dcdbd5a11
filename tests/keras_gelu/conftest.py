"""Fixtures shared by the keras_gelu tests (helpers live in references.py)."""

import os

# Quiet TensorFlow's C++ logging before any backend import.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _restore_global_state():
    """Every test starts seeded and leaves the global dtype policy as found.

    Policy tests call keras.config.set_dtype_policy("mixed_float16"); a
    failure halfway must not leak the policy into the tests after it.
    """
    policy = keras.config.dtype_policy()
    keras.utils.set_random_seed(1234)
    yield
    keras.config.set_dtype_policy(policy)
