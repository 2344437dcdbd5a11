"""Fixtures shared by the keras_gelu tests (helpers live in references.py)."""

import os
import sys

# Quiet TensorFlow's C++ logging before any backend import.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# This process imports keras before keras_gelu (nothing imported it yet):
# the import order the fresh load process (fresh_loads.py) does not take,
# checked by test_serialization.py's reload in this process (issue 16).
KERAS_FIRST = not any(m.split(".")[0] == "keras_gelu" for m in sys.modules)

import keras  # noqa: E402
import pytest  # noqa: E402

# JAX's persistent compilation cache for the JAX suite's own process too,
# in the folder the fresh JAX load processes use (fresh_loads.py). Eager
# JAX compiles op by op, and some programs come back under a new function
# object, which JAX's in-memory cache misses: keras.layers.LSTM's scan is
# traced and compiled again at every call (test_layers.py's mask tests),
# the fresh processes' load programs again in this process's `saved`
# fixture. Keyed by JAX on the program, its version and flags, so a stale
# entry is never used (issue 17). A JAX_COMPILATION_CACHE_DIR already set
# wins, as in fresh_loads.py.
if keras.backend.backend() == "jax" and not os.environ.get("JAX_COMPILATION_CACHE_DIR"):
    import jax  # noqa: E402

    from tests.keras_gelu import fresh_loads  # noqa: E402

    jax.config.update(
        "jax_compilation_cache_dir", fresh_loads.JAX_CACHE["JAX_COMPILATION_CACHE_DIR"]
    )
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


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
