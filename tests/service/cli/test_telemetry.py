"""MLflow's usage telemetry is off in every entry point unless the user
turns it on (service/__init__.py), checked with MLflow's own switch.

MLflow already keeps quiet under pytest and CI (PYTEST_CURRENT_TEST, CI...,
mlflow/telemetry/utils.py): the subprocesses here run without those
markers, as a user's shell would, or the tests would pass without the fix.
"""

import subprocess
import sys

import pytest

from tests.service.shared_sweep import users_shell

TELEMETRY_HOST = "mlflow-telemetry.io"


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


def test_kg_train_verbose_run_never_contacts_mlflow_telemetry(tiny_sweep):
    # A real tiny run: a dry run never imports MLflow, so it would prove
    # nothing. -v logs urllib3's connections, where the config fetch showed.
    # The session's shared sweep is that run: `kg train -v` in a user's
    # shell (tests/service/shared_sweep.py).
    output = tiny_sweep.stdout + tiny_sweep.stderr
    assert tiny_sweep.returncode == 0, output[-3000:]
    assert "urllib3" in output or "DEBUG" in output  # -v did log
    assert TELEMETRY_HOST not in output
    # The printed `mlflow models serve` line runs in the user's shell.
    (serve,) = [l for l in tiny_sweep.stdout.splitlines() if "mlflow models serve" in l]
    assert "MLFLOW_DISABLE_TELEMETRY=true" in serve
    # Issue 30 §20: that command printed a "Downloading artifacts" line per file.
    assert "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR=false" in serve


def test_importing_the_service_turns_mlflow_download_bars_off_by_default():
    """Issue 30 §20: `kg report` printed 21 "Downloading artifacts" lines
    where stderr is not a terminal. MLflow's own switch, as it reads it."""
    code = (
        "import kg_service\n"
        "from mlflow.environment_variables import MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR as bar\n"
        "print(bar.get())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=users_shell(), capture_output=True, text=True,
        timeout=300,
    )
    assert out.stdout.split() == ["False"], out.stderr[-2000:]
