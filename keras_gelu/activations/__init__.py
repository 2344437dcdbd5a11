"""Activations by name: the functions, bound to the one table of names.

As in `keras.activations`: the functions live in `activations.py`, and
this module resolves names to them (`get`). The table itself, and the
name clean-up, live in `keras_gelu_names`, which imports nothing,
so kg-train validates configs against it without Keras.

Nothing here imports a layer: the one name whose target is a layer
(`"learnable_leaky_relu"`) is found by its registered name
`keras_gelu>LearnableLeakyReLU`, so `keras_gelu.layers` can use `get`
without a circle.

Modules:
    activations: one public function per activation.
    formulas: the math: each activation as f(x) and f'(x).
    fusion: where one Keras backend needs its own code path.
    torch_kernels: torch's native GELU kernels, made safe at the edges.
"""

import keras

import keras_gelu_names as name_table
from keras_gelu import serialization
from keras_gelu.activations.activations import APPROXIMATIONS
from keras_gelu.activations.activations import bilinear
from keras_gelu.activations.activations import elu
from keras_gelu.activations.activations import gated
from keras_gelu.activations.activations import geglu
from keras_gelu.activations.activations import geglu_tanh
from keras_gelu.activations.activations import gelu
from keras_gelu.activations.activations import gelu_sigmoid
from keras_gelu.activations.activations import gelu_tanh
from keras_gelu.activations.activations import glu
from keras_gelu.activations.activations import leaky_relu
from keras_gelu.activations.activations import linear
from keras_gelu.activations.activations import mish
from keras_gelu.activations.activations import quick_gelu
from keras_gelu.activations.activations import reglu
from keras_gelu.activations.activations import relu
from keras_gelu.activations.activations import sigmoid
from keras_gelu.activations.activations import silu
from keras_gelu.activations.activations import standardize_approximate
from keras_gelu.activations.activations import swiglu
from keras_gelu.activations.activations import swish

_FUNCTIONS = {
    f.__name__: f
    for f in (
        gelu, gelu_tanh, gelu_sigmoid, relu, leaky_relu, silu, mish, elu,
        sigmoid, linear,
    )
}
_GATED_FUNCTIONS = {
    "glu": glu,
    "geglu": geglu,
    "geglu_tanh": geglu_tanh,
    "swiglu": swiglu,
    "reglu": reglu,
    "bilinear": bilinear,
}


def _bind(name, entry_kind, target):
    if entry_kind == "layer":
        return target  # the class name, registered as keras_gelu>target
    return _FUNCTIONS[target]


# Every name a config or a string may use, bound to its function.
#   "elementwise": the function; "gated": the gate function (the split
#   function is `get(name)`); "layer": the keras_gelu layer class name.
ACTIVATIONS = {
    name: (entry_kind, _bind(name, entry_kind, target))
    for name, (entry_kind, target) in name_table.TABLE.items()
}
if set(_GATED_FUNCTIONS) != set(name_table.names("gated")):
    raise ImportError("keras_gelu: every gated name needs its split function")

names = name_table.names
standardize_name = name_table.standardize
kind = name_table.kind


def gated_name(activation):
    """The table name of a gated split function (`geglu` -> "geglu"), else None.

    Lets layers that make their own projection accept `keras_gelu.geglu`
    as well as `"geglu"`.
    """
    for name, function in _GATED_FUNCTIONS.items():
        if activation is function:
            return name
    return None


def gate_function(name):
    """Returns the gate function of a gated name (`"geglu"` -> `gelu`)."""
    key = standardize_name(name)
    entry_kind, target = ACTIVATIONS[key]
    if entry_kind != "gated":
        gated_names = ", ".join(names("gated"))
        raise ValueError(
            f"keras_gelu: {name!r} is not a gated unit. Gated units: "
            f"{gated_names}."
        )
    return target


def _new_layer(name, class_name):
    """A new instance of the keras_gelu layer registered as `class_name`."""
    cls = serialization.registered(class_name)
    if cls is None:
        raise ValueError(
            f"keras_gelu: {name!r} is the layer {class_name}, which is not "
            f"registered yet. Import keras_gelu (its layers register "
            f"themselves) before resolving the name."
        )
    return cls()


def get(identifier):
    """Resolves an activation: a name, a Keras identifier, dict or callable.

    Names come from `ACTIVATIONS` (case-insensitive, `-` or `_`, spaces
    around ignored); other Keras names (`"tanh"`, `"softplus"`...) and
    serialized config dicts go through `keras.activations.get`. A gated
    name returns the split function (`geglu` etc.);
    `"learnable_leaky_relu"` returns a new `LearnableLeakyReLU` layer.

    Args:
        identifier: `None` (linear), a string, a dict or a callable.

    Returns:
        A callable.

    Raises:
        ValueError: for an unknown name, with the valid names and the
            closest match.

    Example:

    >>> import keras_gelu
    >>> keras_gelu.get("gelu_tanh") is keras_gelu.gelu_tanh
    True
    """
    if identifier is None:
        return linear
    if callable(identifier):
        return identifier
    if isinstance(identifier, dict):
        return keras.activations.get(identifier)
    if isinstance(identifier, str):
        key = name_table.lookup(identifier)
        if key is not None:
            entry_kind, target = ACTIVATIONS[key]
            if entry_kind == "gated":
                return _GATED_FUNCTIONS[key]
            if entry_kind == "layer":
                return _new_layer(key, target)
            return target
        try:
            return keras.activations.get(identifier)
        except (ValueError, TypeError):
            standardize_name(identifier)  # raises with the closest name
    raise ValueError(
        f"keras_gelu: cannot interpret {identifier!r} as an activation. "
        f"Expected a name ({', '.join(names())}), a Keras config dict or a "
        f"callable."
    )
