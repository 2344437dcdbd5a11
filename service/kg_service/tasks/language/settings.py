"""The language model's own config keys: its corpus under `data:`, its
transformer under `model:`, and the check that spans them.

A task declares its keys as dataclasses (`Task.data_settings`,
`Task.model_settings`); the config schema adds them to its sections
(`kg_service.config.schema`), typed and bounded by
`kg_service.config.fields` as every key is.
"""

import dataclasses

from kg_service.config import fields


@dataclasses.dataclass(frozen=True)
class CorpusData:
    """`data:` keys of the corpus: bytes of stdlib source read (sorted
    files), the window length in bytes (the model's context), and the
    validation windows evaluated after each epoch (the test split is
    evaluated whole)."""

    corpus_bytes: fields.integer(ge=1000) = 2_000_000
    context: fields.integer(ge=2, most=fields.MAX_CONTEXT) = 128
    eval_windows: fields.integer(ge=1, most=fields.MAX_BATCH) = 64


@dataclasses.dataclass(frozen=True)
class TransformerModel:
    """`model:` keys of the decoder-only transformer (one block per width
    in hidden_units, each FFN keras_gelu.FeedForward(width,
    output_dim=d_model))."""

    heads: fields.integer(ge=1) = 4  # attention heads; d_model must divide by it
    layer_norm: fields.Bool = True  # false: every LayerNorm removed (normalization-free)
    tie_embeddings: fields.Bool = True  # logits through the token embedding, transposed


def heads_divide(model):
    """`Task.check_model`: each head gets d_model / heads dimensions."""
    if model.d_model % model.heads:
        fields.fail(at=("heads",), message=(
            f"{model.heads} heads do not divide model.d_model {model.d_model}; "
            "expected a head count that divides it (each head gets d_model / "
            "heads dimensions)."
        ))


def logged_metrics(model):
    """`Task.metrics`: the final metrics a member logs beyond every task's
    (train.py's `record` and `language_metrics`), which a claim may name."""
    blocks = range(len(model.hidden_units))
    return (("test_perplexity", "test_bits_per_byte", "val_perplexity", "val_bits_per_byte")
            + tuple(f"entropy_norm.block{i}" for i in blocks)
            + tuple(f"entropy_norm_quarter{k}" for k in range(1, 5))
            + tuple(f"leaky_slope.block{i}" for i in blocks))
