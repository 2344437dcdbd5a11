"""Tasks are plug-ins: a task defined here, in the test, runs a whole sweep.

Nothing in the service names this task; registering it is the only
change, and config validation, training, tracking, statistics, the report
and the registry all follow.
"""

import numpy as np
import pytest

from kg_service.config import loading as config_lib
from kg_service.cli import train as kg_train
from kg_service.tasks import classification
from kg_service.tasks import base as tasks
from kg_service.errors import ServiceError
from tests.service.tasks import blobs

# relu and gelu: one architecture, one stacked model (issue 17: a gated
# unit beside relu was a second model to build and trace, for nothing the
# plug-in checks below need).
TOY_CONFIG = """\
experiment: toy-blobs
activations: [relu, gelu]
seeds: 2
data: {dataset: blobs, n_samples: 300}
model: {hidden_units: [8]}
training: {epochs: 3, batch_size: 32}
registry: {model_name: "blobs-{activation}"}
export: {enabled: false}
"""


@pytest.fixture
def blobs_task():
    task = tasks.register(blobs.task())
    yield task
    tasks.unregister("blobs")


def test_the_builtin_tasks_are_registered():
    assert set(tasks.names()) >= {"moons", "circles", "digits"}
    assert tasks.get("digits").fixed_samples == 1797


def test_unknown_task_is_a_service_error_naming_the_valid_ones():
    with pytest.raises(ServiceError, match="moons"):
        tasks.get("mnist")


def test_config_accepts_a_task_only_once_it_is_registered(tmp_path):
    path = tmp_path / "toy.yaml"
    path.write_text(TOY_CONFIG)
    with pytest.raises(ServiceError, match='data.dataset.*"blobs"'):
        config_lib.load_config(str(path))
    tasks.register(
        classification.task(
            "blobs", blobs.load, features="", feature_names=(), class_names=()
        )
    )
    try:
        assert config_lib.load_config(str(path)).data.dataset == "blobs"
    finally:
        tasks.unregister("blobs")


def test_a_task_defined_in_a_test_runs_a_whole_sweep(blobs_task, tmp_path, monkeypatch):
    import mlflow

    monkeypatch.chdir(tmp_path)
    path = tmp_path / "toy.yaml"
    path.write_text(TOY_CONFIG)
    config = config_lib.load_config(str(path))
    lines = []
    assert kg_train.run(config, quiet=True, echo=lines.append) == 0

    client = mlflow.MlflowClient(
        f"sqlite:///{tmp_path / 'mlflow.db'}",
        # Explicit: an earlier in-process sweep set MLflow's global
        # registry URI to its own store.
        registry_uri=f"sqlite:///{tmp_path / 'mlflow.db'}",
    )
    (experiment,) = [
        e for e in client.search_experiments() if e.name == "toy-blobs"
    ]
    runs = client.search_runs([experiment.experiment_id])
    members = [r for r in runs if r.data.tags.get("kg.role") == "member"]
    assert sorted(
        (r.data.tags["activation"], r.data.tags["seed"]) for r in members
    ) == [("gelu", "0"), ("gelu", "1"), ("relu", "0"), ("relu", "1")]
    for run in members:
        history = client.get_metric_history(run.info.run_id, "val_accuracy")
        assert len(history) == 3
        assert 0.0 <= run.data.metrics["test_accuracy"] <= 1.0
    for activation in ("relu", "gelu"):
        version = client.get_model_version_by_alias(f"blobs-{activation}", "champion")
        assert version.tags["dataset"] == "blobs"
    text = "\n".join(lines)
    assert "relu" in text and "gelu" in text
    (report,) = list((tmp_path / "kg-output").rglob("report.md"))
    assert "three blob coordinates" in report.read_text()
    assert not list((tmp_path / "kg-output").rglob("decision_boundaries.png"))
    assert list((tmp_path / "kg-output").rglob(blobs.BLOB_SIZES))  # its own figure


def test_a_task_model_takes_its_raw_features(blobs_task):
    from kg_service.config.schema import DataConfig
    from kg_service.config.schema import ModelConfig

    dataset = blobs_task.load(DataConfig(dataset="blobs", n_samples=300))
    model = blobs_task.build_model(ModelConfig(hidden_units=(8,)), "gelu", dataset)
    probs = np.asarray(model(dataset.x_test))
    assert probs.shape == (len(dataset.x_test), 3)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)


def test_a_sweep_runs_on_another_tracking_store_without_mlflow(tmp_path, monkeypatch):
    """The pipeline talks to the TrackingStore interface only: an
    in-memory store gets every run, metric, report file and registered
    version, and no MLflow store is created."""
    from tests.service.memory_store import MemoryStore

    monkeypatch.chdir(tmp_path)
    path = tmp_path / "tiny.yaml"
    path.write_text(
        "experiment: in-memory\nactivations: [relu, gelu]\nseeds: 2\n"
        "data: {n_samples: 200}\nmodel: {hidden_units: [4]}\n"
        "training: {epochs: 2}\nexport: {enabled: false}\n"
    )
    store = MemoryStore()
    config = config_lib.load_config(str(path))
    assert kg_train.run(config, quiet=True, echo=lambda line: None, store=store) == 0

    parent = store.runs[store.parent_run_id]
    assert parent["status"] == "FINISHED" and parent["tags"]["winner"] in ("relu", "gelu")
    members = [r for r in store.runs.values() if r["parent"] == store.parent_run_id]
    assert sorted((r["tags"]["activation"], r["tags"]["seed"]) for r in members) == [
        ("gelu", 0), ("gelu", 1), ("relu", 0), ("relu", 1)
    ]
    assert all(len(r["metrics"]["val_accuracy"]) == 2 for r in members)
    assert (store.parent_run_id, "config.json") in store.artifacts
    assert (store.parent_run_id, "report/report.md") in store.artifacts
    for activation in ("relu", "gelu"):
        version = store.aliases[(f"moons-{activation}", "champion")]
        assert store.models[f"moons-{activation}"][version]["tags"]["activation"] == activation
    assert not (tmp_path / "mlflow.db").exists()
