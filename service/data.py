"""Datasets: scikit-learn toy problems, split once, features kept raw.

The arrays hold the features exactly as scikit-learn's loader returns
them, because that is what a served model is sent. Standardizing them is
the model's job (`service.models.build_model(..., normalization=...)`);
this module only measures the training split's mean and variance.

Pure: the same `DataConfig` always gives the same arrays. Nothing here
downloads anything or talks to MLflow.
"""

import dataclasses
from typing import Callable

import numpy as np
from sklearn import datasets as sk_datasets
from sklearn.model_selection import train_test_split

from service.errors import ServiceError


@dataclasses.dataclass(frozen=True)
class FeatureStats:
    """Per-feature mean and variance of the training split, float64 `[F]`.

    A feature that is constant in the training split (e.g. the
    always-blank corner pixels of digits) gets variance 1, so that
    standardizing it subtracts the mean and divides by nothing tiny.
    """

    mean: np.ndarray
    variance: np.ndarray


@dataclasses.dataclass(frozen=True)
class Dataset:
    """Train/validation/test arrays of one classification problem.

    Features are float32 `[N, F]`, raw: as the scikit-learn loader returns
    them (`features` says what they are). Labels are int32 `[N]` in
    `0..n_classes-1`; `class_names[k]` names label k. The test split is
    for the final evaluation only. `normalization` holds the training
    split's statistics when the model is to standardize its inputs
    (`data.standardize`), else None.
    """

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    n_classes: int
    features: str = ""
    feature_names: tuple = ()
    class_names: tuple = ()
    normalization: FeatureStats = None

    @property
    def input_dim(self):
        return int(self.x_train.shape[1])


@dataclasses.dataclass(frozen=True)
class _Source:
    """One dataset: its loader and what its rows and labels mean."""

    load: Callable  # DataConfig -> (x, y), x exactly as scikit-learn gives it
    features: str  # what one row holds, in the loader's units
    feature_names: tuple
    class_names: tuple  # label k's name at index k


def _moons(cfg):
    return sk_datasets.make_moons(
        n_samples=cfg.n_samples, noise=cfg.noise, random_state=cfg.seed
    )


def _circles(cfg):
    # factor: the inner circle's radius; scikit-learn's default 0.8 makes
    # the classes overlap badly at noise 0.2, 0.5 keeps them separable.
    return sk_datasets.make_circles(
        n_samples=cfg.n_samples,
        noise=cfg.noise,
        factor=0.5,
        random_state=cfg.seed,
    )


def _digits(cfg):
    # Bundled with scikit-learn (no download): 1797 8x8 images, 10 classes,
    # pixels 0..16. n_samples and noise do not apply. Not rescaled: a
    # served model takes load_digits().data rows as they are.
    return sk_datasets.load_digits(return_X_y=True)


# One line per dataset: name -> how to load it and what it means.
_SOURCES = {
    "moons": _Source(
        _moons,
        "a point's x, y coordinates, as sklearn.datasets.make_moons "
        "returns them",
        ("x", "y"),
        ("upper moon", "lower moon"),
    ),
    "circles": _Source(
        _circles,
        "a point's x, y coordinates, as sklearn.datasets.make_circles "
        "(factor=0.5) returns them",
        ("x", "y"),
        ("outer circle", "inner circle"),
    ),
    "digits": _Source(
        _digits,
        "an 8x8 image's 64 pixel intensities 0..16, row by row, as "
        "sklearn.datasets.load_digits returns them",
        tuple(f"pixel_{row}_{col}" for row in range(8) for col in range(8)),
        tuple(f"digit {k}" for k in range(10)),
    ),
}


def feature_stats(x):
    """The `FeatureStats` of `x` `[N, F]` (population variance, ddof 0).

    Example:

    >>> feature_stats(np.array([[0.0, 5.0], [2.0, 5.0]])).variance
    array([1., 1.])
    """
    x = np.asarray(x, dtype=np.float64)
    variance = x.var(axis=0)
    variance[variance == 0] = 1.0  # constant: shift only, never divide by 0
    return FeatureStats(mean=x.mean(axis=0), variance=variance)


def load_dataset(cfg):
    """Loads and splits the configured dataset; features stay raw.

    The test set (`cfg.test_fraction`) is held out first, then
    `cfg.validation_fraction` of the rest becomes the validation set; both
    splits are stratified by class and seeded with `cfg.seed`. With
    `cfg.standardize`, `normalization` carries the training split's mean
    and variance for the model's own normalization layer; the arrays are
    never changed.

    Args:
        cfg: A `service.config.DataConfig`.

    Returns:
        A `Dataset`.

    Raises:
        ServiceError: for an unknown dataset name.

    Example:

    >>> from service.config import DataConfig
    >>> ds = load_dataset(DataConfig(dataset="moons", n_samples=200))
    >>> ds.x_train.shape, ds.n_classes, ds.class_names
    ((128, 2), 2, ('upper moon', 'lower moon'))
    """
    source = _SOURCES.get(cfg.dataset)
    if source is None:
        raise ServiceError(
            f"data.dataset: unknown dataset {cfg.dataset!r}; expected one of "
            f"{', '.join(sorted(_SOURCES))}."
        )
    x, y = source.load(cfg)
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.int32)

    x_rest, x_test, y_rest, y_test = train_test_split(
        x, y, test_size=cfg.test_fraction, stratify=y, random_state=cfg.seed
    )
    x_train, x_val, y_train, y_val = train_test_split(
        x_rest,
        y_rest,
        test_size=cfg.validation_fraction,
        stratify=y_rest,
        random_state=cfg.seed,
    )

    def features(a):
        return np.ascontiguousarray(a, dtype=np.float32)

    return Dataset(
        name=cfg.dataset,
        x_train=features(x_train),
        y_train=y_train,
        x_val=features(x_val),
        y_val=y_val,
        x_test=features(x_test),
        y_test=y_test,
        n_classes=len(source.class_names),
        features=source.features,
        feature_names=source.feature_names,
        class_names=source.class_names,
        normalization=feature_stats(x_train) if cfg.standardize else None,
    )


def describe_inputs(dataset):
    """What a model trained on `dataset` takes, as one sentence.

    Example:

    >>> from service.config import DataConfig
    >>> describe_inputs(load_dataset(DataConfig(n_samples=100)))[:56]
    "float32 [n, 2], one example per row: a point's x, y coor"
    """
    text = (
        f"float32 [n, {dataset.input_dim}], one example per row: "
        f"{dataset.features}. Send them raw: "
    )
    if dataset.normalization is not None:
        return text + (
            "the model standardizes them itself, with the training split's "
            "mean and variance."
        )
    return text + "the model was trained on them unscaled."


def describe_outputs(dataset):
    """What a model trained on `dataset` returns, as one sentence.

    Example:

    >>> from service.config import DataConfig
    >>> describe_outputs(load_dataset(DataConfig(n_samples=100)))[-40:]
    'label k: 0 = upper moon, 1 = lower moon.'
    """
    labels = [f"{k} = {name}" for k, name in enumerate(dataset.class_names)]
    if len(labels) > 4:
        labels = labels[:2] + ["…"] + labels[-1:]
    return (
        f"float32 [n, {dataset.n_classes}] class probabilities (rows sum "
        f"to 1), column k for label k: {', '.join(labels)}."
    )
