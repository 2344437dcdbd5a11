"""A small keras_gelu classifier registered through `Tracker.register`, as
kg-train registers its champions: the model test_serving.py and
test_serving_fast_path.py serve (no training: serving does not care what
the weights are)."""

import os

import keras

import keras_gelu
from kg_service.tasks.classification import serving as classifier_serving
from kg_service.tracking import mlflow_store as tracking
from kg_service.tracking import model_logging

FEATURES, CLASSES = 2, 3
FEATURE_NAMES = ("x", "y")


def register(root, name):
    """Registers the classifier as `name` (alias `champion`) in a new sqlite
    store under `root`. Returns (tracking URI, the Keras model, version)."""
    uri = f"sqlite:///{root / 'mlflow.db'}"
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((FEATURES,)),
            keras.layers.Dense(16, activation=keras_gelu.gelu),
            keras.layers.Dense(CLASSES, activation="softmax"),
        ]
    )
    cwd = os.getcwd()
    os.chdir(root)  # the sqlite store's artifacts go to ./mlruns
    try:
        tracker = tracking.Tracker(uri, name)
        run_id = tracker.client.create_run(tracker.experiment_id).info.run_id
        version = tracker.register(
            run_id,
            model,
            name,
            "champion",
            tags={},
            description="test model",
            pip_requirements=model_logging.pip_requirements(),
            # As kg-train logs them: the names named columns are matched to.
            metadata={"feature_names": list(FEATURE_NAMES)},
            serving=classifier_serving.SERVING,
        )
    finally:
        os.chdir(cwd)
    return uri, model, version
