"""Classification over scikit-learn's bundled data: moons, circles, digits.

`task(...)` makes a classification task from a loader of `(x, y)`; the
three built-in ones are defined below. Its data, model, training and
served model are this folder's `data`, `models`, `train` and `pyfunc`;
its config keys, memory estimate and smoke sizes, registered model and
report lines, `settings`, `sizes`, `serving` and `report`.
The task's callables import them (Keras, scikit-learn) when called:
registering the tasks happens whenever the service starts, `kg-train
--dry-run` and a config error included, which must not pay Keras'
5 to 12 seconds.

Modules:
    data: the datasets: split once, features kept raw.
    models: the network, and its member-stacked twin.
    pyfunc: the served model ("models from code").
    report: its lines in the sweep report.
    saved_model_code: the served model of a bare SavedModel folder (kg serve DIR).
    serving: what a registered classifier is: pyfunc file, signature, code.
    settings: its own `data:` keys (samples, noise).
    sizes: its memory estimate and smoke sizes.
    train: training the members of one architecture at once.
"""

from kg_service.tasks.base import Metric
from kg_service.tasks.base import Task
from kg_service.tasks.classification import report
from kg_service.tasks.classification import serving
from kg_service.tasks.classification import sizes
from kg_service.tasks.classification.settings import GeneratedData

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
    from kg_service.tasks.classification import models  # Keras: see the module docstring

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
    from kg_service.tasks.classification import train  # Keras: see the module docstring

    return train.train_activation(task, dataset, config, activation, seeds, report)


def _train_members(task, dataset, config, members, report):
    from kg_service.tasks.classification import train  # Keras: see the module docstring

    return train.train_members(task, dataset, config, members, report)


def _member_split(dataset, config, seed):
    from kg_service.tasks.classification import data  # scikit-learn: see the module docstring

    return data.member_split(dataset, config, seed)


def _stack_key(config, activation):
    from kg_service.tasks.classification import train  # Keras: see the module docstring

    return train.stack_key(config, activation)


def task(
    name, load_xy, *, features, feature_names, class_names, fixed_samples=None,
    description=None, figures=CLASSIFICATION_FIGURES, data_settings=GeneratedData,
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
        data_settings: Its own `data:` keys (`Task.data_settings`): a
            generated set's `n_samples` and `noise` unless it says otherwise.

    Returns:
        A `Task` comparing test accuracy and selecting by validation
        accuracy (both higher is better).
    """

    generated = data_settings is not None and issubclass(data_settings, GeneratedData)

    def load(data_cfg):
        from kg_service.tasks.classification import data  # scikit-learn: see the module docstring

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
        # Activations of one architecture (ReLU, GELU, Swish MLPs; the
        # gated units) train as one stacked model, activations x seeds.
        train_members=_train_members,
        stack_key=_stack_key,
        data_settings=data_settings,
        serving=serving.SERVING,
        data_parts=report.generated_parts if generated else report.split_parts,
        unused_keys=report.unused_keys,
        member_split=_member_split,
        parameters=sizes.parameters,
        data_bytes=sizes.bundled_bytes if fixed_samples else sizes.generated_bytes,
        smoke=sizes.smoke if generated else None,
    )


def _moons(cfg):
    from sklearn import datasets  # see the module docstring

    return datasets.make_moons(
        n_samples=cfg.n_samples, noise=cfg.noise, random_state=cfg.seed
    )


def _circles(cfg):
    from sklearn import datasets  # see the module docstring

    # factor: the inner circle's radius; scikit-learn's default 0.8 makes
    # the classes overlap badly at noise 0.2, 0.5 keeps them separable.
    return datasets.make_circles(
        n_samples=cfg.n_samples, noise=cfg.noise, factor=0.5, random_state=cfg.seed
    )


def _digits(cfg):
    from sklearn import datasets  # see the module docstring

    # Bundled with scikit-learn (no download): 1797 8x8 images, 10 classes,
    # pixels 0..16. n_samples and noise do not apply. Not rescaled: a
    # served model takes load_digits().data rows as they are.
    return datasets.load_digits(return_X_y=True)


MOONS = task(
    "moons",
    _moons,
    features="a point's x, y coordinates, as sklearn.datasets.make_moons "
    "returns them",
    feature_names=("x", "y"),
    class_names=("upper moon", "lower moon"),
    description="two interleaved half-moons (sklearn make_moons)",
)
CIRCLES = task(
    "circles",
    _circles,
    features="a point's x, y coordinates, as sklearn.datasets.make_circles "
    "(factor=0.5) returns them",
    feature_names=("x", "y"),
    class_names=("outer circle", "inner circle"),
    description="two concentric circles (sklearn make_circles)",
)
DIGITS = task(
    "digits",
    _digits,
    features="an 8x8 image's 64 pixel intensities 0..16, row by row, as "
    "sklearn.datasets.load_digits returns them",
    feature_names=tuple(f"pixel_{r}_{c}" for r in range(8) for c in range(8)),
    class_names=tuple(f"digit {k}" for k in range(10)),
    fixed_samples=1797,
    description="8x8 handwritten digits (sklearn load_digits, 10 classes)",
    figures=("learning_curves", "per_seed", "activation_curves"),
    data_settings=None,  # n_samples and noise do not apply
)
