"""Sharded sweeps: `kg-train --shard i/n` and `kg report`.

- `--shard` takes I/N, or with no value a Kubernetes Indexed Job's or a
  Slurm array's variables; every bad value exits 2 with one paragraph.
- The slices cover the grid exactly once, keep each activation's seeds
  together (they still train as one stacked model) and are the same in
  every process.
- Two shards on one store make one sweep whose report
  (from the last shard and from `kg report`) has the statistics of a
  single-machine sweep of the same config, number by number; one of them
  registers, once; a restarted shard trains nothing.
"""

import dataclasses
import json
import os
import pathlib
import subprocess
import sys

import pytest
from click.testing import CliRunner

from kg_service.cli import train as cli
from kg_service.cli import sharding
from kg_service.sweep import shards
from kg_service.config.schema import Config
from kg_service.config.loading import load_config
from kg_service.errors import ServiceError
from tests.service import servers
from tests.service import in_process
from tests.service.sweep.test_golden import _same

REPO = pathlib.Path(__file__).resolve().parents[3]
TINY = REPO / "configs" / "tiny.yaml"


# --- Which shard a job is. -------------------------------------------------


@pytest.mark.parametrize(
    "text, environ, expected",
    [
        ("1/3", {}, (1, 3)),
        (" 3 / 3 ", {}, (3, 3)),
        # Kubernetes: 0-based index; the count from the manifest's env.
        ("", {"JOB_COMPLETION_INDEX": "0", "KG_SHARD_COUNT": "4"}, (1, 4)),
        ("", {"JOB_COMPLETION_INDEX": "3", "KG_SHARD_COUNT": "4"}, (4, 4)),
        # Slurm: relative to the array's minimum (and step).
        ("", {"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_MIN": "1",
              "SLURM_ARRAY_TASK_COUNT": "2"}, (1, 2)),
        ("", {"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "2"}, (1, 2)),
        ("", {"SLURM_ARRAY_TASK_ID": "14", "SLURM_ARRAY_TASK_MIN": "10",
              "SLURM_ARRAY_TASK_STEP": "2", "SLURM_ARRAY_TASK_COUNT": "3"}, (3, 3)),
        # A value given wins over the environment.
        ("2/2", {"JOB_COMPLETION_INDEX": "0", "KG_SHARD_COUNT": "4"}, (2, 2)),
    ],
)
def test_shard_comes_from_the_flag_or_the_scheduler(text, environ, expected):
    shard = sharding.parse(text, environ)
    assert (shard.index, shard.count) == expected


@pytest.mark.parametrize(
    "text, environ, says",
    [
        ("0/3", {}, "1 <= INDEX <= COUNT (1-based"),
        ("4/3", {}, "gives shard 4 of 3"),
        ("a/b", {}, "expected INDEX/COUNT"),
        ("1/0", {}, "gives shard 1 of 0"),
        ("2", {}, "expected INDEX/COUNT"),
        ("", {}, "neither JOB_COMPLETION_INDEX"),
        ("", {"JOB_COMPLETION_INDEX": "1"}, "KG_SHARD_COUNT is not set"),
        ("", {"JOB_COMPLETION_INDEX": "x", "KG_SHARD_COUNT": "2"}, "not a whole number"),
        ("", {"JOB_COMPLETION_INDEX": "2", "KG_SHARD_COUNT": "2"}, "gives shard 3 of 2"),
        ("", {"SLURM_ARRAY_TASK_ID": "1"}, "SLURM_ARRAY_TASK_COUNT is not"),
        # --array=1,5 gives ids 1 and 5, count 2: id 5 cannot be a shard.
        ("", {"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_MIN": "1",
              "SLURM_ARRAY_TASK_COUNT": "2"}, "--array=1-N"),
        ("", {"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_MIN": "0",
              "SLURM_ARRAY_TASK_STEP": "2", "SLURM_ARRAY_TASK_COUNT": "2"}, "min + k * step"),
    ],
)
def test_bad_shards_are_one_clear_error(text, environ, says):
    with pytest.raises(ServiceError, match=None) as error:
        sharding.parse(text, environ)
    assert says in str(error.value)


def _invoke(*args, env=None):
    return CliRunner().invoke(cli.main, [str(a) for a in args], env=env, prog_name="kg-train")


@pytest.mark.parametrize(
    "args, env, says",
    [
        (["--shard", "0/3"], {}, "--shard: 0/3 gives shard 0 of 3"),
        (["--shard", "4/3"], {}, "gives shard 4 of 3"),
        (["--shard", "a/b"], {}, "--shard a/b: expected INDEX/COUNT"),
        (["--shard"], {"JOB_COMPLETION_INDEX": None, "SLURM_ARRAY_TASK_ID": None},
         "neither JOB_COMPLETION_INDEX"),
        (["--shard", "1/2", "--resume", "abc"], {}, "Use one or the other"),
        (["--sweep-id", "no spaces"], {}, "--sweep-id 'no spaces': expected"),
    ],
)
def test_cli_bad_shard_exits_2_without_traceback(tmp_path, monkeypatch, args, env, says):
    monkeypatch.chdir(tmp_path)
    result = _invoke("--config", TINY, *args, "--dry-run", env=env)
    assert result.exit_code == 2, result.output
    assert says in result.stderr and "Traceback" not in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_dry_run_shows_the_shard_its_members_and_the_sweep_id(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = _invoke(
        "--config", TINY, "--shard", "--dry-run",
        env={"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_MIN": "1",
             "SLURM_ARRAY_TASK_COUNT": "2", "JOB_COMPLETION_INDEX": None},
    )
    assert result.exit_code == 0, result.output
    sweep = shards.sweep_id(load_config(TINY))
    assert f"2/2 (from Slurm) of sweep {sweep}: 2 members: gelu/0, gelu/1" in result.stdout


# --- Which members a shard trains. ------------------------------------------


@pytest.mark.parametrize("n_act, n_seeds, count", [(2, 2, 2), (4, 5, 3), (3, 2, 7), (1, 10, 4)])
def test_slices_cover_the_grid_once_balanced_and_keep_seeds_together(n_act, n_seeds, count):
    names = ("relu", "gelu", "silu", "swiglu")[:n_act]
    config = Config(activations=names, baseline=names[0], seeds=tuple(range(n_seeds)))
    slices = [shards.members(config, shards.Shard(i, count)) for i in range(1, count + 1)]
    flat = [m for s in slices for m in s]
    assert flat == [(a, s) for a in names for s in range(n_seeds)]
    assert max(map(len, slices)) - min(map(len, slices)) <= 1
    for piece in slices:
        # Contiguous in the activation-major grid: each activation's seeds
        # in a slice form one run, so they train as one stacked model.
        activations = [a for a, _ in piece]
        assert activations == sorted(activations, key=names.index)


def test_sweep_id_is_the_same_for_the_same_config_and_ignores_where_outputs_go():
    config = load_config(TINY)
    elsewhere = load_config(
        TINY, ["output_dir=/elsewhere", "tracking.uri=http://h:5000", "export.dir=/x"]
    )
    assert shards.sweep_id(config) == shards.sweep_id(elsewhere)
    assert shards.sweep_id(config) != shards.sweep_id(load_config(TINY, ["seeds=3"]))
    assert shards.sweep_id(config) != shards.sweep_id(load_config(TINY, ["training.epochs=4"]))
    # The id is the same in another process (no per-process hash salt).
    other = subprocess.run(
        [sys.executable, "-c",
         "from kg_service.sweep import shards; from kg_service.config.loading import load_config; "
         f"print(shards.sweep_id(load_config({str(TINY)!r})))"],
        capture_output=True, text=True, check=True,
    )
    assert other.stdout.strip() == shards.sweep_id(config)


# --- Two shards, one sweep. ---------------------------------------------------


def _kg_report_process(cwd, *args):
    return subprocess.run(
        [os.path.join(servers.VENV_BIN, "python"), "-m", "kg_service.cli.report", *args],
        cwd=cwd, capture_output=True, text=True, timeout=600,
        env={k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"},
    )


def _summary(folder):
    (path,) = pathlib.Path(folder).rglob("summary.json")
    return json.loads(path.read_text())


def test_two_shards_make_the_single_machine_sweep_registered_once_and_kg_report_rebuilds_it(
    tmp_path, monkeypatch, tiny_smoke_sweep
):
    """Two shards of the session's single-machine smoke sweep of configs/tiny.yaml
    (tests/service/shared_sweep.py: the same flags, its own store); a
    half sweep cannot be registered (exit 2, nothing claimed); shard 2
    completes it and registers once; restarted, shard 1 trains nothing;
    `kg report` gives the single sweep's statistics, and refuses to
    register again.

    kg-train and kg report run in this process (click's runner), each
    shard as a job of its own: what is checked is what they print and
    leave in the store. Each was a process of its own, paying TensorFlow's
    and MLflow's start-up eight times (issue 17). Real processes: a
    mistyped experiment's exit 2 here (kg report); `kg-train --shard` jobs
    in sweep/test_tuning.py (two at once) and tracking/test_shared_server.py
    (two shards finishing at once); kg report's rebuild in
    analysis/test_report.py; the sweep id in another process above."""
    monkeypatch.chdir(tmp_path)  # the output folders are relative
    uri = f"sqlite:///{tmp_path / 'shards.db'}"
    common = ["--config", TINY, "--smoke", "--set", "export.enabled=false",
              "--tracking-uri", uri]

    def shard(which, output_dir):
        done = in_process.kg_train(*common, "--output-dir", output_dir, "--shard", which)
        assert done.exit_code == 0, (done.stderr + str(done.exception))[-3000:]
        return done.stdout

    first = shard("1/2", "shard1")
    assert "2 of its 2 members to train; the store holds 0 of 4" in first
    assert "the sweep holds 2 of 4 members" in first

    early = in_process.kg_report("--experiment", "kg-smoke", "--tracking-uri", uri,
                                 "--register", "-q")
    assert early.exit_code == 2, early.stderr[-3000:]
    assert "holds 2 of its 4 members; missing: gelu seed 0, gelu seed 1" in early.stderr
    unknown = _kg_report_process(tmp_path, "--experiment", "kg-smok", "--tracking-uri", uri)
    assert unknown.returncode == 2 and "Did you mean 'kg-smoke'?" in unknown.stderr
    assert "Traceback" not in early.stderr + unknown.stderr

    second = shard("2/2", "shard2")
    assert "Registered models" in second
    expected = _summary(tiny_smoke_sweep.cwd / "sweep")
    _same(expected, _summary(tmp_path / "shard2"))

    import mlflow

    client = mlflow.MlflowClient(uri, registry_uri=uri)
    exp = client.get_experiment_by_name("kg-smoke")
    runs = client.search_runs([exp.experiment_id], max_results=100)
    (parent,) = [r for r in runs if r.data.tags.get("kg.role") == "sweep"]
    members = [r for r in runs if r.data.tags.get("kg.role") == "member"]
    assert parent.info.status == "FINISHED"
    assert sorted((r.data.tags["activation"], r.data.tags["seed"]) for r in members) == [
        ("gelu", "0"), ("gelu", "1"), ("relu", "0"), ("relu", "1")
    ]
    for name in ("tiny-relu-smoke", "tiny-gelu-smoke"):
        assert len(client.search_model_versions(f"name='{name}'")) == 1

    again = shard("1/2", "again")
    assert "0 of its 2 members to train; the store holds 4 of 4" in again
    assert "compared and registered by kg-train --shard 2/2" in again
    assert len(client.search_runs([exp.experiment_id], max_results=100)) == 5

    report = in_process.kg_report("--experiment", "kg-smoke", "--tracking-uri", uri,
                                  "--output-dir", "rebuilt", "-q")
    assert report.exit_code == 0, (report.stderr + str(report.exception))[-3000:]
    _same(expected, _summary(tmp_path / "rebuilt"))
    twice = in_process.kg_report("--experiment", "kg-smoke", "--tracking-uri", uri,
                                 "--register", "-q")
    assert twice.exit_code == 2 and "registered already" in twice.stderr
    assert "Traceback" not in twice.stderr
    for name in ("tiny-relu-smoke", "tiny-gelu-smoke"):
        assert len(client.search_model_versions(f"name='{name}'")) == 1


# --- The tracking seam: shards and kg report on an in-memory store. -----------


def test_shards_and_kg_report_run_on_another_tracking_store_without_mlflow(
    tmp_path, monkeypatch
):
    """run_shard and report_sweep talk to the TrackingStore interface only:
    three shards of a 2 x 2 grid (the third with nothing to train) make one
    sweep, registered once, by the job that completed it; report_sweep then
    gives the same statistics, and refuses a second registration."""
    from kg_service.cli import report as kg_report
    from kg_service.cli import train as kg_train
    from kg_service.sweep.resume import REGISTRAR
    from tests.service.memory_store import MemoryStore

    monkeypatch.chdir(tmp_path)
    path = tmp_path / "tiny.yaml"
    path.write_text(
        "experiment: in-memory\nactivations: [relu, gelu]\nseeds: 2\n"
        "data: {n_samples: 200}\nmodel: {hidden_units: [4]}\n"
        "training: {epochs: 2}\nexport: {enabled: false}\n"
    )
    store = MemoryStore()
    config = load_config(str(path))
    said = []
    for index in (3, 1, 2):
        shard = shards.Shard(index, 3)
        assert kg_train.run_shard(config, shard, quiet=True, echo=said.append, store=store) == 0
    assert len(store.find_sweeps()) == 1
    (parent_id,) = store.find_sweeps(shards.sweep_id(config))
    parent = store.runs[parent_id]
    assert parent["status"] == "FINISHED"
    assert parent["params"][REGISTRAR].startswith("kg-train --shard 2/3")
    assert [len(v) for v in store.models.values()] == [1, 1]
    table = said[said.index("") + 1]
    # Another grid under the same sweep id is refused before it trains.
    with pytest.raises(ServiceError, match=r"seeds: was \[0, 1\], now \[0, 1, 2\]"):
        kg_train.run_shard(
            dataclasses.replace(config, seeds=(0, 1, 2)), shards.Shard(1, 2),
            shards.sweep_id(config), quiet=True, echo=said.append, store=store,
        )

    said.clear()
    assert kg_report.report_sweep(
        "in-memory", f"sqlite:///{tmp_path}/unused.db", output_dir="rebuilt",
        quiet=True, echo=said.append, store=store,
    ) == 0
    assert said[said.index("") + 1] == table
    with pytest.raises(ServiceError, match="registered already"):
        kg_report.report_sweep(
            "in-memory", f"sqlite:///{tmp_path}/unused.db", register=True,
            quiet=True, echo=said.append, store=store,
        )
    assert [len(v) for v in store.models.values()] == [1, 1]
