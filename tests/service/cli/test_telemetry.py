"""MLflow's usage telemetry is off in every entry point unless the user
turns it on (service/__init__.py), checked with MLflow's own switch.

MLflow already keeps quiet under pytest and CI (PYTEST_CURRENT_TEST, CI...,
mlflow/telemetry/utils.py): the subprocesses here run without those
markers, as a user's shell would, or the tests would pass without the fix.
"""

import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]
TINY = REPO / "configs" / "tiny.yaml"
TELEMETRY_HOST = "mlflow-telemetry.io"
# MLflow 3.17's `_is_ci_env_or_testing` markers, and the switches themselves.
NOT_A_USERS_SHELL = {
    "PYTEST_CURRENT_TEST", "GITHUB_ACTIONS", "CI", "CIRCLECI", "GITLAB_CI",
    "JENKINS_URL", "TRAVIS", "TF_BUILD", "BITBUCKET_BUILD_NUMBER",
    "CODEBUILD_BUILD_ARN", "BUILDKITE", "TEAMCITY_VERSION", "CLOUD_RUN_EXECUTION",
    "RUNBOT_HOST_URL", "RUNBOT_BUILD_NAME", "RUNBOT_WORKER_ID",
    "MLFLOW_DISABLE_TELEMETRY", "DO_NOT_TRACK",
}  # fmt: skip


def users_shell(**extra):
    env = {k: v for k, v in os.environ.items() if k not in NOT_A_USERS_SHELL}
    env["PYTHONPATH"] = str(REPO)
    env.update(extra)
    return env


def telemetry_state(env):
    """(MLFLOW_DISABLE_TELEMETRY, MLflow's verdict) after importing kg_service."""
    code = (
        "import os, kg_service\n"
        "from mlflow.telemetry import utils\n"
        "assert not utils._is_ci_env_or_testing()  # a user's shell\n"
        "print(os.environ.get('MLFLOW_DISABLE_TELEMETRY'), utils.is_telemetry_disabled())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return tuple(out.stdout.split())


def test_importing_the_service_turns_mlflow_telemetry_off_by_default():
    assert telemetry_state(users_shell()) == ("true", "True")


@pytest.mark.parametrize("value", ["false", "true"])
def test_a_users_own_telemetry_setting_wins(value):
    assert telemetry_state(users_shell(MLFLOW_DISABLE_TELEMETRY=value)) == (
        value,
        str(value == "true"),
    )


def test_kg_train_verbose_run_never_contacts_mlflow_telemetry(tmp_path):
    # A real tiny run: a dry run never imports MLflow, so it would prove
    # nothing. -v logs urllib3's connections, where the config fetch showed.
    result = subprocess.run(
        [sys.executable, "-m", "kg_service.cli.train", "--config", str(TINY), "--smoke", "-v",
         "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}",
         "--output-dir", str(tmp_path / "out"), "--set", f"export.dir={tmp_path / 'exports'}"],
        cwd=tmp_path, env=users_shell(), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert "urllib3" in output or "DEBUG" in output  # -v did log
    assert TELEMETRY_HOST not in output
    # The printed `mlflow models serve` line runs in the user's shell.
    (serve,) = [l for l in result.stdout.splitlines() if "mlflow models serve" in l]
    assert "MLFLOW_DISABLE_TELEMETRY=true" in serve
