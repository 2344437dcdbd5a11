"""Datasets: scikit-learn toy problems, split and standardized once.

Pure: the same `DataConfig` always gives the same arrays. Nothing here
downloads anything or talks to MLflow.
"""

import dataclasses

import numpy as np
from sklearn import datasets as sk_datasets
from sklearn.model_selection import train_test_split

from service.errors import ServiceError


@dataclasses.dataclass(frozen=True)
class Dataset:
    """Train/validation/test arrays of one classification problem.

    Features are float32 `[N, F]`, labels int32 `[N]` in `0..n_classes-1`.
    The test split is for the final evaluation only.
    """

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    n_classes: int

    @property
    def input_dim(self):
        return int(self.x_train.shape[1])


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
    # Bundled with scikit-learn (no download): 1797 8x8 images, 10 classes.
    # Pixels are 0..16; scaled to [0, 1]. n_samples and noise do not apply.
    x, y = sk_datasets.load_digits(return_X_y=True)
    return x / 16.0, y


# One line per dataset: name -> (x, y) from a DataConfig.
_LOADERS = {"moons": _moons, "circles": _circles, "digits": _digits}


def load_dataset(cfg):
    """Loads, splits and (optionally) standardizes the configured dataset.

    The test set (`cfg.test_fraction`) is held out first, then
    `cfg.validation_fraction` of the rest becomes the validation set; both
    splits are stratified by class and seeded with `cfg.seed`. With
    `cfg.standardize`, features are z-scored with the training set's mean
    and standard deviation (constant features keep scale 1).

    Args:
        cfg: A `service.config.DataConfig`.

    Returns:
        A `Dataset`.

    Raises:
        ServiceError: for an unknown dataset name.

    Example:

    >>> from service.config import DataConfig
    >>> ds = load_dataset(DataConfig(dataset="moons", n_samples=200))
    >>> ds.x_train.shape, ds.n_classes
    ((128, 2), 2)
    """
    loader = _LOADERS.get(cfg.dataset)
    if loader is None:
        raise ServiceError(
            f"data.dataset: unknown dataset {cfg.dataset!r}; expected one of "
            f"{', '.join(sorted(_LOADERS))}."
        )
    x, y = loader(cfg)
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
    if cfg.standardize:
        mean = x_train.mean(axis=0)
        std = x_train.std(axis=0)
        std[std == 0] = 1.0  # e.g. the always-blank corner pixels of digits
        x_train, x_val, x_test = (
            (a - mean) / std for a in (x_train, x_val, x_test)
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
        n_classes=int(y.max()) + 1,
    )
