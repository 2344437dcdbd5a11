"""kg-train: exit codes, messages, --dry-run, flags, and the pipeline hand-off.

The pipeline itself is replaced by a stub here: these tests pin what the
shell does, and never import TensorFlow.
"""

import dataclasses
import os
import pathlib
import subprocess
import sys
import types

import pytest
from click.testing import CliRunner

import kg_service as service
from kg_service.cli import train as cli
from kg_service.config import excerpts as config_module
from kg_service.config.loading import load_config
from kg_service.errors import ServiceError

REPO = pathlib.Path(__file__).resolve().parents[3]
TINY = REPO / "configs" / "tiny.yaml"


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """An empty working directory; tests assert it stays empty."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return cwd


@pytest.fixture
def bad_config(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("data:\n  n_sampels: 300\ntraining:\n  epochs: 0\n", encoding="utf-8")
    return path


def invoke(*args, env=None):
    return CliRunner().invoke(cli.main, [str(a) for a in args], env=env, prog_name="kg-train")


@pytest.fixture
def pipeline(monkeypatch):
    """A stub kg_service.sweep.pipeline that records its call."""
    stub = types.ModuleType("kg_service.sweep.pipeline")
    stub.calls = []
    stub.result = 0
    stub.error = None

    def run(config, *, quiet, echo, resume=None, wait=False):
        stub.calls.append((config, quiet, echo))
        echo("stub pipeline ran")
        if stub.error is not None:
            raise stub.error
        return stub.result

    stub.run = run
    monkeypatch.setattr(cli, "run", run)
    monkeypatch.setitem(sys.modules, "kg_service.sweep.pipeline", stub)
    monkeypatch.setattr(service, "pipeline", stub, raising=False)
    return stub


# --- --dry-run. --------------------------------------------------------------


def test_dry_run_prints_the_plan_exits_0_and_writes_nothing(workdir):
    result = invoke("--config", TINY, "--dry-run")
    assert result.exit_code == 0, result.output
    assert 'kg-train plan for experiment "kg-smoke"' in result.stdout
    assert "2 activations x 2 seeds = 4 training runs" in result.stdout
    assert "sqlite:///mlflow.db" in result.stdout
    assert list(workdir.iterdir()) == []


def test_dry_run_never_calls_the_pipeline(workdir, pipeline):
    assert invoke("--config", TINY, "--dry-run").exit_code == 0
    assert pipeline.calls == []


def test_dry_run_shows_set_overrides_and_flags(workdir):
    result = invoke(
        "--config", TINY, "--dry-run",
        "--set", "seeds=[5, 6, 7]",
        "--set", "activations=[relu,gelu,swiglu]",
        "--set", "training.epochs=9",
        "--tracking-uri", "sqlite:///elsewhere.db",
        "--output-dir", "out/here",
    )
    assert result.exit_code == 0, result.output
    assert "3 activations x 3 seeds = 9 training runs" in result.stdout
    assert "5, 6, 7" in result.stdout and "9 epochs" in result.stdout
    assert "sqlite:///elsewhere.db (--tracking-uri)" in result.stdout
    assert "out/here" in result.stdout
    assert list(workdir.iterdir()) == []


def test_dry_run_shows_the_environment_tracking_uri(workdir):
    result = invoke("--config", TINY, "--dry-run", env={"MLFLOW_TRACKING_URI": "http://mlflow:5000"})
    assert "http://mlflow:5000 (from MLFLOW_TRACKING_URI)" in result.stdout


def test_tracking_uri_flag_wins_over_environment(workdir):
    result = invoke(
        "--config", TINY, "--dry-run", "--tracking-uri", "sqlite:///flag.db",
        env={"MLFLOW_TRACKING_URI": "http://mlflow:5000"},
    )
    # Named as given (a skeptic's probe: it said "(tracking.uri)" for the flag).
    assert "sqlite:///flag.db (--tracking-uri)" in result.stdout
    assert "mlflow:5000" not in result.stdout


def test_verbose_dry_run_also_prints_the_resolved_config(workdir):
    result = invoke("--config", TINY, "--dry-run", "-v", "--set", "seeds=3")
    assert result.exit_code == 0
    assert "resolved config:" in result.stdout
    assert "seeds:\n- 0\n- 1\n- 2\n" in result.stdout


@pytest.mark.parametrize("path", sorted((REPO / "configs").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_config_passes_dry_run(workdir, path):
    result = invoke("--config", path, "--dry-run")
    assert result.exit_code == 0, result.output
    assert list(workdir.iterdir()) == []


# --- Errors: exit 2, one paragraph, no traceback, nothing written. -----------


def assert_config_error(result, workdir, *fragments):
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr.startswith("kg-train: error: ")
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in result.stderr
    assert list(workdir.iterdir()) == []


def test_invalid_config_exits_2_listing_every_problem(workdir, bad_config, pipeline):
    result = invoke("--config", bad_config)
    assert_config_error(
        result, workdir,
        f"config file {bad_config}: 2 problems:",
        'data.n_sampels (line 2): unknown key. Did you mean "n_samples"?',
        "training.epochs (line 4): got 0 (an integer); expected a value >= 1.",
    )
    assert pipeline.calls == []


def test_invalid_config_with_dry_run_exits_2(workdir, bad_config):
    assert_config_error(invoke("--config", bad_config, "--dry-run"), workdir, "2 problems")


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("data: [\n", "line 2, column 1: not valid YAML"),
        ("- relu\n", "the top level is a list"),
        ("", "is empty"),
        ("activations: [relu, gleu]\n", 'Did you mean "gelu"?'),
        ("data:\n  dataset: moon\n", 'expected one of "moons", "circles", "digits", "python_code". Did you mean "moons"?'),
        ("model:\n  hidden_units: [64, 0]\n", "model.hidden_units[1] (line 2): got 0"),
        ("training:\n  optimizer: adamm\n", 'Did you mean "adam"?'),
        ("device:\n  type: tpu\n", "device.type (line 2)"),
        ("seeds: [1, 1]\n", "expected distinct values"),
        ("baseline: gelu_tanh\n", "expected one of the activations (relu, gelu)"),
        ('registry:\n  model_name: "x/{activation}"\n', 'gives "x/relu"'),
        ("training:\n  epochs: 5\n  epochs: 6\n", 'duplicate key "epochs"'),
    ],
)
def test_each_kind_of_config_mistake_exits_2_with_its_message(workdir, tmp_path, text, fragment):
    path = tmp_path / "sweep.yaml"
    path.write_text(text, encoding="utf-8")
    assert_config_error(invoke("--config", path), workdir, str(path), fragment)


def test_missing_config_file_exits_2_with_the_closest_name(workdir):
    result = invoke("--config", REPO / "configs" / "moon.yaml")
    assert_config_error(result, workdir, "no such file.", f'Did you mean "{REPO / "configs" / "moons.yaml"}"?')


@pytest.mark.parametrize(
    "override, fragment",
    [
        ("training.epochs=0", "training.epochs (--set training.epochs=0): got 0"),
        ("data.n_sampels=300", '--set data.n_sampels=300: data.n_sampels: unknown key. Did you mean "n_samples"?'),
        ("epochs", "--set epochs: expected KEY=VALUE"),
        ("activations=[relu", "--set activations=[relu: the value is not valid YAML"),
        ("activations=[relu,gleu]", 'Did you mean "gelu"?'),
    ],
)
def test_bad_set_override_exits_2_naming_the_flag(workdir, override, fragment):
    assert_config_error(invoke("--config", TINY, "--set", override), workdir, fragment)


@pytest.mark.parametrize("flag", ["--tracking-uri", "--output-dir"])
def test_empty_flag_value_exits_2(workdir, flag):
    assert_config_error(invoke("--config", TINY, "--dry-run", flag, " "), workdir, f"{flag}: got an empty string")


@pytest.mark.parametrize(
    "args, fragment",
    [
        ([], "Missing option '--config'"),
        (["--config", TINY, "--bogus"], "No such option '--bogus'"),
        (["--config"], "Option '--config' requires an argument"),
        (["--config", TINY, "--set"], "Option '--set' requires an argument"),
        (["--config", TINY, "extra"], "unexpected extra argument"),
    ],
)
def test_usage_errors_exit_2(workdir, args, fragment):
    result = invoke(*args)
    assert result.exit_code == 2
    assert fragment in result.stderr
    assert list(workdir.iterdir()) == []


def test_help_exits_0_and_lists_every_option():
    result = invoke("--help")
    assert result.exit_code == 0
    for option in ("--config", "--set", "--dry-run", "--tracking-uri", "--output-dir", "--quiet", "--verbose"):
        assert option in result.stdout


# --- The hand-off to kg_service.sweep.pipeline.run. -----------------------------------


def test_run_hands_the_validated_config_with_flags_to_the_pipeline(workdir, pipeline):
    result = invoke(
        "--config", TINY, "--set", "training.epochs=1",
        "--tracking-uri", "sqlite:///t.db", "--output-dir", "out", "--quiet",
    )
    assert result.exit_code == 0, result.output
    [(config, quiet, echo)] = pipeline.calls
    expected = load_config(TINY, ["training.epochs=1"])
    expected = dataclasses.replace(
        expected,
        tracking=dataclasses.replace(expected.tracking, uri="sqlite:///t.db"),
        output_dir="out",
    )
    assert config == expected
    assert quiet is True
    assert "stub pipeline ran" in result.stdout


def test_run_without_quiet_passes_quiet_false(workdir, pipeline):
    assert invoke("--config", TINY).exit_code == 0
    assert pipeline.calls[0][1] is False


@pytest.mark.parametrize("returned, code", [(0, 0), (None, 0), (1, 1), (3, 3)])
def test_exit_code_is_what_the_pipeline_returns(workdir, pipeline, returned, code):
    pipeline.result = returned
    assert invoke("--config", TINY).exit_code == code


def test_service_error_from_the_pipeline_exits_2_without_traceback(workdir, pipeline):
    pipeline.error = ServiceError("tracking store sqlite:///x.db: cannot be opened.")
    result = invoke("--config", TINY)
    assert result.exit_code == 2
    assert result.stderr == "kg-train: error: tracking store sqlite:///x.db: cannot be opened.\n"


def test_interrupt_exits_130_with_a_short_message(workdir, pipeline):
    pipeline.error = KeyboardInterrupt()
    result = invoke("--config", TINY)
    assert result.exit_code == 130
    assert "kg-train: interrupted." in result.stderr
    assert "Traceback" not in result.stderr


def test_unexpected_exception_propagates_as_a_bug(workdir, pipeline):
    pipeline.error = RuntimeError("a real bug")
    result = invoke("--config", TINY)
    assert isinstance(result.exception, RuntimeError)
    assert result.exit_code == 1


# --- Real processes: the shell as a user runs it. ----------------------------


def run_cli(args, cwd, env=None):
    env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run(
        [sys.executable, "-m", "kg_service.cli.train", *map(str, args)],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=60,
    )


def test_process_with_bad_config_exits_2_one_paragraph_no_traceback(tmp_path, bad_config):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    out = run_cli(["--config", bad_config, "--set", "model.dropout=1.5"], cwd)
    assert out.returncode == 2
    assert out.stdout == ""
    assert out.stderr.startswith(f"kg-train: error: config file {bad_config}: 3 problems:\n")
    assert "Traceback" not in out.stderr
    assert "model.dropout (--set model.dropout=1.5)" in out.stderr
    assert list(cwd.iterdir()) == []


def billion_laughs(path, where):
    """A YAML alias bomb: 9 levels of 9 aliases, 9**9 strings from 700 bytes."""
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    path.write_text("\n".join(lines) + "\n" + where + "\n")
    return path


@pytest.mark.parametrize(
    "where, key",
    [("activations: *a9", "activations[0]"), ("model:\n  hidden_units: *a9", "model.hidden_units[0]")],
)
def test_alias_bomb_under_a_known_key_exits_2_with_an_excerpt(tmp_path, where, key):
    # The error message printed the whole value: > 90 s and > 1 GB (issue
    # 15). run_cli's timeout (60 s) bounds the test; no timing assertion.
    bomb = billion_laughs(tmp_path / "bomb.yaml", where)
    out = run_cli(["--config", bomb, "--dry-run"], tmp_path)
    assert out.returncode == 2, out.stderr[-2000:]
    assert out.stderr.startswith(f"kg-train: error: config file {bomb}: ")
    assert "Traceback" not in out.stderr
    (line,) = [l for l in out.stderr.splitlines() if l.strip().startswith(f"{key} ")]
    assert '[[[[[[[[["lol", "lol"' in line and " ... (a list)" in line
    assert len(out.stderr) < 20 * (config_module.SHOW_LIMIT + 200)


def test_process_usage_error_exits_2(tmp_path):
    out = run_cli(["--dry-run"], tmp_path)
    assert out.returncode == 2 and "Missing option '--config'" in out.stderr
    assert "Usage: kg-train" in out.stderr


def test_process_dry_run_is_fast_and_imports_no_tensorflow(tmp_path):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    code = (
        "import sys\n"
        "from kg_service.cli.train import main\n"
        f"main(['--config', {str(TINY)!r}, '--dry-run'], standalone_mode=False)\n"
        "heavy = ('tensorflow', 'keras', 'mlflow', 'kg_service.sweep.pipeline')\n"
        "print('loaded:', sorted(m for m in heavy if m in sys.modules))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert "2 activations x 2 seeds = 4 training runs" in out.stdout
    assert out.stdout.strip().endswith("loaded: []")
    assert list(cwd.iterdir()) == []


ENTRY_POINT = pathlib.Path(sys.executable).with_name("kg-train")


@pytest.mark.skipif(not ENTRY_POINT.exists(), reason="package not installed (pip install -e .)")
def test_installed_entry_point_exits_2_on_a_bad_config(tmp_path, bad_config):
    out = subprocess.run(
        [str(ENTRY_POINT), "--config", str(bad_config)],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 2
    assert out.stderr.startswith("kg-train: error: ") and "Traceback" not in out.stderr


def test_help_texts_and_readme_say_the_flag_wins_over_the_environment():
    # Pinned by test_run_output's real run; `kg --help` listed
    # MLFLOW_TRACKING_URI first and the README put it before tracking.uri
    # (issue 15).
    from kg_service.cli import main as kg

    def words(text):
        return " ".join(text.split())

    kg_help = words(CliRunner().invoke(kg.main, ["--help"]).output)
    assert "--tracking-uri, else MLFLOW_TRACKING_URI, else ./mlflow.db" in kg_help
    assert "wins over tracking.uri and MLFLOW_TRACKING_URI" in words(invoke("--help").output)
    readme = words((pathlib.Path(__file__).parents[3] / "README.md").read_text())
    assert "`--tracking-uri`, else `MLFLOW_TRACKING_URI`, else `./mlflow.db`" in readme
    assert (
        "`--tracking-uri http://host:5000`, else `tracking.uri` in the config, else "
        "`MLFLOW_TRACKING_URI`" in readme
    )


def test_the_printed_resume_command_repeats_the_sets_and_smoke_it_ran_with():
    # A skeptic's probe: the printed command left out --set, so running it
    # was refused ("this config differs from the sweep's: training.epochs").
    from kg_service.cli import messages
    from kg_service.errors import ResumeHint

    hint = ResumeHint(run_id="abc", config_path="c.yaml", output_dir="out",
                      sets=("training.epochs=1500", "seeds=[0, 1]"), smoke=True)
    assert messages.resume_command(hint) == (
        "kg-train --config c.yaml --output-dir out --set training.epochs=1500 "
        "--set 'seeds=[0, 1]' --smoke --resume abc"
    )


@pytest.mark.parametrize(
    "args",
    [
        ["models"],
        ["report", "--experiment", "moons"],
        ["plan", "--experiment", "moons"],
        ["predict", "models:/moons-gelu@champion", "--input", "-"],
    ],
    ids=["models", "report", "plan", "predict"],
)
def test_a_read_only_command_on_a_missing_sqlite_store_exits_2_and_creates_nothing(
    tmp_path, monkeypatch, args
):
    # A skeptic's probe: `kg models --tracking-uri sqlite:///../w1/mlflw.db`
    # (a typo) said "No registered models", exit 0, and left a new empty
    # database behind; each read-only command in an empty folder left one.
    from kg_service.cli.main import main as kg

    monkeypatch.chdir(tmp_path)
    (tmp_path / "mlflow.db").write_bytes(b"")  # a store beside it: the did-you-mean
    typo = tmp_path / "mlflw.db"
    result = CliRunner().invoke(kg, [*args, "--tracking-uri", f"sqlite:///{typo}"], input="0.5,-0.2\n")
    assert result.exit_code == 2, result.output
    assert f"{typo} does not exist" in result.output and "mlflow.db" in result.output
    assert "Traceback" not in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlflow.db"]


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the one shown
def test_an_interrupt_a_finalizer_swallowed_stops_the_sweep_at_its_next_event():
    # A skeptic's probe: Ctrl-C late in a sweep landed in SQLAlchemy's
    # InstanceState._cleanup, printed "Exception ignored ... KeyboardInterrupt",
    # and the sweep went on to register and exit 0.
    import gc
    import signal

    from kg_service.cli import options
    from kg_service.cli.progress import SweepProgress

    class Finalized:
        def __del__(self):
            os.kill(os.getpid(), signal.SIGINT)  # the handler runs inside __del__

    progress = SweepProgress(quiet=True)
    with options.sigterm_as_interrupt():
        Finalized()
        gc.collect()  # the KeyboardInterrupt was raised in __del__, and ignored
        with pytest.raises(KeyboardInterrupt):
            progress.stage("registering models")
        progress.stage("a stage after the interrupt was raised once")  # not again
