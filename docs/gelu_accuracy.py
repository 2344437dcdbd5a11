"""Measures the exact GELU's relative error in float32 on one Keras backend.

Usage (the backend comes from KERAS_BACKEND):

    KERAS_BACKEND=tensorflow .venv/bin/python docs/gelu_accuracy.py
    KERAS_BACKEND=jax .venv/bin/python docs/gelu_accuracy.py
    KERAS_BACKEND=torch .venv/bin/python docs/gelu_accuracy.py

Prints one Markdown row per input set (on TensorFlow, for the XLA-fused
kernel and for `xla_fusion(False)`): the largest relative error of
`keras_gelu.gelu(x)` against float64 `x * scipy.special.ndtr(x)` evaluated
at the same float32 inputs, and where it occurs. The inputs cover every x
whose GELU is a normal float32 (|GELU(x)| >= 1.1755e-38, x >= -13.146246),
the range keras_gelu promises 1e-5 relative on: every float32 in the
negative tail and in [1, 12], where the error is largest, and dense grids
across the whole range. About a minute per backend.
"""

import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

try:
    import keras_gelu
except ImportError:  # Run from a checkout without `pip install -e .`.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import keras_gelu

import keras
import numpy as np
from scipy import special

FLOAT32_TINY = np.finfo(np.float32).tiny
CHUNK = 1 << 22


def reference(x):
    x = x.astype(np.float64)
    return x * special.ndtr(x)


def lowest_normal_input():
    """The most negative float32 x whose GELU is a normal float32."""
    x = np.float32(-13.0)
    step = np.float32(-np.inf)
    while abs(reference(np.array([np.nextafter(x, step)]))[0]) >= FLOAT32_TINY:
        x = np.nextafter(x, step)
    return x


def every_float32(a, b):
    """Every float32 in [a, b]; a and b of the same sign."""
    bits = np.array([a, b], np.float32).view(np.int32)
    return np.arange(bits.min(), bits.max() + 1, dtype=np.int32).view(
        np.float32
    )


def input_sets():
    lowest = lowest_normal_input()
    low = f"{lowest:.6f}".replace("-", "−")
    grid = np.linspace(-13.2, 12.0, 600_001).astype(np.float32)
    beyond = np.concatenate(
        [
            np.linspace(12.0, 100.0, 1001),
            np.geomspace(100.0, np.finfo(np.float32).max, 1001),
        ]
    ).astype(np.float32)
    whole = grid[grid >= lowest]
    return {
        f"every float32 in [{low}, −1]": every_float32(lowest, -1.0),
        "every float32 in [1, 12]": every_float32(1.0, 12.0),
        f"{len(whole):,} of 600,001 evenly spaced on [−13.2, 12] (those "
        f"with a normal GELU) + {len(beyond):,} from 12 to 3.4e38": (
            np.concatenate([whole, beyond])
        ),
        "200,001 evenly spaced on [−12, 12]": np.linspace(
            -12.0, 12.0, 200_001
        ).astype(np.float32),
    }


def max_relative_error(x, fusion):
    worst, where = 0.0, None
    for start in range(0, len(x), CHUNK):
        chunk = x[start : start + CHUNK]
        with keras_gelu.xla_fusion(fusion):
            y = keras_gelu.gelu(keras.ops.convert_to_tensor(chunk))
        y = keras.ops.convert_to_numpy(y).astype(np.float64)
        expected = reference(chunk)
        nonzero = expected != 0
        rel = np.abs(y - expected)[nonzero] / np.abs(expected[nonzero])
        index = np.argmax(rel)
        if rel[index] > worst:
            worst, where = rel[index], chunk[nonzero][index]
    return worst, where


def main():
    backend = keras.backend.backend()
    configs = [(backend, True)]
    if backend == "tensorflow":
        configs = [
            ("tensorflow, XLA-fused", True),
            ("tensorflow, xla_fusion(False)", False),
        ]
    print("| backend | inputs | count | max relative error | at x |")
    print("|---|---|---|---|---|")
    for name, inputs in input_sets().items():
        for label, fusion in configs:
            worst, where = max_relative_error(inputs, fusion)
            print(
                f"| {label} | {name} | {len(inputs):,} | "
                f"{worst:.5g} | {where:.7g} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
