"""Two jobs that start at once on a new store both look the experiment up,
find nothing, and create it: the second create fails with
RESOURCE_ALREADY_EXISTS (measured on the shared PostgreSQL-backed server:
two shards started together, one exited 2). The loser joins the winner's
experiment instead."""

import mlflow
import pytest

from kg_service.errors import ServiceError
from kg_service.tracking import mlflow_store


def test_a_job_that_loses_the_race_to_create_the_experiment_joins_it(tmp_path, monkeypatch):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    winner = mlflow.MlflowClient(uri).create_experiment("raced")
    lookup = mlflow.MlflowClient.get_experiment_by_name
    calls = []

    def before_the_winner_created_it(client, name):
        # The loser's first lookup ran before the winner's create.
        calls.append(name)
        return None if len(calls) == 1 else lookup(client, name)

    monkeypatch.setattr(mlflow.MlflowClient, "get_experiment_by_name",
                        before_the_winner_created_it)
    tracker = mlflow_store.Tracker(uri, "raced")
    assert tracker.experiment_id == winner
    assert calls == ["raced", "raced"]
    assert [e.name for e in mlflow.MlflowClient(uri).search_experiments()].count("raced") == 1


def test_another_create_failure_is_still_a_store_problem(tmp_path, monkeypatch):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"

    def refused(client, name):
        raise mlflow.exceptions.MlflowException("no", error_code="PERMISSION_DENIED")

    monkeypatch.setattr(mlflow.MlflowClient, "create_experiment", refused)
    with pytest.raises(ServiceError, match=r"MlflowException: no\. "):
        mlflow_store.Tracker(uri, "refused")
