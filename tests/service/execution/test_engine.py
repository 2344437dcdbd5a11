"""`execution:` without a cluster (issue 33): the config's keys, what is
refused before anything starts, and how a sweep's groups become tasks.
The cluster itself: test_ray_cluster.py."""

import types

import pytest

from kg_service.config.loading import load_config
from kg_service.errors import ServiceError
from kg_service.execution import cluster
from kg_service.sweep import shards
from kg_service.results import MemberResult
from kg_service.tracking import destinations
from kg_service.tracking import member_runs
from tests.service import in_process
from tests.service import servers


def _config(tmp_path, text="experiment: engine\n"):
    path = tmp_path / "sweep.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_an_unreachable_ray_address_exits_2_naming_it_before_anything_starts(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    address = f"127.0.0.1:{servers.free_port()}"  # nothing listens there
    result = in_process.kg_train("--config", _config(tmp_path), "--engine", "ray",
                                 "--ray-address", address, "--tracking-uri",
                                 f"sqlite:///{tmp_path / 'm.db'}")
    assert result.exit_code == 2, result.output
    assert f"execution.address {address}: the Ray cluster does not answer" in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "m.db").exists()  # refused before the store was opened


def test_an_execution_key_is_checked_like_every_key(tmp_path):
    result = in_process.kg_train("--config", _config(tmp_path), "--set", "execution.engien=ray",
                                 "--dry-run")
    assert result.exit_code == 2
    assert 'execution.engien: unknown key. Did you mean "engine"?' in result.output
    result = in_process.kg_train("--config", _config(tmp_path), "--ray-address", "head", "--dry-run")
    assert result.exit_code == 2
    assert "'head' is no Ray address; expected auto, host:port" in result.output


def test_engine_ray_with_shards_is_refused_with_exit_2(tmp_path):
    result = in_process.kg_train("--config", _config(tmp_path), "--engine", "ray", "--shard",
                                 "1/2", "--dry-run")
    assert result.exit_code == 2
    assert "execution.engine is ray, and --shard/--sweep-id" in result.output


def test_where_members_train_is_not_what_they_are(tmp_path):
    local = load_config(_config(tmp_path))
    ray = load_config(_config(tmp_path), ["execution={engine: ray, members_per_task: 2}"])
    assert ray.execution.group_resources.num_cpus == 1
    assert shards.sweep_id(local) == shards.sweep_id(ray)  # a resume may switch


def test_a_group_becomes_tasks_of_members_per_task(tmp_path):
    from kg_service.execution import groups  # Keras: this test only
    from kg_service.training import loop  # Keras: this test only

    task = types.SimpleNamespace(train_members=print, stack_key=lambda c, a: "plain")
    config = load_config(_config(tmp_path, "activations: [relu, gelu]\nseeds: 3\n"))
    missing = [(a, s) for a in ("relu", "gelu") for s in range(3) if (a, s) != ("gelu", 1)]
    together = loop.activation_groups(task, config)
    assert groups.tasks_of(together, missing, config.execution.members_per_task) == [
        tuple(missing)]  # the stacked group, whole
    config = load_config(_config(tmp_path, "activations: [relu, gelu]\nseeds: 3\n"),
                         ["execution.members_per_task=2"])
    assert groups.tasks_of(together, missing, config.execution.members_per_task) == [
        (("relu", 0), ("relu", 1)), (("relu", 2), ("gelu", 0)), (("gelu", 2),)]


def test_a_member_from_a_task_reads_its_model_from_its_run_once_and_only_when_used():
    calls = []
    numbers = MemberResult("relu", 0, {"val_accuracy": [0.5], "val_loss": [0.7]}, 0.7, 0.5, None)
    member = member_runs.from_run(numbers, lambda: calls.append(1) or None)
    assert calls == [] and member.test_accuracy == 0.5
    assert member.model is None and member.model is None
    assert calls == [1]


@pytest.mark.parametrize("nodes, uri, refused", [
    (2, "sqlite:////tmp/m.db", True), (2, "/tmp/mlruns", True),
    (2, "http://mlflow:5000", False), (1, "sqlite:////tmp/m.db", False),
])
def test_a_multi_node_cluster_refuses_a_store_on_the_drivers_disk(nodes, uri, refused):
    on_disk = destinations.on_this_machine(uri)
    if refused:
        with pytest.raises(ServiceError, match=f"has {nodes} nodes"):
            cluster.check_store(nodes, uri, on_disk, "head:6379")
    else:
        cluster.check_store(nodes, uri, on_disk, "head:6379")


def test_a_tasks_own_error_reaches_the_driver_unwrapped_and_a_bug_keeps_rays():
    from kg_service.execution import groups  # Keras: this test only

    class RayTaskError(Exception):  # Ray's wrapper: the task's error as `cause`
        def __init__(self, cause):
            super().__init__(f"remote traceback of {cause!r}")
            self.cause = cause

    def ray_raising(cause):
        def get(ref):
            raise RayTaskError(cause)
        return types.SimpleNamespace(get=get, exceptions=types.SimpleNamespace(RayTaskError=RayTaskError))

    with pytest.raises(ServiceError, match="^the store stayed down$"):
        groups.landed_of(ray_raising(ServiceError("the store stayed down")), "ref")
    with pytest.raises(RayTaskError):
        groups.landed_of(ray_raising(ValueError("a bug")), "ref")
