"""`kg-train --config C --smoke` runs every shipped config end to end in
seconds: the same pipeline (train, track, compare, export, register) at
smoke sizes, into a `-smoke` experiment and `-smoke` model names. Each
config runs in the test's own process (click's runner, as the golden and
end-to-end sweeps do): the checks are about the exit code, the printed
registrations, the report and the exports, not the process, and a
kg-train process pays TensorFlow's and MLflow's start-up (issue 30 §25).
The installed entry point runs as a process in test_smoke_plan_shows_the_
smoke_sizes and cli/test_cli.py."""

import pathlib

import pytest

from tests.service.sweep.test_end_to_end import kg_train, kg_train_here

CONFIGS = sorted((pathlib.Path(__file__).parents[2] / "configs").glob("*.yaml"))


def test_every_shipped_config_is_covered():
    assert {c.name for c in CONFIGS} >= {"moons.yaml", "digits.yaml", "tiny.yaml"}


@pytest.mark.parametrize("config", CONFIGS, ids=[c.stem for c in CONFIGS])
def test_smoke_runs_the_config_end_to_end(config, tmp_path):
    out = kg_train_here(
        tmp_path,
        "--config",
        str(config),
        "--smoke",
        "--tracking-uri",
        f"sqlite:///{tmp_path / 'mlflow.db'}",
        "--output-dir",
        str(tmp_path / "out"),
        "--set",
        f"export.dir={tmp_path / 'exports'}",
    )
    assert out.exit_code == 0, (out.output + str(out.exception))[-3000:]
    registered = [l for l in out.stdout.splitlines() if l.startswith("  models:/")]
    # Each name carries -smoke once: from the experiment ({experiment}-{activation}) or a suffix.
    names = [l.split()[0].split("/")[1] for l in registered]
    assert registered and all(n.count("-smoke") == 1 for n in names), out.stdout
    assert list((tmp_path / "out").rglob("report.md"))
    assert list((tmp_path / "exports").rglob("saved_model.pb"))


def test_smoke_plan_shows_the_smoke_sizes(tmp_path):
    out = kg_train(
        tmp_path, "--config", str(CONFIGS[0]), "--smoke", "--dry-run"
    )
    assert out.returncode == 0, out.stderr
    assert "-smoke" in out.stdout
