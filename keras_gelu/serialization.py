"""Registration of keras_gelu's objects for `.keras` files.

Every function and layer is registered as `keras_gelu>Name`, the name
saved files carry; `registered` finds one back by that name.
"""

import keras

PACKAGE = "keras_gelu"

register = keras.saving.register_keras_serializable(package=PACKAGE)


def registered(name):
    """The object registered as `keras_gelu>name`, or None."""
    return keras.saving.get_registered_object(f"{PACKAGE}>{name}")
