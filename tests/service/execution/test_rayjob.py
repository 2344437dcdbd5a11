"""docs/scaling/rayjob.yaml, the KubeRay RayJob of docs/scaling.md, is
checked, not just shown: its RayJob fields are those of KubeRay's own
sample (`ray-operator/config/samples/ray-job.sample.yaml`, ray-project/kuberay
at 0074129, read for issue 33: its fields, commented ones included, are
below), its pod templates survive Kubernetes' own model, its Ray is the
one pyproject.toml pins, and its entrypoint goes through kg-train's real CLI.
docs/scaling/ray.sbatch (Ray's head/worker pattern on Slurm): bash -n, and
its kg-train line through the real CLI."""

import pathlib
import re
import shlex
import subprocess

import pytest
import yaml
from click.testing import CliRunner

from kg_service.cli import train as cli

REPO = pathlib.Path(__file__).resolve().parents[3]

# The sample's fields, level by level (a commented one is a field too:
# the sample shows it with its default).
SAMPLE = {
    "": {"apiVersion", "kind", "metadata", "spec"},
    "spec": {"submissionMode", "entrypoint", "shutdownAfterJobFinishes", "ttlSecondsAfterFinished",
             "activeDeadlineSeconds", "runtimeEnvYAML", "suspend", "rayClusterSpec",
             "submitterPodTemplate"},
    "spec.rayClusterSpec": {"rayVersion", "headGroupSpec", "workerGroupSpecs"},
    "spec.rayClusterSpec.headGroupSpec": {"rayStartParams", "template"},
    "spec.rayClusterSpec.workerGroupSpecs[]": {"replicas", "minReplicas", "maxReplicas",
                                               "groupName", "rayStartParams", "template"},
}
HEAD_PORTS = {"gcs-server": 6379, "dashboard": 8265, "client": 10001}  # the sample's


@pytest.fixture(scope="module")
def job():
    return yaml.safe_load((REPO / "docs" / "scaling" / "rayjob.yaml").read_text())


def _groups(job):
    cluster = job["spec"]["rayClusterSpec"]
    return [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]


def test_rayjob_has_the_fields_of_kuberays_sample_and_no_other(job):
    assert (job["apiVersion"], job["kind"]) == ("ray.io/v1", "RayJob")
    levels = {"": job, "spec": job["spec"], "spec.rayClusterSpec": job["spec"]["rayClusterSpec"],
              "spec.rayClusterSpec.headGroupSpec": job["spec"]["rayClusterSpec"]["headGroupSpec"]}
    for path, value in levels.items():
        assert set(value) <= SAMPLE[path], (path, set(value) - SAMPLE[path])
    for group in job["spec"]["rayClusterSpec"]["workerGroupSpecs"]:
        assert set(group) <= SAMPLE["spec.rayClusterSpec.workerGroupSpecs[]"]
        assert group["minReplicas"] <= group["replicas"] <= group["maxReplicas"]


def test_rayjob_pod_templates_have_only_fields_kubernetes_knows(job):
    from kubernetes.client import ApiClient

    api = ApiClient()
    for group in _groups(job):
        model = api._ApiClient__deserialize(group["template"], "V1PodTemplateSpec")
        assert api.sanitize_for_serialization(model) == group["template"]


def test_rayjob_starts_the_ray_pyproject_pins_with_string_start_params(job):
    pin = re.search(r'^ray = \["ray\[default\]>=([0-9.]+),', (REPO / "pyproject.toml").read_text(),
                    re.M)
    assert job["spec"]["rayClusterSpec"]["rayVersion"].startswith(pin.group(1))
    for group in _groups(job):
        # KubeRay's rayStartParams is map[string]string.
        assert all(isinstance(v, str) for v in group["rayStartParams"].values())
    (head,) = job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"]
    assert {p["name"]: p["containerPort"] for p in head["ports"]} == HEAD_PORTS
    assert yaml.safe_load(job["spec"]["runtimeEnvYAML"])["env_vars"]["KERAS_BACKEND"] == "tensorflow"


def test_rayjob_entrypoint_is_a_ray_sweep_on_a_server_store_through_the_real_cli(job, monkeypatch):
    monkeypatch.chdir(REPO)
    program, *args = shlex.split(job["spec"]["entrypoint"])
    assert program == "kg-train"
    args = [a.replace("/app/", f"{REPO}/") for a in args]
    result = CliRunner().invoke(cli.main, [*args, "--dry-run"], prog_name="kg-train")
    assert result.exit_code == 0, result.output
    assert "engine       ray at $RAY_ADDRESS" in result.output
    assert "tracking     http://mlflow:5000" in result.output  # not sqlite: many nodes


def test_ray_sbatch_is_bash_that_starts_a_head_and_workers_then_the_driver(monkeypatch):
    script = REPO / "docs" / "scaling" / "ray.sbatch"
    subprocess.run(["bash", "-n", str(script)], check=True)
    text = script.read_text()
    assert "ray start --head" in text and 'ray start --address "$head_ip:$port"' in text
    (line,) = [s for s in text.splitlines() if s.startswith("kg-train ")]
    args = shlex.split(line.replace('"$head_ip:$port"', "10.0.0.5:6379"))[1:]
    monkeypatch.chdir(REPO)
    result = CliRunner().invoke(cli.main, [*args, "--dry-run"], prog_name="kg-train",
                                env={"MLFLOW_TRACKING_URI": "http://mlflow.example.org:5000"})
    assert result.exit_code == 0, result.output
    assert "engine       ray at 10.0.0.5:6379" in result.output
