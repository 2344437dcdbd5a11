"""The scheduler files docs/scaling/ ships are checked, not just shown.

- indexed-job.yaml: every field is one Kubernetes knows (it survives a
  round trip through the official client's V1Job model unchanged), it is
  an Indexed Job whose KG_SHARD_COUNT equals its completions, and its
  container's command, with a pod's JOB_COMPLETION_INDEX, goes through
  kg-train's real CLI (--dry-run) as shard i+1 of n.
- sweep.sbatch: bash parses it, its #SBATCH --array is 1-N, and its
  kg-train line, with a task's Slurm variables, goes through the real
  CLI as that shard.
"""

import pathlib
import re
import shlex
import subprocess

import pytest
import yaml
from click.testing import CliRunner

from kg_service.cli import train as cli

REPO = pathlib.Path(__file__).resolve().parents[3]
SCALING = REPO / "docs" / "scaling"


@pytest.fixture(autouse=True)
def _in_the_repository(monkeypatch):
    monkeypatch.chdir(REPO)  # the sbatch script runs from a checkout


def _dry_run(args, env):
    # The image's /app holds the repository's configs (docker/Dockerfile).
    args = [a.replace("/app/", f"{REPO}/") for a in args]
    result = CliRunner().invoke(cli.main, [*args, "--dry-run"], env=env, prog_name="kg-train")
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.fixture(scope="module")
def job():
    return yaml.safe_load((SCALING / "indexed-job.yaml").read_text())


def test_indexed_job_has_only_fields_kubernetes_knows(job):
    from kubernetes.client import ApiClient

    api = ApiClient()
    model = api._ApiClient__deserialize(job, "V1Job")
    # A misspelt or misplaced key is dropped by the model: the round trip
    # then differs from the file.
    assert api.sanitize_for_serialization(model) == job


def test_indexed_job_is_indexed_with_one_pod_per_shard(job):
    spec = job["spec"]
    assert job["apiVersion"] == "batch/v1" and job["kind"] == "Job"
    assert spec["completionMode"] == "Indexed"
    assert spec["completions"] == spec["parallelism"]
    assert spec["podReplacementPolicy"] == "Failed"
    (container,) = spec["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["KG_SHARD_COUNT"] == str(spec["completions"])
    args = container["args"]
    assert "--shard" in args
    following = args[args.index("--shard") + 1 :]
    assert not following or following[0].startswith("-"), "--shard takes its value from the pod"


def test_indexed_job_pods_run_their_shard_through_the_real_cli(job):
    spec = job["spec"]
    (container,) = spec["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    n = spec["completions"]
    for index in (0, n - 1):
        out = _dry_run(
            container["args"],
            {**env, "JOB_COMPLETION_INDEX": str(index), "SLURM_ARRAY_TASK_ID": None},
        )
        assert f"shard        {index + 1}/{n} (from Kubernetes)" in out


def test_sbatch_script_is_bash_with_an_array_and_runs_its_shard_through_the_real_cli():
    script = SCALING / "sweep.sbatch"
    subprocess.run(["bash", "-n", str(script)], check=True)
    text = script.read_text()
    (array,) = re.findall(r"^#SBATCH --array=(\S+)$", text, re.M)
    first, last = map(int, re.fullmatch(r"(\d+)-(\d+)", array).groups())
    count = last - first + 1
    (line,) = [l for l in text.splitlines() if re.match(r"(srun )?kg-train ", l)]
    words = shlex.split(line)
    args = words[words.index("kg-train") + 1 :]
    for task in (first, last):
        out = _dry_run(
            args,
            {
                "SLURM_ARRAY_TASK_ID": str(task),
                "SLURM_ARRAY_TASK_MIN": str(first),
                "SLURM_ARRAY_TASK_MAX": str(last),
                "SLURM_ARRAY_TASK_COUNT": str(count),
                "JOB_COMPLETION_INDEX": None,
            },
        )
        assert f"shard        {task - first + 1}/{count} (from Slurm)" in out
