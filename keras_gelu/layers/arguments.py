"""Checks and copies of layer arguments, shared by keras_gelu's layers.

`keras_gelu.blocks` uses them too: one wording for a bad width, one rule
for giving sub-layers their own initializers.
"""

import keras


def check_units(units, layer, allow_none=False, arg="units"):
    """Returns `units` if it is a positive int (or None, if allowed).

    Raises:
        ValueError: naming `layer`, the argument `arg` and the value.
    """
    if units is None and allow_none:
        return None
    if isinstance(units, bool) or not isinstance(units, int) or units <= 0:
        raise ValueError(
            f"keras_gelu: {layer} expects `{arg}` to be a positive integer"
            f"{' or None' if allow_none else ''}; received {arg}={units!r}."
        )
    return units


def clone_initializer(initializer, seed_offset=0):
    """A fresh initializer with `initializer`'s config, for one sub-layer.

    Sub-layers never share an initializer object. A seeded initializer
    (`GlorotUniform(seed=1)`) gives the same numbers on every call, so
    sub-layer `seed_offset` k gets seed `seed + k`: every projection is
    reproducible and none is a copy of another. Strings and plain
    callables pass through.
    """
    initializer = keras.initializers.get(initializer)
    if not isinstance(initializer, keras.initializers.Initializer):
        return initializer
    config = initializer.get_config()
    seed = config.get("seed")
    if isinstance(seed, int) and not isinstance(seed, bool):
        config["seed"] = seed + seed_offset
    return initializer.__class__.from_config(config)
