import os

import pytest


@pytest.fixture(autouse=True)
def _no_inherited_tracking_uri(monkeypatch):
    """Each test starts without MLFLOW_TRACKING_URI: `mlflow.set_tracking_uri`
    (called by in-process sweeps and serving tests) also sets it in
    os.environ, which would send the next in-process sweep to the previous
    test's store."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("MLFLOW_REGISTRY_URI", raising=False)


@pytest.fixture(scope="module", autouse=True)
def _mlflow_uris_restored():
    """`Tracker` sets MLflow's process-wide tracking and registry URIs, and
    their environment variables, which every later subprocess (kg-train,
    `mlflow models serve`) inherits: put all four back after each module."""
    from mlflow.tracking._model_registry import utils as registry_utils
    from mlflow.tracking._tracking_service import utils as tracking_utils

    with pytest.MonkeyPatch.context() as patch:
        for name in ("MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI"):
            if name in os.environ:
                patch.setenv(name, os.environ[name])
            else:
                patch.delenv(name, raising=False)
        patch.setattr(registry_utils, "_registry_uri", registry_utils._registry_uri)
        patch.setattr(tracking_utils, "_tracking_uri", tracking_utils._tracking_uri)
        yield


@pytest.fixture(scope="session")
def tiny_sweep(tmp_path_factory):
    """The one real sweep every reader module shares (tests/service/shared_sweep.py):
    trained once per pytest run, under xdist too (in the run's temporary
    folder, which the workers share)."""
    from tests.service import shared_sweep

    sweep = shared_sweep.once(_shared_root(tmp_path_factory))
    assert sweep.returncode == 0, (sweep.stdout + sweep.stderr)[-3000:]
    return sweep


@pytest.fixture(scope="session")
def tiny_smoke_sweep(tmp_path_factory):
    """configs/tiny.yaml --smoke without export, once per pytest run, for
    the modules that compare its two activations (shared_sweep.train_smoke)."""
    from tests.service import shared_sweep

    root = _shared_root(tmp_path_factory)
    sweep = shared_sweep.once(root, "tiny-smoke-sweep", shared_sweep.train_smoke)
    assert sweep.returncode == 0, (sweep.stdout + sweep.stderr)[-3000:]
    return sweep


def _shared_root(tmp_path_factory):
    """The folder every worker of this run sees (one per run without xdist)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return tmp_path_factory.getbasetemp().parent / "shared"
    return tmp_path_factory.getbasetemp() / "shared"
