"""A fixed-seed tiny sweep gives today what it gave before the service's
house was rebuilt (issue 7: tasks, stages, tracking seam): the terminal
table, the registered champions and every number of summary.json.

The golden files in golden/tiny_sweep/ were written by kg-train at commit
1ec2efe (before the rebuild) from golden/tiny_sweep/config.yaml, and
rewritten when issue 19 gave each seed its own data split (`vary`), with

    KERAS_BACKEND=tensorflow .venv/bin/python -m tests.service.sweep.test_golden

A change that alters what a user sees fails here; a deliberate one
rewrites them with that command.

The golden sweep runs kg-train in the test's process (click's runner):
what is checked is what it prints and leaves behind, not the process,
which paid TensorFlow's and MLflow's start-up (issue 17). The refused
resumes read the same finished sweep; each trained a one-member sweep
of its own before. kg-train as a real process: the stopped and killed
sweeps of sweep/test_faults.py, test_smoke_configs.py.
"""

import json
import math
import pathlib
import re
import shutil

import pytest

from tests.service.sweep.test_end_to_end import kg_train
from tests.service.sweep.test_end_to_end import kg_train_here

GOLDEN = pathlib.Path(__file__).parents[1] / "golden" / "tiny_sweep"


def _same(expected, actual, path="summary"):
    if isinstance(expected, dict):
        assert isinstance(actual, dict) and set(actual) >= set(expected), path
        for key in expected:
            if "seconds" not in key:  # wall time differs run to run
                _same(expected[key], actual[key], f"{path}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), path
        for i, (e, a) in enumerate(zip(expected, actual)):
            _same(e, a, f"{path}[{i}]")
    elif isinstance(expected, float) and not isinstance(expected, bool):
        # Float32 training: losses agree to ~1e-8 (summation order), not bits.
        assert math.isclose(expected, actual, rel_tol=1e-5, abs_tol=1e-6), (
            f"{path}: {actual} != {expected}"
        )
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"


def _golden_args(tmp_path):
    shutil.copy(GOLDEN / "config.yaml", tmp_path / "config.yaml")
    return ["--config", "config.yaml", "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}"]


def _run_golden_sweep(tmp_path):
    """kg-train in a process of its own (`regenerate`, outside pytest)."""
    return kg_train(tmp_path, *_golden_args(tmp_path))


@pytest.fixture(scope="module")
def golden_sweep(tmp_path_factory):
    """The golden config's sweep, kg-train in this process: (folder, its
    arguments, click's result). The tests below only read it."""
    cwd = tmp_path_factory.mktemp("golden")
    args = _golden_args(cwd)
    out = kg_train_here(cwd, *args)
    assert out.exit_code == 0, (out.stderr + str(out.exception))[-3000:]
    return cwd, args, out


def test_tiny_sweep_summary_table_and_champions_are_unchanged(golden_sweep):
    tmp_path, _, out = golden_sweep
    # One line is new since then, on purpose: which metric the table
    # compares and its direction (issue 8, statistics follow the metric).
    lines = [l for l in out.stdout.splitlines() if not l.startswith("Metric: ")]

    table = (GOLDEN / "table.txt").read_text().splitlines()
    start = lines.index(table[0])
    assert lines[start : start + len(table)] == table

    for line in (GOLDEN / "registered.txt").read_text().splitlines():
        assert line in lines, line

    (summary,) = (tmp_path / "kg-output").rglob("summary.json")
    _same(json.loads((GOLDEN / "summary.json").read_text()), json.loads(summary.read_text()))


def test_resume_refuses_a_changed_config_or_a_finished_sweep(golden_sweep):
    """Three refused resumes of the finished golden sweep, each exit 2
    with one paragraph, kg-train's command in this process (click's
    runner: its exit code, its stdout and stderr apart); the real
    process's refusal is cli/test_cli.py's. A refusal writes nothing:
    the store and the output folder stay as the sweep left them."""
    import mlflow

    cwd, args, out = golden_sweep
    run_id = re.search(r"Sweep run (\w+)", out.stdout).group(1)
    uri = f"sqlite:///{cwd / 'mlflow.db'}"
    client = mlflow.MlflowClient(uri, registry_uri=uri)

    def left_behind():
        (experiment,) = client.search_experiments(filter_string="name = 'golden-tiny'")
        runs = client.search_runs([experiment.experiment_id], max_results=1000)
        versions = client.search_model_versions("name LIKE 'golden-%'")
        files = sorted(str(p.relative_to(cwd)) for p in (cwd / "kg-output").rglob("*"))
        return sorted((r.info.run_id, r.info.status) for r in runs), len(versions), files

    before = left_behind()
    again = kg_train_here(cwd, *args, "--resume", run_id)
    assert again.exit_code == 2 and "finished already" in again.stderr
    changed = kg_train_here(cwd, *args, "--set", "training.learning_rate=0.5", "--resume", run_id)
    assert changed.exit_code == 2
    assert "training.learning_rate: was 0.01, now 0.5" in changed.stderr
    missing = kg_train_here(cwd, *args, "--resume", "0123abc")
    assert missing.exit_code == 2 and "no such run" in missing.stderr
    # Other seeds or activations were taken silently (a skeptic's probe): the
    # resumed sweep trained and compared seeds its params and report did not
    # name, or dropped an activation its params still listed.
    seeds = kg_train_here(cwd, *args, "--set", "seeds=[5,6]", "--resume", run_id)
    assert seeds.exit_code == 2 and "seeds: was [0, 1, 2], now [5, 6]" in seeds.stderr, seeds.stderr
    fewer = kg_train_here(cwd, *args, "--set", "activations=[relu,gelu]", "--resume", run_id)
    assert fewer.exit_code == 2 and "activations: was" in fewer.stderr, fewer.stderr
    for refused in (again, changed, missing, seeds, fewer):
        assert refused.exception is None or isinstance(refused.exception, SystemExit)
        assert "Traceback" not in refused.output
    assert left_behind() == before


def regenerate():
    """Rewrites the golden files from a fresh run of golden/tiny_sweep/config.yaml."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = _run_golden_sweep(pathlib.Path(tmp))
        assert out.returncode == 0, out.stderr[-3000:]
        lines = [l for l in out.stdout.splitlines() if not l.startswith("Metric: ")]
        start = next(i for i, l in enumerate(lines) if l.startswith("activation "))
        end = next(i for i, l in enumerate(lines) if l.startswith("Registered models"))
        (GOLDEN / "table.txt").write_text("\n".join(lines[start:end]).rstrip("\n") + "\n")
        registered = [l for l in lines if l.startswith("  models:/")]
        (GOLDEN / "registered.txt").write_text("\n".join(registered) + "\n")
        (summary,) = (pathlib.Path(tmp) / "kg-output").rglob("summary.json")
        shutil.copy(summary, GOLDEN / "summary.json")


if __name__ == "__main__":
    regenerate()
