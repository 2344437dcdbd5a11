"""M language models of one architecture as one model with a member axis.

`stack_language_model(model, M)` is `model.py`'s network for M independent
members at once, `int32 (batch, M, t) -> float32 (batch, M, t, vocabulary)`:
every layer replaced by its stacked form, each weight with a leading M
axis, index by index the weights of the plain model (so
`keras_gelu.stacking.stack_weights` / `unstack_weights` copy M plain models
in and out, as for the classification task). The feed-forward blocks,
Dense, Add and Activation take keras_gelu's stacked forms
(`keras_gelu.stacking.stack`); this module adds the four layers a language
model has beyond those: the (reversible) token embedding, the learned
positions, LayerNormalization and causal MultiHeadAttention.

Each stacked layer computes, for member m, the same operations in the same
order as the plain Keras layer (the same `ops.dot_product_attention` call,
the same LayerNorm formula), so a member of the stacked model equals the
plain model up to float rounding of the batched matmuls (test:
`tests/service/tasks/test_language.py`). Members of one step share its
per-step overhead and its single trace; on a CPU that overhead, and each
new model's tracing, is most of a small language model's training time
(issue 20).

Not for serving: the registered model is the plain one. Importing this
module imports Keras.
"""

import keras
from keras import ops

import keras_gelu
from keras_gelu.member_ops import member_matmul
from kg_service.tasks.language import lm_layers


class StackedEmbedding(keras.layers.Layer):
    """M token embeddings `E[m]` `(vocabulary, d)`; `reverse=True` projects
    back, `x[:, m] @ E[m]^T` (the tied output of `ReversibleEmbedding`).

    Input `int (batch, M, t)`; output `(batch, M, t, d)`, or with `reverse`
    `(batch, M, t, d) -> (batch, M, t, vocabulary)`.
    """

    def __init__(self, members, input_dim, output_dim, **kwargs):
        super().__init__(**kwargs)
        self.members, self.input_dim, self.output_dim = members, input_dim, output_dim

    def build(self, input_shape):
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.members, self.input_dim, self.output_dim),
            initializer="zeros",  # placeholders for stack_weights
        )

    def call(self, inputs, reverse=False):
        if reverse:
            kernel = ops.convert_to_tensor(self.embeddings, dtype=inputs.dtype)
            return member_matmul(inputs, ops.transpose(kernel, (0, 2, 1)))
        # Member m's ids index rows m*V.. of the members' tables, end to end:
        # one gather, as Embedding's, for all members.
        offsets = ops.reshape(ops.arange(self.members, dtype="int32") * self.input_dim,
                              (1, self.members, 1))
        table = ops.reshape(self.embeddings, (self.members * self.input_dim, self.output_dim))
        outputs = ops.take(table, ops.cast(inputs, "int32") + offsets, axis=0)
        return ops.cast(outputs, self.compute_dtype)

    def compute_output_shape(self, input_shape, reverse=False):
        if reverse:
            return tuple(input_shape[:-1]) + (self.input_dim,)
        return tuple(input_shape) + (self.output_dim,)

    def compute_output_spec(self, inputs, reverse=False):
        return keras.KerasTensor(
            self.compute_output_shape(inputs.shape, reverse=reverse), dtype=self.compute_dtype
        )


class StackedPositionEmbedding(keras.layers.Layer):
    """M learned position tables: `x[:, m] + P[m, :t]`."""

    def __init__(self, members, sequence_length, **kwargs):
        super().__init__(**kwargs)
        self.members, self.sequence_length = members, sequence_length
        self.supports_masking = True

    def build(self, input_shape):
        self.position_embeddings = self.add_weight(
            name="embeddings",
            shape=(self.members, self.sequence_length, input_shape[-1]),
            initializer="zeros",
        )

    def call(self, inputs):
        # A gather, as PositionEmbedding's (see there).
        positions = ops.take(
            ops.convert_to_tensor(self.position_embeddings, dtype=inputs.dtype),
            ops.arange(ops.shape(inputs)[2]),
            axis=1,
        )
        return inputs + positions[None]

    def compute_output_shape(self, input_shape):
        return input_shape


class StackedLayerNormalization(keras.layers.Layer):
    """M LayerNormalizations over the last axis, with per-member gamma, beta.

    The formula and its order of operations are `ops.layer_normalization`'s
    (Keras 3.15): `x * (rsqrt(var + eps) * gamma) + (beta - mean * ...)`,
    in float32 at least.
    """

    def __init__(self, members, epsilon, center=True, scale=True, **kwargs):
        super().__init__(**kwargs)
        self.members, self.epsilon = members, epsilon
        self.center, self.scale = center, scale
        self.supports_masking = True

    def build(self, input_shape):
        shape = (self.members, input_shape[-1])
        self.gamma = self.add_weight(name="gamma", shape=shape, initializer="ones") if self.scale else None
        self.beta = self.add_weight(name="beta", shape=shape, initializer="zeros") if self.center else None

    def call(self, inputs):
        dtype = keras.backend.result_type(inputs.dtype, "float32")
        x = ops.cast(inputs, dtype)
        middle = (1,) * (len(inputs.shape) - 3)  # (batch, M, ..., d)
        mean, variance = ops.moments(x, axes=[-1], keepdims=True)
        inv = ops.rsqrt(variance + self.epsilon)
        if self.gamma is not None:
            inv = inv * ops.reshape(ops.cast(self.gamma, dtype), (self.members,) + middle + (-1,))
        res = -mean * inv
        if self.beta is not None:
            res = res + ops.reshape(ops.cast(self.beta, dtype), (self.members,) + middle + (-1,))
        return ops.cast(x * inv + res, self.compute_dtype)

    def compute_output_shape(self, input_shape):
        return input_shape


class StackedSelfAttention(keras.layers.Layer):
    """M `MultiHeadAttention` layers in self-attention, `(batch, M, t, d)`.

    Weights as MultiHeadAttention's (query, key, value kernels `(d, H, K)`
    and biases `(H, K)`, output kernel `(H, K, d)` and bias `(d,)`), each
    with a leading M axis. Query, key and value are one fused projection
    per member (the three kernels side by side), and each member's rows
    are batch rows of their own to one attention call, `(batch * M, t, H,
    K)`: rows do not interact, so member m's heads see only member m's
    queries, keys and values, with no transpose. The call is
    MultiHeadAttention's own `ops.dot_product_attention(..., is_causal=True)`
    (without dropout and scores; with either, its explicit softmax path).
    """

    def __init__(self, members, heads, key_dim, value_dim, dropout=0.0, use_bias=True, **kwargs):
        super().__init__(**kwargs)
        self.members, self.heads = members, heads
        self.key_dim, self.value_dim = key_dim, value_dim
        self.dropout, self.use_bias = dropout, use_bias
        self.softmax = keras.layers.Softmax(axis=-1, dtype=self.dtype_policy)
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy)

    def build(self, query_shape, value_shape=None):
        d = query_shape[-1]
        m, h = self.members, self.heads

        def projection(name, width):
            kernel = self.add_weight(name=f"{name}_kernel", shape=(m, d, h, width), initializer="zeros")
            bias = self.add_weight(name=f"{name}_bias", shape=(m, h, width), initializer="zeros") if self.use_bias else None
            return kernel, bias

        self.query_kernel, self.query_bias = projection("query", self.key_dim)
        self.key_kernel, self.key_bias = projection("key", self.key_dim)
        self.value_kernel, self.value_bias = projection("value", self.value_dim)
        self.output_kernel = self.add_weight(
            name="attention_output_kernel", shape=(m, h, self.value_dim, d), initializer="zeros"
        )
        self.output_bias = (
            self.add_weight(name="attention_output_bias", shape=(m, d), initializer="zeros")
            if self.use_bias else None
        )

    def _qkv(self, x):
        # One fused projection for query, key and value: each member's
        # three kernels side by side, (M, d, 3 * H * K), one matmul.
        kernels = [self.query_kernel, self.key_kernel, self.value_kernel]
        widths = [self.heads * self.key_dim] * 2 + [self.heads * self.value_dim]
        d = self.query_kernel.shape[1]
        kernel = ops.concatenate(
            [ops.reshape(k, (self.members, d, w)) for k, w in zip(kernels, widths)], axis=-1
        )
        y = member_matmul(x, ops.cast(kernel, x.dtype))
        if self.use_bias:
            biases = [self.query_bias, self.key_bias, self.value_bias]
            bias = ops.concatenate(
                [ops.reshape(b, (self.members, w)) for b, w in zip(biases, widths)], axis=-1
            )
            y = y + ops.reshape(ops.cast(bias, y.dtype), (self.members, 1, -1))
        q, k, v = ops.split(y, [widths[0], widths[0] + widths[1]], axis=-1)
        # (batch, M, t, H * K) -> (batch * M, t, H, K): a member is a batch
        # row of its own to the attention, no transpose.
        shape = ops.shape(x)
        rows = (shape[0] * self.members, shape[2], self.heads)
        return (ops.reshape(q, rows + (self.key_dim,)), ops.reshape(k, rows + (self.key_dim,)),
                ops.reshape(v, rows + (self.value_dim,)))

    def call(self, query, value=None, use_causal_mask=False, return_attention_scores=False,
             training=None):
        if not use_causal_mask:
            raise ValueError("StackedSelfAttention: only causal self-attention is stacked.")
        q, k, v = self._qkv(query)
        scale = 1.0 / float(self.key_dim) ** 0.5
        scores = None
        if self.dropout > 0 or return_attention_scores:
            scores, out = self._explicit_attention(q, k, v, scale, training)
        else:
            out = ops.dot_product_attention(q, k, v, scale=scale, is_causal=True)
        shape = ops.shape(query)
        out = ops.reshape(out, (shape[0], self.members, shape[2], self.heads * self.value_dim))
        kernel = ops.reshape(self.output_kernel, (self.members, self.heads * self.value_dim, -1))
        out = member_matmul(out, ops.cast(kernel, out.dtype))
        if self.output_bias is not None:
            out = out + ops.reshape(self.output_bias, (self.members, 1, -1))
        if return_attention_scores:
            # (batch * M, H, t, t) -> (batch, M, H, t, t)
            s = ops.shape(scores)
            return out, ops.reshape(scores, (shape[0], self.members, self.heads, s[2], s[3]))
        return out

    def _explicit_attention(self, q, k, v, scale, training):
        # MultiHeadAttention's path with dropout or scores: scaled query,
        # masked softmax, dropout on the probabilities.
        q = ops.multiply(q, ops.cast(scale, q.dtype))
        scores = ops.einsum("bshk,bthk->bhts", k, q)
        t = ops.shape(q)[1]
        ones = ops.ones((1, 1, t, t), dtype="int32")
        causal = ops.greater_equal(ops.cumsum(ones, axis=-2), ops.cumsum(ones, axis=-1))
        probabilities = self.softmax(scores, mask=causal)
        dropped = self.dropout_layer(probabilities, training=training)
        return probabilities, ops.einsum("bhts,bshk->bthk", dropped, v)

    def compute_output_shape(self, query_shape, value_shape=None, **kwargs):
        return query_shape

    def compute_output_spec(self, query, value=None, use_causal_mask=False,
                            return_attention_scores=False, training=None):
        out = keras.KerasTensor(query.shape, dtype=self.compute_dtype)
        if return_attention_scores:
            b, m, t = query.shape[:3]
            return out, keras.KerasTensor((b, m, self.heads, t, t), dtype=self.compute_dtype)
        return out


def _stack_embedding(layer, members):
    return StackedEmbedding(
        members, layer.input_dim, layer.output_dim, name=layer.name, dtype=layer.dtype_policy
    )


def _stack_positions(layer, members):
    return StackedPositionEmbedding(
        members, layer.sequence_length, name=layer.name, dtype=layer.dtype_policy
    )


def _stack_layer_norm(layer, members):
    if layer.rms_scaling or list(layer.axis) not in ([-1], [len(layer.input.shape) - 1]):
        raise ValueError(f"{layer.name}: only a LayerNormalization over the last axis is stacked.")
    return StackedLayerNormalization(
        members, layer.epsilon, center=layer.center, scale=layer.scale,
        name=layer.name, dtype=layer.dtype_policy,
    )


def _stack_attention(layer, members):
    return StackedSelfAttention(
        members, layer.num_heads, layer.key_dim, layer.value_dim,
        dropout=layer.dropout, use_bias=layer.use_bias,
        name=layer.name, dtype=layer.dtype_policy,
    )


# One line per layer class of model.py that keras_gelu.stacking does not
# know; matched along the MRO (ReversibleEmbedding is an Embedding).
_STACKERS = {
    keras.layers.Embedding: _stack_embedding,
    lm_layers.PositionEmbedding: _stack_positions,
    keras.layers.LayerNormalization: _stack_layer_norm,
    keras.layers.MultiHeadAttention: _stack_attention,
}


def stack_layer(layer, members):
    """The stacked form of one layer of the language model; `layer` may be
    a list of M layers, member m's (`keras_gelu.stacking.stack`: members
    whose FFNs differ in their activation)."""
    layers = list(layer) if isinstance(layer, (list, tuple)) else [layer]
    for cls in type(layers[0]).__mro__:
        stacker = _STACKERS.get(cls)
        if stacker is not None:
            if any(type(l) is not type(layers[0]) for l in layers):
                raise ValueError(f"{layers[0].name}: the members' layers are not of one class.")
            return stacker(layers[0], members)
    return keras_gelu.stacking.stack(layer, members)


def stack_language_model(model, members, name=None):
    """`model` (from `model.build_language_model`) for M members at once.

    Args:
        model: The plain language model (built), or a list of M of them,
            member m's, of one architecture that may differ in their FFN
            activation (ReLU, GELU and Swish models; or GLU, ReGLU and
            SwiGLU ones at one width): member m then computes model m.
        members: Positive int M.
        name: Name of the stacked model (default `<name>_x<M>`).

    Returns:
        A `keras.Model`, `int32 (batch, M, t) -> (batch, M, t, vocabulary)`,
        its weights placeholders until `keras_gelu.stacking.stack_weights`.

    Raises:
        ValueError: for models that differ in more than an activation.
    """
    models = list(model) if isinstance(model, (list, tuple)) else [model]
    if len(models) not in (1, members):
        raise ValueError(f"{len(models)} plain models for {members} members.")
    names = [[layer.name for layer in m.layers] for m in models]
    if any(n != names[0] for n in names):
        raise ValueError("the members' models do not have the same layers: not one architecture.")
    by_name = {
        layers[0].name: list(layers) if len(models) > 1 else layers[0]
        for layers in zip(*[m.layers for m in models])
    }
    tokens = keras.Input((members, None), dtype="int32", name=models[0].layers[0].name)
    stacked = keras.models.clone_model(
        models[0], input_tensors=tokens,
        clone_function=lambda layer: stack_layer(by_name[layer.name], members),
    )
    return keras.Model(tokens, stacked.outputs[0], name=name or f"{models[0].name}_x{members}")
