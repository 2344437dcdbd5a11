"""A toy task, defined outside the service: Gaussian blobs.

What a new task's folder holds (`service/kg_service/tasks/<name>/__init__.py`),
written in the tests: a loader, a config key of its own (`centers`), a
figure of its own (the blobs' sizes), a served signature of its own (one
named column per feature) and one `classification.task(...)`. Used by
`tests/service/tasks/test_tasks.py` (a whole sweep on MLflow) and
`tests/service/test_contributing.py` (CONTRIBUTING.md's recipe, on the
in-memory store).
"""

import dataclasses

import numpy as np
from matplotlib.figure import Figure

from kg_service.config import fields
from kg_service.tasks import classification
from kg_service.tasks.base import Serving
from kg_service.tasks.classification import serving
from kg_service.tasks.classification.settings import GeneratedData

NAME = "blobs"
FEATURES = ("a", "b", "c")
BLOB_SIZES = "blob_sizes.png"


@dataclasses.dataclass(frozen=True)
class BlobsData(GeneratedData):
    """`data:` keys of the blobs: a generated set's, and how many blobs."""

    centers: fields.integer(ge=2, most=10) = 3


def load(cfg):
    """`DataConfig -> (x, y)`: scikit-learn's `make_blobs`, 3 features,
    `data.centers` classes."""
    from sklearn.datasets import make_blobs

    return make_blobs(
        n_samples=cfg.n_samples, centers=cfg.centers, n_features=len(FEATURES),
        random_state=cfg.seed,
    )


def blob_sizes(context):
    """The report figure of its own: training points per blob."""
    if context.dataset is None:
        return BLOB_SIZES, "Training points per blob", None
    fig = Figure(figsize=(4, 3))
    counts = np.bincount(context.dataset.y_train)
    fig.subplots().bar(range(len(counts)), counts)
    return BLOB_SIZES, "Training points per blob", fig


def signature(mlflow, model):
    """One named float column per feature in, the class probabilities out."""
    from mlflow.types import ColSpec
    from mlflow.types import DataType
    from mlflow.types import Schema

    outputs = serving.signature(mlflow, model).outputs
    inputs = Schema([ColSpec(DataType.float, name) for name in FEATURES])
    return mlflow.models.ModelSignature(inputs=inputs, outputs=outputs)


def task():
    """The blobs `Task`: unregistered; `kg_service.tasks.base.register` adds it."""
    blobs = classification.task(
        NAME,
        load,
        features="three blob coordinates, as make_blobs returns them",
        feature_names=FEATURES,
        class_names=("first", "second", "third"),  # of the default 3 centers
        figures=("learning_curves", "per_seed", blob_sizes),
        data_settings=BlobsData,
    )
    return dataclasses.replace(blobs, serving=Serving(
        python_model=serving.SERVING.python_model, signature=signature))
