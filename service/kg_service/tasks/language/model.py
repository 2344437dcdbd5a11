"""A small decoder-only language model from keras_gelu blocks.

`build_language_model` is GPT-2's layout at any size: byte embedding +
learned positions, then one block per width w in `model.hidden_units`:

    x = x + MultiHeadAttention(LN(x), causal)
    x = x + keras_gelu.FeedForward(w, activation, output_dim=d)(LN(x))

then a final LN and the logits, through the token embedding transposed
(`model.tie_embeddings`) or a Dense head. `model.layer_norm: false` removes
every LayerNorm ("normalization-free", as in the paper). Every Keras piece
is Keras' own (`MultiHeadAttention` with `use_causal_mask`), the FFN is
keras_gelu's, so any activation of `keras_gelu.names()` fits, gated ones
parameter-matched with `model.match_params`.
"""

import keras

import keras_gelu
from kg_service.tasks.language import lm_layers


def build_language_model(model_cfg, activation, corpus, dtype=None, name=None):
    """The causal language model of `model_cfg` with one FFN activation.

    Args:
        model_cfg: A `kg_service.config.schema.ModelConfig`: `hidden_units` (one
            block per FFN width), `d_model`, `heads`, `layer_norm`,
            `tie_embeddings`, `dropout`, `match_params`.
        activation: A name from `keras_gelu.names()`.
        corpus: A `kg_service.tasks.language.corpus.Corpus` (vocabulary size, context).
        dtype: Dtype policy of the layers; `None` for the global one. The
            logits are float32 under a mixed policy.
        name: Model name.

    Returns:
        An uncompiled `keras.Model`, `int32 [batch, t] -> float32 [batch,
        t, vocabulary]` logits, `t <= data.context`.
    """
    d = model_cfg.d_model
    tokens = keras.Input((None,), dtype="int32", name="tokens")
    embedding = lm_layers.ReversibleEmbedding(
        corpus.n_classes,
        d,
        embeddings_initializer=keras.initializers.RandomNormal(stddev=0.02),
        name="token_embedding",
        dtype=dtype,
    )
    x = embedding(tokens)
    x = lm_layers.PositionEmbedding(
        corpus.context, name="position_embedding", dtype=dtype
    )(x)
    for i, width in enumerate(model_cfg.hidden_units):
        h = _norm(x, model_cfg, f"block_{i}_attention_norm", dtype)
        attended = keras.layers.MultiHeadAttention(
            model_cfg.heads,
            key_dim=d // model_cfg.heads,
            dropout=model_cfg.dropout,
            name=f"block_{i}_attention",
            dtype=dtype,
        )(h, h, use_causal_mask=True)
        x = keras.layers.Add(name=f"block_{i}_attention_residual", dtype=dtype)([x, attended])
        h = _norm(x, model_cfg, f"block_{i}_ffn_norm", dtype)
        ffn = keras_gelu.FeedForward(
            width,
            activation=activation,
            output_dim=d,
            dropout=model_cfg.dropout,
            match_params=model_cfg.match_params,
            name=f"block_{i}_ffn",
            dtype=dtype,
        )(h)
        x = keras.layers.Add(name=f"block_{i}_ffn_residual", dtype=dtype)([x, ffn])
    x = _norm(x, model_cfg, "final_norm", dtype)
    if model_cfg.tie_embeddings:
        logits = embedding(x, reverse=True)
    else:
        logits = keras.layers.Dense(corpus.n_classes, name="head", dtype=dtype)(x)
    # float32 logits under mixed precision: the loss and log-softmax need them.
    logits = keras.layers.Activation("linear", name="logits", dtype="float32")(logits)
    return keras.Model(tokens, logits, name=name)


def _norm(x, model_cfg, name, dtype):
    if not model_cfg.layer_norm:
        return x
    return keras.layers.LayerNormalization(epsilon=1e-5, name=name, dtype=dtype)(x)
