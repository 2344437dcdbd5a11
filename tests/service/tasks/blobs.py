"""A toy task, defined outside the service: three Gaussian blobs.

What a new task's folder holds (`service/kg_service/tasks/<name>/__init__.py`),
written in the tests: a loader and one `classification.task(...)`. Used by
`tests/service/tasks/test_tasks.py` (a whole sweep on MLflow) and
`tests/service/test_contributing.py` (CONTRIBUTING.md's recipe, on the
in-memory store).
"""

from kg_service.tasks import classification

NAME = "blobs"


def load(cfg):
    """`DataConfig -> (x, y)`: scikit-learn's `make_blobs`, 3 features, 3 classes."""
    from sklearn.datasets import make_blobs

    return make_blobs(
        n_samples=cfg.n_samples, centers=3, n_features=3, random_state=cfg.seed
    )


def task():
    """The blobs `Task`: unregistered; `kg_service.tasks.base.register` adds it."""
    return classification.task(
        NAME,
        load,
        features="three blob coordinates, as make_blobs returns them",
        feature_names=("a", "b", "c"),
        class_names=("first", "second", "third"),
        figures=("learning_curves", "per_seed"),
    )
