"""The sweep configuration: typed objects, validated once at the edge.

Everything after `load_config` trusts these objects.

The dataclasses below are the schema, one line per key: its type (strict,
as YAML writes values: true is not 1, "5" is not 5; an integer is a fine
number), its constraint and its default. pydantic validates a file
against them and collects every problem of the file and its `--set`
overrides in one pass; `_problem` phrases each as the user wrote it (key
path, YAML line or `--set`, the value given, what was expected, the
closest valid name), and they are raised as one `ServiceError`, one line
per problem. The checks that span fields (the baseline is one of the
activations, every split gets samples, registry names are valid) read the
fields validated before them.

Constructing these classes directly validates nothing (tests and callers
build them as plain values); `load_config` is the edge.

Importing this module, loading and describing a config import neither
Keras nor TensorFlow, so `kg-train --dry-run` and config errors are fast.
"""

import dataclasses
import difflib
import functools
import math
import os
import pathlib
import re
import string
from typing import Annotated
from typing import Literal
from typing import Optional
from typing import TypeVar

import pydantic
import yaml
from pydantic import AfterValidator
from pydantic import BeforeValidator
from pydantic import Field
from pydantic import Strict
from pydantic.json_schema import SkipJsonSchema
from pydantic_core import PydanticCustomError

from kg_service.config import catalog
from kg_service.tasks import base as tasks
from kg_service.errors import ServiceError

DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"
MIN_SPLIT_SAMPLES = 10  # fewer makes validation/test accuracy meaningless
MAX_SEED = 2**32 - 1  # numpy's seed range
MAX_SEEDS = 10_000  # a count beyond is a typo: each seed is a training run per activation
# Sizes beyond these are typos (1e10 samples, 1e12 epochs); what fits in
# this machine's memory is checked before training (`memory_estimate`).
MAX_SAMPLES = 100_000_000
MAX_EPOCHS = 1_000_000
MAX_BATCH = 1_000_000  # a classifier's batch beyond its split is the split
MAX_STEPS = 1_000_000
MAX_WIDTH = 1_000_000
MAX_CONTEXT = 65_536
GENERATED_FEATURES = 2  # moons and circles: one (x, y) point per sample
MODEL_NAME_FIELDS = ("experiment", "dataset", "activation")


# --- Names: activations from keras_gelu, without Keras. ----------------------


@functools.lru_cache(maxsize=None)
def _keras_gelu_names():
    """`keras_gelu._names`, the plugin's one name table, without Keras.

    Importing keras_gelu imports Keras and so TensorFlow (5 to 12 seconds),
    which validation and `--dry-run` must not pay. `_names.py` imports
    nothing, so it is loaded here from its file alone, without running
    `keras_gelu/__init__.py`; once keras_gelu is imported, its own copy
    is used.
    """
    import importlib.util
    import sys

    module = sys.modules.get("keras_gelu._names")
    if module is None:
        spec = importlib.util.find_spec("keras_gelu")  # finds, does not import
        folder = pathlib.Path(list(spec.submodule_search_locations)[0])
        spec = importlib.util.spec_from_file_location(
            "keras_gelu._names", folder / "_names.py"
        )
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return module


def activation_names():
    """Every valid activation name: `keras_gelu.names()`, without Keras."""
    return tuple(_keras_gelu_names().names())


def _closest(name, valid):
    """Returns ' Did you mean "x"?' for the closest valid name, or ''."""
    return _keras_gelu_names().closest(name, valid)


def _quoted(names):
    return ", ".join(f'"{n}"' for n in names)


# --- Checks pydantic runs on top of the types. -------------------------------


def _fail(expected="", hint="", **ctx):
    """Rejects the value being checked.

    Args:
        expected: What the value should be ("a non-empty string").
        hint: Appended to the message (' Did you mean "x"?').
        **ctx: `at`, a key path below the checked value to report the
            problem at (a list index, `("model_name",)`); `message`, a whole
            sentence instead of "got ...; expected ...".
    """
    ctx = dict(expected=expected, hint=hint, **ctx)
    raise PydanticCustomError("config", "expected {expected}", ctx)


_FLOAT_TEXT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")


def _number_text(value):
    # PyYAML reads 1e-3 (no dot) as a string; a user means the number.
    if isinstance(value, str) and _FLOAT_TEXT.fullmatch(value.strip()):
        return float(value)
    return value


def _non_blank(value):
    if not value.strip():
        _fail("a non-empty string")
    return value


def _distinct(values):
    for i, value in enumerate(values):
        if value in values[:i]:
            _fail(f"distinct values; {_show(value)} appears twice", at=(i,))
    return values


def _seed_count(value):
    """`seeds: n` means seeds 0..n-1; a list passes through."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            _fail("a count n >= 1 (meaning seeds 0..n-1) or a list of distinct seeds")
        if value > MAX_SEEDS:
            _fail(f"a count n <= {MAX_SEEDS} (meaning seeds 0..n-1) or a list of distinct seeds")
        return list(range(value))
    return value


def _activation(name):
    names = _keras_gelu_names()
    key = names.lookup(name)
    if key is None:
        valid = names.names()
        _fail(
            f"an activation name from keras_gelu.names(): {', '.join(valid)}",
            names.closest(names.clean(name), valid),
        )
    return key


def _task_name(name):
    """A task registered in `kg_service.tasks.base` (read when validating, so a
    task registered by the caller's code counts)."""
    if name not in tasks.names():
        _fail(f"one of {_quoted(tasks.names())}", _closest(name, tasks.names()))
    return name


def _experiment_name(value):
    if len(value) > 500:  # MLflow's limit
        _fail("an MLflow experiment name of at most 500 characters")
    return value


def _template_fields(template):
    """[(field, spec, conversion)] of a name template's placeholders."""
    try:
        parsed = [(f, spec, conv) for _, f, spec, conv in string.Formatter().parse(template)]
    except ValueError:  # an unmatched brace
        parsed = [("", "", "!")]
    return [(f, spec, conv) for f, spec, conv in parsed if f is not None]


def _name_template(template):
    used = _template_fields(template)
    bad = [f for f, spec, conv in used if f not in MODEL_NAME_FIELDS or spec or conv]
    if bad:
        placeholders = ", ".join("{%s}" % f for f in MODEL_NAME_FIELDS)
        match = difflib.get_close_matches(bad[0], MODEL_NAME_FIELDS, n=1, cutoff=0.5)
        _fail(
            f"a name template whose only placeholders are {placeholders}, with no "
            "format spec (write {{ and }} for literal braces)",
            f' Did you mean "{{{match[0]}}}"?' if match else "",
        )
    return template


def _alias(value):
    # MLflow: alphanumerics, "_" and "-"; "latest" and "v<digits>" are taken.
    if not re.fullmatch(r"[\w-]{1,255}", value) or re.fullmatch(r"latest|[vV]\d+", value, re.I):
        _fail(
            'an MLflow alias of letters, digits, "_" and "-", other than "latest" and '
            '"v<number>"'
        )
    return value


# The checks that span fields read `info.data`: the fields validated before
# theirs, without those that have a problem (reported already).


def _in_activations(baseline, info):
    activations = info.data.get("activations")
    if activations is not None and baseline not in activations:
        expected = f"one of the activations ({', '.join(activations)})"
        _fail(expected, _closest(baseline, activations))
    return baseline


def _splits_filled(data):
    if not tasks.get(data.dataset).sample_splits:
        return data  # a corpus: kg_service.tasks.language.corpus checks its splits' bytes
    train, validation, test = split_sizes(data)
    if min(train, validation, test) < MIN_SPLIT_SAMPLES:
        _fail(message=(
            f"{train + validation + test} samples split into {train} train / {validation} "
            f"validation / {test} test; expected at least {MIN_SPLIT_SAMPLES} in each. Raise "
            "data.n_samples or move data.test_fraction / data.validation_fraction away "
            "from 0 and 1."
        ))
    return data


def _heads_divide(model, info):
    data = info.data.get("data")
    if data is not None and not tasks.get(data.dataset).sample_splits:
        if model.d_model % model.heads:
            _fail(at=("heads",), message=(
                f"{model.heads} heads do not divide model.d_model {model.d_model}; "
                "expected a head count that divides it (each head gets d_model / "
                "heads dimensions)."
            ))
    return model


# MLflow forbids "/" and ":" and path-like names; the name is also a
# directory under export.dir and a TF Serving model name.
_MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,255}")
_MODEL_NAME_RULE = (
    "a registered model name of letters, digits, '.', '_' and '-' that starts with a "
    "letter or digit, at most 256 characters (it is also a directory under export.dir "
    "and a TF Serving model name)"
)


def _names_valid(registry, info):
    if not {"experiment", "activations", "data"} <= info.data.keys():
        return registry
    template, config = registry.model_name, info.data
    dataset = config["data"].dataset
    names = [
        template.format(experiment=config["experiment"], dataset=dataset, activation=a)
        for a in config["activations"]
    ]
    for name in names:
        if not _MODEL_NAME.fullmatch(name):
            _fail(at=("model_name",), message=(
                f"{_show(template)} gives {_show(name)}; expected {_MODEL_NAME_RULE}."
            ))
    if len(set(names)) < len(names):
        _fail(at=("model_name",), message=(
            f"{_show(template)} gives the same name for several activations; expected a "
            "template with {activation} in it, so that each activation gets its own "
            "registered model."
        ))
    return registry


def _devices_need_mirrored(device):
    if device.devices is not None and device.distribution != "mirrored":
        _fail(at=("devices",), message=(
            f"devices lists the devices of distribution: mirrored, but distribution is "
            f"{_show(device.distribution)}. Set device.distribution to mirrored, or remove "
            "device.devices."
        ))
    return device


def _defaults_if_null(section):
    return {} if section is None else section  # `data:` with every key commented out


def _not_a_key(value):
    raise PydanticCustomError("unexpected_keyword_argument", "not a key")


# --- The schema. -------------------------------------------------------------


def _integer(most=None, **bounds):
    """An int setting within `bounds` (pydantic Field's gt, ge, lt, le),
    and at most `most`: a sanity bound, said apart from the range."""
    if most is None:
        return Annotated[int, Strict(), Field(**bounds)]
    return Annotated[int, Strict(), Field(**bounds), AfterValidator(_at_most(most))]


def _at_most(most):
    def check(value):
        if value > most:
            _fail(f"a value <= {most:_} (more is surely a typo)".replace("_", ","))
        return value

    return check


def _number(**bounds):
    """A float setting within `bounds`; an int is a fine float."""
    return Annotated[float, Strict(), Field(**bounds), BeforeValidator(_number_text)]


# Strict: YAML's true is not 1, "5" is not 5. A `description` is what a
# value of the wrong type is told the setting takes.
_Bool = Annotated[bool, Strict()]
_Str = Annotated[str, Strict()]
_Text = Annotated[_Str, AfterValidator(_non_blank)]
_Fraction = _number(gt=0, lt=1)
_Seed = _integer(ge=0, le=MAX_SEED)
_Activation = Annotated[_Str, AfterValidator(_activation)]
_Widths = Annotated[
    tuple[_integer(gt=0, most=MAX_WIDTH), ...],
    Field(min_length=1, description="a non-empty list of positive integers, e.g. [64, 64]"),
]
_Activations = Annotated[
    tuple[_Activation, ...],
    Field(min_length=1, description="a list of activation names, e.g. [relu, gelu]"),
    AfterValidator(_distinct),
]
_Seeds = Annotated[
    tuple[_Seed, ...],
    Field(
        min_length=1,
        description="a count n >= 1 (meaning seeds 0..n-1) or a list of distinct "
        "non-negative integers",
    ),
    AfterValidator(_distinct),
    BeforeValidator(_seed_count),
]
_DeviceNames = Annotated[
    tuple[_Text, ...],
    Field(min_length=1, description='a non-empty list of device names, e.g. ["/gpu:0", "/gpu:1"]'),
    AfterValidator(_distinct),
]
_S = TypeVar("_S")
_Section = Annotated[_S, BeforeValidator(_defaults_if_null)]

# Unknown keys are errors; NaN and infinity are not numbers a setting takes.
_STRICT = pydantic.ConfigDict(extra="forbid", allow_inf_nan=False)


@dataclasses.dataclass(frozen=True)
class DataConfig:
    __pydantic_config__ = _STRICT
    dataset: Annotated[_Str, AfterValidator(_task_name)] = "moons"  # a name in kg_service.tasks.base
    n_samples: _integer(ge=50, most=MAX_SAMPLES) = 2000  # moons/circles only; digits has 1797
    noise: _number(ge=0) = 0.2  # moons/circles only
    test_fraction: _Fraction = 0.2  # held out, used only for the final evaluation
    validation_fraction: _Fraction = 0.2  # of what remains after the test split
    seed: _Seed = 0  # data generation and split; separate from model seeds
    standardize: _Bool = True  # the model z-scores raw inputs (training-split statistics)
    # python_code only: bytes of stdlib source read (sorted files), the
    # window length in bytes (the model's context), and the validation
    # windows evaluated after each epoch (the test split is evaluated whole).
    corpus_bytes: _integer(ge=1000) = 2_000_000
    context: _integer(ge=2, most=MAX_CONTEXT) = 128
    eval_windows: _integer(ge=1, most=MAX_BATCH) = 64


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    __pydantic_config__ = _STRICT
    hidden_units: _Widths = (64, 64)  # one activated projection per width
    dropout: _number(ge=0, lt=1) = 0.0
    block: Literal[tuple(catalog.BLOCKS)] = "dense"
    # block: feedforward -> Dense(d_model) stem, then one residual
    # keras_gelu.FeedForward(hidden_dim=w, output_dim=d_model) per width w.
    d_model: _integer(ge=1, most=MAX_WIDTH) = 32
    match_params: _Bool = False  # gated FFNs at the parameters of plain ones
    # python_code only (a decoder-only transformer, one block per width in
    # hidden_units, each FFN keras_gelu.FeedForward(width, output_dim=d_model)):
    heads: _integer(ge=1) = 4  # attention heads; d_model must divide by it
    layer_norm: _Bool = True  # false: every LayerNorm removed (normalization-free)
    tie_embeddings: _Bool = True  # logits through the token embedding, transposed


@dataclasses.dataclass(frozen=True)
class TrainingConfig:
    __pydantic_config__ = _STRICT
    optimizer: Literal[tuple(catalog.OPTIMIZERS)] = "adam"
    learning_rate: _number(gt=0) = 0.001
    epochs: _integer(ge=1, most=MAX_EPOCHS) = 100
    batch_size: _integer(ge=1, most=MAX_BATCH) = 32
    # python_code: training steps per epoch (None: one pass over the
    # training bytes); each step draws batch_size random windows.
    steps_per_epoch: Optional[_integer(ge=1, most=MAX_STEPS)] = None
    weight_decay: Optional[_number(ge=0)] = None  # None: the optimizer's default
    # Convergence speed: first epoch whose validation accuracy reaches this.
    convergence_threshold: _number(gt=0, le=1) = 0.95


@dataclasses.dataclass(frozen=True)
class TrackingConfig:
    __pydantic_config__ = _STRICT
    uri: Optional[_Text] = None  # None: MLFLOW_TRACKING_URI, else sqlite:///mlflow.db
    # How long a store that fails mid-sweep (server down, 5xx, sqlite
    # locked) is retried, with growing waits, before kg-train stops and
    # keeps what it trained for --resume; 0: stop at the first failure.
    retry_seconds: _number(ge=0, le=86400) = 120.0


@dataclasses.dataclass(frozen=True)
class RegistryConfig:
    __pydantic_config__ = _STRICT
    enabled: _Bool = True
    # Placeholders: {experiment}, {dataset}, {activation}.
    model_name: Annotated[_Text, AfterValidator(_name_template)] = "{dataset}-{activation}"
    alias: Annotated[_Str, AfterValidator(_alias)] = "champion"


@dataclasses.dataclass(frozen=True)
class ExportConfig:
    __pydantic_config__ = _STRICT
    enabled: _Bool = True
    dir: _Text = "exports"  # TF Serving layout: <dir>/<model_name>/<version>/
    tolerance: _number(gt=0) = 1e-5  # SavedModel vs in-memory model, max abs diff


@dataclasses.dataclass(frozen=True)
class DeviceConfig:
    __pydantic_config__ = _STRICT
    type: Literal["auto", "cpu", "gpu"] = "auto"
    mixed_precision: Optional[Literal["mixed_float16", "mixed_bfloat16"]] = None  # float32
    xla: _Bool = False  # jit_compile the training step
    # Data-parallel training on the backend's own engine (docs/distribution.md):
    # none; mirrored, one process over this machine's devices
    # (tf.distribute.MirroredStrategy, keras.distribution.DataParallel on
    # JAX); multi_worker, one process per machine (TensorFlow:
    # MultiWorkerMirroredStrategy from TF_CONFIG). training.batch_size is
    # the global batch, split across the replicas.
    distribution: Literal["none", "mirrored", "multi_worker"] = "none"
    # mirrored only: the devices to replicate over, as the backend names them
    # ("/gpu:0" on TensorFlow, "gpu:0" on JAX); null: every GPU, else every
    # CPU device the backend sees.
    devices: Optional[_DeviceNames] = None


@dataclasses.dataclass(frozen=True)
class Config:
    __pydantic_config__ = _STRICT
    experiment: Annotated[_Text, AfterValidator(_experiment_name)] = "kg-sweep"
    activations: _Activations = ("relu", "gelu")  # keras_gelu.names(), canonical spelling
    # What every other activation is compared with; when absent: "relu" if
    # it is among the activations, else the first activation.
    baseline: Annotated[_Activation, AfterValidator(_in_activations)] = "relu"
    seeds: _Seeds = (0, 1, 2, 3, 4)  # YAML: a list, or a count n -> 0..n-1
    output_dir: _Text = "kg-output"  # report, plots, resolved config
    data: Annotated[_Section[DataConfig], AfterValidator(_splits_filled)] = DataConfig()
    model: Annotated[_Section[ModelConfig], AfterValidator(_heads_divide)] = ModelConfig()
    training: _Section[TrainingConfig] = TrainingConfig()
    tracking: _Section[TrackingConfig] = TrackingConfig()
    registry: Annotated[_Section[RegistryConfig], AfterValidator(_names_valid)] = RegistryConfig()
    export: _Section[ExportConfig] = ExportConfig()
    device: Annotated[_Section[DeviceConfig], AfterValidator(_devices_need_mirrored)] = (
        DeviceConfig()
    )
    # The YAML file it came from: set by load_config, not a key.
    source: SkipJsonSchema[Annotated[Optional[str], BeforeValidator(_not_a_key)]] = None


_SCHEMA = pydantic.TypeAdapter(Config)


# --- Reading YAML, with line numbers and duplicate keys caught. --------------


class _Mapping(dict):
    """A YAML mapping that remembers the line of each key."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.lines = {}


class _Loader(yaml.SafeLoader):
    pass


def _construct_mapping(loader, node):
    explicit = sum(1 for key, _ in node.value if key.tag != "tag:yaml.org,2002:merge")
    loader.flatten_mapping(node)  # `<<:` merge keys come first, then the rest
    merged = len(node.value) - explicit
    mapping = _Mapping()
    yield mapping
    for position, (key_node, value_node) in enumerate(node.value):
        key = loader.construct_object(key_node, deep=True)
        try:
            hash(key)
        except TypeError:
            raise yaml.constructor.ConstructorError(
                None, None, "a key is a list or mapping; keys are names", key_node.start_mark
            )
        if position >= merged and key in mapping and key in mapping.lines:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f'duplicate key "{key}" (first on line {mapping.lines[key]})',
                key_node.start_mark,
            )
        mapping[key] = loader.construct_object(value_node, deep=True)
        if position >= merged:
            mapping.lines[key] = key_node.start_mark.line + 1


_Loader.add_constructor("tag:yaml.org,2002:map", _construct_mapping)


def _parse_yaml(text):
    return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass


def _yaml_problem(error):
    mark = getattr(error, "problem_mark", None)
    what = getattr(error, "problem", None) or str(error)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
    return f"{where}not valid YAML: {what}"


def _read(path):
    """Returns the file's top-level mapping, or raises a ServiceError."""
    shown = str(path)
    p = pathlib.Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ServiceError(
            f"config file {shown}: no such file.{_closest_file(p)} Pass --config the path "
            "of a YAML config, e.g. configs/moons.yaml."
        ) from None
    except IsADirectoryError:
        raise ServiceError(f"config file {shown}: is a directory; expected a YAML file.") from None
    except PermissionError:
        raise ServiceError(f"config file {shown}: cannot be read: permission denied.") from None
    except UnicodeDecodeError as error:
        raise ServiceError(
            f"config file {shown}: is not UTF-8 text (byte {error.start}); expected a YAML file."
        ) from None
    except OSError as error:
        raise ServiceError(f"config file {shown}: cannot be read: {error.strerror}.") from None
    try:
        raw = _parse_yaml(text)
    except yaml.YAMLError as error:
        raise ServiceError(f"config file {shown}: {_yaml_problem(error)}.") from None
    if raw is None:
        raise ServiceError(
            f"config file {shown}: is empty; expected a mapping of settings such as "
            f"{_top_level_example()}."
        )
    if not isinstance(raw, dict):
        raise ServiceError(
            f"config file {shown}: the top level is {_kind(raw)}; expected a mapping of "
            f"settings such as {_top_level_example()}."
        )
    return raw


def _closest_file(path):
    try:
        candidates = [c.name for c in path.parent.iterdir() if c.suffix in (".yaml", ".yml")]
    except OSError:
        return ""
    match = difflib.get_close_matches(path.name, candidates, n=1, cutoff=0.6)
    return f' Did you mean "{path.parent / match[0]}"?' if match else ""


def _top_level_example():
    return "experiment: ..., activations: [relu, gelu], seeds: 5, data: {dataset: moons}"


# --- Pydantic's errors, as the user wrote the values. ------------------------


def _kind(value):
    if value is None:
        return "null"
    kinds = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    kinds.update({list: "a list", dict: "a mapping"})
    for types, kind in kinds.items():
        if isinstance(value, types):
            return kind
    return type(value).__name__


SHOW_LIMIT = 120  # characters of a value an error message shows


def _show(value, limit=SHOW_LIMIT):
    """A value as the user would write it in YAML, cut at `limit` characters.

    The value is walked lazily and the walk stops at the limit: a YAML
    alias bomb (nine lists of nine aliases of ..., 9**9 strings from a
    300-byte file) is shown in microseconds, not walked for minutes.
    """
    shown, length = [], 0
    for token in _show_tokens(value):
        if length + len(token) > limit:
            shown.append(token[: limit - length] + " ...")
            break
        shown.append(token)
        length += len(token)
    return "".join(shown)


def _show_tokens(value):
    """`_show`'s pieces, in order, produced as the walk goes."""
    if value is None:
        yield "null"
    elif isinstance(value, bool):
        yield "true" if value else "false"
    elif isinstance(value, str):
        yield '"' + value[: SHOW_LIMIT + 1].replace('"', '\\"')
        yield '"'
    elif isinstance(value, (list, tuple)):
        yield "["
        for i, item in enumerate(value):
            yield ", " if i else ""
            yield from _show_tokens(item)
        yield "]"
    elif isinstance(value, dict):
        yield "{"
        for i, (key, item) in enumerate(value.items()):
            yield (", " if i else "") + f"{str(key)[: SHOW_LIMIT + 1]}: "
            yield from _show_tokens(item)
        yield "}"
    else:
        yield str(value)[: SHOW_LIMIT + 1]


def _path_text(path):
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


@functools.lru_cache(maxsize=None)
def _json_schema():
    """pydantic's JSON schema of `Config`: what the messages and `--set` read
    about a setting (its type, bounds, choices; a section's keys)."""
    return _SCHEMA.json_schema()


def _setting(path):
    """The JSON schema of the setting at a key path; list indexes go into
    the items, a section is its definition (with its "properties")."""
    schema = node = _json_schema()
    for part in path:
        if isinstance(part, int):
            node = _without_null(node)[0]["items"]  # an optional list's item
        else:
            node = node["properties"][part]
        if "$ref" in node:
            node = schema["$defs"][node["$ref"].rsplit("/", 1)[-1]]
    return node


def _without_null(setting):
    """(the setting's schema without its null option, whether it takes null)."""
    options = setting.get("anyOf", [])
    if {"type": "null"} not in options:
        return setting, False
    return next(s for s in options if s != {"type": "null"}), True


def _unknown_key(key, path):
    keys = list(_setting(path)["properties"])
    under = f"under {_path_text(path)}" if path else "at the top level"
    return f"unknown key.{_closest(key, keys)} Valid keys {under}: {', '.join(keys)}."


def _bounds(setting):
    """'a value in (0, 1]', 'a value >= 50', 'a positive integer'..."""
    ge, gt = setting.get("minimum"), setting.get("exclusiveMinimum")
    le, lt = setting.get("maximum"), setting.get("exclusiveMaximum")
    low = f"[{ge}" if ge is not None else f"({gt}" if gt is not None else None
    high = f"{le}]" if le is not None else f"{lt})" if lt is not None else None
    if low and high:
        return f"a value in {low}, {high}"
    if gt == 0 and setting["type"] == "integer":
        return "a positive integer"
    bounds = ((">=", ge), (">", gt), ("<=", le), ("<", lt))
    return next(f"a value {op} {b}" for op, b in bounds if b is not None)


_TYPES = {
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "string": "a string",
    "array": "a list",
}
_RANGES = ("greater_than", "greater_than_equal", "less_than", "less_than_equal")


def _problem(error):
    """(key path, message) for one of pydantic's `ValidationError.errors()`."""
    kind, ctx = error["type"], error.get("ctx") or {}
    path = tuple(error["loc"]) + tuple(ctx.get("at", ()))
    given = error["input"]  # as the user wrote it, before any conversion
    if ctx.get("at") and isinstance(given, list):
        given = given[ctx["at"][0]]  # the item of a list at fault
    if kind in ("unexpected_keyword_argument", "invalid_key"):  # invalid: not a string
        return path[:-1] + (str(path[-1]),), _unknown_key(path[-1], path[:-1])
    if "message" in ctx:
        return path, ctx["message"]
    setting, nullable = _without_null(_setting(path))
    or_null, hint = " or null" if nullable else "", ""
    if kind == "config":
        expected, hint = ctx["expected"] + or_null, ctx["hint"]
    elif kind == "literal_error":
        expected = f"one of {_quoted(setting['enum'])}{or_null}"
        hint = _closest(given, setting["enum"])
    elif kind in _RANGES:
        expected = _bounds(setting) + or_null
    elif kind == "finite_number":
        expected = "a finite number"
    elif kind == "too_short":
        expected = "a non-empty list"
    elif "properties" in setting:
        expected = f"a mapping of settings ({', '.join(setting['properties'])})"
    else:  # the wrong type
        expected = setting.get("description") or _TYPES[setting["type"]]
        expected += or_null
        if setting.get("type") == "integer" and isinstance(given, str) and _FLOAT_TEXT.fullmatch(given.strip()):
            hint = f" Write it in digits: {float(given):.0f}." if float(given).is_integer() else ""
        elif setting.get("type") == "string" and isinstance(given, bool):
            hint = " Quote it to mean text."
        elif setting.get("type") == "string" and isinstance(given, (int, float)):
            hint = f' Quote it to mean text: "{given}".'
    return path, f"got {_show(given)} ({_kind(given)}); expected {expected}.{hint}"


class _Problems:
    """Every problem of a file and its overrides, labelled with its line or --set."""

    def __init__(self, raw):
        self.raw = raw
        self.origins = {}  # key path tuple -> "--set a.b=c"
        self.problems = []  # (sort order, "key.path (line 7)", message)

    def locate(self, path):
        """Where a key path came from: "line 7" in the file, or its --set."""
        for end in range(len(path), 0, -1):
            if path[:end] in self.origins:
                return self.origins[path[:end]]
        line, node = None, self.raw
        for part in path:
            if isinstance(node, _Mapping) and part in node.lines:
                line = node.lines[part]
            node = node.get(part) if isinstance(node, dict) else None
        return f"line {line}" if line else None

    def add(self, path, message):
        where = self.locate(path)
        label = _path_text(path) + (f" ({where})" if where else "")
        # Listed as the user reads them: the file's in line order, then --set.
        if where and where.startswith("line "):
            order = (1, int(where[5:]))
        else:
            order = (2, 0) if where else (1, math.inf)
        self.problems.append((order, label, message))

    def add_override(self, label, message):
        """A --set that could not be applied at all (syntax, unknown key)."""
        self.problems.append(((0, 0), label, message))

    def add_errors(self, error):
        """Adds a pydantic `ValidationError`'s errors, the most specific of each
        path (an item's error, not its list's "too short" that follows)."""
        locs = [tuple(e["loc"]) for e in error.errors()]
        for e in error.errors():
            loc = tuple(e["loc"])
            if not any(len(other) > len(loc) and other[: len(loc)] == loc for other in locs):
                self.add(*_problem(e))

    def raise_if_any(self, path):
        if not self.problems:
            return
        lines = [f"{label}: {m}" for _, label, m in sorted(self.problems, key=lambda p: p[0])]
        if len(lines) == 1:
            raise ServiceError(f"config file {path}: {lines[0]}")
        listing = "\n".join(f"  {line}" for line in lines)
        raise ServiceError(f"config file {path}: {len(lines)} problems:\n{listing}")


# --- Split sizes and registered names. ---------------------------------------


def split_sizes(data):
    """Returns (train, validation, test) sample counts for a DataConfig.

    As scikit-learn's `train_test_split` with float sizes: the test split
    takes ceil(test_fraction * n), validation ceil(validation_fraction *
    rest), training the remainder. Digits always has 1797 samples.
    """
    n = tasks.get(data.dataset).fixed_samples or data.n_samples
    test = math.ceil(data.test_fraction * n)
    validation = math.ceil(data.validation_fraction * (n - test))
    return n - test - validation, validation, test


def memory_estimate(config):
    """About how many bytes of memory a run of `config` needs at its peak.

    A classifier: its generated data (float64, with the generator's
    temporaries), and each epoch's evaluation, a forward pass of every
    member over the whole training + validation splits at once (float32,
    the input and the two widest layers). A language model: one epoch's
    training windows (int64 offsets, int32 inputs and targets) and one
    batch's logits over 256 bytes. An estimate, within a factor of about
    two: what it is for is refusing 1e9 samples before numpy fails.
    """
    data, model, training = config.data, config.model, config.training
    task = tasks.get(data.dataset)
    members = len(config.seeds)
    widest = sorted(tuple(model.hidden_units) + (model.d_model,))[-2:]
    if not task.sample_splits:
        steps = training.steps_per_epoch or max(
            1, data.corpus_bytes // (data.context * training.batch_size)
        )
        windows = steps * training.batch_size * (data.context + 1) * (8 + 4 + 4 + 4)
        logits = training.batch_size * data.context * 256 * 4 * 3
        return windows + logits + data.corpus_bytes * 8
    if task.fixed_samples:
        return 256 * 2**20  # a bundled set: small
    train, validation, _ = split_sizes(data)
    generated = data.n_samples * GENERATED_FEATURES * 8 * 4
    evaluation = (train + validation) * members * (GENERATED_FEATURES + sum(widest) + 2) * 4
    return generated + evaluation


def registered_model_name(config, activation):
    """The registered model (and export directory) name for one activation."""
    return config.registry.model_name.format(
        experiment=config.experiment, dataset=config.data.dataset, activation=activation
    )


# --- Overrides: --set key.path=value. ----------------------------------------


def _apply_overrides(raw, overrides, check):
    """Applies each `key.path=value` to the raw mapping; bad ones become problems."""
    for override in overrides:
        label = f"--set {override}"
        key, sep, text = str(override).partition("=")
        key = key.strip()
        if not sep or not key:
            check.add_override(
                label,
                "expected KEY=VALUE, e.g. --set training.epochs=5 or "
                "--set activations=[relu,gelu].",
            )
            continue
        path = tuple(key.split("."))
        setting, problem = _setting_or_problem(path)
        if problem:
            check.add_override(label, problem)
            continue
        try:
            value = _override_value(setting, text)
        except yaml.YAMLError as error:
            mark = getattr(error, "problem_mark", None)
            where = f" at column {mark.column + 1}" if mark else ""
            what = getattr(error, "problem", None) or str(error)
            check.add_override(
                label,
                f"the value is not valid YAML{where}: {what}. Quote text, write lists "
                "as [a,b].",
            )
            continue
        node = raw
        for i, part in enumerate(path[:-1]):
            if node.get(part) is None:
                node[part] = _Mapping()
            elif not isinstance(node[part], dict):
                check.add_override(
                    label,
                    f"{_path_text(path[: i + 1])} in the file is {_kind(node[part])}, "
                    "not a mapping of settings; fix the file first.",
                )
                break
            node = node[part]
        else:
            node[path[-1]] = value
            if isinstance(node, _Mapping):
                node.lines.pop(path[-1], None)
            check.origins[path] = label


def _setting_or_problem(path):
    """Returns (the JSON schema of the setting at a key path, None) or (None, problem)."""
    for i, part in enumerate(path):
        section = _setting(path[:i])
        if "properties" not in section:
            return None, (
                f"{_path_text(path[:i])} is a single setting, not a section; "
                f"it has no key {_show(part)}."
            )
        if part not in section["properties"]:
            return None, f"{_path_text(path[: i + 1])}: {_unknown_key(part, path[:i])}"
    return _setting(path), None


def _override_value(setting, text):
    """Parses a --set value: YAML, except that a string setting takes the text.

    So `--set registry.model_name={dataset}-{activation}` and
    `--set experiment=2024` work unquoted; null, ~ and "" still mean null
    for an optional string, and a quoted value is read as YAML.
    """
    setting, nullable = _without_null(setting)
    stripped = text.strip()
    if setting.get("type") == "string":
        if nullable and stripped in ("", "null", "~", "Null", "NULL"):
            return None
        if stripped[:1] in ("'", '"'):
            return _parse_yaml(stripped)
        return stripped
    return _parse_yaml(stripped)


# --- The public face. --------------------------------------------------------


def load_config(path, overrides=()):
    """Reads, overrides and validates a sweep config.

    Args:
        path: the YAML file.
        overrides: `"key.path=value"` strings, as given to `--set`; each
            value is read as YAML (`training.epochs=5`,
            `activations=[relu,gelu]`), except that string settings take
            the text as given.

    Returns:
        A `Config`, with every default filled in, `seeds` as a tuple, and
        `baseline` resolved.

    Raises:
        ServiceError: one paragraph listing every problem, each with its key
            path, its line or `--set`, what was given and what was expected.

    Example:
        >>> config = load_config("configs/tiny.yaml", ["training.epochs=2"])
        >>> config.training.epochs
        2
    """
    raw = _read(path)
    check = _Problems(raw)
    _apply_overrides(raw, overrides, check)
    try:
        config = _SCHEMA.validate_python(raw)
    except pydantic.ValidationError as error:
        check.add_errors(error)
    check.raise_if_any(path)
    if "baseline" not in raw:
        activations = config.activations
        baseline = "relu" if "relu" in activations else activations[0]
        config = dataclasses.replace(config, baseline=baseline)
    return dataclasses.replace(config, source=str(path))


def config_to_dict(config):
    """The resolved config as plain YAML/JSON types; `load_config` reads it back.

    `source` (not a key) is left out; tuples become lists.
    """
    return _SCHEMA.dump_python(config, mode="json", exclude={"source"}, warnings=False)


def flatten(tree, prefix=""):
    """`{"a": {"b": 1}}` -> `{"a.b": 1}`: a resolved config as key paths."""
    flat = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def resolve_tracking_uri(config, environ=None):
    """The MLflow tracking URI a run uses.

    `config.tracking.uri` (which `--tracking-uri` sets), else the
    `MLFLOW_TRACKING_URI` environment variable, else `sqlite:///mlflow.db`
    (a file in the working directory).
    """
    return _tracking_uri_and_origin(config, environ)[0]


def tracking_uri_for(flag, environ=None):
    """The tracking URI of a command that takes `--tracking-uri` but no
    config (kg serve, predict, models): the flag, else MLFLOW_TRACKING_URI,
    else `sqlite:///mlflow.db`, as for a sweep.

    Raises:
        ServiceError: for an empty flag.
    """
    if flag is not None and not flag.strip():
        raise ServiceError(
            "--tracking-uri: got an empty string; expected an MLflow tracking URI, "
            "e.g. sqlite:///mlflow.db."
        )
    return _uri_and_origin(flag and flag.strip(), "--tracking-uri", environ)[0]


def _tracking_uri_and_origin(config, environ=None):
    return _uri_and_origin(config.tracking.uri, "tracking.uri", environ)


def _uri_and_origin(explicit, origin, environ):
    environ = os.environ if environ is None else environ
    if explicit:
        return explicit, origin
    if environ.get("MLFLOW_TRACKING_URI", "").strip():
        return environ["MLFLOW_TRACKING_URI"].strip(), "from MLFLOW_TRACKING_URI"
    return DEFAULT_TRACKING_URI, "default; set tracking.uri, MLFLOW_TRACKING_URI or --tracking-uri"


def _retry_text(seconds):
    if not seconds:
        return "not retried if it fails mid-sweep"
    return f"retried for {seconds:g} s if it fails mid-sweep"


def _seeds_text(seeds):
    if seeds == tuple(range(len(seeds))) and len(seeds) > 2:
        return f"0..{len(seeds) - 1}"
    return ", ".join(str(s) for s in seeds)


def _distribution_text(device):
    if device.distribution == "none":
        return ""
    over = f" over {', '.join(device.devices)}" if device.devices else ""
    return f", data-parallel {device.distribution}{over} (global batch split across replicas)"


def describe_plan(config, environ=None):
    """What a run of `config` would do, as the lines `--dry-run` prints."""
    data, model, training = config.data, config.model, config.training
    task = tasks.get(data.dataset)
    if not task.sample_splits:
        return _describe_language_plan(config, task, environ)
    train, validation, test = split_sizes(data)
    if task.fixed_samples:
        source = f"{data.dataset}: {task.fixed_samples} samples, {task.description}"
    else:
        source = f"{data.dataset}: {data.n_samples} samples, noise {data.noise}"
    source += f", data seed {data.seed}"
    source += (
        ", features standardized inside the model"
        if data.standardize
        else ", raw features"
    )
    arch = f"{model.block} block, hidden {list(model.hidden_units)}"
    if model.block == "feedforward":
        arch += f", d_model {model.d_model}"
        arch += ", gated widths matched to plain parameters" if model.match_params else ""
    arch += f", dropout {model.dropout}"
    rows = [
        ("data", source),
        ("split", f"{train} train / {validation} validation / {test} test "
                  "(test held out for the final evaluation only)"),
        ("model", arch),
        ("training", f"{training.optimizer}, learning rate {training.learning_rate:g}, "
                     f"batch size {training.batch_size}, {training.epochs} epochs, "
                     f"convergence at val accuracy {training.convergence_threshold:g}"),
    ]
    return _plan(config, rows, environ)


def _describe_language_plan(config, task, environ):
    data, model, training = config.data, config.model, config.training
    steps = training.steps_per_epoch or "one pass over the training bytes"
    rows = [
        ("data", f"{data.dataset}: {task.description}; first {data.corpus_bytes:,} "
                 f"bytes of sorted files, split by file (seed {data.seed}), windows of "
                 f"{data.context} bytes"),
        ("split", f"test {data.test_fraction:g} / validation "
                  f"{data.validation_fraction:g} of the rest, by file; "
                  f"{data.eval_windows} validation windows per epoch, the whole test "
                  "split once at the end"),
        ("model", f"decoder-only transformer, {len(model.hidden_units)} blocks, "
                  f"d_model {model.d_model}, {model.heads} heads, FFN widths "
                  f"{list(model.hidden_units)}"
                  + (", gated widths matched to plain parameters" if model.match_params else "")
                  + f", LayerNorm {'on' if model.layer_norm else 'off (normalization-free)'}"
                  + f", {'tied' if model.tie_embeddings else 'untied'} embeddings"
                  + f", dropout {model.dropout}"),
        ("training", f"{training.optimizer}, learning rate {training.learning_rate:g}"
                     + (f", weight decay {training.weight_decay:g}"
                        if training.weight_decay is not None else "")
                     + f", batch size {training.batch_size} windows, {training.epochs} "
                     f"epochs of {steps} steps"),
    ]
    return _plan(config, rows, environ)


def _plan(config, rows, environ):
    activations = ", ".join(
        a + (" (baseline)" if a == config.baseline else "") for a in config.activations
    )
    n_act, n_seeds = len(config.activations), len(config.seeds)
    uri, origin = _tracking_uri_and_origin(config, environ)
    device = config.device
    precision = device.mixed_precision or "float32"
    if config.registry.enabled:
        names = ", ".join(f"{registered_model_name(config, a)}" for a in config.activations)
        registry = f"{names} (alias {_show(config.registry.alias)})"
    else:
        registry = "off"
    if config.export.enabled:
        export = (
            f"{config.export.dir}/<model name>/<version>/ (SavedModel, max abs diff "
            f"{config.export.tolerance:g})"
        )
    else:
        export = "off"
    rows = rows + [
        ("activations", activations),
        ("seeds", f"{_seeds_text(config.seeds)} ({n_seeds} seeds)"),
        ("members", f"{n_act} activations x {n_seeds} seeds = {n_act * n_seeds} training runs"),
        ("device", f"{device.type}, {precision}, XLA {'on' if device.xla else 'off'}"
                   + _distribution_text(device)),
        ("tracking", f"{uri} ({origin}), {_retry_text(config.tracking.retry_seconds)}"),
        ("registry", registry),
        ("export", export),
        ("output", config.output_dir),
    ]
    head = f'kg-train plan for experiment "{config.experiment}"'
    head += f" ({config.source})" if config.source else ""
    return "\n".join([head] + [f"  {k:<12} {v}" for k, v in rows])


# --- Smoke sizes: the same sweep in seconds. -----------------------------

SMOKE_SAMPLES = 200
SMOKE_WIDTH = 8
SMOKE_EPOCHS = 2
SMOKE_SEEDS = 2
SMOKE_CORPUS_BYTES = 300_000  # python_code: about 40 stdlib files
SMOKE_CONTEXT = 32
SMOKE_EVAL_WINDOWS = 8
SMOKE_STEPS = 5


def smoke(config):
    """`config` at smoke sizes: the same pipeline, done in seconds.

    Every activation and every stage stay (training, tracking, statistics,
    report, export, registry); what shrinks is the data (at most
    `SMOKE_SAMPLES` generated samples), the widths (at most `SMOKE_WIDTH`),
    the epochs (at most `SMOKE_EPOCHS`) and the seeds (the first
    `SMOKE_SEEDS`); a corpus, its bytes, context, steps and evaluation
    windows. The experiment and registered model names get a
    `-smoke` suffix (once: a model name made from `{experiment}` has it
    already), so a smoke run never moves the real models' aliases nor
    mixes its runs into the real experiment.

    Example:

    >>> smoke(Config(seeds=(3, 4, 5))).seeds
    (3, 4)
    """
    d_model = min(config.model.d_model, SMOKE_WIDTH)
    data = dataclasses.replace(
        config.data,
        n_samples=min(config.data.n_samples, SMOKE_SAMPLES),
        corpus_bytes=min(config.data.corpus_bytes, SMOKE_CORPUS_BYTES),
        context=min(config.data.context, SMOKE_CONTEXT),
        eval_windows=min(config.data.eval_windows, SMOKE_EVAL_WINDOWS),
    )
    model = dataclasses.replace(
        config.model,
        hidden_units=tuple(min(w, SMOKE_WIDTH) for w in config.model.hidden_units),
        d_model=d_model,
        heads=math.gcd(config.model.heads, d_model),
    )
    training = dataclasses.replace(
        config.training,
        epochs=min(config.training.epochs, SMOKE_EPOCHS),
        steps_per_epoch=min(config.training.steps_per_epoch or SMOKE_STEPS, SMOKE_STEPS),
    )
    # A template with {experiment} gets the experiment's suffix already.
    template = config.registry.model_name
    if "experiment" not in [field for field, _, _ in _template_fields(template)]:
        template += "-smoke"
    registry = dataclasses.replace(config.registry, model_name=template)
    return dataclasses.replace(
        config,
        experiment=f"{config.experiment}-smoke",
        seeds=tuple(config.seeds[:SMOKE_SEEDS]),
        data=data,
        model=model,
        training=training,
        registry=registry,
    )
