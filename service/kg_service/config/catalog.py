"""The service's named choices, listed once, importing nothing heavy.

Config validation (no Keras) and the modules that act on a choice read
the same tables: `kg_service.training.optimizers` resolves an optimizer's
Keras class from `OPTIMIZERS`, `kg_service.tasks.classification.models`
builds `BLOCKS`. Tasks put their facts here when they are registered
(`kg_service.tasks.base.register`), so validation knows every task,
a test's toy task too, without importing one. Activation names are
keras_gelu's, from its name table `keras_gelu_names`, which imports
nothing (importing `keras_gelu` imports Keras, 5 to 12 seconds, which
validation and `--dry-run` must not pay).
"""

import dataclasses
from typing import Optional

import keras_gelu_names

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


# --- Tasks: what validation and the plan read about each. --------------------


@dataclasses.dataclass(frozen=True)
class TaskFacts:
    """What the config needs to know about a task, without importing it.

    Attributes:
        name: What `data.dataset` says in a config.
        description: One line for the dry-run plan and the report.
        fixed_samples: The dataset's size when the config cannot set it
            (`n_samples` does not apply), else None.
        sample_splits: Whether `data.n_samples` and the split fractions
            make sample counts that config validation checks (False for
            a corpus, sized by `data.corpus_bytes`).
    """

    name: str
    description: str
    fixed_samples: Optional[int] = None
    sample_splits: bool = True


_TASKS = {}


def add_task(facts):
    """Adds (or replaces) a task's facts; `kg_service.tasks.base.register` calls it."""
    _TASKS[facts.name] = facts


def remove_task(name):
    _TASKS.pop(name, None)


def task_names():
    """The registered task names, in registration order."""
    return tuple(_TASKS)


def task(name):
    """The facts of the task called `name` (a name validation has accepted)."""
    return _TASKS[name]


# --- Activations: keras_gelu's one name table, without Keras. ----------------


def activation_names():
    """Every valid activation name: `keras_gelu.names()`, without Keras."""
    return tuple(keras_gelu_names.names())


def closest(name, valid):
    """Returns ' Did you mean "x"?' for the closest valid name, or ''."""
    return keras_gelu_names.closest(name, valid)
