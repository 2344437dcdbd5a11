"""Logging a trained Keras model as an MLflow pyfunc model: its signature,
its pinned requirements, and the files a task's served model is made of
(the task says which: `kg_service.tasks.base.Serving`).
"""

import os
import pathlib
import re
import tempfile
import time
import warnings

import keras_gelu_names
import numpy as np

# Deliberate choices MLflow warns about on every logged model: a float32
# tensor signature instead of predict() type hints, and no input example
# (input_example crashes keras logging, mlflow#16183). Its log_model forces
# a "once" filter, so these are caught and dropped rather than filtered.
DELIBERATE = re.compile("Add type hints to the `predict`|An input example was not provided")
PACKAGE = pathlib.Path(__file__).parents[1]  # kg_service/: relative paths are in it


def log_pyfunc(
    mlflow, run_id, model, *, python_model, make_signature, code_paths,
    pip_requirements, metadata=None, extra_artifacts=None, keras_file=None,
):
    """Logs `model` in `run_id` as the pyfunc model "model"; returns
    MLflow's `ModelInfo`.

    The logged model carries its own copy of keras_gelu and of its name
    table, keras_gelu_names (code paths), and a pyfunc loader that imports it, so `mlflow models serve` works in a
    fresh process that never imported keras_gelu.

    Args:
        python_model: the pyfunc model file (absolute, or relative to
            kg_service/).
        make_signature: `(mlflow, model) -> ModelSignature`.
        code_paths: files beside keras_gelu its model needs to load
            (absolute, or relative to kg_service/).
        keras_file: a `.keras` file `model.save` already wrote (the
            member's own artifact), copied as it is; None: saved here.
    """
    # Keras at its point of use: mlflow_store imports this module, and a
    # wrong store must fail before TensorFlow loads (see mlflow_store).
    import keras_gelu

    signature = make_signature(mlflow, model)
    with tempfile.TemporaryDirectory() as tmp:
        keras_path = keras_file
        if keras_path is None:
            keras_path = os.path.join(tmp, "model.keras")
            model.save(keras_path)
        artifacts = {"keras_model": keras_path, **(extra_artifacts or {})}
        with mlflow.start_run(run_id=run_id, nested=True), warnings.catch_warnings(
            record=True
        ) as caught:
            warnings.simplefilter("always")
            _test_pause("register")
            info = mlflow.pyfunc.log_model(
                name="model",
                python_model=str(PACKAGE / python_model),
                artifacts=artifacts,
                code_paths=[os.path.dirname(keras_gelu.__file__),
                            os.path.dirname(keras_gelu_names.__file__)]
                + [str(PACKAGE / path) for path in code_paths],
                signature=signature,
                pip_requirements=pip_requirements,
                metadata=metadata,
                # What the classifier's pyfunc matches named columns to.
                model_config={"feature_names": list(metadata["feature_names"])}
                if (metadata or {}).get("feature_names") else None,
            )
        for warning in caught:
            if not DELIBERATE.search(str(warning.message)):
                warnings.warn_explicit(
                    warning.message, warning.category, warning.filename, warning.lineno
                )
    return info


def pip_requirements():
    """Pinned requirements of a logged model (explicit: no inference)."""
    # Keras at its point of use (see log_pyfunc); of the backends, only the
    # active one is imported (the others may not be installed).
    import keras

    requirements = [f"keras=={keras.__version__}", f"numpy=={np.__version__}"]
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf  # the backend's own, only on the backend that runs

        requirements.append(f"tensorflow=={tf.__version__}")
    elif backend == "jax":
        import jax  # the backend's own, only on the backend that runs

        requirements.append(f"jax=={jax.__version__}")
    elif backend == "torch":
        import torch  # the backend's own, only on the backend that runs

        requirements.append(f"torch=={torch.__version__.split('+')[0]}")
    return requirements


def _test_pause(point):
    """For the kill tests: with KG_TEST_PAUSE=<point>, writes the file
    KG_TEST_PAUSE_MARKER and waits there until the process is killed (or
    the test deletes the file: it then goes on), so that a test acts at a
    known point, not after a guessed delay."""
    if os.environ.get("KG_TEST_PAUSE") != point:
        return
    marker = pathlib.Path(os.environ["KG_TEST_PAUSE_MARKER"])
    marker.write_text(str(os.getpid()))
    while marker.exists():
        time.sleep(0.2)
