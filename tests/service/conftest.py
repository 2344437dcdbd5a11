import pytest


@pytest.fixture(autouse=True)
def _no_inherited_tracking_uri(monkeypatch):
    """Each test starts without MLFLOW_TRACKING_URI: `mlflow.set_tracking_uri`
    (called by in-process sweeps and serving tests) also sets it in
    os.environ, which would send the next in-process sweep to the previous
    test's store."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("MLFLOW_REGISTRY_URI", raising=False)
