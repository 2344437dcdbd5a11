"""A classifier's memory estimate and smoke sizes: what
`kg_service.config.derived` asks a task (`Task.parameters`,
`Task.data_bytes`, `Task.smoke`).

Pure arithmetic on a validated config; imports neither Keras nor
scikit-learn.
"""

import dataclasses

from kg_service.config import derived
from kg_service.config.fields import GENERATED_FEATURES
from kg_service.config.fields import split_sizes

INPUT_BOUND = 64  # features of the widest built-in classifier input (digits' 8x8)
OUTPUT_BOUND = 256  # classes, at most
BUNDLED_BYTES = 256 * 2**20  # a bundled set (digits): small
SMOKE_SAMPLES = 200  # at most this many generated samples at smoke sizes


def parameters(config):
    """About how many weights one member has (an upper bound for the
    built-in sets): a dense block's chain of projections from the widest
    input to the most classes, else the feedforward blocks on a d_model
    stem (`derived.feedforward_weights`)."""
    model = config.model
    factor = derived.gating_factor(config.activations)
    if model.block == "dense":
        chain = (INPUT_BOUND,) + tuple(model.hidden_units)
        hidden = sum((a + 1) * b * factor for a, b in zip(chain, chain[1:]))
        return hidden + (chain[-1] + 1) * OUTPUT_BOUND
    blocks = derived.feedforward_weights(model.d_model, model.hidden_units, factor)
    return (INPUT_BOUND + OUTPUT_BOUND + 1) * model.d_model + blocks


def generated_bytes(config, members):
    """A generated set (float64, with the generator's temporaries), and
    each epoch's evaluation, a forward pass of every member over the whole
    training + validation splits at once (float32, the input and the two
    widest layers)."""
    data, model = config.data, config.model
    widest = sorted(tuple(model.hidden_units) + (model.d_model,))[-2:]
    train, validation, _ = split_sizes(data)
    generated = data.n_samples * GENERATED_FEATURES * 8 * 4
    evaluation = (train + validation) * members * (GENERATED_FEATURES + sum(widest) + 2) * 4
    return generated + evaluation


def bundled_bytes(config, members):
    """A set bundled with scikit-learn: small whatever the config."""
    return BUNDLED_BYTES


def smoke(data, model):
    """`data.n_samples` at most `SMOKE_SAMPLES`; the model as it is."""
    return dataclasses.replace(data, n_samples=min(data.n_samples, SMOKE_SAMPLES)), model
