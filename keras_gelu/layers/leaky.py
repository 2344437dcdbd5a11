"""Leaky ReLU with a learnable slope."""

import math

import keras
from keras import ops

from keras_gelu.serialization import register


def leaky(inputs, slope):
    """`x if x >= 0 else slope * x`, `slope` a tensor that broadcasts."""
    slope = ops.cast(slope, inputs.dtype)
    return ops.where(inputs >= 0, inputs, inputs * slope)


def _finite_slope(value):
    """`value` as a float, or a ValueError: a NaN or infinite slope makes
    every negative input NaN or infinite from the first step."""
    number = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:  # an int past the float range
            number = math.inf
    if number is None or not math.isfinite(number):
        raise ValueError(
            "keras_gelu: LearnableLeakyReLU expects `initial_slope` to be "
            f"a finite number; received {value!r}."
        )
    return number


@register
class LearnableLeakyReLU(keras.layers.Layer):
    """Leaky ReLU with a learnable negative slope: `x if x >= 0 else a * x`.

    "ReLU's Revival" (Jha & Reagen 2024) starts the slope at 0.01 and
    learns it, globally or per layer.

    Args:
        initial_slope: Float, the slope's initial value (default 0.01);
            a NaN or infinite one raises a `ValueError`.
        per_channel: If True, one slope per channel (last axis). Default
            False: one scalar slope for the layer.
        shared_axes: Alternatively, as in `keras.layers.PReLU`: one slope
            per element of the non-batch shape, shared along these axes
            (ints >= 1). The axes not shared must have known sizes.
        slope_regularizer: Optional regularizer for the slope.
        slope_constraint: Optional constraint, e.g. `"non_neg"`.
        **kwargs: Base layer keyword arguments.

    Works with `None` (unknown) dimensions in scalar and per-channel mode.
    An int or bool input is cast to the layer's compute dtype (the output
    is float), as `keras.layers.LeakyReLU` does.

    Example:

    >>> import keras, keras_gelu
    >>> layer = keras_gelu.LearnableLeakyReLU()
    >>> y = layer(keras.ops.convert_to_tensor([[-1.0, 2.0]]))  # [[-0.01, 2.]]
    """

    def __init__(
        self,
        initial_slope=0.01,
        per_channel=False,
        shared_axes=None,
        slope_regularizer=None,
        slope_constraint=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.initial_slope = _finite_slope(initial_slope)
        self.per_channel = bool(per_channel)
        if shared_axes is not None:
            if per_channel:
                raise ValueError(
                    "keras_gelu: LearnableLeakyReLU takes `per_channel=True` "
                    "or `shared_axes`, not both; received both."
                )
            axes = [shared_axes] if isinstance(shared_axes, int) else shared_axes
            if not isinstance(axes, (list, tuple)) or not all(
                isinstance(a, int) and not isinstance(a, bool) and a >= 1
                for a in axes
            ):
                raise ValueError(
                    "keras_gelu: LearnableLeakyReLU expects `shared_axes` to "
                    "be an int >= 1 or a list of them (axis 0 is the batch); "
                    f"received shared_axes={shared_axes!r}."
                )
            shared_axes = sorted(set(axes))
        self.shared_axes = shared_axes
        self.slope_regularizer = keras.regularizers.get(slope_regularizer)
        self.slope_constraint = keras.constraints.get(slope_constraint)
        self.supports_masking = True

    def slope_shape(self, input_shape):
        if self.shared_axes is not None:
            rank = len(input_shape)
            bad = [a for a in self.shared_axes if a >= rank]
            if bad:
                raise ValueError(
                    f"keras_gelu: LearnableLeakyReLU shared_axes={bad} do not "
                    f"exist for input shape {tuple(input_shape)} (valid axes: "
                    f"1..{rank - 1})."
                )
            shape = [
                1 if axis in self.shared_axes else size
                for axis, size in enumerate(input_shape)
            ][1:]
            if None in shape:
                raise ValueError(
                    f"keras_gelu: LearnableLeakyReLU needs a known size on "
                    f"every axis it does not share; input shape "
                    f"{tuple(input_shape)}, shared_axes={self.shared_axes}. "
                    f"Share the unknown axes, or use per_channel=True."
                )
            return tuple(shape)
        if self.per_channel:
            if input_shape[-1] is None:
                raise ValueError(
                    "keras_gelu: LearnableLeakyReLU(per_channel=True) needs a "
                    f"known last axis; input shape {tuple(input_shape)}."
                )
            return (input_shape[-1],)
        return ()

    def build(self, input_shape):
        self.slope = self.add_weight(
            name="slope",
            shape=self.slope_shape(input_shape),
            initializer=keras.initializers.Constant(self.initial_slope),
            regularizer=self.slope_regularizer,
            constraint=self.slope_constraint,
        )

    def call(self, inputs):
        # Layer.__call__ casts only float inputs to the compute dtype; an
        # int one would cast the slope to int (0.01 -> 0, a silent ReLU).
        # Computed in the compute dtype instead, as keras.layers.LeakyReLU
        # does through ops.leaky_relu (issue 30 §16).
        if not keras.backend.is_float_dtype(inputs.dtype):
            inputs = ops.cast(inputs, self.compute_dtype)
        return leaky(inputs, self.slope)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {
            **super().get_config(),
            "initial_slope": self.initial_slope,
            "per_channel": self.per_channel,
            "shared_axes": self.shared_axes,
            "slope_regularizer": keras.regularizers.serialize(
                self.slope_regularizer
            ),
            "slope_constraint": keras.constraints.serialize(
                self.slope_constraint
            ),
        }
