"""SavedModel export: verification before registration."""

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


def _language_model():
    from types import SimpleNamespace

    from kg_service.tasks.language import model as lm

    shape = SimpleNamespace(d_model=8, heads=2, hidden_units=[16], layer_norm=True,
                            tie_embeddings=True, dropout=0.0, match_params=False)
    return lm.build_language_model(shape, "geglu", SimpleNamespace(n_classes=11, context=6))


@pytest.mark.parametrize(
    "make, inputs",
    [
        (lambda: _model(keras.layers.Dense(3, activation="softmax")),
         np.random.default_rng(1).normal(size=(5, 2)).astype("float32")),
        (_language_model, np.random.default_rng(2).integers(0, 11, (3, 6)).astype("int32")),
    ],
    ids=["classifier", "language_model"],
)
def test_the_saved_model_written_is_the_one_keras_model_export_writes(tmp_path, make, inputs):
    """`write_saved_model` against Keras' own `model.export`: the same
    signatures (names, input specs, output specs), the same variables and
    the same outputs, read back with `tf.saved_model.load`."""
    import tensorflow as tf

    model = make()
    written = {}
    for name, write in [
        ("keras", lambda path: model.export(str(path), format="tf_saved_model", verbose=False)),
        ("ours", lambda path: export.write_saved_model(model, path)),
    ]:
        with keras_gelu.xla_fusion(False):
            write(tmp_path / name)
        loaded = tf.saved_model.load(str(tmp_path / name))
        signatures = {
            key: (repr(f.structured_input_signature), repr(f.structured_outputs))
            for key, f in loaded.signatures.items()
        }
        collections = {
            c: sorted((v.name, v.numpy().tobytes()) for v in getattr(loaded, c))
            for c in ("variables", "trainable_variables", "non_trainable_variables")
        }
        served = loaded.signatures["serving_default"](tf.constant(inputs))
        written[name] = (signatures, collections, {k: v.numpy() for k, v in served.items()},
                         loaded.serve(tf.constant(inputs)).numpy())
    keras_signatures, keras_collections, keras_served, keras_serve = written["keras"]
    signatures, collections, served, serve = written["ours"]
    assert signatures == keras_signatures and set(signatures) == {"serve", "serving_default"}
    assert collections == keras_collections and len(collections["variables"]) == len(model.variables)
    assert served.keys() == keras_served.keys()
    for key in served:
        np.testing.assert_array_equal(served[key], keras_served[key])
    np.testing.assert_array_equal(serve, keras_serve)
