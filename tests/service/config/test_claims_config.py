"""`claims:` (issue 32 §1): declared in the config, as strict as every key;
each problem named at its key and line, with a "did you mean"."""

import textwrap

import pytest

from click.testing import CliRunner

from kg_service.cli import train as train_cli
from kg_service.config.loading import load_config
from kg_service.errors import ServiceError

HEAD = """\
activations: [relu, gelu, elu]
seeds: 3
analysis:
  contrasts:
    - {name: smooth-vs-relu, plus: [gelu, elu], minus: [relu]}
claims:
"""


def load(tmp_path, claims, head=HEAD):
    path = tmp_path / "sweep.yaml"
    path.write_text(head + textwrap.indent(textwrap.dedent(claims), "  "), encoding="utf-8")
    return load_config(path)


def problem(tmp_path, claims, head=HEAD):
    with pytest.raises(ServiceError) as info:
        load(tmp_path, claims, head)
    return str(info.value)


GOOD = """\
- name: gelu-beats-relu
  pair: [gelu, relu]
  metric: test_accuracy
  direction: greater
  smallest_effect: 0.003
- name: smooth-beats-relu
  contrast: smooth-vs-relu
  metric: test_loss
  direction: less
  smallest_effect: 0.01
  alpha: 0.05
"""


def test_declared_claims_load_with_what_they_compare(tmp_path):
    config = load(tmp_path, GOOD)
    first, second = config.claims
    assert (first.name, first.pair, first.smallest_effect) == ("gelu-beats-relu",
                                                              ("gelu", "relu"), 0.003)
    assert second.sides(config.analysis.contrasts) == (("gelu", "elu"), ("relu",))


def test_a_typo_of_a_claim_key_is_named_at_its_line_with_did_you_mean(tmp_path):
    message = problem(tmp_path, GOOD.replace("smallest_effect: 0.003", "smallest_efect: 0.003"))
    assert "line 11" in message and 'Did you mean "smallest_effect"' in message, message


def test_an_activation_not_in_the_sweep_is_refused_with_did_you_mean(tmp_path):
    message = problem(tmp_path, GOOD.replace("[gelu, relu]", "[geglu, relu]"))
    assert "claims[0].pair[0] (line 8)" in message and "not one of the activations" in message
    assert 'Did you mean "gelu"' in message, message


def test_a_metric_not_logged_is_refused_with_did_you_mean(tmp_path):
    message = problem(tmp_path, GOOD.replace("metric: test_accuracy", "metric: test_acuracy"))
    assert "claims[0].metric (line 9)" in message and 'Did you mean "test_accuracy"' in message


def test_an_undeclared_contrast_is_refused_with_did_you_mean(tmp_path):
    message = problem(tmp_path, GOOD.replace("contrast: smooth-vs-relu", "contrast: smooth-vs-reLu"))
    assert "claims[1].contrast (line 13)" in message
    assert 'Did you mean "smooth-vs-relu"' in message, message


@pytest.mark.parametrize("edit,key", [
    (("smallest_effect: 0.003", "smallest_effect: big"), "claims[0].smallest_effect"),
    (("smallest_effect: 0.003", "smallest_effect: -1"), "claims[0].smallest_effect"),
    (("direction: greater", "direction: up"), "claims[0].direction"),
    (("alpha: 0.05", "alpha: 0.01"), "claims[1].alpha"),
    (("pair: [gelu, relu]", "interaction: [gelu, relu]"), "claims[0]"),
    (("pair: [gelu, relu]", "pair: [gelu, gelu]"), "claims[0].pair[1]"),
])
def test_ill_formed_claims_are_one_clear_problem_at_their_key(tmp_path, edit, key):
    message = problem(tmp_path, GOOD.replace(*edit))
    assert key in message and "line" in message, message


def test_two_things_compared_in_one_claim_is_refused(tmp_path):
    message = problem(tmp_path, GOOD.replace("  pair: [gelu, relu]",
                                             "  pair: [gelu, relu]\n  contrast: smooth-vs-relu"))
    assert "expected exactly one of pair" in message, message


STUDY = """\
activations: [relu, gelu]
seeds: 3
study: revival
data: {dataset: python_code}
model: {layer_norm: true}
study_factor: {setting: model.layer_norm, reference: true}
claims:
"""


def test_an_interaction_names_its_reference_level_of_the_study_factor(tmp_path):
    config = load(tmp_path, """\
        - {name: ln, interaction: [relu, gelu], reference: true, metric: test_loss,
           direction: less, smallest_effect: 0.01}
        - {name: relief, pair: [relu, gelu], level: false, metric: entropy_norm.block1,
           direction: less, smallest_effect: 0.02}
        """, STUDY)
    assert config.claims[0].reference is True and config.claims[1].level is False
    message = problem(tmp_path, """\
        - {name: ln, interaction: [relu, gelu], metric: test_loss, direction: less,
           smallest_effect: 0.01}
        """, STUDY)
    assert "without `reference:`" in message, message
    message = problem(tmp_path, """\
        - {name: ln, interaction: [relu, gelu], reference: 3, metric: test_loss,
           direction: less, smallest_effect: 0.01}
        """, STUDY)
    assert "claims[0].reference" in message and "model.layer_norm" in message, message


def test_an_interaction_without_a_study_factor_is_refused(tmp_path):
    message = problem(tmp_path, GOOD.replace("pair: [gelu, relu]",
                                             "interaction: [gelu, relu]\n  reference: true"))
    assert "without a `study_factor:`" in message, message


KINDS = """\
- {name: overload, change: gelu, reference: true, metric: entropy_norm.block1,
   direction: greater, smallest_effect: 0.02}
- {name: slope, activation: relu, versus: 0.01, level: false,
   metric: leaky_slope_abs.block1, direction: less, smallest_effect: 0.005}
"""


def test_a_level_change_and_a_constant_load_with_their_sides(tmp_path):
    config = load(tmp_path, KINDS, STUDY)
    change, constant = config.claims
    assert (change.change, change.reference, change.sides()) == ("gelu", True,
                                                                  (("gelu",), ("gelu",)))
    assert (constant.activation, constant.versus, constant.level) == ("relu", 0.01, False)
    assert constant.sides() == (("relu",), ())


@pytest.mark.parametrize("edit,words", [
    (("change: gelu", "chnage: gelu"), ["claims[0]", "line 8", 'Did you mean "change"']),
    (("change: gelu", "change: gleu"), ["claims[0].change", "line 8", 'Did you mean "gelu"']),
    (("versus: 0.01", "versu: 0.01"), ["claims[1]", "line 10", 'Did you mean "versus"']),
    (("versus: 0.01", "versus: small"), ["claims[1].versus", "line 10"]),
    (("change: gelu, reference: true", "change: gelu"), ["claims[0]", "without `reference:`"]),
    (("activation: relu, versus: 0.01", "versus: 0.01"), ["claims[1]", "line 10",
                                                         "activation: NAME"]),
    (("activation: relu, versus: 0.01", "activation: relu, pair: [relu, gelu]"),
     ["claims[1].activation", "belongs to `versus:`"]),
    (("change: gelu, reference: true", "change: gelu, reference: true, level: false"),
     ["claims[0].level", "spans the factor's levels"]),
])
def test_a_bad_change_or_constant_is_one_clear_problem_exit_2(tmp_path, edit, words):
    path = tmp_path / "sweep.yaml"
    path.write_text(STUDY + textwrap.indent(KINDS.replace(*edit), "  "), encoding="utf-8")
    result = CliRunner().invoke(train_cli.main, ["--config", str(path), "--dry-run"],
                                prog_name="kg-train")
    assert result.exit_code == 2, result.output
    assert all(w in result.output for w in words), result.output


def test_every_sweep_of_make_results_loads_with_its_claims():
    """docs/make_results.sh's sweeps, each its config with its `--set`s: the
    slope sweep trains one activation, so it declares no claims (the
    config's compare activations it does not train; issue 32 §4)."""
    import pathlib
    import re
    import shlex

    repo = pathlib.Path(__file__).resolve().parents[3]
    script = (repo / "docs" / "make_results.sh").read_text().replace("\\\n", " ")
    tuning = re.search(r"^LM_TUNING='(.*)'$", script, re.M).group(1)
    loaded = {}
    for line in re.findall(r"^\s*train (\S+ .*)$", script, re.M):
        name, *args = shlex.split(line.split("#")[0].replace('"$LM_TUNING"', repr(tuning)))
        config = args[args.index("--config") + 1]
        sets = [args[i + 1] for i, a in enumerate(args) if a == "--set"]
        loaded[name] = load_config(repo / config, sets)
    assert {"revival-layernorm", "revival-no-layernorm", "revival-slope-long"} <= set(loaded)
    assert loaded["revival-slope-long"].claims == ()
    assert len(loaded["revival-no-layernorm"].claims) == 4


def test_a_claim_is_logged_with_only_its_keys_and_an_older_logged_form_still_resumes(tmp_path):
    """A claim kind added later (an optional key, unset) changes no sweep's
    params or id, and a sweep logged with every key spelled (null for the
    unset ones, as the first claims were) still resumes: a glu-variants
    shard logged before `change`/`versus` existed was refused as 'differs'."""
    import json  # noqa: PLC0415 (this test only)

    from kg_service.config.loading import config_to_dict  # noqa: PLC0415 (this test only)
    from kg_service.sweep import shards  # noqa: PLC0415 (this test only)
    from kg_service.tracking import store  # noqa: PLC0415 (this test only)

    config = load(tmp_path, GOOD)
    claims = config_to_dict(config)["claims"]
    assert claims and all(None not in entry.values() for entry in claims)
    assert load_config(tmp_path / "sweep.yaml") == config
    logged_then = json.dumps([{"change": None, "versus": None, "level": None, **entry}
                              for entry in claims])
    assert store.same_param(logged_then, claims)
    changed = [{**claims[0], "smallest_effect": claims[0]["smallest_effect"] * 2}, *claims[1:]]
    assert not store.same_param(logged_then, changed)
    assert shards.sweep_id(config) == shards.sweep_id(load(tmp_path, GOOD))
