"""The service's named choices, listed once, importing nothing heavy.

Config validation (no Keras) and the modules that act on a choice read
the same table: `train.make_optimizer` resolves an optimizer's Keras
class from it, `models.BLOCKS` is built from its block names. Datasets
and tasks have their own table (`kg_service.tasks.base`); activations are
keras_gelu's (`keras_gelu/_names.py`).
"""

# name -> keras.optimizers class name. All four update each weight from
# its own gradient only, so member-stacked training stays exact.
OPTIMIZERS = {
    "adam": "Adam",
    "adamw": "AdamW",
    "sgd": "SGD",
    "rmsprop": "RMSprop",
}

# name -> what the hidden layers are (kg_service.tasks.classification.models writes each).
BLOCKS = {
    "dense": "one activated projection (keras_gelu.projection_layers) per width",
    "feedforward": "Dense(d_model) stem, then a residual keras_gelu.FeedForward "
    "per width",
}
