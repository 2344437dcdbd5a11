"""The pyfunc model files (mlflow_model.py, mlflow_lm.py) as MLflow logs them."""

import re
import warnings

import keras
import pytest

from kg_service.tasks.classification import serving as classifier
from kg_service.tasks.language import serving as language_model
from kg_service.tracking import mlflow_store as tracking

SERVING = {"classifier": classifier.SERVING, "language_model": language_model.SERVING}

# MLflow's red warning for a predict() type hint it cannot use (an `Any`,
# say), printed on every logged model with raw ANSI colour codes.
UNSUPPORTED_HINT = re.compile("Type hint used in the model's predict function is not supported")


def _any_model():
    inputs = keras.Input((2,))
    return keras.Model(inputs, keras.layers.Dense(2, activation="softmax")(inputs))


@pytest.mark.parametrize("serving", sorted(SERVING))
def test_logging_a_model_prints_no_unsupported_type_hint_warning(tmp_path, serving):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    store = tracking.Tracker(uri, f"hints-{serving}")
    run_id = store.client.create_run(store.experiment_id).info.run_id
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        version = store.register(
            run_id, _any_model(), f"hints-{serving}", "champion", {}, "", [],
            serving=SERVING[serving],
        )
    assert str(version) == "1"
    shown = [str(w.message) for w in caught]
    assert not [m for m in shown if UNSUPPORTED_HINT.search(m)], shown
    assert not [m for m in shown if "\x1b[" in m], shown  # no raw colour codes either
