"""The `tuning:` block (issue 19 item 1), at the edge: validated like every
key (one paragraph naming the key, its line, what it takes and the closest
valid name; exit 2 from kg-train), shown by --dry-run, cut by --smoke,
and refused with --shard. Pure: no training."""

import dataclasses
import pathlib
import textwrap

import pytest
from click.testing import CliRunner

from kg_service.cli import train as kg_train
from kg_service.sweep import shards
from kg_service.cli.plan import describe_plan
from kg_service.config import derived
from kg_service.config import fields
from kg_service.config import schema
from kg_service.config import tuning as config_tuning
from kg_service.config.loading import load_config
from kg_service.errors import ServiceError

REPO = pathlib.Path(__file__).resolve().parents[3]
SECTIONS = {"model": schema.ModelConfig, "training": schema.TrainingConfig}


def write(tmp_path, text):
    path = tmp_path / "sweep.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def problem(tmp_path, block, seeds="2"):
    with pytest.raises(ServiceError) as info:
        load_config(write(tmp_path, f"seeds: {seeds}\ntuning: {block}\n"))
    return str(info.value)


def test_a_typo_in_the_parameter_names_the_closest_tunable_key(tmp_path):
    message = problem(tmp_path, "{parameter: training.learning_rte, values: [1e-3]}")
    assert "tuning.parameter (line 2)" in message
    assert 'Did you mean "training.learning_rate"?' in message
    # The keys it lists are the schema's numeric model/training keys, read from it.
    for key in ("training.learning_rate", "training.weight_decay", "model.dropout"):
        assert key in message
    assert "model.hidden_units" not in message and "training.optimizer" not in message


@pytest.mark.parametrize("block, where, says", [
    ("{parameter: training.learning_rate, values: [3e-4, -1e-3]}", "tuning.values[1]",
     "greater than 0"),
    ("{parameter: model.dropout, values: [0.1, 1.5]}", "tuning.values[1]", "less than 1"),
    ("{parameter: training.epochs, values: [2, 2.5]}", "tuning.values[1]", "whole number"),
    ("{parameter: training.learning_rate, values: [1e-3], low: 1e-4, high: 1e-2, trials: 3}",
     "tuning.low", "not both"),
    ("{parameter: training.learning_rate, low: 1e-4, high: 1e-2}", "tuning (line 2)",
     "missing trials"),
    ("{parameter: training.learning_rate, low: 1e-2, high: 1e-4, trials: 3}", "tuning.high",
     "expected high > low"),
    ("{parameter: model.dropout, low: 0.0, high: 0.5, trials: 3, log: true}", "tuning.low",
     "log range needs low > 0"),
    ("{parameter: training.learning_rate, values: [1e-3], select_by: val_los}",
     "tuning.select_by", 'Did you mean "val_loss"?'),
    ("{parameter: training.learning_rate, values: [1e-3], sedes: 2}", "tuning.sedes",
     'Did you mean "seeds"?'),
])
def test_a_bad_tuning_block_is_one_clear_problem_at_its_key(tmp_path, block, where, says):
    message = problem(tmp_path, block)
    assert where in message and says in message, message


def test_comparison_seeds_in_the_tuning_range_are_refused(tmp_path):
    message = problem(tmp_path, "{parameter: training.learning_rate, values: [1e-3]}",
                      seeds=f"[0, {config_tuning.SEED_BASE}]")
    assert "tuning seeds' range" in message


def test_kg_train_exits_2_without_a_traceback_for_a_bad_block(tmp_path):
    path = write(tmp_path, "tuning: {parameter: training.lr, values: [1e-3]}\n")
    result = CliRunner().invoke(kg_train.main, ["--config", str(path), "--dry-run"])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and "tuning.parameter" in result.output


def test_the_dry_run_shows_the_tuning_members(tmp_path):
    config = load_config(write(tmp_path, """\
        activations: [relu, gelu, elu]
        seeds: 2
        tuning: {parameter: training.learning_rate, values: [3e-4, 1e-3, 3e-3], seeds: 2}
        """))
    plan = describe_plan(config, environ={})
    assert "grid [0.0003, 0.001, 0.003]" in plan
    assert "3 activations x 3 values x 2 seeds = 18 tuning members" in plan
    ranged = dataclasses.replace(config, tuning=dataclasses.replace(
        config.tuning, values=None, low=1e-4, high=1e-2, log=True, trials=6))
    plan = describe_plan(ranged, environ={})
    assert "6 trials of Optuna's TPE over [0.0001, 0.01] (log-uniform)" in plan
    assert "3 activations x 6 values x 2 seeds = 36 tuning members" in plan
    assert "\n  tuning " not in describe_plan(load_config(write(tmp_path, "seeds: 2\n")), {})


def test_smoke_keeps_the_first_value_or_one_trial_and_one_seed(tmp_path):
    config = load_config(write(tmp_path, """\
        tuning: {parameter: training.learning_rate, values: [3e-4, 1e-3, 3e-3], seeds: 3}
        """))
    small = derived.smoke(config).tuning
    assert small.values == (3e-4,) and small.seeds == 1
    assert "2 activations x 1 values x 1 seeds = 2 tuning members" in describe_plan(
        derived.smoke(config), environ={})
    ranged = dataclasses.replace(config.tuning, values=None, low=1e-4, high=1e-2, trials=6)
    assert config_tuning.smoke(ranged).trials == 1


def test_tuning_seeds_are_apart_from_every_comparison_seed_and_each_other():
    seeds = [config_tuning.tuning_seeds(c, config_tuning.MAX_SEEDS)
             for c in range(config_tuning.MAX_TRIALS)]
    flat = [s for group in seeds for s in group]
    assert len(set(flat)) == len(flat)  # no two candidates share a seed
    assert min(flat) == config_tuning.SEED_BASE and max(flat) <= fields.MAX_SEED


def test_an_int_range_no_larger_than_the_budget_is_a_grid():
    tuning = schema.TuningConfig(parameter="training.epochs", low=2, high=4, trials=6)
    assert config_tuning.grid(tuning, int) == (2, 3, 4)
    wide = dataclasses.replace(tuning, high=40)
    assert config_tuning.grid(wide, int) is None  # 39 values > 6 trials: TPE
    assert config_tuning.candidate_count(wide, int) == 6


def test_digits_config_tunes_the_learning_rate_per_activation():
    config = load_config(REPO / "configs" / "digits.yaml")
    assert config.tuning.parameter == "training.learning_rate"
    assert config_tuning.kind_of(config.tuning, SECTIONS) is float
    assert len(config.tuning.values) >= 2


def test_a_tuned_shard_dry_run_says_what_it_tunes_and_multi_worker_is_refused(tmp_path):
    path = write(tmp_path, "tuning: {parameter: training.learning_rate, values: [1e-3]}\n")
    result = CliRunner().invoke(
        kg_train.main, ["--config", str(path), "--shard", "1/2", "--dry-run"]
    )
    assert result.exit_code == 0, result.output
    (line,) = [x for x in result.output.splitlines() if x.strip().startswith("shard tuning")]
    mine = [a for a, _ in shards.members(load_config(path), shards.Shard(1, 2))]
    assert line.split()[2].rstrip(":").split(",")[0] == mine[0]
    assert "never waits for another job" in line
    result = CliRunner().invoke(
        kg_train.main, ["--config", str(path), "--dry-run",
                        "--set", "device.distribution=multi_worker"]
    )
    assert result.exit_code == 2, result.output
    assert "multi_worker cannot run it" in result.output and "--shard I/N" in result.output
