"""Datasets: split once, features kept raw, and described for clients.

Which datasets exist and how each is loaded is `kg_service.tasks.base`' table;
this module splits what a task loads and measures it.

The arrays hold the features exactly as scikit-learn's loader returns
them, because that is what a served model is sent. Standardizing them is
the model's job (`kg_service.tasks.classification.models.build_model(..., normalization=...)`);
this module only measures the training split's mean and variance.

Pure: the same `DataConfig` always gives the same arrays. Nothing here
downloads anything or talks to MLflow.
"""

import dataclasses

import numpy as np
from sklearn.model_selection import train_test_split


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
    # The loader's (x, y) before splitting and the DataConfig that split
    # them: what `resplit` splits again with a member's split seed.
    unsplit: tuple = dataclasses.field(default=(), repr=False)
    data_config: object = dataclasses.field(default=None, repr=False)

    @property
    def input_dim(self):
        return int(self.x_train.shape[1])

    # What the pipeline, the registry and the report ask of any task's
    # dataset (a language model's `kg_service.tasks.language.corpus.Corpus` answers too).

    def describe_inputs(self):
        return describe_inputs(self)

    def describe_outputs(self):
        return describe_outputs(self)

    def metadata(self):
        """The logged model's MLmodel `metadata`: its inputs and outputs."""
        return {
            "inputs": describe_inputs(self),
            "feature_names": list(self.feature_names),
            "standardized_inside_model": self.normalization is not None,
            "outputs": describe_outputs(self),
            "class_names": list(self.class_names),
        }

    def tags(self):
        """Tags a tracked sweep records about its data (none beyond the config)."""
        return {}


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


def split(name, x, y, cfg, *, features="", feature_names=(), class_names=()):
    """Splits one classification dataset; features stay raw.

    The test set (`cfg.test_fraction`) is held out first, then
    `cfg.validation_fraction` of the rest becomes the validation set; both
    splits are stratified by class and seeded with `cfg.seed`. With
    `cfg.standardize`, `normalization` carries the training split's mean
    and variance for the model's own normalization layer; the arrays are
    never changed.

    Args:
        name: The dataset's name.
        x: `[N, F]` features, as a client will send them.
        y: `[N]` int labels in `0..C-1`.
        cfg: A `kg_service.config.schema.DataConfig`.
        features: What one row holds, in its units.
        feature_names: One name per column.
        class_names: Label k's name at index k (default: "0", "1", ...).

    Returns:
        A `Dataset`.

    Example:

    >>> from kg_service.config.schema import DataConfig
    >>> x, y = np.random.default_rng(0).normal(size=(100, 3)), np.arange(100) % 2
    >>> split("toy", x, y, DataConfig(n_samples=100)).x_train.shape
    (64, 3)
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.int32)
    class_names = tuple(class_names) or tuple(str(k) for k in range(y.max() + 1))
    n_classes = len(class_names)

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

    def as_features(a):
        return np.ascontiguousarray(a, dtype=np.float32)

    return Dataset(
        name=cfg.dataset,
        x_train=as_features(x_train),
        y_train=y_train,
        x_val=as_features(x_val),
        y_val=y_val,
        x_test=as_features(x_test),
        y_test=y_test,
        n_classes=n_classes,
        features=features,
        feature_names=tuple(feature_names),
        class_names=class_names,
        normalization=feature_stats(x_train) if cfg.standardize else None,
        unsplit=(x, y),
        data_config=cfg,
    )


def member_split(dataset, config, seed):
    """The split member `seed` of `config` trained and was tested on: its own
    (`resplit` with its derived split seed) where `config.vary` has split,
    else `dataset` itself (issue 30 §5: every per-member figure and number
    uses this, never the data seed's split).

    Raises:
        ValueError: `vary` has split and `dataset` cannot be split again.
    """
    from kg_service.config.derived import member_source_seeds  # config: below tasks, cheap

    if "split" not in config.vary:
        return dataset
    return resplit(dataset, member_source_seeds(config, seed)["split"])


def resplit(dataset, seed):
    """`dataset`'s data split again, as `split` does, with split seed `seed`.

    The split sizes stay the same (they depend on the fractions only), so
    members on different splits still stack. The seed's own split is
    `dataset` itself.

    Example:

    >>> from kg_service.config.schema import DataConfig
    >>> x, y = np.arange(200.0).reshape(100, 2), np.arange(100) % 2
    >>> a = split("toy", x, y, DataConfig(n_samples=100))
    >>> b = resplit(a, 7)
    >>> b.x_test.shape == a.x_test.shape, bool((b.x_test != a.x_test).any())
    (True, True)
    """
    if dataset.data_config is None or not dataset.unsplit:
        raise ValueError(
            f"dataset {dataset.name!r} was not made by data.split, so it cannot be split "
            "again per member; set vary without split, or build it with data.split."
        )
    if seed == dataset.data_config.seed:
        return dataset
    x, y = dataset.unsplit
    return split(
        dataset.name, x, y, dataclasses.replace(dataset.data_config, seed=seed),
        features=dataset.features, feature_names=dataset.feature_names,
        class_names=dataset.class_names,
    )


def describe_inputs(dataset):
    """What a model trained on `dataset` takes, as one sentence.

    Example:

    >>> from kg_service.config.schema import DataConfig
    >>> from kg_service.tasks.base import load_dataset
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

    >>> from kg_service.config.schema import DataConfig
    >>> from kg_service.tasks.base import load_dataset
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
