import dataclasses

import numpy as np
import pytest
from sklearn import datasets as sk_datasets
from sklearn.preprocessing import StandardScaler

from kg_service.config.schema import DataConfig
from kg_service.tasks.classification.data import describe_inputs
from kg_service.tasks.classification.data import describe_outputs
from kg_service.tasks.base import load_dataset
from kg_service.errors import ServiceError

SPLITS = ("train", "val", "test")


def _splits(ds):
    return {s: (getattr(ds, f"x_{s}"), getattr(ds, f"y_{s}")) for s in SPLITS}


@pytest.mark.parametrize("name", ["moons", "circles"])
def test_splits_partition_the_samples_without_overlap(name):
    ds = load_dataset(DataConfig(dataset=name, n_samples=300, seed=3))
    splits = _splits(ds)
    sizes = {s: len(y) for s, (_, y) in splits.items()}
    assert sum(sizes.values()) == 300
    assert sizes["test"] == 60  # test_fraction 0.2 of all
    assert sizes["val"] == 48  # validation_fraction 0.2 of the remaining 240
    rows = {s: {tuple(row) for row in x} for s, (x, _) in splits.items()}
    assert all(len(rows[s]) == sizes[s] for s in SPLITS)
    assert not rows["train"] & rows["val"]
    assert not rows["train"] & rows["test"]
    assert not rows["val"] & rows["test"]


def test_splits_are_stratified_by_class():
    ds = load_dataset(DataConfig(dataset="digits", seed=1))
    overall = (
        np.bincount(np.concatenate([ds.y_train, ds.y_val, ds.y_test])) / 1797
    )
    for _, y in _splits(ds).values():
        share = np.bincount(y, minlength=10) / len(y)
        # Stratified: each class share within one example of the overall.
        assert np.all(np.abs(share - overall) <= 1.0 / len(y) + 1e-12)


def test_same_seed_gives_identical_arrays_and_another_seed_differs():
    a = load_dataset(DataConfig(n_samples=200, seed=5))
    b = load_dataset(DataConfig(n_samples=200, seed=5))
    c = load_dataset(DataConfig(n_samples=200, seed=6))
    for s in SPLITS:
        np.testing.assert_array_equal(
            getattr(a, f"x_{s}"), getattr(b, f"x_{s}")
        )
        np.testing.assert_array_equal(
            getattr(a, f"y_{s}"), getattr(b, f"y_{s}")
        )
    assert not np.array_equal(a.x_train, c.x_train)


def test_arrays_have_the_documented_dtypes_and_shapes():
    ds = load_dataset(DataConfig(n_samples=200))
    for x, y in _splits(ds).values():
        assert x.dtype == np.float32 and x.ndim == 2 and x.shape[1] == 2
        assert y.dtype == np.int32 and y.shape == (len(x),)
    assert ds.input_dim == 2 and ds.n_classes == 2 and ds.name == "moons"


def _rows(x, y):
    """{(features..., label)} of float32 features: rows to look up."""
    x = np.asarray(x, dtype=np.float32)
    return {tuple(row) + (int(label),) for row, label in zip(x, y)}


@pytest.mark.parametrize(
    "name, generate",
    [
        (
            "moons",
            lambda: sk_datasets.make_moons(300, noise=0.2, random_state=3),
        ),
        (
            "circles",
            lambda: sk_datasets.make_circles(
                300, noise=0.2, factor=0.5, random_state=3
            ),
        ),
        ("digits", lambda: sk_datasets.load_digits(return_X_y=True)),
    ],
)
def test_features_are_the_scikit_learn_rows_as_they_come(name, generate):
    # What a served model is sent: the loader's rows, unscaled.
    ds = load_dataset(DataConfig(dataset=name, n_samples=300, seed=3))
    source = _rows(*generate())
    for x, y in _splits(ds).values():
        assert _rows(x, y) <= source


def test_normalization_is_the_training_split_mean_and_variance():
    ds = load_dataset(DataConfig(dataset="digits", seed=2))
    scaler = StandardScaler().fit(ds.x_train.astype(np.float64))
    np.testing.assert_allclose(ds.normalization.mean, scaler.mean_, rtol=1e-12)
    constant = scaler.var_ == 0
    assert constant.sum() >= 2  # the always-blank corner pixels
    np.testing.assert_allclose(
        ds.normalization.variance[~constant], scaler.var_[~constant], rtol=1e-12
    )
    # Constant features are shifted only: variance 1, never a division by 0.
    np.testing.assert_array_equal(ds.normalization.variance[constant], 1.0)


def test_standardize_false_gives_the_same_arrays_and_no_statistics():
    on = load_dataset(DataConfig(n_samples=400, standardize=True))
    off = load_dataset(DataConfig(n_samples=400, standardize=False))
    assert on.normalization is not None and off.normalization is None
    for s in SPLITS:
        np.testing.assert_array_equal(
            getattr(on, f"x_{s}"), getattr(off, f"x_{s}")
        )


def test_digits_loads_bundled_data_and_ignores_sample_count_and_noise():
    ds = load_dataset(DataConfig(dataset="digits", n_samples=50, noise=3.0))
    assert len(ds.y_train) + len(ds.y_val) + len(ds.y_test) == 1797
    assert ds.input_dim == 64 and ds.n_classes == 10
    # Raw pixels as load_digits gives them: the integers 0..16.
    assert ds.x_train.min() == 0.0 and ds.x_train.max() == 16.0
    np.testing.assert_array_equal(ds.x_train, np.round(ds.x_train))
    assert ds.feature_names == tuple(sk_datasets.load_digits().feature_names)


@pytest.mark.parametrize(
    "name, features, labels",
    [
        ("moons", "make_moons", "0 = upper moon, 1 = lower moon"),
        ("circles", "make_circles", "0 = outer circle, 1 = inner circle"),
        ("digits", "0..16", "0 = digit 0, 1 = digit 1, …, 9 = digit 9"),
    ],
)
def test_descriptions_name_raw_units_shapes_and_class_order(
    name, features, labels
):
    ds = load_dataset(DataConfig(dataset=name, n_samples=100))
    inputs = describe_inputs(ds)
    assert inputs.startswith(f"float32 [n, {ds.input_dim}]")
    assert features in inputs and "raw" in inputs
    assert "standardizes them itself" in inputs
    raw = load_dataset(
        DataConfig(dataset=name, n_samples=100, standardize=False)
    )
    assert "unscaled" in describe_inputs(raw)
    outputs = describe_outputs(ds)
    assert outputs.startswith(
        f"float32 [n, {ds.n_classes}] class probabilities"
    )
    assert outputs.endswith(f"{labels}.")


def test_unknown_dataset_raises_service_error_naming_the_valid_ones():
    with pytest.raises(ServiceError, match="moons"):
        load_dataset(DataConfig(dataset="mnist"))


def test_resplit_gives_each_split_seed_its_own_stratified_split_of_the_same_data():
    """Issue 19: a member's split from its split seed, as sklearn splits it."""
    from sklearn.model_selection import train_test_split

    from kg_service.tasks.classification.data import resplit

    base = load_dataset(DataConfig(n_samples=200, seed=0))
    assert resplit(base, 0) is base
    other = resplit(base, 11)
    x, y = base.unsplit
    rest, x_test, y_rest, _ = train_test_split(x, y, test_size=0.2, stratify=y, random_state=11)
    _, x_val, _, _ = train_test_split(rest, y_rest, test_size=0.2, stratify=y_rest,
                                      random_state=11)
    np.testing.assert_array_equal(other.x_test, x_test.astype("float32"))
    np.testing.assert_array_equal(other.x_val, x_val.astype("float32"))
    assert (len(other.y_train), len(other.y_test)) == (len(base.y_train), len(base.y_test))
    assert not np.array_equal(other.x_test, base.x_test)
    np.testing.assert_allclose(other.normalization.mean, other.x_train.mean(axis=0), rtol=1e-6)
    with pytest.raises(ValueError, match="not made by data.split"):
        resplit(dataclasses.replace(base, data_config=None), 11)
