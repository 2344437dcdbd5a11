import numpy as np
import pytest

from service.config import DataConfig
from service.data import load_dataset
from service.errors import ServiceError

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


def test_standardize_uses_training_statistics_only():
    raw = load_dataset(DataConfig(n_samples=400, standardize=False))
    std = load_dataset(DataConfig(n_samples=400, standardize=True))
    np.testing.assert_allclose(std.x_train.mean(axis=0), 0.0, atol=1e-6)
    np.testing.assert_allclose(std.x_train.std(axis=0), 1.0, atol=1e-5)
    mean, scale = raw.x_train.mean(axis=0), raw.x_train.std(axis=0)
    np.testing.assert_allclose(std.x_val, (raw.x_val - mean) / scale, atol=1e-5)
    np.testing.assert_allclose(
        std.x_test, (raw.x_test - mean) / scale, atol=1e-5
    )


def test_digits_loads_bundled_data_and_ignores_sample_count_and_noise():
    ds = load_dataset(DataConfig(dataset="digits", n_samples=50, noise=3.0))
    assert len(ds.y_train) + len(ds.y_val) + len(ds.y_test) == 1797
    assert ds.input_dim == 64 and ds.n_classes == 10
    # Constant (always blank) pixels stay finite after standardizing.
    assert np.all(np.isfinite(ds.x_train))
    raw = load_dataset(DataConfig(dataset="digits", standardize=False))
    assert raw.x_train.min() >= 0.0 and raw.x_train.max() <= 1.0


def test_unknown_dataset_raises_service_error_naming_the_valid_ones():
    with pytest.raises(ServiceError, match="moons"):
        load_dataset(DataConfig(dataset="mnist"))
