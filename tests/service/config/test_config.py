"""kg_service.config: the YAML schema, its error messages, overrides and plan.

No test here imports TensorFlow, except the one that pins the activation
names read from keras_gelu's source to `keras_gelu.names()`.
"""

import dataclasses
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest
import yaml

from kg_service.cli.plan import describe_plan
from kg_service.config import derived
from kg_service.config import schema as config_module
from kg_service.config.derived import resolve_tracking_uri
from kg_service.config.fields import split_sizes
from kg_service.config.loading import config_to_dict
from kg_service.config.loading import load_config
from kg_service.config.schema import Config
from kg_service.errors import ServiceError

REPO = pathlib.Path(__file__).resolve().parents[3]
SHIPPED = sorted((REPO / "configs").glob("*.yaml"))


def write(tmp_path, text, name="sweep.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def error_of(tmp_path, text, overrides=()):
    path = write(tmp_path, text)
    with pytest.raises(ServiceError) as info:
        load_config(path, overrides)
    return str(info.value)


# --- Shipped configs and defaults. -------------------------------------------


def test_configs_directory_ships_the_four_documented_configs():
    assert {p.name for p in SHIPPED} >= {"moons.yaml", "moons-glu.yaml", "digits.yaml", "tiny.yaml"}


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_every_shipped_config_validates_and_describes(path):
    config = load_config(path)
    assert config.source == str(path)
    members = len(config.activations) * len(config.seeds)
    assert f"= {members} training runs" in describe_plan(config)


def test_moons_config_is_the_seed_article_experiment():
    config = load_config(REPO / "configs" / "moons.yaml")
    assert config.data == config_module.DataConfig(
        dataset="moons", n_samples=2000, noise=0.2, test_fraction=0.2, validation_fraction=0.2
    )
    assert config.model.hidden_units == Config().model.hidden_units
    assert (config.training.optimizer, config.training.learning_rate) == ("adam", 0.001)
    assert (config.training.epochs, config.training.batch_size) == (100, 32)
    assert config.activations == ("relu", "gelu") and config.baseline == "relu"
    assert config.seeds == tuple(range(10))
    assert (config.registry.model_name, config.registry.alias) == ("moons-{activation}", "champion")
    assert config.export.dir == "exports"


def test_shipped_smaller_configs_match_their_descriptions():
    glu = load_config(REPO / "configs" / "moons-glu.yaml")
    assert set(glu.activations) == {
        "relu", "gelu", "gelu_tanh", "geglu", "swiglu", "learnable_leaky_relu"
    }
    assert len(glu.seeds) == 5 and glu.training.epochs < 100
    digits = load_config(REPO / "configs" / "digits.yaml")
    # The GELU paper's MNIST classifier: 8 x 128, Adam, GELU/ReLU/ELU, >= 5 seeds.
    assert (digits.data.dataset, digits.model.hidden_units) == ("digits", (128,) * 8)
    assert set(digits.activations) == {"relu", "gelu", "elu"} and len(digits.seeds) >= 5
    assert (digits.training.optimizer, digits.training.batch_size) == ("adam", 128)
    for name in ("revival.yaml", "glu-variants.yaml"):
        language = load_config(REPO / "configs" / name)
        assert language.data.dataset == "python_code"
    glu_variants = load_config(REPO / "configs" / "glu-variants.yaml")
    assert set(glu_variants.activations) == {
        "relu", "gelu", "swish", "glu", "bilinear", "reglu", "geglu", "swiglu"}
    assert glu_variants.model.match_params
    revival = load_config(REPO / "configs" / "revival.yaml")
    assert set(revival.activations) == {"gelu", "relu", "learnable_leaky_relu"}
    tiny = load_config(REPO / "configs" / "tiny.yaml")
    assert (tiny.data.n_samples, tiny.model.hidden_units, tiny.training.epochs) == (300, (16, 16), 10)
    assert (tiny.seeds, tiny.activations) == ((0, 1), ("relu", "gelu"))


def test_missing_keys_and_sections_take_the_schema_defaults(tmp_path):
    config = load_config(write(tmp_path, "experiment: x\n"))
    assert dataclasses.replace(config, source=None) == Config(experiment="x")
    assert config.seeds == (0, 1, 2, 3, 4)


def test_empty_section_means_all_defaults(tmp_path):
    config = load_config(write(tmp_path, "data:\nmodel:\n"))
    assert config.data == config_module.DataConfig()


# --- Unknown keys. -----------------------------------------------------------


def test_unknown_key_names_file_path_line_closest_and_valid_keys(tmp_path):
    message = error_of(tmp_path, "data:\n  dataset: moons\n  n_sampels: 300\n")
    assert "sweep.yaml" in message
    assert "data.n_sampels (line 3): unknown key." in message
    assert 'Did you mean "n_samples"?' in message
    assert "Valid keys under data: dataset, n_samples, noise" in message


def test_unknown_top_level_key_lists_the_top_level_keys(tmp_path):
    message = error_of(tmp_path, "activation: [relu]\n")
    assert 'activation (line 1): unknown key. Did you mean "activations"?' in message
    assert "Valid keys at the top level: experiment, activations" in message
    assert "source" not in message  # a field, but not a key


# --- Types. ------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, label, expected",
    [
        ("training:\n  epochs: true\n", "training.epochs (line 2)", "got true (a boolean); expected an integer"),
        ("training:\n  epochs: 10.0\n", "training.epochs (line 2)", "got 10.0 (a number); expected an integer"),
        ("training:\n  epochs: ten\n", "training.epochs (line 2)", 'got "ten" (a string); expected an integer'),
        ("training:\n  learning_rate: fast\n", "training.learning_rate (line 2)", "expected a number"),
        ("training:\n  learning_rate: false\n", "training.learning_rate (line 2)", "got false (a boolean); expected a number"),
        ("data:\n  standardize: 1\n", "data.standardize (line 2)", "got 1 (an integer); expected true or false"),
        ("data:\n  standardize: \"yes\"\n", "data.standardize (line 2)", "expected true or false"),
        ("experiment: 2024\n", "experiment (line 1)", 'expected a string. Quote it to mean text: "2024".'),
        ("experiment: [a]\n", "experiment (line 1)", 'got ["a"] (a list); expected a string'),
        ("experiment: null\n", "experiment (line 1)", "got null (null); expected a string"),
        ("tracking:\n  uri: 5\n", "tracking.uri (line 2)", "expected a string or null"),
        ("model:\n  hidden_units: 64\n", "model.hidden_units (line 2)", "expected a non-empty list of positive integers, e.g. [64, 64]"),
        ("model:\n  hidden_units: [64, 6.5]\n", "model.hidden_units[1] (line 2)", "got 6.5 (a number); expected an integer"),
        ("model:\n  hidden_units: [64, true]\n", "model.hidden_units[1] (line 2)", "got true (a boolean); expected an integer"),
        ("activations: gelu\n", "activations (line 1)", "expected a list of activation names, e.g. [relu, gelu]"),
        ("activations: [relu, 3]\n", "activations[1] (line 1)", "got 3 (an integer); expected a string"),
        ("seeds: three\n", "seeds (line 1)", "expected a count n >= 1 (meaning seeds 0..n-1) or a list"),
        ("seeds: [0, 1.5]\n", "seeds[1] (line 1)", "expected an integer"),
        ("data: moons\n", "data (line 1)", 'got "moons" (a string); expected a mapping of settings (dataset, n_samples'),
    ],
)
def test_wrong_type_names_path_given_and_expected(tmp_path, text, label, expected):
    message = error_of(tmp_path, text)
    assert f"{label}: " in message
    assert expected in message


def test_int_is_accepted_for_float_and_1e_notation_is_a_number(tmp_path):
    # PyYAML reads 1e-3 (no dot) as a string; a user means the number.
    config = load_config(write(tmp_path, "training:\n  learning_rate: 1e-3\ndata:\n  noise: 0\n"))
    assert config.training.learning_rate == 0.001
    assert config.data.noise == 0.0 and isinstance(config.data.noise, float)


# --- Ranges. -----------------------------------------------------------------


@pytest.mark.parametrize(
    "text, label, expected",
    [
        ("data:\n  n_samples: 49\n", "data.n_samples", "got 49 (an integer); expected a value >= 50"),
        ("data:\n  noise: -0.1\n", "data.noise", "expected a value >= 0"),
        ("data:\n  test_fraction: 0\n", "data.test_fraction", "got 0 (an integer); expected a value in (0, 1)"),
        ("data:\n  test_fraction: 1.0\n", "data.test_fraction", "expected a value in (0, 1)"),
        ("data:\n  validation_fraction: 1.5\n", "data.validation_fraction", "expected a value in (0, 1)"),
        ("data:\n  seed: -1\n", "data.seed", "expected a value in [0, 4294967295]"),
        ("training:\n  epochs: 0\n", "training.epochs", "expected a value >= 1"),
        ("training:\n  batch_size: 0\n", "training.batch_size", "expected a value >= 1"),
        ("training:\n  learning_rate: 0\n", "training.learning_rate", "expected a value > 0"),
        ("training:\n  learning_rate: -1.0e-3\n", "training.learning_rate", "expected a value > 0"),
        ("training:\n  learning_rate: .nan\n", "training.learning_rate", "expected a finite number"),
        ("training:\n  convergence_threshold: 0\n", "training.convergence_threshold", "expected a value in (0, 1]"),
        ("model:\n  dropout: 1\n", "model.dropout", "got 1 (an integer); expected a value in [0, 1)"),
        ("model:\n  dropout: -0.1\n", "model.dropout", "expected a value in [0, 1)"),
        ("model:\n  hidden_units: []\n", "model.hidden_units", "got [] (a list); expected a non-empty list"),
        ("model:\n  hidden_units: [64, 0]\n", "model.hidden_units[1]", "got 0 (an integer); expected a positive integer"),
        ("model:\n  d_model: 0\n", "model.d_model", "expected a value >= 1"),
        ("export:\n  tolerance: 0\n", "export.tolerance", "expected a value > 0"),
        ("export:\n  dir: ''\n", "export.dir", "expected a non-empty string"),
        ("output_dir: ' '\n", "output_dir", "expected a non-empty string"),
        ("experiment: ''\n", "experiment", "expected a non-empty string"),
        ("seeds: 0\n", "seeds", "got 0 (an integer); expected a count n >= 1"),
        ("seeds: []\n", "seeds", "expected a non-empty list"),
        ("seeds: [0, -1]\n", "seeds[1]", "got -1 (an integer); expected a value in [0, "),
        ("seeds: [3, 1, 3]\n", "seeds[2]", "expected distinct values; 3 appears twice"),
    ],
)
def test_out_of_range_value_names_path_given_and_range(tmp_path, text, label, expected):
    message = error_of(tmp_path, text)
    assert f"{label} (line " in message
    assert expected in message


@pytest.mark.parametrize(
    "n_samples, test, validation",
    [(2000, 0.2, 0.2), (300, 0.2, 0.2), (101, 0.33, 0.1), (57, 0.5, 0.5), (1797, 0.25, 0.15)],
)
def test_split_sizes_match_scikit_learn_train_test_split(n_samples, test, validation):
    from sklearn.model_selection import train_test_split

    rest, held_out = train_test_split(list(range(n_samples)), test_size=test, random_state=0)
    train, val = train_test_split(rest, test_size=validation, random_state=0)
    data = config_module.DataConfig(
        n_samples=n_samples, test_fraction=test, validation_fraction=validation
    )
    assert split_sizes(data) == (len(train), len(val), len(held_out))


def test_split_with_too_few_samples_in_a_split_is_an_error(tmp_path):
    message = error_of(tmp_path, "data:\n  n_samples: 50\n")  # 32 / 8 / 10
    assert "data (line 1): 50 samples split into 32 train / 8 validation / 10 test" in message
    assert "at least 10 in each" in message


def test_digits_split_uses_its_1797_samples_whatever_n_samples_says(tmp_path):
    config = load_config(write(tmp_path, "data:\n  dataset: digits\n  n_samples: 60\n"))
    assert split_sizes(config.data) == (1149, 288, 360)


# --- Choices. ----------------------------------------------------------------


@pytest.mark.parametrize(
    "text, label, suggestion",
    [
        ("data:\n  dataset: moon\n", "data.dataset", "moons"),
        ("data:\n  dataset: MNIST\n", "data.dataset", None),
        ("model:\n  block: Dense\n", "model.block", "dense"),
        ("model:\n  block: feed_forward\n", "model.block", "feedforward"),
        ("training:\n  optimizer: adamm\n", "training.optimizer", "adam"),
        ("training:\n  optimizer: rmsprob\n", "training.optimizer", "rmsprop"),
        ("device:\n  type: GPU\n", "device.type", "gpu"),
        ("device:\n  type: metal\n", "device.type", None),
        ("device:\n  mixed_precision: float16\n", "device.mixed_precision", "mixed_float16"),
        ("device:\n  mixed_precision: bfloat16\n", "device.mixed_precision", "mixed_bfloat16"),
    ],
)
def test_enum_value_lists_choices_and_suggests_the_closest(tmp_path, text, label, suggestion):
    message = error_of(tmp_path, text)
    assert f"{label} (line 2): got " in message
    assert "expected one of " in message
    if suggestion:
        assert f'Did you mean "{suggestion}"?' in message
    else:
        assert "Did you mean" not in message


def test_mixed_precision_accepts_null_and_both_policies(tmp_path):
    for value, expected in [("null", None), ("mixed_float16", "mixed_float16"), ("mixed_bfloat16", "mixed_bfloat16")]:
        path = write(tmp_path, f"device:\n  mixed_precision: {value}\n")
        assert load_config(path).device.mixed_precision == expected


# --- Activations and baseline. -----------------------------------------------


def test_unknown_activation_suggests_the_closest_name(tmp_path):
    message = error_of(tmp_path, "activations: [relu, gleu]\n")
    assert 'activations[1] (line 1): got "gleu" (a string)' in message
    assert "expected an activation name from keras_gelu.names(): " in message
    assert "learnable_leaky_relu" in message
    assert 'Did you mean "gelu"?' in message


def test_activation_names_are_standardized_like_keras_gelu(tmp_path):
    config = load_config(write(tmp_path, "activations: [ReLU, GELU-tanh]\nbaseline: relu\n"))
    assert config.activations == ("relu", "gelu_tanh")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("activations: []\n", "activations (line 1): got [] (a list); expected a non-empty list"),
        ("activations: [gelu, relu, GELU]\n", 'activations[2] (line 1): got "GELU" (a string); expected distinct values; "gelu" appears twice'),
    ],
)
def test_activations_must_be_a_non_empty_list_of_distinct_names(tmp_path, text, expected):
    assert expected in error_of(tmp_path, text)


def test_baseline_defaults_to_relu_when_it_is_an_activation(tmp_path):
    config = load_config(write(tmp_path, "activations: [gelu, relu]\n"))
    assert config.baseline == "relu"


def test_baseline_defaults_to_the_first_activation_without_relu(tmp_path):
    config = load_config(write(tmp_path, "activations: [gelu_tanh, gelu]\n"))
    assert config.baseline == "gelu_tanh"


def test_baseline_outside_the_activations_is_an_error_with_suggestion(tmp_path):
    message = error_of(tmp_path, "activations: [relu, gelu]\nbaseline: gelu_tanh\n")
    assert 'baseline (line 2): got "gelu_tanh" (a string); expected one of the activations (relu, gelu). Did you mean "gelu"?' in message


def test_baseline_typo_is_checked_against_every_activation_name(tmp_path):
    message = error_of(tmp_path, "baseline: rleu\n")
    assert 'baseline (line 1): got "rleu"' in message
    assert 'Did you mean "relu"?' in message


def test_config_validation_reads_the_name_table_without_importing_keras():
    # A fresh process: validating a config must not import Keras, and the
    # names it accepts are exactly keras_gelu.names().
    import subprocess
    import sys

    code = (
        "import sys; from kg_service.config import catalog as config; "
        "names = config.activation_names(); "
        "assert 'keras' not in sys.modules, 'keras imported'; "
        "import keras_gelu; assert names == tuple(keras_gelu.names()), names; "
        "print('ok')"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr


# --- Seeds. ------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, seeds",
    [("seeds: 3\n", (0, 1, 2)), ("seeds: 1\n", (0,)), ("seeds: [7, 2, 42]\n", (7, 2, 42)), ("experiment: x\n", (0, 1, 2, 3, 4))],
)
def test_seeds_are_a_count_or_a_list(tmp_path, text, seeds):
    assert load_config(write(tmp_path, text)).seeds == seeds


# --- Registry names. ---------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ('registry:\n  model_name: "{datset}-{activation}"\n', 'placeholders are {experiment}, {dataset}, {activation}'),
        ('registry:\n  model_name: "{datset}-{activation}"\n', 'Did you mean "{dataset}"?'),
        ('registry:\n  model_name: "{activation:>10}"\n', "with no format spec"),
        ('registry:\n  model_name: "{activation"\n', "placeholders are {experiment}"),
        ('registry:\n  model_name: "team/{activation}"\n', 'gives "team/relu"; expected a registered model name of letters, digits'),
        ('registry:\n  model_name: "{activation}:v1"\n', 'gives "relu:v1"'),
        ('experiment: my sweep\nregistry:\n  model_name: "{experiment}-{activation}"\n', 'gives "my sweep-relu"'),
        ('registry:\n  model_name: "{dataset}"\n', "gives the same name for several activations; expected a template with {activation}"),
    ],
)
def test_registry_model_name_template_must_give_valid_distinct_names(tmp_path, text, expected):
    message = error_of(tmp_path, text)
    assert "registry.model_name (line " in message
    assert expected in message


def test_registry_template_without_activation_is_fine_for_one_activation(tmp_path):
    config = load_config(write(tmp_path, 'activations: [gelu]\nregistry:\n  model_name: "{experiment}.{dataset}"\n'))
    assert derived.registered_model_name(config, "gelu") == "kg-sweep.moons"


@pytest.mark.parametrize("alias", ["latest", "Latest", "v3", "has space", "a/b"])
def test_registry_alias_must_be_a_usable_mlflow_alias(tmp_path, alias):
    message = error_of(tmp_path, f"registry:\n  alias: '{alias}'\n")
    assert "registry.alias (line 2): " in message and "expected an MLflow alias" in message


# --- The file itself. --------------------------------------------------------


def test_missing_file_names_the_path_and_the_closest_config(tmp_path):
    write(tmp_path, "experiment: x\n", name="moons.yaml")
    with pytest.raises(ServiceError) as info:
        load_config(tmp_path / "moon.yaml")
    message = str(info.value)
    assert f"config file {tmp_path / 'moon.yaml'}: no such file." in message
    assert f'Did you mean "{tmp_path / "moons.yaml"}"?' in message


def test_directory_instead_of_file_is_an_error(tmp_path):
    with pytest.raises(ServiceError, match="is a directory; expected a YAML file"):
        load_config(tmp_path)


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads anything")
def test_unreadable_file_is_an_error(tmp_path):
    path = write(tmp_path, "experiment: x\n")
    path.chmod(0)
    with pytest.raises(ServiceError, match="cannot be read: permission denied"):
        load_config(path)


def test_binary_file_is_an_error(tmp_path):
    path = tmp_path / "model.yaml"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    with pytest.raises(ServiceError, match="is not UTF-8 text"):
        load_config(path)


def test_yaml_syntax_error_reports_line_and_column(tmp_path):
    message = error_of(tmp_path, "experiment: x\ndata:\n  dataset: moons\n   noise: 0.2\n")
    assert "sweep.yaml: line 4, column 9: not valid YAML: mapping values are not allowed here" in message


def test_unquoted_brace_template_is_a_yaml_error_with_position(tmp_path):
    message = error_of(tmp_path, "registry:\n  model_name: {dataset}-{activation}\n")
    assert "line 2, column " in message and "not valid YAML" in message


def test_duplicate_key_is_an_error_naming_both_lines(tmp_path):
    message = error_of(tmp_path, "training:\n  epochs: 5\n  batch_size: 8\n  epochs: 6\n")
    assert 'line 4, column 3: not valid YAML: duplicate key "epochs" (first on line 2)' in message


def test_yaml_merge_keys_are_not_duplicates(tmp_path):
    path = write(tmp_path, "training:\n  <<: {epochs: 5, batch_size: 8}\n  epochs: 7\n")
    assert load_config(path).training == config_module.TrainingConfig(epochs=7, batch_size=8)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("", "is empty; expected a mapping of settings"),
        ("# only a comment\n", "is empty"),
        ("- relu\n- gelu\n", "the top level is a list; expected a mapping of settings"),
        ("moons\n", "the top level is a string; expected a mapping"),
    ],
)
def test_top_level_must_be_a_mapping(tmp_path, text, expected):
    message = error_of(tmp_path, text)
    assert message.startswith(f"config file {tmp_path / 'sweep.yaml'}: ")
    assert expected in message


def test_every_problem_is_reported_at_once_one_line_each_in_file_order(tmp_path):
    message = error_of(
        tmp_path,
        """\
        experiment: sweep
        activations: [relu, gleu]
        data:
          dataset: moon
          n_sampels: 10
        training:
          epochs: 0
          optimizer: Adam
        """,
    )
    lines = message.splitlines()
    assert lines[0] == f"config file {tmp_path / 'sweep.yaml'}: 5 problems:"
    assert [line.split(":")[0].strip() for line in lines[1:]] == [
        "activations[1] (line 2)",
        "data.dataset (line 4)",
        "data.n_sampels (line 5)",
        "training.epochs (line 7)",
        "training.optimizer (line 8)",
    ]


def test_a_single_problem_is_one_line(tmp_path):
    message = error_of(tmp_path, "training:\n  epochs: 0\n")
    assert message == (
        f"config file {tmp_path / 'sweep.yaml'}: training.epochs (line 2): got 0 (an integer); "
        "expected a value >= 1."
    )


# --- --set overrides. --------------------------------------------------------


def test_overrides_parse_yaml_scalars_lists_and_nested_keys(tmp_path):
    path = write(tmp_path, "training:\n  epochs: 100\n")
    config = load_config(
        path,
        [
            "training.epochs=5",
            "training.learning_rate=3e-4",
            "activations=[relu,gelu_tanh]",
            "model.hidden_units=[16, 8]",
            "data.standardize=false",
            "device.mixed_precision=mixed_bfloat16",
            "seeds=3",
        ],
    )
    assert config.training.epochs == 5 and config.training.learning_rate == 3e-4
    assert config.activations == ("relu", "gelu_tanh")
    assert config.model.hidden_units == (16, 8)
    assert config.data.standardize is False
    assert config.device.mixed_precision == "mixed_bfloat16"
    assert config.seeds == (0, 1, 2)


def test_override_seeds_list_replaces_the_file_count(tmp_path):
    config = load_config(write(tmp_path, "seeds: 10\n"), ["seeds=[4, 2]"])
    assert config.seeds == (4, 2)


def test_later_override_of_the_same_key_wins(tmp_path):
    config = load_config(write(tmp_path, "experiment: x\n"), ["training.epochs=5", "training.epochs=7"])
    assert config.training.epochs == 7


def test_override_string_settings_take_the_text_as_given(tmp_path):
    config = load_config(
        write(tmp_path, "experiment: x\n"),
        ["registry.model_name={dataset}-{activation}-v2", "experiment=2024", "registry.alias='prod'"],
    )
    assert config.registry.model_name == "{dataset}-{activation}-v2"
    assert config.experiment == "2024"
    assert config.registry.alias == "prod"


def test_override_null_clears_an_optional_string(tmp_path):
    path = write(tmp_path, "tracking:\n  uri: sqlite:///a.db\n")
    assert load_config(path, ["tracking.uri="]).tracking.uri is None
    assert load_config(path, ["tracking.uri=null"]).tracking.uri is None
    assert load_config(path, ["tracking.uri=file:/tmp/x=y"]).tracking.uri == "file:/tmp/x=y"


def test_override_creates_a_section_the_file_lacks(tmp_path):
    config = load_config(write(tmp_path, "experiment: x\n"), ["device.type=cpu"])
    assert config.device.type == "cpu"


def test_override_replaces_a_whole_section_with_a_mapping(tmp_path):
    config = load_config(write(tmp_path, "data:\n  n_samples: 500\n"), ["data={dataset: circles}"])
    assert config.data == config_module.DataConfig(dataset="circles")


def test_override_can_pick_the_baseline(tmp_path):
    config = load_config(write(tmp_path, "activations: [relu, gelu]\n"), ["baseline=GELU"])
    assert config.baseline == "gelu"


@pytest.mark.parametrize(
    "override, expected",
    [
        ("data.n_sampels=300", '--set data.n_sampels=300: data.n_sampels: unknown key. Did you mean "n_samples"? Valid keys under data: dataset'),
        ("trainig.epochs=5", '--set trainig.epochs=5: trainig: unknown key. Did you mean "training"? Valid keys at the top level: experiment'),
        ("training.epochs.max=5", "--set training.epochs.max=5: training.epochs is a single setting, not a section"),
        ("training.epochs", "--set training.epochs: expected KEY=VALUE, e.g. --set training.epochs=5"),
        ("=5", "--set =5: expected KEY=VALUE"),
        ("training.epochs=[1", "--set training.epochs=[1: the value is not valid YAML at column 3"),
        ("training.epochs=0", "training.epochs (--set training.epochs=0): got 0 (an integer); expected a value >= 1"),
        ("training.epochs=five", 'training.epochs (--set training.epochs=five): got "five" (a string); expected an integer'),
        ("activations=[relu,gleu]", 'activations[1] (--set activations=[relu,gleu]): got "gleu"'),
        ("data.dataset=moon", 'data.dataset (--set data.dataset=moon): got "moon" (a string); expected one of "moons", "circles", "digits", "python_code". Did you mean "moons"?'),
        ("seeds=0", "seeds (--set seeds=0): got 0 (an integer); expected a count n >= 1"),
    ],
)
def test_bad_override_is_reported_naming_the_set_flag(tmp_path, override, expected):
    message = error_of(tmp_path, "experiment: x\n", [override])
    assert expected in message


def test_override_into_a_section_the_file_got_wrong_is_reported(tmp_path):
    message = error_of(tmp_path, "data: 5\n", ["data.n_samples=300"])
    assert "--set data.n_samples=300: data in the file is an integer, not a mapping" in message
    assert "data (line 1): got 5 (an integer); expected a mapping of settings" in message


def test_override_problems_and_file_problems_come_together(tmp_path):
    message = error_of(tmp_path, "training:\n  epochs: 0\n", ["data.n_sampels=3", "model.dropout=2"])
    assert "3 problems" in message
    assert message.index("--set data.n_sampels=3") < message.index("training.epochs (line 2)")
    assert message.index("training.epochs (line 2)") < message.index("model.dropout (--set model.dropout=2)")


def test_load_config_does_not_mutate_anything_between_calls(tmp_path):
    path = write(tmp_path, "training:\n  epochs: 9\n")
    assert load_config(path, ["training.epochs=5"]).training.epochs == 5
    assert load_config(path).training.epochs == 9


# --- Resolved config, tracking URI, plan. ------------------------------------


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_config_to_dict_is_plain_yaml_that_loads_back_to_the_same_config(tmp_path, path):
    config = load_config(path, ["seeds=[3, 1]"])
    as_dict = config_to_dict(config)
    text = yaml.safe_dump(as_dict, sort_keys=False)
    assert "source" not in as_dict and "!!python" not in text
    assert as_dict["seeds"] == [3, 1] and isinstance(as_dict["model"]["hidden_units"], list)
    again = load_config(write(tmp_path, text, name="resolved.yaml"))
    assert dataclasses.replace(again, source=None) == dataclasses.replace(config, source=None)


def test_tracking_uri_prefers_config_then_environment_then_sqlite_default(tmp_path):
    config = load_config(write(tmp_path, "experiment: x\n"))
    assert resolve_tracking_uri(config, environ={}) == "sqlite:///mlflow.db"
    env = {"MLFLOW_TRACKING_URI": "http://mlflow:5000"}
    assert resolve_tracking_uri(config, environ=env) == "http://mlflow:5000"
    pinned = dataclasses.replace(config, tracking=config_module.TrackingConfig(uri="sqlite:///x.db"))
    assert resolve_tracking_uri(pinned, environ=env) == "sqlite:///x.db"


def test_tracking_uri_reads_the_process_environment_by_default(tmp_path, monkeypatch):
    config = load_config(write(tmp_path, "experiment: x\n"))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///from-env.db")
    assert resolve_tracking_uri(config) == "sqlite:///from-env.db"
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    assert resolve_tracking_uri(config) == "sqlite:///mlflow.db"


def test_plan_states_data_split_members_tracking_registry_and_export():
    config = load_config(REPO / "configs" / "moons.yaml")
    plan = describe_plan(config, environ={})
    assert 'experiment "moons-relu-vs-gelu"' in plan and "configs/moons.yaml" in plan
    assert "moons: 2000 samples, noise 0.2" in plan
    assert "1280 train / 320 validation / 400 test" in plan
    assert "dense block, hidden [64, 64]" in plan
    assert "adam, learning rate 0.001, batch size 32, 100 epochs" in plan
    assert "relu (baseline), gelu" in plan
    assert "2 activations x 10 seeds = 20 training runs" in plan
    assert "sqlite:///mlflow.db" in plan
    assert 'moons-relu, moons-gelu (alias "champion")' in plan
    assert "exports/<model name>/<version>/" in plan
    assert "kg-output/moons" in plan


def test_plan_for_digits_uses_1797_samples():
    plan = describe_plan(load_config(REPO / "configs" / "digits.yaml"), environ={})
    assert "digits: 1797 samples" in plan and "1149 train / 288 validation / 360 test" in plan


def test_plan_shows_the_environment_tracking_uri_and_disabled_stages(tmp_path):
    path = write(tmp_path, "registry:\n  enabled: false\nexport:\n  enabled: false\n")
    plan = describe_plan(load_config(path), environ={"MLFLOW_TRACKING_URI": "http://m:5000"})
    assert "http://m:5000 (from MLFLOW_TRACKING_URI)" in plan
    assert "registry     off" in plan and "export       off" in plan


# --- Speed: no TensorFlow for config work. -----------------------------------


def test_loading_and_describing_a_config_imports_neither_keras_nor_tensorflow():
    code = (
        "import sys\n"
        "from kg_service.config.loading import load_config\nfrom kg_service.cli.plan import describe_plan\n"
        "import kg_service.cli.train\n"
        f"config = load_config({str(REPO / 'configs' / 'moons-glu.yaml')!r}, ['activations=[relu,swiglu]'])\n"
        "describe_plan(config)\n"
        "loaded = sorted(m for m in ('tensorflow', 'keras', 'keras_gelu', 'mlflow', 'kg_service.sweep.pipeline') if m in sys.modules)\n"
        "print(loaded)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "[]"


# --- device.distribution (docs/distribution.md). ------------------------------


def test_distribution_is_validated_with_the_closest_name(tmp_path):
    message = error_of(tmp_path, "device:\n  distribution: mirored\n")
    assert message == (
        f"config file {tmp_path / 'sweep.yaml'}: device.distribution (line 2): got "
        '"mirored" (a string); expected one of "none", "mirrored", "multi_worker". '
        'Did you mean "mirrored"?'
    )


def test_distribution_and_its_devices_are_set_from_the_command_line(tmp_path):
    path = write(tmp_path, "experiment: x\n")
    config = load_config(
        path, ["device.distribution=mirrored", "device.devices=[/gpu:0, /gpu:1]"]
    )
    assert config.device.distribution == "mirrored"
    assert config.device.devices == ("/gpu:0", "/gpu:1")
    assert load_config(path).device.distribution == "none"
    plan = describe_plan(config)
    assert "data-parallel mirrored over /gpu:0, /gpu:1 (global batch split" in plan


def test_devices_need_distribution_mirrored(tmp_path):
    message = error_of(tmp_path, "device:\n  devices: [/gpu:0]\n")
    assert "device.devices (line 2): devices lists the devices of distribution: " in message
    assert 'but distribution is "none". Set device.distribution to mirrored' in message


@pytest.mark.parametrize(
    "override, expected",
    [
        ("device.devices=[/gpu:0,/gpu:0]", 'device.devices[1] (--set device.devices=[/gpu:0,/gpu:0]): '
         'got "/gpu:0" (a string); expected distinct values; "/gpu:0" appears twice.'),
        ("device.devices=[]", "expected a non-empty list."),
        ("device.devices=/gpu:0", 'expected a non-empty list of device names, e.g. '
         '["/gpu:0", "/gpu:1"] or null.'),
    ],
)
def test_bad_device_lists_are_one_clear_line(tmp_path, override, expected):
    message = error_of(
        tmp_path, "device:\n  distribution: mirrored\n", [override]
    )
    assert message.endswith(expected), message


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_smoke_model_names_carry_the_smoke_suffix_once(path):
    # revival.yaml's "{experiment}-{activation}" gave
    # "revival-layernorm-smoke-gelu-smoke" (issue 15).
    config = derived.smoke(load_config(path))
    for activation in config.activations:
        name = derived.registered_model_name(config, activation)
        assert name.count("-smoke") == 1, name
        assert name.endswith(f"-{activation}-smoke") or name.endswith(
            f"-smoke-{activation}"
        ), name


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_smoke_suffix_is_applied_once_whatever_the_names_hold(path):
    # tiny.yaml's experiment "kg-smoke" became "kg-smoke-smoke" (issue 30 §18).
    config = load_config(path)
    once = derived.smoke(config)
    assert derived.smoke(once) == once
    assert once.experiment.count("-smoke") == 1, once.experiment
    assert once.experiment in (config.experiment, f"{config.experiment}-smoke")
    named = dataclasses.replace(config, study="s-smoke", experiment="e-smoke")
    assert (derived.smoke(named).study, derived.smoke(named).experiment) == ("s-smoke", "e-smoke")


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_smoke_keeps_the_first_layers_at_smoke_width(path):
    # One hidden layer or block (SMOKE_DEPTH): tracing grows with the layers (issue 17).
    config = load_config(path)
    small = derived.smoke(config).model.hidden_units
    assert small == tuple(min(w, derived.SMOKE_WIDTH) for w in config.model.hidden_units[:1])
    assert len(small) == derived.SMOKE_DEPTH == 1


@pytest.mark.parametrize(
    "override, expected",
    [
        ("data.n_samples=10000000000", "got 10000000000 (an integer); expected a value <= 100,000,000"),
        ("training.epochs=1000000000000", "expected a value <= 1,000,000 (more is surely a typo)"),
        ("training.batch_size=1000000000000", "expected a value <= 1,000,000"),
        ("model.hidden_units=[8,10000000000]", "model.hidden_units[1] (--set"),
        ("data.n_samples=1e10", 'got "1e10" (a string); expected an integer. Write it in digits: 10000000000.'),
    ],
)
def test_impossible_sizes_are_refused_at_validation(override, expected):
    # They passed validation; 1e9 samples died in numpy (issue 15).
    with pytest.raises(ServiceError) as info:
        load_config(REPO / "configs" / "tiny.yaml", [override])
    assert expected in str(info.value)


@pytest.mark.parametrize(
    "override, says",
    [
        ("training.epochs=010", "010 is an octal number in YAML 1.1 (it reads as 8); write 10"),
        ("seeds=[010,011]", "010 is an octal number in YAML 1.1 (it reads as 8); write 10"),
        ("training.epochs=-07", "-07 is an octal number in YAML 1.1 (it reads as -7); write -7"),
        ("training.epochs=1:30", "1:30 is a base-60 number in YAML 1.1 (it reads as 90,"),
        ("data.noise=1:0", "1:0 is a base-60 number in YAML 1.1 (it reads as 60,"),
        ("data.noise=1:0.5", "1:0.5 is a base-60 number in YAML 1.1 (it reads as 60.5,"),
    ],
)
def test_yaml_11_octal_and_base_60_numbers_are_refused_not_read_as_another_number(override, says):
    # A skeptic's probe: `epochs: 010` trained 8 epochs, `1:30` 90, silently.
    with pytest.raises(ServiceError) as info:
        load_config(REPO / "configs" / "tiny.yaml", [override])
    assert says in str(info.value), str(info.value)


def test_yaml_11_octal_is_refused_in_a_file_with_its_line(tmp_path):
    text = (REPO / "configs" / "tiny.yaml").read_text()
    path = tmp_path / "octal.yaml"
    path.write_text(text.replace("epochs: ", "epochs: 0", 1))
    line = next(i for i, l in enumerate(path.read_text().splitlines(), 1) if "epochs: 0" in l)
    with pytest.raises(ServiceError) as info:
        load_config(path)
    assert f"line {line}" in str(info.value) and "octal number in YAML 1.1" in str(info.value)


@pytest.mark.parametrize("override, value", [("training.epochs=0x0a", 10), ("training.epochs=1_0", 10),
                                             ("training.epochs=0", 0), ("training.epochs=10", 10)])
def test_decimal_hex_and_underscored_integers_still_read_as_written(override, value):
    if value == 0:
        with pytest.raises(ServiceError):  # epochs must be >= 1: read as 0, refused by its range
            load_config(REPO / "configs" / "tiny.yaml", [override])
        return
    assert load_config(REPO / "configs" / "tiny.yaml", [override]).training.epochs == value


@pytest.mark.parametrize("key", ["output_dir", "export.dir"])
def test_a_folder_setting_takes_no_control_character_and_reads_tilde_as_home(key):
    # A skeptic's probe: a newline in output_dir was taken (the plan's line
    # split in two); `~/kg` planned a folder named "~" in the working folder.
    with pytest.raises(ServiceError) as info:
        load_config(REPO / "configs" / "tiny.yaml", [f"{key}=o\tut"])
    assert "without control characters" in str(info.value)
    config = load_config(REPO / "configs" / "tiny.yaml", [f"{key}=~/kg-out"])
    value = config.output_dir if key == "output_dir" else config.export.dir
    assert value == os.path.join(os.path.expanduser("~"), "kg-out")


def test_a_missing_config_is_matched_by_its_name_and_a_null_one_is_not_called_empty(tmp_path):
    # A skeptic's probe: "nonexist.yaml" was told "Did you mean list.yaml?"
    # (the shared ".yaml" made them close); a file holding `null` "is empty".
    (tmp_path / "list.yaml").write_text("x: 1\n")
    (tmp_path / "moons.yaml").write_text("x: 1\n")
    with pytest.raises(ServiceError) as info:
        load_config(tmp_path / "nonexist.yaml")
    assert "Did you mean" not in str(info.value)
    with pytest.raises(ServiceError) as info:
        load_config(tmp_path / "moon.yaml")
    assert f'Did you mean "{tmp_path / "moons.yaml"}"?' in str(info.value)
    (tmp_path / "null.yaml").write_text("# nothing set\nnull\n")
    with pytest.raises(ServiceError) as info:
        load_config(tmp_path / "null.yaml")
    assert "holds no settings (its YAML reads as null)" in str(info.value)
    (tmp_path / "empty.yaml").write_text("# only a comment\n\n")
    with pytest.raises(ServiceError, match="is empty"):
        load_config(tmp_path / "empty.yaml")
