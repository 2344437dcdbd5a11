"""The `analysis:` section (issue 18): margin, alpha, power, contrasts,
validated like every other section and shown in the dry-run plan."""

import pytest

from kg_service.cli.plan import describe_plan
from kg_service.config.loading import load_config
from kg_service.config.schema import DEFAULT_MARGINS
from tests.service.config.test_config import SHIPPED
from tests.service.config.test_config import error_of
from tests.service.config.test_config import write


def test_defaults_give_each_compared_metric_its_margin(tmp_path):
    config = load_config(write(tmp_path, "activations: [relu, gelu]\n"))
    assert config.analysis.alpha == 0.05 and config.analysis.power == 0.8
    assert config.analysis.margin_for("test_accuracy") == 0.003
    assert config.analysis.margin_for("test_loss") == 0.01
    assert config.analysis.margin_for("test_perplexity") is None
    assert "±0.003 test_accuracy, ±0.01 test_loss (defaults)" in describe_plan(config, {})


def test_a_margin_mapping_overrides_one_metric_and_keeps_the_other_default(tmp_path):
    config = load_config(write(tmp_path, "analysis:\n  margin: {test_loss: 0.02}\n"))
    assert config.analysis.margin_for("test_loss") == 0.02
    assert config.analysis.margin_for("test_accuracy") == DEFAULT_MARGINS["test_accuracy"]
    assert "±0.003 test_accuracy (default), ±0.02 test_loss" in describe_plan(config, {})


def test_every_problem_of_the_section_is_named_with_its_line_and_a_suggestion(tmp_path):
    message = error_of(tmp_path, """\
        activations: [relu, gelu, geglu]
        analysis:
          margin: {test_acuracy: 0.003}
          alpah: 0.1
          power: 1.5
        """)
    assert "4 problems" not in message and "3 problems" in message
    assert ('analysis.margin.test_acuracy (line 3): unknown metric "test_acuracy"' in message
            and 'Did you mean "test_accuracy"?' in message)
    assert 'analysis.alpah (line 4): unknown key. Did you mean "alpha"?' in message
    assert "analysis.power (line 5): got 1.5 (a number); expected a value in (0, 1)." in message


@pytest.mark.parametrize("margin", ["-1", "0", "abc", "{}", "{test_loss: -0.1}"])
def test_a_margin_that_is_not_positive_is_refused(tmp_path, margin):
    message = error_of(tmp_path, f"analysis:\n  margin: {margin}\n")
    assert "analysis.margin" in message and "positive number" in message


def test_contrasts_name_trained_activations_on_disjoint_sides(tmp_path):
    message = error_of(tmp_path, """\
        activations: [relu, gelu, geglu]
        analysis:
          contrasts:
            - {name: gated, plus: [geglu], minus: [relu, elu]}
        """)
    assert 'analysis.contrasts[0].minus[1]' in message
    assert '"elu" is not one of the activations (relu, gelu, geglu)' in message
    message = error_of(tmp_path, """\
        activations: [relu, gelu]
        analysis:
          contrasts:
            - {name: same, plus: [gelu], minus: [gelu]}
        """)
    assert '"gelu" is on both sides of contrast "same"' in message


def test_set_overrides_reach_the_section_and_the_plan(tmp_path):
    config = load_config(write(tmp_path, "activations: [relu, gelu, geglu]\n"), [
        "analysis.margin=0.005",
        "analysis.contrasts=[{name: g, plus: [geglu], minus: [relu, gelu]}]",
    ])
    assert config.analysis.margin_for("test_accuracy") == 0.005
    assert "contrast g: mean(geglu) − mean(relu, gelu)" in describe_plan(config, {})


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_every_shipped_config_sets_its_margin(path):
    assert load_config(path).analysis.margin is not None, path.name


def test_a_contrast_name_must_suit_mlflow_metric_and_tag_keys(tmp_path):
    message = error_of(tmp_path, """\
        activations: [relu, gelu]
        analysis:
          contrasts:
            - {name: "gated+plain?", plus: [gelu], minus: [relu]}
        """)
    assert "analysis.contrasts[0].name" in message and "e.g. gated-vs-plain" in message
