"""Every example in every command's --help names what the shipped configs
make, and runs (issue 30 §18: `kg plan --help` said `--experiment moons`;
the shipped config makes `moons-relu-vs-gelu`; "a test runs every `--help`
example against a real tiny store").

Two checks per example. Its names: each experiment, study, registered
model and config it names is one a shipped config (or its --smoke run)
makes; click parses it as the command's own arguments. Its run: the
example is run in this process (click's runner) against copies of the
session's two real tiny stores (tests/service/shared_sweep.py: the tiny
sweep, registered and exported, for serve, predict and models; the tiny
--smoke sweep, two activations of two seeds, for report, plan and
results), and must exit 0 with no traceback. A store of every shipped
config would mean training each one, so the run puts the tiny store's
thing of the same kind where the example names another config's (an
experiment, a registered model and version, a study, a sweep id, a
tracking server): the first check holds the names, the second the
command line's shape and flow. What a run cannot do here, and what is
run instead, is said where it is done (`_runnable`, `_no_server`).
"""

import contextlib
import os
import pathlib
import re
import shlex
import shutil
import sqlite3
import subprocess
import types

import numpy as np
import pytest

from kg_service.cli.main import main
from kg_service.cli.train import main as kg_train
from kg_service.config import derived
from kg_service.config.loading import load_config
from tests.service import in_process

REPO = pathlib.Path(__file__).resolve().parents[3]
CONFIGS = [load_config(p) for p in sorted((REPO / "configs").glob("*.yaml"))]
COMMANDS = {"kg-train": kg_train, **{f"kg {n}": c for n, c in main.commands.items()}}
# Commands whose examples read a sweep's comparison: run on the --smoke store.
COMPARING = {"kg report", "kg plan", "kg results"}
# The tiny stores' stand-ins; the --smoke sweep joins the paper page's
# study "revival" (`kg results` renders a page of the shipped studies).
TINY_MODEL, TINY_EXPERIMENT, TINY_STUDY = "tiny-gelu", "kg-smoke", "revival"


def _names():
    """What a user of the shipped configs (and their --smoke runs) has."""
    experiments, studies, models = set(), set(), set()
    for config in CONFIGS:
        for variant in (config, derived.smoke(config)):
            experiments.add(variant.experiment)
            studies.add(variant.study)
            models.update(derived.registered_model_name(variant, a) for a in variant.activations)
    return experiments, studies - {None}, models


def _examples():
    """(name, command, args, stdin): each example line of each --help; a
    line `producer | kg ...` feeds the producer's output to the command,
    one `kg ... | consumer` is run without its consumer."""
    for name, command in COMMANDS.items():
        help_text = command.help or ""
        if "Examples:" not in help_text:
            continue
        for line in help_text.split("Examples:", 1)[1].splitlines():
            parts = [p.strip() for p in line.split("  #", 1)[0].split("|")]
            for i, part in enumerate(parts):
                if part == name or part.startswith(name + " "):
                    yield name, command, shlex.split(part[len(name):]), " | ".join(parts[:i])


EXAMPLES = list(_examples())
IDS = [" ".join([n, *a]) for n, _, a, _ in EXAMPLES]


def test_every_command_with_examples_is_covered():
    assert {"kg plan", "kg report", "kg-train", "kg serve", "kg predict",
            "kg models", "kg results"} <= {n for n, _, _, _ in EXAMPLES}  # fmt: skip


@pytest.mark.parametrize("name, command, args, stdin", EXAMPLES, ids=IDS)
def test_a_help_example_names_what_the_shipped_configs_make(name, command, args, stdin):
    experiments, studies, models = _names()
    command.make_context(name, list(args))  # its options and arguments parse
    for flag, value in zip(args, args[1:]):
        if flag == "--experiment":
            assert value in experiments, f"{name}: no shipped config makes experiment {value!r}"
        if flag == "--study":
            assert value in studies, f"{name}: no shipped config joins study {value!r}"
        if flag == "--config":
            assert (REPO / value).is_file(), value
    for value in args:
        model = re.match(r"models:/([^@/]+)", value) or re.match(r"exports/([^/]+)/", value)
        if model:
            assert model.group(1) in models, f"{name}: no shipped config registers {model.group(1)!r}"


@pytest.fixture(scope="module")
def stores(tmp_path_factory, tiny_sweep, tiny_smoke_sweep):
    """Two user folders: `models`, a copy of the tiny sweep (mlflow.db,
    exports/) with the files the examples read (request.json, x.npy,
    token.txt); `compare`, a copy of the --smoke sweep's store, its sweep
    also joined to a study. Copies: an example may write (`--register`),
    and other modules read the shared sweeps meanwhile. Returns
    {"models": folder, "compare": folder, "sweep_id": the --smoke sweep's
    parent run id, which --sweep-id takes as it takes a sharded sweep's id}."""
    import mlflow  # the store's tags: only once the shared sweeps exist

    from kg_service.sweep import resume
    from kg_service.tracking import store

    root = tmp_path_factory.mktemp("help-examples")
    folders = {"models": root / "models", "compare": root / "compare"}
    for folder, sweep in ((folders["models"], tiny_sweep), (folders["compare"], tiny_smoke_sweep)):
        folder.mkdir()
        shutil.copy(sweep.db, folder / "mlflow.db")
    shutil.copytree(tiny_sweep.cwd / "exports", folders["models"] / "exports")
    for folder in folders.values():  # --config configs/X.yaml: a checkout's
        (folder / "configs").symlink_to(REPO / "configs")
    # `kg results`' defaults: the store results-store/mlflow.db, the page docs/results.md.
    (folders["compare"] / "docs").mkdir()
    (folders["compare"] / "results-store").mkdir()
    (folders["compare"] / "results-store" / "mlflow.db").symlink_to(folders["compare"] / "mlflow.db")
    (folders["models"] / "request.json").write_text('{"inputs": [[0.5, -0.2], [1.0, 2.0]]}')
    np.save(folders["models"] / "x.npy", np.array([[0.5, -0.2], [1.0, 2.0]], np.float32))
    (folders["models"] / "token.txt").write_text("a-test-token\n")
    client = mlflow.MlflowClient(f"sqlite:///{folders['compare'] / 'mlflow.db'}")
    experiment = client.get_experiment_by_name(TINY_EXPERIMENT)
    (parent,) = client.search_runs([experiment.experiment_id], f"tags.`kg.role` = '{store.SWEEP_ROLE}'")
    for key, value in {"kg.study": TINY_STUDY, "kg.metric": "test_accuracy",
                       "kg.higher_is_better": "true"}.items():  # fmt: skip
        client.set_tag(parent.info.run_id, key, value)
    # `kg report --register` registers a sweep nothing registered yet (the
    # last shard's job, done by hand): the copy's claim is taken back, as
    # before the sweep registered. A write-once param: MLflow's client
    # deletes none, so it goes from the copy's table.
    with contextlib.closing(sqlite3.connect(folders["compare"] / "mlflow.db")) as db, db:
        db.execute("DELETE FROM params WHERE run_uuid = ? AND key = ?",
                   (parent.info.run_id, resume.REGISTRAR))  # fmt: skip
    return {**folders, "sweep_id": parent.info.run_id}


def _runnable(name, args, stores):
    """The example's arguments as run here: the tiny stores' names for
    the shipped configs', the folder's own store for any tracking URI
    (`http://mlflow:5000` is docker compose's server), a file in the
    folder for an absolute path, and kg-train with `--dry-run` (a real
    sweep per example would cost a training each; every shipped config's
    --smoke sweep runs in test_smoke_configs.py)."""
    experiments, studies, models = _names()
    model = "|".join(re.escape(m) for m in sorted(models, key=len, reverse=True))
    out, flag = [], None
    for value in args:
        if flag == "--experiment" and value in experiments:
            value = TINY_EXPERIMENT
        elif flag == "--study" and value in studies:
            value = TINY_STUDY
        elif flag == "--sweep-id":
            value = stores["sweep_id"]
        elif flag == "--tracking-uri":
            value = "sqlite:///mlflow.db"
        elif value.startswith("/"):
            value = pathlib.Path(value).name
        else:
            value = re.sub(rf"^models:/({model})/\d+$", f"models:/{TINY_MODEL}/1", value)
            value = re.sub(rf"^(models:/|exports/)({model})(?=[@/]|$)", rf"\g<1>{TINY_MODEL}", value)
            value = re.sub(rf"^exports/{TINY_MODEL}/\d+$", f"exports/{TINY_MODEL}/1", value)
            value = TINY_MODEL if value in models else value
        out.append(value)
        flag = value
    if name == "kg-train" and "--dry-run" not in out:
        out.append("--dry-run")
    return out


@contextlib.contextmanager
def _no_server():
    """`kg serve` as far as a server process: the token file read, the
    model resolved (downloaded, or a SavedModel wrapped) and uvicorn's
    command built, then no process started and the wait answered 0 while
    the resolved model folder still exists. The port is not checked: a
    port the example names may be taken on this machine (test_serving.py
    runs the servers; test_kg.py the busy port's exit 2)."""
    from kg_service.serving import scoring_app, server  # uvicorn, MLflow: this fixture's only

    started = []

    def popen(command, env, **_):
        started.append(env[scoring_app.MODEL_PATH_ENV])

    def wait(self, echo):
        assert started and os.path.isdir(started[-1]), started
        return 0

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(server, "check_port", lambda host, port: None)
        patch.setattr(server, "subprocess", types.SimpleNamespace(Popen=popen))
        patch.setattr(server.Server, "wait", wait)
        yield started


def run_example(name, command, args, stdin, stores):
    """The example run in the folder of its kind; click's result."""
    folder = stores["compare"] if name in COMPARING else stores["models"]
    feed = subprocess.run(["bash", "-c", stdin], capture_output=True, text=True,
                          check=True).stdout if stdin else None  # fmt: skip
    server = _no_server() if name == "kg serve" else contextlib.nullcontext()
    with pytest.MonkeyPatch.context() as patch, server:
        patch.chdir(folder)
        patch.delenv("MLFLOW_TRACKING_URI", raising=False)
        return in_process.invoke(command, *_runnable(name, args, stores), prog_name=name,
                                 input=feed)  # fmt: skip


def assert_ran(result):
    """Exit 0, nothing raised, no traceback printed."""
    printed = result.stdout + result.stderr
    assert result.exit_code == 0 and result.exception is None, printed[-3000:] + repr(result.exception)
    assert "Traceback" not in printed, printed[-3000:]


# `kg results --run` trains every study of the paper page first
# (docs/make_results.sh: the whole page's sweeps, an hour's CPU); its
# store-filling is tested in papers/test_page.py.
RUN_HERE = [e for e, i in zip(EXAMPLES, IDS) if i != "kg results --run"]


@pytest.mark.parametrize("name, command, args, stdin", RUN_HERE,
                         ids=[i for i in IDS if i != "kg results --run"])  # fmt: skip
def test_a_help_example_runs_against_a_real_tiny_store(name, command, args, stdin, stores):
    assert_ran(run_example(name, command, args, stdin, stores))


@pytest.mark.parametrize("line", [
    "kg plan --experiment moons",  # issue 30 §18's example: no such experiment
    "kg predict models:/tiny-gelu@champion --input missing.json",
    "kg report --study no-such-study",
])  # fmt: skip
def test_a_wrong_example_fails_its_run(line, stores):
    name = " ".join(line.split()[:2])
    with pytest.raises(AssertionError):
        assert_ran(run_example(name, COMMANDS[name], shlex.split(line)[2:], "", stores))
