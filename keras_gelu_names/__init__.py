"""The one table of activation names, and the one place names are cleaned.

Pure Python, importing nothing: `keras_gelu.activations` binds each name
to its function. A package of its own, beside `keras_gelu` and shipped in
the same distribution, so that kg-train's config validation imports it,
as any module is imported, without Keras: importing anything under
`keras_gelu` runs `keras_gelu/__init__.py`, which imports Keras (5 to 12
seconds) to register every object a saved model may name, and must. So
this package must keep importing nothing but the standard library.

Kinds:
    "elementwise": f(x), same shape out; the target is the function name.
    "gated": halves the split axis, `value * gate(gate_half)`; the target
        is the gate's function name.
    "layer": has weights; the target is the keras_gelu layer class name.
"""

import difflib

KINDS = ("elementwise", "gated", "layer")

# name -> (kind, target). Adding a variant is one line here (and, for a
# new function, its definition in activations/activations.py).
TABLE = {
    "gelu": ("elementwise", "gelu"),
    "gelu_tanh": ("elementwise", "gelu_tanh"),
    "gelu_sigmoid": ("elementwise", "gelu_sigmoid"),
    "quick_gelu": ("elementwise", "gelu_sigmoid"),
    "relu": ("elementwise", "relu"),
    "leaky_relu": ("elementwise", "leaky_relu"),
    "silu": ("elementwise", "silu"),
    "swish": ("elementwise", "silu"),
    "mish": ("elementwise", "mish"),
    "elu": ("elementwise", "elu"),
    "sigmoid": ("elementwise", "sigmoid"),
    "linear": ("elementwise", "linear"),
    "glu": ("gated", "sigmoid"),
    "geglu": ("gated", "gelu"),
    # Gemma's FFN gate (keras-hub's GemmaDecoderBlock: tanh-approximate GELU).
    "geglu_tanh": ("gated", "gelu_tanh"),
    "swiglu": ("gated", "silu"),
    "reglu": ("gated", "relu"),
    "bilinear": ("gated", "linear"),
    "learnable_leaky_relu": ("layer", "LearnableLeakyReLU"),
}


def clean(name):
    """`" GeGLU"`, `"learnable-leaky-relu"` -> `"geglu"`, `"learnable_leaky_relu"`.

    Case, surrounding whitespace and `-` versus `_` do not matter. This is
    the only place a name is cleaned; everything else compares cleaned
    names.
    """
    return str(name).strip().lower().replace("-", "_")


def closest(name, valid):
    """Returns ' Did you mean "x"?' for the closest valid name, or ''.

    A case difference or swapped letters win first ("gleu" -> "gelu",
    where difflib alone says "glu").
    """
    name, valid = str(name), [str(v) for v in valid]
    same = [v for v in valid if v.lower() == name.lower()]
    swapped = [v for v in valid if len(v) == len(name) and sorted(v) == sorted(name)]
    match = same or swapped or difflib.get_close_matches(name, valid, n=1, cutoff=0.5)
    return f' Did you mean "{match[0]}"?' if match else ""


def names(kind=None):
    """The sorted table names, optionally of one kind."""
    return sorted(n for n, (k, _) in TABLE.items() if kind in (None, k))


def lookup(name):
    """The cleaned table key of `name`, or None if it is not in the table."""
    key = clean(name)
    return key if key in TABLE else None


def standardize(name):
    """The cleaned table key of `name`; a ValueError naming the valid
    names and the closest one otherwise."""
    key = lookup(name)
    if key is None:
        raise ValueError(
            f"keras_gelu: unknown activation {name!r}. Valid names: "
            f"{', '.join(names())}.{closest(clean(name), TABLE)}"
        )
    return key


def kind(name):
    """`"elementwise"`, `"gated"` or `"layer"` for a name in the table."""
    return TABLE[standardize(name)][0]

