"""keras_gelu: GELU in every mode, gated units and FFN blocks for Keras 3.

The public names (`keras_gelu.gelu`, `keras_gelu.GEGLU`, `keras_gelu.get`,
...) live in `keras_gelu.api`; this file hands them on lazily (PEP 562),
so that `keras_gelu.name_table`, the one table of activation names,
imports without Keras: kg-train validates a config against it without
paying for Keras and TensorFlow (5 to 12 s).

The first public name used loads `keras_gelu.api`, which imports Keras and
registers every object a `.keras` file may name. Where Keras is imported
already that costs nothing, so it happens at once: `import keras,
keras_gelu` registers them, as it always has, for code that imports
keras_gelu only to load a saved model.
"""

import importlib
import importlib.util
import sys

__version__ = "0.1.0"


def _load_api():
    api = importlib.import_module("keras_gelu.api")
    globals().update(
        (name, value) for name, value in vars(api).items() if not name.startswith("_")
    )
    return api


def __getattr__(name):
    if name.startswith("_"):  # dunder probes (tools, pickle) stay Keras-free
        raise AttributeError(f"module 'keras_gelu' has no attribute {name!r}")
    if importlib.util.find_spec(f"{__name__}.{name}") is not None:
        # A submodule (`from keras_gelu import name_table`): just that one,
        # as without this hook. Loading the api here would import the
        # modules that are importing it.
        return importlib.import_module(f"{__name__}.{name}")
    try:
        return getattr(_load_api(), name)
    except AttributeError:
        raise AttributeError(
            f"module 'keras_gelu' has no attribute {name!r}"
        ) from None


def __dir__():
    return sorted(set(globals()) | set(dir(_load_api())))


if "keras" in sys.modules:
    _load_api()
