"""Gated linear units as layers: GLU with any gate, and the named ones.

The math lives in `keras_gelu.activations` (`gated`); these layers add the
fused value+gate projection, masking and serialization.
"""

import keras
import numpy as np
from keras import ops

from keras_gelu import activations
import keras_gelu_names as name_table
from keras_gelu.layers.arguments import check_units
from keras_gelu.layers.arguments import clone_initializer
from keras_gelu.serialization import register


@register
class GLU(keras.layers.Layer):
    """Gated linear unit, `(x V + c) * activation(x W + b)`.

    Shazeer 2020 (https://arxiv.org/abs/2002.05202). With `units`, the
    value and gate projections V and W are one fused `Dense(2 * units)`,
    `value_gate_proj`, whose kernel is `[V | W]`: value columns first,
    gate columns second, the order of `keras.ops.glu`,
    `torch.nn.functional.glu` and x-transformers' GEGLU. Without `units`
    the layer splits its input along `axis` instead, exactly like
    `torch.nn.GLU` / `keras.ops.glu` (first half value, second half gate).
    To load separate gate and up (value) matrices, as keras-hub and
    Hugging Face store them, use `set_value_gate_weights`.

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

    Masks: a split along the feature axis (always, with `units`) keeps the
    mask. A split along a masked axis (`GLU(axis=1)` after `Masking`, the
    time axis) pairs step i with step i + n/2, so the output mask is the
    AND of the two halves of the input mask, split the same way.

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
        self.units = check_units(units, type(self).__name__, allow_none=True)
        self.activation = _gate(activation)
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
        self.supports_masking = True
        self.value_gate_proj = None
        if self.units is not None:
            self.value_gate_proj = keras.layers.Dense(
                2 * self.units,
                dtype=self.dtype_policy,
                name="value_gate_proj",
                **{
                    **self.dense_config,
                    "kernel_initializer": clone_initializer(kernel_initializer),
                    "bias_initializer": clone_initializer(bias_initializer),
                },
            )

    def build(self, input_shape):
        if self.value_gate_proj is not None:
            self.value_gate_proj.build(input_shape)
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
        if self.value_gate_proj is not None:
            return activations.gated(
                self.value_gate_proj(inputs), self.activation, axis=-1
            )
        return activations.gated(inputs, self.activation, axis=self.axis)

    def compute_mask(self, inputs, mask=None):
        # The mask covers the leading axes of the input (the feature axis
        # has none). Splitting one of them must split the mask likewise,
        # or the next layer (an LSTM) gets a mask of the old length.
        if mask is None or self.units is not None:
            return mask
        axis = self.axis % len(inputs.shape)
        if axis >= len(mask.shape):
            return mask
        value_mask, gate_mask = ops.split(mask, 2, axis=axis)
        return ops.logical_and(value_mask, gate_mask)

    def set_value_gate_weights(
        self, value_kernel, gate_kernel, value_bias=None, gate_bias=None
    ):
        """Loads separate value ("up") and gate projections into the fused one.

        Kernels are in Keras' `(input_dim, units)` layout (transpose a
        PyTorch `nn.Linear.weight`). For keras-hub's Llama this is
        `value_kernel = feedforward_intermediate_dense.kernel` and
        `gate_kernel = feedforward_gate_dense.kernel`; for Gemma,
        `ffw_gating_2` (value) and `ffw_gating` (gate).

        Args:
            value_kernel, gate_kernel: arrays of shape `(input_dim, units)`.
            value_bias, gate_bias: arrays of shape `(units,)`; required
                (both) when the layer has a bias, refused when it has none.

        Raises:
            ValueError: for a layer without `units`, or shapes or biases
                that do not fit.
        """
        if self.value_gate_proj is None:
            raise ValueError(
                f"keras_gelu: {type(self).__name__}(units=None) has no "
                f"projection to load weights into."
            )
        kernels = [ops.convert_to_numpy(k) for k in (value_kernel, gate_kernel)]
        if not self.value_gate_proj.built:
            self.build((None, kernels[0].shape[0]))
        weights = [np.concatenate(kernels, axis=-1)]
        biases = (value_bias, gate_bias)
        given = [b is not None for b in biases]
        if not (all(given) if self.use_bias else not any(given)):
            raise ValueError(
                f"keras_gelu: {type(self).__name__}(use_bias={self.use_bias}) "
                f"needs {'both biases' if self.use_bias else 'no biases'}; "
                f"received value_bias={'set' if given[0] else None}, "
                f"gate_bias={'set' if given[1] else None}."
            )
        if self.use_bias:
            weights.append(
                np.concatenate([ops.convert_to_numpy(b) for b in biases], axis=-1)
            )
        expected = [tuple(w.shape) for w in self.value_gate_proj.weights]
        if [w.shape for w in weights] != expected:
            raise ValueError(
                f"keras_gelu: {type(self).__name__} expects value and gate "
                f"kernels of shape {(expected[0][0], self.units)}; received "
                f"{kernels[0].shape} and {kernels[1].shape}."
            )
        self.value_gate_proj.set_weights(weights)

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


def _gate(activation):
    """The gate function of a GLU: a gated name means its gate.

    `"geglu"` or `keras_gelu.geglu` give `gelu`, as in FeedForward (the
    split function would halve the gate again); anything else resolves
    through `keras_gelu.get`.
    """
    name = activations.gated_name(activation) or activation
    if isinstance(name, str) and name_table.lookup(name) in name_table.names("gated"):
        return activations.gate_function(name)
    return activations.get(activation)


class _NamedGLU(GLU):
    """A GLU whose gate is fixed by the class (GEGLU, SwiGLU...)."""

    gate = None

    def __init__(self, units=None, **kwargs):
        activation = kwargs.pop("activation", None)
        if activation is not None and _gate(activation) is not _gate(self.gate):
            raise ValueError(
                f"keras_gelu: {type(self).__name__} fixes its gate to "
                f"{self.gate!r}; received activation={activation!r}. Use "
                f"keras_gelu.GLU(units, activation={activation!r}) for "
                f"another gate."
            )
        super().__init__(units, activation=self.gate, **kwargs)

    def get_config(self):
        config = super().get_config()
        config.pop("activation")
        return config


@register
class GEGLU(_NamedGLU):
    """GEGLU, `(x V) * gelu(x W)`: Shazeer 2020's best FFN variant.

    `approximate="tanh"` is Gemma's gate (`"geglu_tanh"` in the table).

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
        self.approximate = activations.standardize_approximate(approximate)
        self.gate = self._MODE_NAMES[self.approximate]
        super().__init__(units, **kwargs)

    def get_config(self):
        return {**super().get_config(), "approximate": self.approximate}


@register
class SwiGLU(_NamedGLU):
    """SwiGLU, `(x V) * silu(x W)` (Llama, PaLM). Args as for `GLU`."""

    gate = "silu"


@register
class ReGLU(_NamedGLU):
    """ReGLU, `(x V) * relu(x W)`. Args as for `GLU`."""

    gate = "relu"


@register
class Bilinear(_NamedGLU):
    """Bilinear unit, `(x W) * (x V)`, no activation. Args as for `GLU`."""

    gate = "linear"
