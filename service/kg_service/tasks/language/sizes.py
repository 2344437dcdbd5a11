"""The language model's memory estimate and smoke sizes: what
`kg_service.config.derived` asks a task (`Task.parameters`,
`Task.data_bytes`, `Task.smoke`).

Pure arithmetic on a validated config; imports no Keras.
"""

import dataclasses
import math

from kg_service.config import derived

VOCABULARY = 256  # bytes
# The embedding's bound per d_model: the byte vocabulary, and 64 + 1 to
# spare (the estimate of issue 30 §13, kept when it moved here).
EMBEDDING_BOUND = 64 + VOCABULARY + 1

# A language model's smoke cost is per member: each new model traces its
# training step once, and Keras unrolls `steps_per_epoch` steps into that
# step (steps_per_execution); the test split is evaluated whole (300 kB of
# corpus put ~940 test windows through every member). Measured (issue 17):
# a glu-variants member 5.1 s at 5 steps and 300 kB, 4.5 s at 2 and 60 kB
# (mean of 6, interleaved in one process, load 4.5-4.9).
SMOKE_CORPUS_BYTES = 60_000  # a dozen stdlib files, ~190 test windows
SMOKE_CONTEXT = 32
SMOKE_EVAL_WINDOWS = 8


def parameters(config):
    """About how many weights one member has: the embedding, the
    feedforward blocks (`derived.feedforward_weights`) and each block's
    attention (4 d_model^2)."""
    model = config.model
    d = model.d_model
    factor = derived.gating_factor(config.activations)
    blocks = derived.feedforward_weights(d, model.hidden_units, factor)
    attention = 4 * d * (d + 1) * len(model.hidden_units)
    return EMBEDDING_BOUND * d + blocks + attention


def data_bytes(config, members):
    """One epoch's training windows (int64 offsets, int32 inputs and
    targets), one batch's logits over the vocabulary, and the corpus."""
    data, training = config.data, config.training
    steps = training.steps_per_epoch or max(
        1, data.corpus_bytes // (data.context * training.batch_size)
    )
    windows = steps * training.batch_size * (data.context + 1) * (8 + 4 + 4 + 4)
    logits = training.batch_size * data.context * VOCABULARY * 4 * 3
    return windows + logits + data.corpus_bytes * 8


def smoke(data, model):
    """The corpus, context and evaluation windows at smoke sizes, and a
    head count that divides the (smoke) d_model."""
    data = dataclasses.replace(
        data,
        corpus_bytes=min(data.corpus_bytes, SMOKE_CORPUS_BYTES),
        context=min(data.context, SMOKE_CONTEXT),
        eval_windows=min(data.eval_windows, SMOKE_EVAL_WINDOWS),
    )
    return data, dataclasses.replace(model, heads=math.gcd(model.heads, model.d_model))
