"""A member read back from the store: what is read at once, what on use."""

import keras
import numpy as np

from kg_service.results import MemberResult
from kg_service.tracking import member_runs
from kg_service.tracking import mlflow_store as tracking


def _member(seed):
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((3,))
    model = keras.Model(inputs, keras.layers.Dense(2, activation="softmax")(inputs))
    history = {"loss": [0.9, 0.5], "accuracy": [0.5, 0.8], "val_loss": [0.9, 0.6], "val_accuracy": [0.5, 0.7]}
    return MemberResult("gelu", seed, history, 0.4, 0.75, 2, model=model,
                        test_correct=np.array([True, False, True]))


def test_a_stored_members_model_loads_on_first_use_and_equals_the_logged_one(tmp_path):
    store = tracking.Tracker(f"sqlite:///{tmp_path / 'mlflow.db'}", "members")
    sweep = store.open_sweep("sweep", {}, {})
    logged = [_member(seed) for seed in (0, 1)]
    for result in logged:
        store.log_member(result, {}, {"activation": result.activation, "seed": str(result.seed)})

    read = store.finished_members(sweep)

    assert sorted(read) == [("gelu", 0), ("gelu", 1)]
    for original in logged:
        _, result = read[("gelu", original.seed)]
        assert isinstance(result, member_runs.StoredMemberResult)
        # Read at once: the numbers and the test correctness; the model not yet.
        assert result.test_accuracy == original.test_accuracy
        np.testing.assert_array_equal(result.test_correct, original.test_correct)
        assert isinstance(result.model_file, bytes) and vars(result)["_model"] is None
        # On first use: the logged model, once.
        model = result.model
        assert result.model_file is None and result.model is model
        for ours, theirs in zip(model.get_weights(), original.model.get_weights()):
            np.testing.assert_array_equal(ours, theirs)
    # Assigning, before any use, replaces the pending file (a tuning
    # member drops its model).
    _, result = store.finished_members(sweep)[("gelu", 0)]
    assert result.model_file is not None
    result.model = None
    assert result.model is None and result.model_file is None
