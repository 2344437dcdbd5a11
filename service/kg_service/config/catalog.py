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
from typing import Callable
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
    """What the config needs to know about a task, without importing it
    (a `kg_service.tasks.base.Task` is one, with the rest it knows).

    Attributes:
        name: What `data.dataset` says in a config.
        description: One line for the dry-run plan and the report.
        fixed_samples: The dataset's size when the config cannot set it
            (`n_samples` does not apply), else None.
        sample_splits: Whether `data.n_samples` and the split fractions
            make sample counts that config validation checks (False for
            a corpus, sized by its own keys).
        data_settings: A dataclass of the task's own `data:` keys (or None);
            `kg_service.config.schema` adds them to `data:`.
        model_settings: The same for `model:`.
        check_model: `ModelConfig -> None`, refusing through
            `kg_service.config.fields.fail` a model the task cannot build.
        parameters: `Config -> int`, about how many weights one member has.
        data_bytes: `(Config, members trained at once) -> int`, about how
            many bytes its data and evaluation take.
        smoke: `(DataConfig, ModelConfig) -> (DataConfig, ModelConfig)`,
            its own keys at smoke sizes.
        metrics: `ModelConfig -> (name, ...)`, the final per-member
            metrics it logs beyond every task's (`config.claims.COMMON_METRICS`),
            which a claim may name.
    """

    name: str
    description: str
    fixed_samples: Optional[int] = None
    sample_splits: bool = True
    data_settings: Optional[type] = None
    model_settings: Optional[type] = None
    check_model: Optional[Callable] = None
    parameters: Optional[Callable] = None
    data_bytes: Optional[Callable] = None
    smoke: Optional[Callable] = None
    metrics: Optional[Callable] = None


_TASKS = {}


def add_task(facts):
    """Adds (or replaces) a task's facts; `kg_service.tasks.base.register` calls it.

    Raises:
        ValueError: a setting the task declares that another task declares
            differently (one key, one meaning, whichever task a config names).
    """
    for section in SECTIONS:
        mine = getattr(facts, f"{section}_settings")
        for other in _TASKS.values():
            theirs = getattr(other, f"{section}_settings")
            if other.name != facts.name and mine is not None and theirs is not None:
                _same_keys_alike(section, (facts.name, mine), (other.name, theirs))
    _TASKS[facts.name] = facts


def remove_task(name):
    _TASKS.pop(name, None)


def task_names():
    """The registered task names, in registration order."""
    return tuple(_TASKS)


def task(name):
    """The facts of the task called `name` (a name validation has accepted)."""
    return _TASKS[name]


def tasks():
    """Every registered task's facts, in registration order."""
    return tuple(_TASKS.values())


# The config sections a task may add keys to: `data:` and `model:`.
SECTIONS = ("data", "model")


def settings(section):
    """The settings registered tasks add to `section` ("data" or "model"):
    `(dataclasses.Field, ...)`, each key once, in registration order.

    A config of any task accepts every task's keys (a config.json stored
    before a task's section moved keeps loading); each key is checked as
    the task that declares it says.
    """
    out = {}
    for facts in _TASKS.values():
        declared = getattr(facts, f"{section}_settings")
        for field in dataclasses.fields(declared) if declared is not None else ():
            out.setdefault(field.name, field)
    return tuple(out.values())


def _same_keys_alike(section, mine, theirs):
    (name, declared), (other, known) = mine, theirs
    known = {f.name: f for f in dataclasses.fields(known)}
    for field in dataclasses.fields(declared):
        same = known.get(field.name)
        if same is not None and (same.type, same.default) != (field.type, field.default):
            raise ValueError(
                f"task {name!r} declares {section}.{field.name}, which task {other!r} "
                "declares differently; name it apart, or share the declaration."
            )


# --- Activations: keras_gelu's one name table, without Keras. ----------------


def activation_names():
    """Every valid activation name: `keras_gelu.names()`, without Keras."""
    return tuple(keras_gelu_names.names())


def closest(name, valid):
    """Returns ' Did you mean "x"?' for the closest valid name, or ''."""
    return keras_gelu_names.closest(name, valid)
