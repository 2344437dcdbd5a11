"""The top-level `study:` key (issue 18 §6): validated like every key, shown
by --dry-run, and set in the Revival config so both halves share it."""

import pathlib
import textwrap

import pytest

from kg_service.cli.plan import describe_plan
from kg_service.config.loading import load_config
from kg_service.errors import ServiceError

REPO = pathlib.Path(__file__).resolve().parents[3]


def write(tmp_path, text):
    path = tmp_path / "sweep.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_a_study_name_is_shown_by_the_dry_run_plan(tmp_path):
    config = load_config(write(tmp_path, "study: revival\n"))
    assert config.study == "revival"
    assert "study        revival (one family with its other sweeps: kg report --study revival)" \
        in describe_plan(config, environ={})


def test_without_a_study_the_plan_has_no_study_line(tmp_path):
    plan = describe_plan(load_config(write(tmp_path, "seeds: 2\n")), environ={})
    assert "kg report --study" not in plan and "\n  study " not in plan


@pytest.mark.parametrize("value", ["'two words'", "\"it's\"", "''", "3"])
def test_a_bad_study_name_is_one_clear_problem_at_its_line(tmp_path, value):
    with pytest.raises(ServiceError) as info:
        load_config(write(tmp_path, f"seeds: 2\nstudy: {value}\n"))
    message = str(info.value)
    assert "study (line 2)" in message, message


def test_a_typo_of_study_suggests_it(tmp_path):
    with pytest.raises(ServiceError, match='Did you mean "study"'):
        load_config(write(tmp_path, "stuyd: revival\n"))


def test_both_revival_halves_are_one_study():
    ln = load_config(REPO / "configs" / "revival.yaml")
    no_ln = load_config(REPO / "configs" / "revival.yaml",
                        ["model.layer_norm=false", "experiment=revival-no-layernorm"])
    assert ln.study == no_ln.study == "revival"
    assert ln.experiment != no_ln.experiment


def test_a_smoke_run_joins_the_smoke_study_not_the_real_one():
    from kg_service.config.derived import smoke

    config = smoke(load_config(REPO / "configs" / "revival.yaml"))
    assert (config.experiment, config.study) == ("revival-layernorm-smoke", "revival-smoke")
    tiny = smoke(load_config(REPO / "configs" / "tiny.yaml"))
    assert tiny.study is None


# --- The study's factor and reference level (issue 30 §4). --------------------


def test_the_revival_halves_declare_layer_norm_with_reference_true():
    ln = load_config(REPO / "configs" / "revival.yaml")
    no_ln = load_config(REPO / "configs" / "revival.yaml",
                        ["model.layer_norm=false", "experiment=revival-no-layernorm"])
    assert ln.study_factor == no_ln.study_factor
    assert (ln.study_factor.setting, ln.study_factor.reference) == ("model.layer_norm", True)


@pytest.mark.parametrize("text, where, says", [
    ("study_factor: {setting: model.layer_norm, reference: true}\n", "study_factor",
     "without a `study:` name"),
    ("study: s\nstudy_factor: {setting: model.layer_nrom, reference: true}\n",
     "setting", "no setting of this config"),
    ("study: s\nstudy_factor: {setting: model, reference: true}\n", "setting",
     "a section or a list"),
    ("study: s\nstudy_factor: {setting: model.layer_norm, reference: 'yes'}\n",
     "reference", "is not a value model.layer_norm can take"),
    ("study: s\nstudy_factor: {setting: model.layer_norm}\n", "reference", ""),
])
def test_a_bad_study_factor_is_one_clear_problem(tmp_path, text, where, says):
    with pytest.raises(ServiceError) as info:
        load_config(write(tmp_path, "seeds: 2\n" + text))
    message = str(info.value)
    assert where in message and says in message, message
