"""Sequential seeds (`seeds: {start, step, max}`), end to end on a real
MLflow store (sqlite in a temp folder):

- the config's mapping form is validated like every key (exit 2, one
  paragraph naming the key, its line and the closest valid name), and
  `--dry-run` and `--smoke` show the batches;
- a sweep whose first look decides stops there, with its looks in the
  terminal, report.md, summary.json and the sweep's MLflow run;
- a sweep whose looks never decide trains up to `max`; interrupted in its
  second look, `--resume` replays the first look from the store, trains
  only the missing members of the second and finishes as one sweep, and
  `kg report` rebuilds the same looks from the store;
- sharded sequential sweeps are refused with exit 2.

The statistics themselves are tested in tests/service/analysis/test_sequential.py.
"""

import dataclasses
import json

import mlflow
import pytest
from click.testing import CliRunner

from kg_service.cli import train as kg_train
from kg_service.config import derived
from kg_service.config.loading import config_to_dict
from kg_service.config.loading import load_config
from kg_service.errors import SweepInterrupted
from kg_service.errors import SweepMismatch
from kg_service.sweep import pipeline
from kg_service.sweep import rebuild

EARLY = """\
experiment: seq-early
activations: [relu, linear]
seeds: {start: 3, step: 3, max: 9, spending: pocock}
data: {dataset: circles, n_samples: 300}
model: {hidden_units: [16]}
training: {epochs: 8, learning_rate: 0.02}
registry: {enabled: false}
export: {enabled: false}
"""

# relu and gelu on 200 moons points, 2 epochs of a width-4 layer: about
# 55 % each, no decision at 2 nor 4 seeds (measured).
TO_MAX = """\
experiment: seq-max
activations: [relu, gelu]
seeds: {start: 2, step: 2, max: 4}
data: {n_samples: 200}
model: {hidden_units: [4]}
training: {epochs: 2}
registry: {enabled: false}
export: {enabled: false}
"""


def invoke(*args):
    return CliRunner().invoke(kg_train.main, [str(a) for a in args], prog_name="kg-train")


def _write(tmp_path, text, name="sweep.yaml"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# --- The config: validated at the edge, shown by --dry-run. ------------------


def test_dry_run_shows_the_batches_and_the_budget(tmp_path):
    path = _write(tmp_path, "activations: [relu, gelu]\nseeds: {start: 4, step: 4, max: 40}\n")
    result = invoke("--config", path, "--dry-run")
    assert result.exit_code == 0, result.output
    assert "4 seeds, then +4 until decided, at most 40" in result.output
    assert "10 looks at 4, 8, 12, 16, ..., 40 seeds" in result.output
    assert "O'Brien-Fleming-type alpha spending" in result.output
    assert "2 activations x 4..40 seeds = 8..80 training runs" in result.output


def test_dry_run_states_the_futility_rule(tmp_path):
    path = _write(tmp_path, "seeds: {start: 4, max: 40, futility: true, smallest_effect: 0.005}\n")
    result = invoke("--config", path, "--dry-run")
    assert result.exit_code == 0, result.output
    assert "stops for futility when the smallest effect 0.005 is out of reach" in result.output


def test_smoke_keeps_the_looks_at_two_batches_of_two_seeds(tmp_path):
    path = _write(tmp_path, "seeds: {start: 4, step: 4, max: 40, spending: pocock}\n")
    result = invoke("--config", path, "--smoke", "--dry-run")
    assert result.exit_code == 0, result.output
    assert "2 seeds, then +2 until decided, at most 4" in result.output
    assert "Pocock-type" in result.output


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("seeds: {start: 1}\n", "seeds.start (line 1): got 1 (an integer); expected a value >= 2."),
        ("seeds:\n  start: 4\n  stpe: 2\n", 'seeds.stpe (line 3): unknown key. Did you mean "step"?'),
        ("seeds: {start: 8, max: 4}\n", "seeds.max (line 1): 4 is below seeds.start 8; expected max >= start"),
        ("seeds: {spending: pocok}\n", 'expected one of "obrien_fleming", "pocock". Did you mean "pocock"?'),
        ("seeds: {step: 2.5}\n", "seeds.step (line 1): got 2.5 (a number); expected an integer."),
        ("seeds: three\n", "or a mapping {start, step, max} of sequential seeds"),
        # Issue 32 §2: the futility rule and the effect it reads, together.
        ("seeds: {futility: true}\n", "seeds.futility (line 1): true needs seeds.smallest_effect"),
        ("seeds: {smallest_effect: 0.01}\n",
         "seeds.smallest_effect (line 1): 0.01 is read only by the futility rule"),
        ("seeds: {futility: true, smallest_effect: -0.01}\n",
         "seeds.smallest_effect (line 1): got -0.01 (a number); expected a value > 0 or null."),
        ("seeds: {futility: true, smallest_efect: 0.01}\n",
         'seeds.smallest_efect (line 1): unknown key. Did you mean "smallest_effect"?'),
    ],
)
def test_each_sequential_seeds_mistake_exits_2_with_its_message(tmp_path, text, fragment):
    path = _write(tmp_path, text)
    result = invoke("--config", path, "--dry-run")
    assert result.exit_code == 2, result.output
    assert fragment in result.output
    assert "Traceback" not in result.output


def test_set_can_switch_a_count_to_sequential_seeds(tmp_path):
    path = _write(tmp_path, "seeds: 10\n")
    config = load_config(path, ["seeds={start: 3, max: 9}"])
    assert derived.sequential(config).start == 3
    assert derived.look_counts(config.seeds) == (3, 7, 9)


def test_set_reaches_into_the_mapping_and_names_a_mistyped_key(tmp_path):
    path = _write(tmp_path, "seeds: {start: 4, max: 12}\n")
    config = load_config(path, ["seeds.start=3", "seeds.spending=pocock"])
    assert (config.seeds.start, config.seeds.step, config.seeds.spending) == (3, 4, "pocock")
    result = invoke("--config", path, "--set", "seeds.strat=3", "--dry-run")
    assert result.exit_code == 2
    assert '--set seeds.strat=3: seeds.strat: unknown key. Did you mean "start"?' in result.output


def test_the_mapping_survives_config_json_and_each_look_is_a_sweep_of_n_seeds(tmp_path):
    config = load_config(_write(tmp_path, "seeds: {start: 3, step: 2, max: 6}\n"))
    written = _write(tmp_path, json.dumps(config_to_dict(config)), "config.json")
    assert config_to_dict(load_config(written))["seeds"] == {
        "start": 3, "step": 2, "max": 6, "spending": "obrien_fleming", "futility": False,
        "smallest_effect": None,
    }
    assert derived.with_seeds(config, 5).seeds == (0, 1, 2, 3, 4)
    assert derived.seed_budget(config) == 6 and derived.seeds_at_once(config) == 3


def test_a_sharded_sequential_sweep_is_refused_with_exit_2(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = _write(tmp_path, "seeds: {start: 4, step: 4, max: 40}\n")
    result = invoke("--config", path, "--shard", "1/2", "--dry-run")
    assert result.exit_code == 2, result.output
    assert "a sharded sweep cannot run it" in result.output
    assert "--set seeds=40" in result.output
    assert "Traceback" not in result.output
    assert [p.name for p in tmp_path.iterdir()] == ["sweep.yaml"]


def test_a_multi_worker_sequential_sweep_is_refused_with_exit_2(tmp_path):
    path = _write(tmp_path, "seeds: {start: 4, step: 4, max: 40}\n")
    result = invoke("--config", path, "--set", "device.distribution=multi_worker", "--dry-run")
    assert result.exit_code == 2, result.output
    assert "multi_worker cannot run it" in result.output
    assert "Traceback" not in result.output


# --- Real sweeps. -------------------------------------------------------------


def _client(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    return mlflow.MlflowClient(uri, registry_uri=uri)


def _runs(client, experiment):
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id], max_results=1000)
    parents = [r for r in runs if r.data.tags.get("kg.role") == "sweep"]
    members = [r for r in runs if r.data.tags.get("kg.role") == "member"]
    return parents, members


def test_a_sweep_whose_first_look_decides_stops_there(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = load_config(_write(tmp_path, EARLY))
    lines = []
    assert kg_train.run(config, quiet=True, echo=lines.append) == 0
    text = "\n".join(lines)
    # A linear network cannot separate circles: far worse than relu at 3 seeds.
    assert "Look 1 at 3 seeds: linear vs relu: worse at look 1" in text
    assert "Every comparison decided: no more seeds." in text
    assert "Look 2" not in text
    assert "Sequential seeds: 1 look, 3 of at most 9 seeds; Pocock-type" in text

    (parent,), members = _runs(_client(tmp_path), "seq-early")
    assert sorted((m.data.tags["activation"], m.data.tags["seed"]) for m in members) == [
        (a, str(s)) for a in ("linear", "relu") for s in range(3)
    ]
    assert parent.data.metrics["sequential.looks"] == 1
    assert parent.data.metrics["sequential.seeds_used"] == 3
    assert parent.data.metrics["sequential.linear.decided_at_look"] == 1
    assert parent.data.tags["sequential.linear"] == "worse"
    assert json.loads(parent.data.params["seeds"])["max"] == 9
    (report,) = list((tmp_path / "kg-output").rglob("report.md"))
    assert "## Sequential seeds" in report.read_text()
    summary = json.loads((report.parent / "summary.json").read_text())["sequential"]
    assert summary["seeds_per_look"] == [3]
    assert summary["comparisons"]["linear"]["decision"] == "worse"
    assert summary["comparisons"]["linear"]["decided_at_look"] == 1
    assert 0 < summary["nominal_alpha_per_look"][0] < 0.05


class _StopInLookTwo:
    """A progress display that interrupts (as Ctrl-C would) once the second
    look trains gelu: relu and gelu train as one stacked group (issue 20),
    so neither's new seeds are in the store, the first look's are."""

    def __call__(self, event):
        if event["members_total"] == 8 and "gelu" in event["activation"].split("+"):
            raise KeyboardInterrupt

    def stage(self, message):
        pass

    def close(self):
        pass


def test_an_interrupted_sequential_sweep_resumes_and_trains_up_to_max(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = load_config(_write(tmp_path, TO_MAX))
    lines = []
    with pytest.raises(SweepInterrupted) as stopped:
        pipeline.run(config, claimant="test", progress=_StopInLookTwo(), echo=lines.append)
    assert any(line.startswith("Look 1 at 2 seeds") for line in lines)
    client = _client(tmp_path)
    (parent,), members = _runs(client, "seq-max")
    assert parent.info.status == "KILLED" and len(members) == 4  # look 1's
    assert stopped.value.kept.total == 8  # 2 activations x at most 4 seeds

    # Another schedule would change the design between looks: refused.
    other = dataclasses.replace(config, seeds=dataclasses.replace(config.seeds, max=6))
    with pytest.raises(SweepMismatch, match="seeds"):
        pipeline.run(other, claimant="test", echo=print, resume=stopped.value.run_id)

    lines = []
    outcome = pipeline.run(config, claimant="test", echo=lines.append,
                           resume=stopped.value.run_id)
    assert "resumed, 4 members already done" in lines[0]
    assert lines[1].startswith("Look 1 at 2 seeds")  # replayed from the store
    assert lines[2].startswith("Look 2 at 4 seeds: gelu vs relu: inconclusive")
    assert "At the most seeds (4)" in lines[2]
    looks = outcome.compared.looks
    assert looks.counts == (2, 4) and not looks.decided
    assert outcome.config.seeds == (0, 1, 2, 3)
    assert outcome.compared.summary.activation("gelu").n == 4

    (parent,), members = _runs(client, "seq-max")
    assert parent.info.status == "FINISHED"
    keys = [(m.data.tags["activation"], m.data.tags["seed"]) for m in members]
    assert sorted(keys) == [(a, str(s)) for a in ("gelu", "relu") for s in range(4)]
    assert parent.data.metrics["sequential.gelu.decided_at_look"] == 0
    assert parent.data.tags["sequential.gelu"] == "inconclusive"

    # kg report rebuilds it from the store alone, replaying the same looks.
    rebuilt = rebuild.report_sweep(
        "seq-max", f"sqlite:///{tmp_path / 'mlflow.db'}", claimant="test",
        output_dir=str(tmp_path / "rebuilt"),
    )
    assert rebuilt.compared.looks.counts == looks.counts
    assert [(a, t.decision, t.looks[-1].p_value) for a, t in rebuilt.compared.looks.comparisons] == [
        (a, t.decision, t.looks[-1].p_value) for a, t in looks.comparisons
    ]
    assert rebuilt.config.seeds == (0, 1, 2, 3)


def test_a_comparison_whose_smallest_effect_is_out_of_reach_stops_for_futility(
        tmp_path, monkeypatch):
    """Issue 32 §2: TO_MAX at 4 seeds of at most 40, with a smallest effect
    of 1e-6 (a ten-thousandth of a point): no difference shown at 4 seeds
    (+3.75 pp, p 0.18: measured), and so small an effect leaves 0.07 chance
    of a difference by 40 (conditional power), so the first look stops for
    futility; the words,
    summary.json and the run's tags say so, with the repeated CI and the
    median-unbiased estimate."""
    monkeypatch.chdir(tmp_path)
    text = TO_MAX.replace("seq-max", "seq-futile").replace(
        "seeds: {start: 2, step: 2, max: 4}",
        "seeds: {start: 4, step: 4, max: 40, futility: true, smallest_effect: 0.000001}")
    config = load_config(_write(tmp_path, text))
    lines = []
    assert kg_train.run(config, quiet=True, echo=lines.append) == 0
    out = "\n".join(lines)
    assert "gelu vs relu: stopped for futility at look 1 (4 seeds): the smallest effect of " \
           "interest ±0.00 pp test accuracy is out of reach" in out, out
    assert "median-unbiased estimate" in out and "repeated CI" in out
    assert "Look 2" not in out
    (parent,), members = _runs(_client(tmp_path), "seq-futile")
    assert len(members) == 8  # 2 activations x 4 seeds
    assert parent.data.tags["sequential.gelu"] == "futility"
    assert parent.data.tags["verdict.gelu"] == "inconclusive"
    (report,) = list((tmp_path / "kg-output").rglob("report.md"))
    summary = json.loads((report.parent / "summary.json").read_text())["sequential"]
    assert summary["comparisons"]["gelu"]["decision"] == "futility"
    assert summary["futility"]["smallest_effect"] == 1e-6
