"""The tuning stage (issue 19 item 1): each activation's own value of one
setting, chosen on validation with seeds of its own, before the comparison.

- The choice (pure, on made-up scores): the best mean validation score, a
  value with a diverged member after every value without one, ties to the
  earlier value; checked against numpy's argmin/argmax of the means.
- Optuna's TPE asks values inside the range, and asks the same values
  again when told the same scores: what a resumed sweep relies on to find
  its trials' members in the store.
- The comparison trains each activation at its own chosen value.
- End to end on a real MLflow store (sqlite in a temp folder): a tiny
  sweep with a 2-value x 1-seed grid, interrupted once its tuning members
  are in the store, resumes without training them again, and its report,
  summary.json, sweep run and member runs say which value each activation
  got.
- `kg report`'s tuning section, rebuilt from the tuning members an
  in-memory store holds (the comparison's members left out).
- One choice per activation and sweep: a second claim (a job that tuned
  the same activation at once) gets the first's; a job finding the claims
  trains nothing.
- In shards (3 shards of the same sweep, in turn with one killed and
  restarted, and two at once as processes): the same choices as the
  unsharded sweep, in the report, summary.json, the claims, the members'
  params and `kg report`; the restart retrains no tuning member.
"""

import dataclasses
import json
import math
import os
import subprocess
import uuid

import mlflow
import numpy as np
import pytest

from kg_service.analysis.reports import tuning as analysis
from kg_service.config import schema
from kg_service.config import tuning as config_tuning
from kg_service.config.loading import load_config
from kg_service.errors import SweepInterrupted
from kg_service.sweep import pipeline
from kg_service.sweep import rebuild
from kg_service.sweep import sharded
from kg_service.results import MemberResult
from kg_service.sweep import tuning as stage
from kg_service.sweep.preflight import Preflight
from tests.service import servers
from tests.service.memory_store import MemoryStore


# --- The choice, on made-up scores. --------------------------------------------


@pytest.mark.parametrize("higher_is_better", [False, True])
def test_the_chosen_value_has_the_best_mean_score(higher_is_better):
    rng = np.random.default_rng(19)
    for _ in range(50):
        scores = rng.uniform(0.1, 1.0, size=(5, 3))  # 5 values x 3 tuning seeds
        candidates = [analysis.Candidate(v, tuple(row)) for v, row in zip(range(5), scores)]
        means = scores.mean(axis=1)
        expected = np.argmax(means) if higher_is_better else np.argmin(means)
        assert analysis.choose(candidates, higher_is_better) == expected


def test_a_value_with_a_diverged_member_loses_to_any_value_without_one():
    candidates = [
        analysis.Candidate(1e-2, (0.10,), failed=1),  # best survivor, but one diverged
        analysis.Candidate(1e-3, (0.50, 0.52)),
        analysis.Candidate(3e-3, (0.40, 0.44)),
    ]
    assert analysis.choose(candidates, higher_is_better=False) == 2
    every = [analysis.Candidate(1e-2, (), failed=2), analysis.Candidate(1e-3, (0.9,), failed=1)]
    assert analysis.choose(every, higher_is_better=False) == 1
    assert analysis.choose([analysis.Candidate(1e-2, (), failed=2)], False) is None


def test_ties_go_to_the_earlier_value_and_sd_is_the_sample_sd():
    tied = [analysis.Candidate(3e-3, (0.4, 0.6)), analysis.Candidate(1e-3, (0.5, 0.5))]
    assert analysis.choose(tied, higher_is_better=False) == 0
    assert tied[0].sd == pytest.approx(np.std([0.4, 0.6], ddof=1))
    assert math.isnan(analysis.Candidate(1e-3, (0.5,)).sd)  # one seed: no spread


# --- Optuna's TPE over a range. ------------------------------------------------


def _search(trials=6):
    return analysis.Search(
        schema.TuningConfig(parameter="training.learning_rate", low=1e-4, high=1e-2,
                            log=True, trials=trials, seeds=1), float)


def _asked(search, score):
    asked = []
    for _, value in search:
        asked.append(value)
        search.tell(analysis.Candidate(value, (score(value),)))
    return asked


def test_tpe_asks_values_in_the_range_and_the_same_ones_when_told_the_same_scores():
    def score(v):  # a validation loss with its minimum at 1e-3
        return (math.log10(v) + 3) ** 2

    first = _asked(_search(), score)
    assert len(first) == 6 and all(1e-4 <= v <= 1e-2 for v in first)
    assert len(set(first)) == 6
    assert _asked(_search(), score) == first  # a resumed sweep asks them again


# --- Each activation at its own value. -----------------------------------------


def test_the_comparison_trains_each_activation_at_its_chosen_value():
    from kg_service.tasks import base as tasks

    seen = {}

    def train(task, dataset, config, activation, seeds, report):
        seen[activation] = (config.training.learning_rate, config.training.epochs)
        return []

    task = dataclasses.replace(tasks.get("moons"), train=train)
    pre = Preflight(task=task, dataset=None, store=None, tracking_uri="", resume=None,
                    done={}, spooled={}, model_names={}, out_dir=None, resolved={},
                    params={}, tags={})
    outcome = analysis.Tuning(
        parameter="training.learning_rate", select_by="val_loss", higher_is_better=False,
        seeds=1, activations=(
            analysis.ActivationTuning("relu", (), 3e-3),
            analysis.ActivationTuning("gelu", (), 1e-3),
        ))
    after = stage.tuned(pre, outcome, float)
    config = schema.Config(training=schema.TrainingConfig(learning_rate=0.5, epochs=7))
    for activation in ("relu", "gelu"):
        after.task.train(after.task, None, config, activation, (0,), None)
    assert seen == {"relu": (3e-3, 7), "gelu": (1e-3, 7)}
    assert after.tuned == {"relu": {"training.learning_rate": 3e-3},
                           "gelu": {"training.learning_rate": 1e-3}}


# --- What a store holds: kg report's tuning section. --------------------------


def _member(activation, seed, val_loss, failure=None):
    return MemberResult(activation=activation, seed=seed, epochs_to_threshold=None,
                        history={"loss": [1.0], "val_loss": [val_loss], "val_accuracy": [0.5]},
                        test_loss=9.0, test_accuracy=0.1, failure=failure)


def test_the_tuning_is_rebuilt_from_the_tuning_members_a_store_holds(tmp_path):
    config = schema.Config(
        activations=("relu", "gelu"), seeds=(0, 1),
        tuning=schema.TuningConfig(parameter="training.learning_rate",
                                   values=(1e-3, 3e-3), seeds=2))
    store = MemoryStore()
    store.parent_run_id = store.open_sweep("s", {}, {"kg.role": "sweep"})
    pre = Preflight(task=None, dataset=None, store=store, tracking_uri="", resume=None,
                    done={}, spooled={}, model_names={}, out_dir=None, resolved={},
                    params={"training.learning_rate": 0.5}, tags={})
    losses = {  # (activation, value) -> the validation loss of each tuning seed
        ("relu", 1e-3): (0.40, 0.50), ("relu", 3e-3): (0.30, float("nan")),
        ("gelu", 1e-3): (0.42, 0.44), ("gelu", 3e-3): (0.20, 0.60),
    }
    for (activation, value), pair in losses.items():
        seeds = config_tuning.tuning_seeds(config.tuning.values.index(value), 2)
        stage._log(pre, [
            _member(activation, seed, loss, None if loss == loss else "diverged")
            for seed, loss in zip(seeds, pair)], "training.learning_rate", value, tmp_path)
    store.log_member(_member("relu", 0, 0.1), {}, {"kg.role": "member"})  # not tuning

    rebuilt = stage.stored(config, pre, store.parent_run_id)
    # relu: 3e-3 has the lower mean of its survivors but a diverged member.
    assert rebuilt.chosen() == {"relu": 1e-3, "gelu": 3e-3}
    (relu, gelu) = rebuilt.activations
    assert [(c.value, c.scores, c.failed) for c in relu.candidates] == [
        (1e-3, (0.40, 0.50), 0), (3e-3, (0.30,), 1)]
    assert gelu.candidates[1].mean == pytest.approx(np.mean([0.20, 0.60]))
    member = next(r for r in store.runs.values() if r["tags"].get("kg.role") == "tuning")
    assert member["params"]["training.learning_rate"] in ("0.001", "0.003")


# --- One choice per activation, claimed once. -----------------------------------


def test_two_jobs_that_tuned_one_activation_both_use_the_first_claimed_choice():
    """Two jobs (shards run at once) tuned relu from their own copies of its
    tuning members, a rounding apart, enough to choose differently: the
    second's claim loses and it gets the first's choice and candidates; a
    later job, and the store's rebuilt tuning, find that claim and train
    nothing (a task that would train is absent: it would fail)."""
    config = schema.Config(
        activations=("relu", "gelu"), seeds=(0,),
        tuning=schema.TuningConfig(parameter="training.learning_rate",
                                   values=(1e-3, 5e-2), seeds=1))
    store = MemoryStore()
    run = store.parent_run_id = store.open_sweep("s", {}, {"kg.role": "sweep"})
    first = analysis.ActivationTuning("relu", (
        analysis.Candidate(1e-3, (0.5000001,)), analysis.Candidate(5e-2, (0.5,))), 5e-2)
    second = analysis.ActivationTuning("relu", (
        analysis.Candidate(1e-3, (0.4999999,)), analysis.Candidate(5e-2, (0.5,))), 1e-3)

    def claim(index, mine):  # as `stage.tune` claims an activation's choice
        won = store.claim_dict(run, stage.CHOICE.format(index=index), analysis.choice_as_dict(
            mine), f"tuning/choice-{index}-{uuid.uuid4().hex[:12]}.json")
        return analysis.choice_from_dict(won, mine.activation, run)

    assert claim(0, first) == first
    assert claim(0, second) == first  # lost: the first's
    gelu = analysis.ActivationTuning("gelu", (analysis.Candidate(1e-3, (0.7,), 0),), 1e-3)
    claim(1, gelu)

    pre = Preflight(task=_no_training_task(), dataset=None,
                    store=store, tracking_uri="", resume=None, done={}, spooled={},
                    model_names={}, out_dir=None, resolved={}, params={}, tags={})
    later = stage.tune(config, pre, run, _StopAtTheComparison(), print,
                       activations=("relu", "gelu"))
    assert later.tuning.chosen() == {"relu": 5e-2, "gelu": 1e-3}
    assert later.tuning.activations[0] == first
    assert stage.stored(config, pre, run).activations == (first, gelu)
    assert sorted(k for k in store.runs[run]["params"] if "choice" in k) == [
        "kg.tuning.choice.0", "kg.tuning.choice.1"]


def _no_training_task():
    from kg_service.tasks import base as tasks

    def train(*args):
        raise AssertionError("a claimed activation trains no tuning member")

    return dataclasses.replace(tasks.get("moons"), train=train)


# --- End to end, on a real MLflow store. ---------------------------------------

TINY = """\
experiment: tune-tiny
activations: [relu, gelu]
seeds: 2
data: {n_samples: 200}
model: {hidden_units: [4]}
training: {epochs: 2}
registry: {enabled: false}
export: {enabled: false}
tuning: {parameter: training.learning_rate, values: [0.001, 0.05], seeds: 1}
"""


class _StopAtTheComparison:
    """Interrupts (as Ctrl-C would) at the comparison's first epoch: the
    tuning stage reports stages only, so every tuning member is in."""

    def __call__(self, event):
        raise KeyboardInterrupt

    def stage(self, message):
        pass

    def close(self):
        pass


def _runs(tmp_path, experiment="tune-tiny"):
    client = mlflow.tracking.MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    (found,) = [e for e in client.search_experiments() if e.name == experiment]
    runs = client.search_runs([found.experiment_id], max_results=1000)
    by_role = {}
    for run in runs:
        by_role.setdefault(run.data.tags.get("kg.role"), []).append(run)
    return by_role


@pytest.fixture(scope="module")
def tuned_sweep(tmp_path_factory):
    """The tiny tuned sweep, interrupted once its tuning members are in the
    store, then resumed: `(folder, config, runs before the resume, lines,
    outcome)`. One sweep for this module's end-to-end tests."""
    tmp_path = tmp_path_factory.mktemp("tuned")
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.chdir(tmp_path)
        # The store is ./mlflow.db: a MLFLOW_TRACKING_URI left by an earlier
        # module of this worker (MLflow's set_tracking_uri exports it) would
        # send the sweep to that module's server, stopped by now (a module
        # fixture starts before the per-test guard in tests/service/conftest.py).
        monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
        monkeypatch.delenv("MLFLOW_REGISTRY_URI", raising=False)
        path = tmp_path / "sweep.yaml"
        path.write_text(TINY)
        # Absolute: the module's other test reads the report from elsewhere.
        config = dataclasses.replace(load_config(path), output_dir=str(tmp_path / "out"))
        with pytest.raises(SweepInterrupted) as stopped:
            pipeline.run(config, claimant="test", progress=_StopAtTheComparison(), echo=print)
        before = _runs(tmp_path)
        lines = []
        outcome = pipeline.run(config, claimant="test", echo=lines.append,
                               resume=stopped.value.run_id)
    return tmp_path, config, before, lines, outcome


def test_a_tuned_sweep_resumes_without_retraining_its_tuning_members(tuned_sweep):
    tmp_path, config, before, lines, outcome = tuned_sweep
    assert "member" not in before and before["sweep"][0].info.status == "KILLED"
    tuning_runs = {r.info.run_id for r in before["tuning"]}
    assert len(tuning_runs) == 4  # 2 activations x 2 values x 1 seed

    after = _runs(tmp_path)
    # Not trained again: the same four runs (a retrained member replaces its run).
    assert {r.info.run_id for r in after["tuning"]} == tuning_runs
    assert "resumed, 4 members already done" in lines[0]

    # Each activation's choice, from the stored validation losses alone.
    losses = {}
    for run in after["tuning"]:
        tags, metrics = run.data.tags, run.data.metrics
        assert int(tags["seed"]) >= config_tuning.SEED_BASE
        assert float(run.data.params["training.learning_rate"]) == metrics["tuning_value"]
        losses.setdefault(tags["activation"], {})[metrics["tuning_value"]] = (
            metrics["final_val_loss"])
    chosen = {a: min(by_value, key=by_value.get) for a, by_value in losses.items()}
    (sweep,) = after["sweep"]
    assert sweep.info.status == "FINISHED"
    for activation, value in chosen.items():
        assert float(sweep.data.tags[f"tuning.{activation}.training.learning_rate"]) == value
    members = after["member"]
    assert sorted(int(m.data.tags["seed"]) for m in members) == [0, 0, 1, 1]
    for member in members:
        assert float(member.data.params["training.learning_rate"]) == (
            chosen[member.data.tags["activation"]])

    report = outcome.compared.report_paths[0]
    text = report.read_text()
    assert "## Tuning" in text and (report.parent / analysis.FIGURE).exists()
    for activation, value in chosen.items():
        assert f"{activation} training.learning_rate = {value:g}" in text
    summary = json.loads((report.parent / "summary.json").read_text())["tuning"]
    assert summary["chosen"] == chosen
    assert {c["value"]: c["mean"] for c in summary["candidates"]["relu"]} == losses["relu"]



# --- A tuned sweep in shards. --------------------------------------------------
# Shard jobs never wait for nor talk to each other: each tunes the
# activations of its own members, reusing the tuning members whole in the
# store and training the missing ones, and every job uses the one choice per
# activation claimed first (`TrackingStore.claim_dict`). The same tiny sweep in 3
# shards of its 2 x 2 grid (relu/0 | relu/1 | gelu/0, gelu/1): shards 1 and
# 2 both need relu's tuning. Its tuning members are those of `tuned_sweep`
# (tuning seeds do not depend on the comparison's), so it must choose as that
# one unsharded job did.


def _summary(outcome):
    report = outcome.compared.report_paths[0]
    return json.loads((report.parent / "summary.json").read_text())


def _sharded_config(tmp_path, name):
    folder = tmp_path / name
    folder.mkdir()
    path = folder / "sweep.yaml"
    path.write_text(TINY.replace("tune-tiny", "tune-shards")
                    + f"tracking: {{uri: 'sqlite:///{folder / 'mlflow.db'}'}}\n"
                    + f"output_dir: '{folder / 'out'}'\n")
    return load_config(path), folder


def _check_sharded(folder, outcome, expected):
    """The registering shard's report and summary.json, the sweep's claims
    (one per activation) and every member's param agree on `expected`."""
    assert _summary(outcome)["tuning"]["chosen"] == expected
    text = outcome.compared.report_paths[0].read_text()
    for activation, value in expected.items():
        assert f"{activation} training.learning_rate = {value:g}" in text
    runs = _runs(folder, "tune-shards")
    (sweep,) = runs["sweep"]
    assert sorted(k for k in sweep.data.params if k.startswith("kg.tuning.choice.")) == [
        "kg.tuning.choice.0", "kg.tuning.choice.1"]
    assert sorted((m.data.tags["activation"], m.data.tags["seed"]) for m in runs["member"]) == [
        ("gelu", "0"), ("gelu", "1"), ("relu", "0"), ("relu", "1")]
    for member in runs["member"]:
        assert float(member.data.params["training.learning_rate"]) == (
            expected[member.data.tags["activation"]])
    return runs


def test_tuned_shards_in_turn_and_at_once_choose_as_one_job_and_resume_retrains_nothing(
    tuned_sweep, tmp_path
):
    from kg_service.sweep.shards import Shard
    from tests.service.sweep.test_golden import _same

    expected = _summary(tuned_sweep[4])["tuning"]["chosen"]

    # One after another; shard 1 killed at its comparison, relu's choice claimed.
    config, folder = _sharded_config(tmp_path, "in_turn")
    with pytest.raises(SweepInterrupted):
        sharded.run_shard(config, Shard(1, 3), claimant="test",
                           progress=_StopAtTheComparison(), echo=print)
    before = _runs(folder, "tune-shards")
    relu_tuning = {r.info.run_id for r in before["tuning"]}
    assert "member" not in before and len(relu_tuning) == 2  # relu x 2 values x 1 seed
    restarted = sharded.run_shard(config, Shard(1, 3), claimant="test", echo=print)
    assert (restarted.held, restarted.total) == (1, 4)  # relu/0; tuning members aside
    sharded.run_shard(config, Shard(2, 3), claimant="test", echo=print)  # relu's claimed
    assert {r.info.run_id for r in _runs(folder, "tune-shards")["tuning"]} == relu_tuning
    outcome = sharded.run_shard(config, Shard(3, 3), claimant="test", echo=print)
    runs = _check_sharded(folder, outcome, expected)
    assert len(runs["tuning"]) == 4  # each tuning member trained once
    rebuilt = rebuild.report_sweep("tune-shards", config.tracking.uri, claimant="test",
                                    output_dir=str(folder / "rebuilt"))
    _same(_summary(outcome), _summary(rebuilt))  # kg report: the same Tuning section

    # At once: shards 1 and 2 (both tune relu) as two kg-train processes, then 3.
    config, folder = _sharded_config(tmp_path, "at_once")
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    jobs = [subprocess.Popen(
        [os.path.join(servers.VENV_BIN, "kg-train"), "--config", "sweep.yaml", "--quiet",
         "--shard", shard], cwd=folder, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True) for shard in ("1/3", "2/3")]
    for job in jobs:
        _, err = job.communicate(timeout=600)
        assert job.returncode == 0, err[-3000:]
    outcome = sharded.run_shard(config, Shard(3, 3), claimant="test", echo=print)
    runs = _check_sharded(folder, outcome, expected)
    # However many copies of relu's tuning members the two jobs logged, the
    # store's (kg report's) tuning is the one claimed choice.
    (sweep,) = runs["sweep"]
    stored = stage.stored(config, pipeline.preflight(config), sweep.info.run_id)
    assert stored.chosen() == expected
