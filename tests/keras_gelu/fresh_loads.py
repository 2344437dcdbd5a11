"""Saved .keras files loaded in a fresh process of the next backend.

test_serialization.py saves its models once and hands the folder to
`load_everywhere`: one fresh interpreter, of the backend that follows
the suite's own in the cycle tensorflow -> jax -> torch -> tensorflow,
loads every file and writes back the outputs. The suite's own backend
reloads the files in its own process (bit for bit). A fresh interpreter
costs an import of Keras and a backend (5-8 CPU s here), so there is one
per suite, not one per other backend (issue 30 §25): over the three
suites every backend loads in a fresh process once and every backend's
files load under another backend once (a .keras file holds no backend:
its weights are arrays, its config JSON). The other checks that need a
fresh interpreter ride in it: it imports the name table,
keras_gelu_names, first, with nothing imported (kg-train validates
configs against it without paying for Keras, issue 16), then keras_gelu
before keras. The other import order, keras before keras_gelu, is the
suite's own process's (tests/keras_gelu/conftest.py imports keras before
anything imports keras_gelu, and records that it did), which reloads
every file; so every backend loads its files after either order (issue
16: a lazy package face broke the keras_gelu-first one).
"""

import json
import os
import subprocess
import sys

import numpy as np

import keras_gelu

HERE = os.path.dirname(os.path.abspath(__file__))
FILES = ("functional", "sequential", "subclassed")

LOADER = """
import json, os, sys

directory = sys.argv[1]
facts = {"first": "keras_gelu"}
import keras_gelu_names as table
facts["imported_with_the_table"] = sorted(
    m for m in sys.modules if m.split(".")[0] in ("keras", "keras_gelu")
)
facts["table_names"] = table.names()
import keras_gelu, keras
facts["names"] = keras_gelu.names()

import numpy as np
x = np.load(os.path.join(directory, "inputs.npy"))
results = {}
for name in ("functional", "sequential"):
    model = keras.saving.load_model(os.path.join(directory, name + ".keras"))
    results[name] = keras.ops.convert_to_numpy(model(x, training=False))
    if name == "sequential":
        facts["sequential_layers"] = [
            model.layers[0].activation.__name__, type(model.layers[1]).__name__
        ]
import custom_models  # a subclassed model needs its class importable
model = keras.saving.load_model(os.path.join(directory, "subclassed.keras"))
results["subclassed"] = keras.ops.convert_to_numpy(model(x, training=False))
name = "loaded_" + keras.backend.backend()
np.savez(os.path.join(directory, name + ".npz"), **results)
with open(os.path.join(directory, name + ".json"), "w") as f:
    json.dump(facts, f)
"""


# JAX's persistent compilation cache, for the fresh JAX processes alone:
# the TensorFlow and torch suites start one each (the JAX suite reloads in
# its own process, with the same cache: conftest.py), and all load the same models
# (same shapes, same ops: the same XLA programs), which JAX compiles op by
# op. Compiling was half of such a process's CPU: 16-18 CPU s cold, 8 with
# the programs cached (issue 17). Under the repository's .pytest_cache
# (git-ignored), so the suites of one `bash .ci/run` share it; keyed by
# JAX on the program, its version and flags, so a stale entry is never
# used. A JAX_COMPILATION_CACHE_DIR already set wins.
JAX_CACHE = {
    "JAX_COMPILATION_CACHE_DIR": os.path.join(
        os.path.dirname(os.path.dirname(HERE)), ".pytest_cache", "keras_gelu-jax-compilation"
    ),
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",  # default 1 s: none here
    "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
}


def subprocess_env(backend):
    root = os.path.dirname(os.path.dirname(os.path.abspath(keras_gelu.__file__)))
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3")
    if backend == "jax" and not env.get("JAX_COMPILATION_CACHE_DIR"):
        env.update(JAX_CACHE)
    env["PYTHONPATH"] = os.pathsep.join(
        [root, HERE] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    )
    return env


def others(own_backend, backends):
    """The backends other than `own_backend`, in the cycle that follows
    it: (jax, torch) for tensorflow, (torch, tensorflow) for jax,
    (tensorflow, jax) for torch. The first loads the files fresh."""
    start = backends.index(own_backend)
    return [backends[(start + i) % len(backends)] for i in range(1, len(backends))]


def load_everywhere(directory, backends, own_backend):
    """Loads FILES (and inputs.npy) from `directory` in one fresh process
    of the backend after `own_backend` (`others(...)[0]`), which imports
    the name table alone, then keras_gelu, then keras.

    Returns {backend: ({file: outputs}, facts)}, or the process's last
    output where it failed.
    """
    backend = others(own_backend, list(backends))[0]
    process = subprocess.Popen(
        [sys.executable, "-c", LOADER, str(directory)],
        env=subprocess_env(backend),
        cwd=str(directory),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output, _ = process.communicate(timeout=600)
    if process.returncode != 0:
        return {backend: output[-3000:]}
    with np.load(os.path.join(directory, f"loaded_{backend}.npz")) as data:
        outputs = {k: data[k] for k in data.files}
    with open(os.path.join(directory, f"loaded_{backend}.json")) as f:
        return {backend: (outputs, json.load(f))}
