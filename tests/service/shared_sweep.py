"""One real `kg train` sweep per pytest run, for every module that only
reads what a sweep leaves behind (issue 17): its store, registry,
SavedModel, report and printed output. `tiny_sweep` in
tests/service/conftest.py hands it out.

What it is: configs/tiny.yaml cut to one gelu member (`kg train --set
activations=[gelu] --set seeds=1`), run verbose (`-v`) in a user's shell
(no pytest or CI markers, so MLflow's telemetry would be on unless
kg_service turns it off), with `--tracking-uri` naming `mlflow.db` while
`MLFLOW_TRACKING_URI` names `env.db`, and `--output-dir sweep`. Each
reader asserts its own part: serving/test_kg.py (kg serve, predict,
models), cli/test_run_output.py (which store wins, the printed `Serve:`
command) and cli/test_telemetry.py (no telemetry host contacted).
A second shared sweep, `tiny-smoke-sweep`: configs/tiny.yaml `--smoke` without
export (two activations of two seeds: something to compare), trained in
the first asking worker's own process (`train_smoke`), for the
readers that need a comparison: analysis/test_report.py (`kg report`
and `kg plan` of it) and sweep/test_shards.py (the single-machine sweep
two shards must equal). `tiny_smoke_sweep` in tests/service/conftest.py
hands it out; each of those modules trained the same sweep before.

A reader must not write into the sweep's folder or store: the other
readers, maybe on another xdist worker, read it at the same time. A test
that changes a sweep trains its own.

Under pytest-xdist each worker builds its session fixtures itself; this
one is built once for all of them: the first worker to ask trains it
under a lock in the run's shared temporary folder and writes the result
beside it, the others wait for the lock and read that result.
"""

import dataclasses
import fcntl
import json
import os
import pathlib
import shutil
import subprocess
from typing import Optional

from tests.service import servers

REPO = pathlib.Path(__file__).resolve().parents[2]
TINY = REPO / "configs" / "tiny.yaml"
MODEL = "tiny-gelu"  # tiny.yaml's "tiny-{activation}"

# MLflow 3.17's `_is_ci_env_or_testing` markers, and the switches themselves.
NOT_A_USERS_SHELL = {
    "PYTEST_CURRENT_TEST", "GITHUB_ACTIONS", "CI", "CIRCLECI", "GITLAB_CI",
    "JENKINS_URL", "TRAVIS", "TF_BUILD", "BITBUCKET_BUILD_NUMBER",
    "CODEBUILD_BUILD_ARN", "BUILDKITE", "TEAMCITY_VERSION", "CLOUD_RUN_EXECUTION",
    "RUNBOT_HOST_URL", "RUNBOT_BUILD_NAME", "RUNBOT_WORKER_ID",
    "MLFLOW_DISABLE_TELEMETRY", "DO_NOT_TRACK",
}  # fmt: skip


def users_shell(**extra):
    """os.environ without pytest's and CI's markers, as a user's shell."""
    env = {k: v for k, v in os.environ.items() if k not in NOT_A_USERS_SHELL}
    env["PYTHONPATH"] = str(REPO)
    env.update(extra)
    return env


@dataclasses.dataclass(frozen=True)
class TinySweep:
    """The shared sweep: its folder, its two stores, what `kg train` printed."""

    cwd: pathlib.Path
    uri: str  # --tracking-uri: the store the sweep went to
    env_uri: Optional[str]  # MLFLOW_TRACKING_URI in the sweep's environment: unused
    returncode: int
    stdout: str
    stderr: str

    @property
    def db(self):
        return self.cwd / "mlflow.db"

    @property
    def saved_model(self):
        """The champion's SavedModel (version 1 of the only model)."""
        return self.cwd / "exports" / MODEL / "1"


def train(cwd):
    """Runs the sweep in `cwd` (empty); returns a `TinySweep`."""
    uri, env_uri = f"sqlite:///{cwd / 'mlflow.db'}", f"sqlite:///{cwd / 'env.db'}"
    done = subprocess.run(
        [os.path.join(servers.VENV_BIN, "kg"), "train", "--config", str(TINY),
         "--set", "activations=[gelu]", "--set", "seeds=1", "--tracking-uri", uri,
         "--output-dir", "sweep", "-v"],
        cwd=cwd, env=users_shell(MLFLOW_TRACKING_URI=env_uri), capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    return TinySweep(cwd, uri, env_uri, done.returncode, done.stdout, done.stderr)


def train_smoke(cwd):
    """`kg-train --config configs/tiny.yaml --smoke --set export.enabled=false
    --output-dir sweep -q` in `cwd` (empty), MLFLOW_TRACKING_URI unset: the
    experiment kg-smoke, models tiny-{relu,gelu}-smoke; a `TinySweep`.

    Run in this process (click's runner, tests/service/in_process.py): its
    readers check what it leaves in the store and the folder, not the
    process, and a kg-train process paid TensorFlow's and MLflow's
    start-up, which this worker has paid already (issue 17). This config's
    `--smoke` as a kg-train process: test_smoke_configs.py[tiny]."""
    import pytest
    from mlflow.tracking._model_registry import utils as registry_utils
    from mlflow.tracking._tracking_service import utils as tracking_utils

    from tests.service import in_process

    uri = f"sqlite:///{cwd / 'mlflow.db'}"
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(cwd)  # --output-dir is relative
        patch.delenv("MLFLOW_TRACKING_URI", raising=False)
        # The sweep sets MLflow's process-wide URIs: the asking test's are put back.
        patch.setattr(registry_utils, "_registry_uri", registry_utils._registry_uri)
        patch.setattr(tracking_utils, "_tracking_uri", tracking_utils._tracking_uri)
        done = in_process.kg_train("--config", TINY, "--smoke", "--set", "export.enabled=false",
                                   "--tracking-uri", uri, "--output-dir", "sweep")
    stderr = done.stderr + ("" if done.exception is None or done.exit_code == 0 else repr(done.exception))
    return TinySweep(cwd, uri, None, done.exit_code, done.stdout, stderr)


def once(shared_root, name="tiny-sweep", trainer=train):
    """The sweep `trainer` makes in `shared_root`/`name`, trained by the
    first caller of any process (under an exclusive lock), read back by
    the others."""
    shared_root.mkdir(parents=True, exist_ok=True)
    result = shared_root / f"{name}.json"
    with open(shared_root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not result.exists():
            cwd = shared_root / name
            shutil.rmtree(cwd, ignore_errors=True)  # a caller killed mid-sweep
            cwd.mkdir()
            sweep = trainer(cwd)
            fields = dataclasses.asdict(sweep)
            result.write_text(json.dumps({**fields, "cwd": str(sweep.cwd)}))
    fields = json.loads(result.read_text())
    return TinySweep(**{**fields, "cwd": pathlib.Path(fields["cwd"])})
