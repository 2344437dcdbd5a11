"""Tasks: what a sweep trains and how it is judged, one entry each.

A task is one named entry that knows how to load its data (offline), how
to build its model for an activation, how to train the members of one
activation, which final metric the statistics compare and which one picks
the champion (and in which direction), its report figures, and what its
served model takes and returns. `moons`, `circles` and `digits` are
classification tasks over scikit-learn's bundled data; `python_code` is a
byte-level language model of the Python standard library's source (see
`kg_service.tasks.language.train`). A config names one with `data.dataset`.

Adding a dataset or a task is one `register(...)` call, here or in the
caller's own code (a test defines a toy task and runs a sweep of it):

>>> from kg_service.tasks import base as tasks
>>> sorted(tasks.names())
['circles', 'digits', 'moons', 'python_code']

Importing this module imports neither Keras nor scikit-learn: config
validation reads the task names and sizes from it. Each task's callables
import what they need when called.
"""

import dataclasses
from typing import Callable
from typing import Optional

from kg_service.errors import ServiceError


@dataclasses.dataclass(frozen=True)
class Metric:
    """A final per-member metric and the direction that is better.

    `name` is a key of `MemberResult.final` (e.g. `"test_accuracy"`).
    """

    name: str
    higher_is_better: bool
    label: str


@dataclasses.dataclass(frozen=True)
class Task:
    """One kind of problem a sweep can train.

    Attributes:
        name: What `data.dataset` says in a config.
        description: One line for the dry-run plan and the report.
        load: `DataConfig -> Dataset`, offline and deterministic.
        build_model: `(ModelConfig, activation, Dataset, dtype=None,
            name=None) -> keras.Model`, the plain model users get.
        train: `(task, Dataset, Config, activation, seeds, report) ->
            [MemberResult]`, every seed of one activation.
        compared: The final metric the statistics compare across
            activations (paired over seeds).
        selects: The final metric that picks each activation's champion.
        figures: Names of the report's figures this task draws (see
            `kg_service.analysis.figures.FIGURES`).
        fixed_samples: The dataset's size when the config cannot set it
            (`n_samples` does not apply), else None.
        sample_splits: Whether `data.n_samples` and the split fractions
            make sample counts that config validation checks (False for
            a corpus, sized by `data.corpus_bytes`).
        serving: How the registered model is served: "classifier"
            (features in, class probabilities out) or "language_model"
            (a prompt string in, a continuation out); see
            `kg_service.tracking.mlflow_store.SERVING`.
    """

    name: str
    description: str
    load: Callable
    build_model: Callable
    train: Callable
    compared: Metric
    selects: Metric
    figures: tuple
    fixed_samples: Optional[int] = None
    sample_splits: bool = True
    serving: str = "classifier"


_TASKS = {}


def register(task):
    """Adds `task` to the table (replacing one of the same name); returns it."""
    _TASKS[task.name] = task
    return task


def unregister(name):
    """Removes a task added with `register` (tests that define their own)."""
    _TASKS.pop(name, None)


def names():
    """The registered task names, in registration order."""
    return tuple(_TASKS)


def get(name):
    """The task called `name`.

    Raises:
        ServiceError: for an unknown name, listing the valid ones.
    """
    task = _TASKS.get(name)
    if task is None:
        raise ServiceError(
            f"data.dataset: unknown dataset {name!r}; expected one of "
            f"{', '.join(names())}."
        )
    return task


def load_dataset(data_cfg):
    """`get(data_cfg.dataset).load(data_cfg)`: the configured dataset."""
    return get(data_cfg.dataset).load(data_cfg)


# --- Classification over scikit-learn's bundled data. ----------------------

ACCURACY = Metric("test_accuracy", higher_is_better=True, label="test accuracy")
VAL_ACCURACY = Metric(
    "val_accuracy", higher_is_better=True, label="final validation accuracy"
)
CLASSIFICATION_FIGURES = (
    "learning_curves",
    "per_seed",
    "decision_boundaries",
    "activation_curves",
)


def _build_classifier(model_cfg, activation, dataset, dtype=None, name=None):
    from kg_service.tasks.classification import models

    return models.build_model(
        model_cfg,
        activation,
        dataset.input_dim,
        dataset.n_classes,
        dtype=dtype,
        name=name,
        normalization=dataset.normalization,
    )


def _train_classifier(task, dataset, config, activation, seeds, report):
    from kg_service.tasks.classification import train

    return train.train_activation(task, dataset, config, activation, seeds, report)


def classification(
    name, load_xy, *, features, feature_names, class_names, fixed_samples=None,
    description=None, figures=CLASSIFICATION_FIGURES,
):
    """A classification task: features `[N, F]` -> class probabilities.

    Args:
        name: The task name (`data.dataset`).
        load_xy: `DataConfig -> (x, y)`, x exactly as a client will send it
            (the model standardizes it itself).
        features: What one row holds, in the loader's units.
        feature_names: One name per column.
        class_names: Label k's name at index k.
        fixed_samples: The dataset's size if `n_samples` does not apply.
        description: One line for the plan; default from the name.
        figures: The report's figures (decision boundaries need 2 features).

    Returns:
        A `Task` comparing test accuracy and selecting by validation
        accuracy (both higher is better).
    """

    def load(data_cfg):
        from kg_service.tasks.classification import data

        x, y = load_xy(data_cfg)
        return data.split(
            name,
            x,
            y,
            data_cfg,
            features=features,
            feature_names=tuple(feature_names),
            class_names=tuple(class_names),
        )

    return Task(
        name=name,
        description=description or f"{name} classification",
        load=load,
        build_model=_build_classifier,
        train=_train_classifier,
        compared=ACCURACY,
        selects=VAL_ACCURACY,
        figures=tuple(figures),
        fixed_samples=fixed_samples,
    )


def _moons(cfg):
    from sklearn import datasets

    return datasets.make_moons(
        n_samples=cfg.n_samples, noise=cfg.noise, random_state=cfg.seed
    )


def _circles(cfg):
    from sklearn import datasets

    # factor: the inner circle's radius; scikit-learn's default 0.8 makes
    # the classes overlap badly at noise 0.2, 0.5 keeps them separable.
    return datasets.make_circles(
        n_samples=cfg.n_samples, noise=cfg.noise, factor=0.5, random_state=cfg.seed
    )


def _digits(cfg):
    from sklearn import datasets

    # Bundled with scikit-learn (no download): 1797 8x8 images, 10 classes,
    # pixels 0..16. n_samples and noise do not apply. Not rescaled: a
    # served model takes load_digits().data rows as they are.
    return datasets.load_digits(return_X_y=True)


register(
    classification(
        "moons",
        _moons,
        features="a point's x, y coordinates, as sklearn.datasets.make_moons "
        "returns them",
        feature_names=("x", "y"),
        class_names=("upper moon", "lower moon"),
        description="two interleaved half-moons (sklearn make_moons)",
    )
)
register(
    classification(
        "circles",
        _circles,
        features="a point's x, y coordinates, as sklearn.datasets.make_circles "
        "(factor=0.5) returns them",
        feature_names=("x", "y"),
        class_names=("outer circle", "inner circle"),
        description="two concentric circles (sklearn make_circles)",
    )
)
register(
    classification(
        "digits",
        _digits,
        features="an 8x8 image's 64 pixel intensities 0..16, row by row, as "
        "sklearn.datasets.load_digits returns them",
        feature_names=tuple(f"pixel_{r}_{c}" for r in range(8) for c in range(8)),
        class_names=tuple(f"digit {k}" for k in range(10)),
        fixed_samples=1797,
        description="8x8 handwritten digits (sklearn load_digits, 10 classes)",
        figures=("learning_curves", "per_seed", "activation_curves"),
    )
)


# --- A language model of Python source. -------------------------------------

TEST_LOG_PERPLEXITY = Metric(
    "test_loss", higher_is_better=False, label="test log-perplexity (nats per byte)"
)
VAL_LOSS = Metric("val_loss", higher_is_better=False, label="final validation loss")


def _load_corpus(data_cfg):
    from kg_service.tasks.language import corpus

    return corpus.load("python_code", data_cfg)


def _build_language_model(model_cfg, activation, dataset, dtype=None, name=None):
    from kg_service.tasks.language import train as language

    return language.build_language_model(
        model_cfg, activation, dataset, dtype=dtype, name=name
    )


def _train_language_model(task, dataset, config, activation, seeds, report):
    from kg_service.tasks.language import train as language

    return language.train_language_model(task, dataset, config, activation, seeds, report)


register(
    Task(
        name="python_code",
        description="byte-level causal language model of the Python standard "
        "library's source (offline; ReLU's Revival trains on Python code)",
        load=_load_corpus,
        build_model=_build_language_model,
        train=_train_language_model,
        compared=TEST_LOG_PERPLEXITY,
        selects=VAL_LOSS,
        figures=("learning_curves", "per_seed", "attention_entropy", "leaky_slopes"),
        sample_splits=False,
        serving="language_model",
    )
)
