"""Fixtures shared by the keras_gelu tests (helpers live in references.py)."""

import os

# Quiet TensorFlow's C++ logging before any backend import.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import pytest  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


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


def pytest_collection_modifyitems(config, items):
    """Under JAX and torch, the `unfused` half of every test parametrized
    by `fusion` is deselected (not collected: no skip counted as a pass).

    Why: `keras_gelu.xla_fusion` is the TensorFlow XLA fusion switch; on
    the other backends nothing reads it (activations/fusion.py reads it
    only after a TensorFlow check), so `fused` and `unfused` run the same
    code there, twice (issue 17: ~125 tests per suite). The `fused` case
    runs on every backend, both on TensorFlow, where they differ.
    test_activations.py::test_nothing_reads_the_fusion_switch_off_tensorflow
    keeps that premise checked on JAX and torch.
    """
    if keras.backend.backend() == "tensorflow":
        return
    keep, same_path = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        ours = str(item.path).startswith(HERE + os.sep)
        if ours and callspec is not None and callspec.params.get("fusion") is False:
            same_path.append(item)
        else:
            keep.append(item)
    if same_path:
        config.hook.pytest_deselected(items=same_path)
        items[:] = keep
