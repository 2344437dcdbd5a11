"""Layers that wrap the functions in `keras_gelu.activations`.

The math lives in `activations.py`; these layers add weights, masking and
serialization, never a second copy of a formula.
"""

import keras
from keras import ops

from keras_gelu import activations
from keras_gelu.activations import register
from keras_gelu.activations import standardize_approximate


def _check_units(units, layer, allow_none=False, arg="units"):
    if units is None and allow_none:
        return None
    if isinstance(units, bool) or not isinstance(units, int) or units <= 0:
        raise ValueError(
            f"keras_gelu: {layer} expects `{arg}` to be a positive integer"
            f"{' or None' if allow_none else ''}; received {arg}={units!r}."
        )
    return units


@register
class GELU(keras.layers.Layer):
    """GELU activation layer, `x * Phi(x)` in the chosen mode.

    Args:
        approximate: `"none"` (exact erf), `"tanh"` or `"sigmoid"`.
            Unknown modes raise a `ValueError` naming the valid ones.
        **kwargs: Base layer keyword arguments (`name`, `dtype`...).

    Example:

    >>> import keras, keras_gelu
    >>> layer = keras_gelu.GELU(approximate="tanh")
    >>> y = layer(keras.ops.ones((2, 3)))
    """

    def __init__(self, approximate="none", **kwargs):
        super().__init__(**kwargs)
        self.approximate = standardize_approximate(approximate)
        self.supports_masking = True
        self.built = True

    def call(self, inputs):
        return activations.gelu(inputs, approximate=self.approximate)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "approximate": self.approximate}


@register
class GLU(keras.layers.Layer):
    """Gated linear unit, `activation(x W + b) * (x V + c)` (Shazeer 2020).

    With `units`, the gate and value projections W and V are one fused
    `Dense(2 * units)` whose output is split in two; without `units` the
    layer splits its input along `axis` instead (like `torch.nn.GLU`).

    Args:
        units: Positive int (output width), or `None` to split the input.
        activation: Gate activation: any name or callable that
            `keras_gelu.get` resolves. `"sigmoid"` gives the plain GLU.
        use_bias: Whether the projection has a bias (Shazeer used none).
        axis: Axis to split when `units` is None.
        kernel_initializer, bias_initializer, kernel_regularizer,
        bias_regularizer, kernel_constraint, bias_constraint: as in
            `keras.layers.Dense`, for the fused projection.
        **kwargs: Base layer keyword arguments.

    Raises:
        ValueError: for non-positive `units`, an unknown activation, or
            (without `units`) an odd size along `axis`.

    Example:

    >>> import keras, keras_gelu
    >>> layer = keras_gelu.GLU(8, activation="gelu")  # = GEGLU(8)
    >>> layer(keras.ops.ones((2, 4))).shape
    (2, 8)
    """

    def __init__(
        self,
        units=None,
        activation="sigmoid",
        use_bias=True,
        axis=-1,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        kernel_constraint=None,
        bias_constraint=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.units = _check_units(units, type(self).__name__, allow_none=True)
        activation = activations.gated_name(activation) or activation
        if isinstance(activation, str):
            key = activation.strip().lower().replace("-", "_")
            if key in activations.names("gated"):
                # A gated name ("geglu") means its gate (gelu), as in
                # FeedForward; its split function would halve the gate again.
                activation = activations.gate_function(key)
        self.activation = activations.get(activation)
        self.use_bias = use_bias
        self.axis = axis
        self.dense_config = dict(
            use_bias=use_bias,
            kernel_initializer=kernel_initializer,
            bias_initializer=bias_initializer,
            kernel_regularizer=kernel_regularizer,
            bias_regularizer=bias_regularizer,
            kernel_constraint=kernel_constraint,
            bias_constraint=bias_constraint,
        )
        self.gate_value_proj = None
        if self.units is not None:
            self.gate_value_proj = keras.layers.Dense(
                2 * self.units,
                dtype=self.dtype_policy,
                name="gate_value_proj",
                **self.dense_config,
            )

    def build(self, input_shape):
        if self.gate_value_proj is not None:
            self.gate_value_proj.build(input_shape)
        else:
            size = input_shape[self.axis]
            if size is not None and size % 2:
                raise ValueError(
                    f"keras_gelu: {type(self).__name__}(units=None) splits "
                    f"its input in two halves along axis {self.axis}, but "
                    f"the input shape {tuple(input_shape)} has an odd size "
                    f"{size} there. Pass `units` to project first, or give "
                    f"an even size."
                )

    def call(self, inputs):
        if self.gate_value_proj is not None:
            return activations.gated(
                self.gate_value_proj(inputs), self.activation, axis=-1
            )
        return activations.gated(inputs, self.activation, axis=self.axis)

    def compute_output_shape(self, input_shape):
        shape = list(input_shape)
        if self.units is not None:
            shape[-1] = self.units
        elif shape[self.axis] is not None:
            shape[self.axis] //= 2
        return tuple(shape)

    def get_config(self):
        config = {
            **super().get_config(),
            "units": self.units,
            "activation": keras.activations.serialize(self.activation),
            "axis": self.axis,
        }
        for key, value in self.dense_config.items():
            if key == "use_bias":
                config[key] = value
            else:
                config[key] = keras.saving.serialize_keras_object(value)
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if "activation" in config:
            config["activation"] = keras.activations.deserialize(
                config["activation"]
            )
        return cls(**config)


class _NamedGLU(GLU):
    """A GLU whose gate is fixed by the class (GEGLU, SwiGLU...)."""

    gate = None

    def __init__(self, units=None, **kwargs):
        kwargs.pop("activation", None)
        super().__init__(units, activation=self.gate, **kwargs)

    def get_config(self):
        config = super().get_config()
        config.pop("activation")
        return config


@register
class GEGLU(_NamedGLU):
    """GEGLU, `gelu(x W) * (x V)`: Shazeer 2020's best FFN variant.

    Args:
        units: Positive int, or `None` to split the input.
        approximate: GELU mode of the gate: `"none"`, `"tanh"`, `"sigmoid"`.
        **kwargs: As for `GLU`.

    Example:

    >>> import keras, keras_gelu
    >>> keras_gelu.GEGLU(8)(keras.ops.ones((2, 4))).shape
    (2, 8)
    """

    _MODE_NAMES = {"none": "gelu", "tanh": "gelu_tanh", "sigmoid": "gelu_sigmoid"}

    def __init__(self, units=None, approximate="none", **kwargs):
        self.approximate = standardize_approximate(approximate)
        self.gate = self._MODE_NAMES[self.approximate]
        super().__init__(units, **kwargs)

    def get_config(self):
        return {**super().get_config(), "approximate": self.approximate}


@register
class SwiGLU(_NamedGLU):
    """SwiGLU, `silu(x W) * (x V)` (Llama, PaLM). Args as for `GLU`."""

    gate = "silu"


@register
class ReGLU(_NamedGLU):
    """ReGLU, `relu(x W) * (x V)`. Args as for `GLU`."""

    gate = "relu"


@register
class Bilinear(_NamedGLU):
    """Bilinear unit, `(x W) * (x V)`, no activation. Args as for `GLU`."""

    gate = "linear"


@register
class LearnableLeakyReLU(keras.layers.Layer):
    """Leaky ReLU with a learnable negative slope: `x if x >= 0 else a * x`.

    "ReLU's Revival" (Jha & Reagen 2024) starts the slope at 0.01 and
    learns it, globally or per layer.

    Args:
        initial_slope: Float, the slope's initial value (default 0.01).
        per_channel: If True, one slope per channel (last axis). Default
            False: one scalar slope for the layer.
        shared_axes: Alternatively, as in `keras.layers.PReLU`: one slope
            per element of the non-batch shape, shared along these axes
            (ints >= 1). The axes not shared must have known sizes.
        slope_regularizer: Optional regularizer for the slope.
        slope_constraint: Optional constraint, e.g. `"non_neg"`.
        **kwargs: Base layer keyword arguments.

    Works with `None` (unknown) dimensions in scalar and per-channel mode.

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
        if isinstance(initial_slope, bool) or not isinstance(
            initial_slope, (int, float)
        ):
            raise ValueError(
                "keras_gelu: LearnableLeakyReLU expects `initial_slope` to be "
                f"a number; received {initial_slope!r}."
            )
        self.initial_slope = float(initial_slope)
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

    def _slope_shape(self, input_shape):
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
            shape=self._slope_shape(input_shape),
            initializer=keras.initializers.Constant(self.initial_slope),
            regularizer=self.slope_regularizer,
            constraint=self.slope_constraint,
        )

    def call(self, inputs):
        slope = ops.cast(self.slope, inputs.dtype)
        return ops.where(inputs >= 0, inputs, inputs * slope)

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
