"""SavedModel export: verification before registration."""

import dataclasses

import keras
import numpy as np
import pytest

import keras_gelu
from kg_service.serving import export
from kg_service.errors import ServiceError


class _DriftingLayer(keras.layers.Layer):
    """Adds how often it was called: a traced graph freezes that count, so
    the SavedModel really disagrees with the live model."""

    calls = 0

    def call(self, x):
        type(self).calls += 1
        return x + float(type(self).calls)


def _model(*layers):
    return keras.Sequential(
        [keras.Input((2,)), keras.layers.Dense(4, activation=keras_gelu.gelu), *layers]
    )


def test_stage_accepts_a_faithful_export_within_tolerance(tmp_path):
    model = _model(keras.layers.Dense(2, activation="softmax"))
    x = np.random.default_rng(0).normal(size=(32, 2)).astype("float32")
    staged = export.stage(model, tmp_path, "m", x, 1e-5)
    assert staged.max_abs_diff <= 1e-5
    target = export.promote(staged, tmp_path, 3)
    assert target == tmp_path / "m" / "3"
    assert (target / "saved_model.pb").exists()


def test_stage_rejects_an_export_that_disagrees_and_keeps_nothing(tmp_path):
    model = _model(_DriftingLayer())
    x = np.ones((4, 2), "float32")
    with pytest.raises(export.ExportVerificationError, match="does not reproduce"):
        export.stage(model, tmp_path, "m", x, 1e-5)
    assert not list((tmp_path / "m").iterdir())


def test_half_precision_models_get_a_tolerance_of_a_few_ulps():
    float32 = _model()
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        bfloat16 = _model()
    finally:
        keras.config.set_dtype_policy("float32")
    assert export.tolerance_for(float32, 1e-5) == 1e-5
    assert 1e-2 <= export.tolerance_for(bfloat16, 1e-5) <= 5e-2


def test_promote_refuses_to_overwrite_an_existing_version(tmp_path):
    model = _model()
    staged = export.stage(model, tmp_path, "m", np.ones((2, 2), "float32"), 1e-5)
    (tmp_path / "m" / "1").mkdir()
    with pytest.raises(ServiceError, match="already exists"):
        export.promote(staged, tmp_path, 1)
    assert staged.path.exists()  # the verified export is kept


def test_failed_verification_registers_nothing(tmp_path, monkeypatch):
    """The pipeline exports and verifies every winner before registering any."""
    import mlflow

    from kg_service.config import loading as config_lib
    from kg_service.cli import train as kg_train

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    config = config_lib.load_config(_write(tmp_path / "tiny.yaml"))
    real_stage = export.stage

    def stage_then_fail_on_gelu(model, export_dir, model_name, inputs, tolerance, **kwargs):
        if model_name.endswith("gelu"):
            raise export.ExportVerificationError("injected: export disagrees")
        return real_stage(model, export_dir, model_name, inputs, tolerance, **kwargs)

    monkeypatch.setattr(export, "stage", stage_then_fail_on_gelu)
    with pytest.raises(export.ExportVerificationError):
        kg_train.run(config, quiet=True, echo=lambda line: None)
    client = mlflow.MlflowClient(
        f"sqlite:///{tmp_path / 'mlflow.db'}",
        # Explicit: an earlier in-process sweep set MLflow's global
        # registry URI to its own store.
        registry_uri=f"sqlite:///{tmp_path / 'mlflow.db'}",
    )
    assert client.search_registered_models() == []
    assert not list((tmp_path / "exports").rglob("saved_model.pb"))
    (parent,) = [
        r
        for r in client.search_runs(
            [client.get_experiment_by_name("tiny").experiment_id]
        )
        if "mlflow.parentRunId" not in r.data.tags
    ]
    assert parent.info.status == "FAILED"


def _write(path):
    path.write_text(
        "experiment: tiny\n"
        "activations: [relu, gelu]\n"
        "seeds: 1\n"
        "data: {dataset: moons, n_samples: 200}\n"
        "model: {hidden_units: [4]}\n"
        "training: {epochs: 2}\n"
        'registry: {model_name: "tiny-{activation}"}\n'
    )
    return str(path)
