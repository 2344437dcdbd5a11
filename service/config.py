"""The sweep configuration: typed objects, validated once at the edge.

Everything after `load_config` trusts these objects.

Validation is driven by the dataclasses below: a field's type annotation
says which YAML value it takes (bool is not an int; an int is a fine
float), and its `_setting(...)` rules add the one constraint on top (a
range, a set of choices). A few rules span fields (the baseline is one of
the activations, every split gets samples, registry names are valid);
they run once the fields are known. Every problem in a file and its
`--set` overrides is collected in one pass and raised as one
`ServiceError`, one line per problem.

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
import typing
from typing import Optional

import yaml

from service import catalog
from service import tasks
from service.errors import ServiceError

DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"
MIN_SPLIT_SAMPLES = 10  # fewer makes validation/test accuracy meaningless
MAX_SEED = 2**32 - 1  # numpy's seed range
MODEL_NAME_FIELDS = ("experiment", "dataset", "activation")


# --- Rules: each checks (and may normalize) one value. ----------------------


class _Problem(Exception):
    """A rule's verdict: what was expected, for the one value it checked."""

    def __init__(self, expected, suggestion="", index=None):
        super().__init__(expected)
        self.expected = expected
        self.suggestion = suggestion
        self.index = index  # element of a list, for the key path


def _closest(name, valid):
    """Returns ' Did you mean "x"?' for the closest valid name, or ''."""
    return _keras_gelu_names().closest(name, valid)


def _quoted(names):
    return ", ".join(f'"{n}"' for n in names)


def _one_of(*choices):
    def rule(value):
        if value not in choices:
            raise _Problem(f"one of {_quoted(choices)}", _closest(value, choices))
        return value

    return rule


def _at_least(low, text=None):
    def rule(value):
        if not value >= low:
            raise _Problem(text or f"a value >= {low}")
        return value

    return rule


def _above(low):
    def rule(value):
        if not value > low:  # `not >` also catches NaN
            raise _Problem(f"a value > {low}")
        return value

    return rule


def _within(low, high, *, low_open, high_open):
    def rule(value):
        above = value > low if low_open else value >= low
        below = value < high if high_open else value <= high
        if not (above and below):
            left, right = "(" if low_open else "[", ")" if high_open else "]"
            raise _Problem(f"a value in {left}{low}, {high}{right}")
        return value

    return rule


_fraction = _within(0, 1, low_open=True, high_open=True)


def _text(value):
    if not value.strip():
        raise _Problem("a non-empty string")
    return value


def _non_empty(value):
    if not value:
        raise _Problem("a non-empty list")
    return value


def _distinct(value):
    seen = set()
    for i, item in enumerate(value):
        if item in seen:
            raise _Problem(f"distinct values; {_show(item)} appears twice", index=i)
        seen.add(item)
    return value


def _each(rule):
    def each(value):
        out = []
        for i, item in enumerate(value):
            try:
                out.append(rule(item))
            except _Problem as problem:
                problem.index = i
                raise
        return tuple(out)

    return each


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


def _activation(name):
    names = _keras_gelu_names()
    key = names.lookup(name)
    if key is None:
        valid = names.names()
        raise _Problem(
            f"an activation name from keras_gelu.names(): {', '.join(valid)}",
            names.closest(names.clean(name), valid),
        )
    return key


def _task_name(value):
    """A task registered in `service.tasks` (read when validating, so a
    task registered by the caller's code counts)."""
    return _one_of(*tasks.names())(value)


def _seed_count(value):
    """`seeds: n` means seeds 0..n-1; a list passes through."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise _Problem("a count n >= 1 (meaning seeds 0..n-1) or a list of distinct seeds")
        return list(range(value))
    return value


def _experiment_name(value):
    _text(value)
    if len(value) > 500:  # MLflow's limit
        raise _Problem("an MLflow experiment name of at most 500 characters")
    return value


def _model_name_template(template):
    _text(template)
    try:
        parsed = [(f, spec, conv) for _, f, spec, conv in string.Formatter().parse(template)]
    except ValueError:  # an unmatched brace
        parsed = [("", "", "!")]
    used = [(f, spec, conv) for f, spec, conv in parsed if f is not None]
    bad = [f for f, spec, conv in used if f not in MODEL_NAME_FIELDS or spec or conv]
    if bad:
        placeholders = ", ".join("{%s}" % f for f in MODEL_NAME_FIELDS)
        match = difflib.get_close_matches(bad[0], MODEL_NAME_FIELDS, n=1, cutoff=0.5)
        hint = f' Did you mean "{{{match[0]}}}"?' if match else ""
        raise _Problem(
            f"a name template whose only placeholders are {placeholders}, with no "
            "format spec (write {{ and }} for literal braces)",
            hint,
        )
    return template


_MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,255}\Z")


def _check_model_name(name):
    """Returns the problem with a registered model name, or None.

    MLflow forbids "/" and ":" and path-like names; the name is also a
    directory under export.dir and a TF Serving model name, so only
    letters, digits, ".", "_" and "-" are allowed.
    """
    if _MODEL_NAME.match(name):
        return None
    return (
        "a registered model name of letters, digits, '.', '_' and '-' that starts "
        "with a letter or digit, at most 256 characters (it is also a directory "
        "under export.dir and a TF Serving model name)"
    )


_ALIAS = re.compile(r"[\w-]{1,255}\Z")


def _alias(value):
    # MLflow: alphanumerics, "_" and "-"; "latest" and "v<digits>" are taken.
    if not _ALIAS.match(value) or value.lower() == "latest" or re.match(r"[vV]\d+\Z", value):
        raise _Problem(
            'an MLflow alias of letters, digits, "_" and "-", other than "latest" '
            'and "v<number>"'
        )
    return value


# --- The schema. -------------------------------------------------------------


def _setting(default, *rules, before=None, expected=None):
    """A config field with its rules.

    Args:
        default: the value when the key is absent.
        *rules: applied in order to the type-checked value; each may raise
            `_Problem` or return a normalized value.
        before: applied to the raw YAML value before the type check
            (`seeds: 5` -> [0, 1, 2, 3, 4]).
        expected: what to say instead of the type's description when the
            value has the wrong type.
    """
    return dataclasses.field(
        default=default, metadata={"rules": rules, "before": before, "expected": expected}
    )


@dataclasses.dataclass(frozen=True)
class DataConfig:
    # moons | circles | digits (scikit-learn, no downloads)
    dataset: str = _setting("moons", _task_name)  # a name in service.tasks
    # moons/circles only; digits has 1797
    n_samples: int = _setting(2000, _at_least(50))
    noise: float = _setting(0.2, _at_least(0))  # moons/circles only
    # held out, used only for the final evaluation
    test_fraction: float = _setting(0.2, _fraction)
    # of what remains after the test split
    validation_fraction: float = _setting(0.2, _fraction)
    # data generation and split; separate from model seeds
    seed: int = _setting(0, _within(0, MAX_SEED, low_open=False, high_open=False))
    # the model z-scores its raw inputs itself (training-split statistics)
    standardize: bool = True


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    # one activated projection per width
    hidden_units: tuple[int, ...] = _setting(
        (64, 64),
        _non_empty,
        _each(_at_least(1, "a positive integer")),
        expected="a non-empty list of positive integers, e.g. [64, 64]",
    )
    dropout: float = _setting(0.0, _within(0, 1, low_open=False, high_open=True))
    block: str = _setting("dense", _one_of(*catalog.BLOCKS))
    # block: feedforward -> Dense(d_model) stem, then one residual
    # keras_gelu.FeedForward(hidden_dim=w, output_dim=d_model) per width w.
    d_model: int = _setting(32, _at_least(1))
    match_params: bool = False  # gated FFNs at the parameters of plain ones


@dataclasses.dataclass(frozen=True)
class TrainingConfig:
    optimizer: str = _setting("adam", _one_of(*catalog.OPTIMIZERS))
    learning_rate: float = _setting(0.001, _above(0))
    epochs: int = _setting(100, _at_least(1))
    batch_size: int = _setting(32, _at_least(1))
    # Convergence speed: first epoch whose validation accuracy reaches this.
    convergence_threshold: float = _setting(
        0.95, _within(0, 1, low_open=True, high_open=False)
    )


@dataclasses.dataclass(frozen=True)
class TrackingConfig:
    # None: MLFLOW_TRACKING_URI, else sqlite:///mlflow.db. See
    # resolve_tracking_uri.
    uri: Optional[str] = _setting(None, _text)


@dataclasses.dataclass(frozen=True)
class RegistryConfig:
    enabled: bool = True
    # Placeholders: {experiment}, {dataset}, {activation}.
    model_name: str = _setting("{dataset}-{activation}", _model_name_template)
    alias: str = _setting("champion", _alias)


@dataclasses.dataclass(frozen=True)
class ExportConfig:
    enabled: bool = True
    # TF Serving layout: <dir>/<model_name>/<version>/
    dir: str = _setting("exports", _text)
    # SavedModel vs in-memory model, max abs diff
    tolerance: float = _setting(1e-5, _above(0))


@dataclasses.dataclass(frozen=True)
class DeviceConfig:
    type: str = _setting("auto", _one_of("auto", "cpu", "gpu"))
    # None | mixed_float16 | mixed_bfloat16
    mixed_precision: Optional[str] = _setting(None, _one_of("mixed_float16", "mixed_bfloat16"))
    xla: bool = False  # jit_compile the training step


@dataclasses.dataclass(frozen=True)
class Config:
    experiment: str = _setting("kg-sweep", _experiment_name)
    # names from keras_gelu.names(), stored in its canonical spelling
    activations: tuple[str, ...] = _setting(
        ("relu", "gelu"),
        _non_empty,
        _each(_activation),
        _distinct,
        expected="a list of activation names, e.g. [relu, gelu]",
    )
    # what every other activation is compared with; when absent: "relu"
    # if it is among the activations, else the first activation
    baseline: str = _setting("relu", _activation)
    # YAML: a list, or a count n -> 0..n-1
    seeds: tuple[int, ...] = _setting(
        (0, 1, 2, 3, 4),
        _non_empty,
        _each(_within(0, MAX_SEED, low_open=False, high_open=False)),
        _distinct,
        before=_seed_count,
        expected="a count n >= 1 (meaning seeds 0..n-1) or a list of distinct "
        "non-negative integers",
    )
    output_dir: str = _setting("kg-output", _text)  # report, plots, resolved config
    data: DataConfig = DataConfig()
    model: ModelConfig = ModelConfig()
    training: TrainingConfig = TrainingConfig()
    tracking: TrackingConfig = TrackingConfig()
    registry: RegistryConfig = RegistryConfig()
    export: ExportConfig = ExportConfig()
    device: DeviceConfig = DeviceConfig()
    # the YAML file it came from (not a key)
    source: Optional[str] = dataclasses.field(default=None, metadata={"key": False})


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


# --- The validator: walks YAML against the dataclass fields. -----------------


_INVALID = object()  # a value that already has a problem recorded
_FLOAT_TEXT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+\Z")


def _keys(cls):
    return [f for f in dataclasses.fields(cls) if f.metadata.get("key", True)]


def _hints(cls):
    return typing.get_type_hints(cls)


def _optional_of(tp):
    """Returns T for Optional[T], else None."""
    args = typing.get_args(tp)
    if typing.get_origin(tp) is typing.Union and type(None) in args and len(args) == 2:
        return next(a for a in args if a is not type(None))
    return None


def _describe_type(tp):
    inner = _optional_of(tp)
    if inner is not None:
        return f"{_describe_type(inner)} or null"
    if typing.get_origin(tp) is tuple:
        item = typing.get_args(tp)[0]
        return {int: "a list of integers", str: "a list of names", float: "a list of numbers"}.get(
            item, "a list"
        )
    if dataclasses.is_dataclass(tp):
        return "a mapping of settings"
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string"}[tp]


def _kind(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _show(value):
    """A value as the user would write it in YAML."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace('"', '\\"') + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_show(v)}" for k, v in value.items()) + "}"
    return str(value)


def _path_text(path):
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


class _Validation:
    """One pass over a raw mapping; collects every problem."""

    def __init__(self, raw, origins):
        self.raw = raw
        self.origins = origins  # key path tuple -> "--set a.b=c"
        self.problems = []  # (sort order, "key.path (line 7)", message)

    # Where a key path came from: "line 7" in the file, or its --set.
    def locate(self, path):
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

    def sorted_problems(self):
        return [(label, m) for _, label, m in sorted(self.problems, key=lambda p: p[0])]

    def bad_value(self, path, value, expected, suggestion=""):
        self.add(path, f"got {_show(value)} ({_kind(value)}); expected {expected}.{suggestion}")

    # The walk.
    def section(self, cls, raw, path):
        """Returns {field name: value or _INVALID} for one dataclass."""
        if raw is None:
            raw = {}  # `data:` with every key commented out: all defaults
        if not isinstance(raw, dict):
            self.bad_value(path, raw, f"a mapping of settings ({', '.join(_key_names(cls))})")
            return None
        fields = {f.name: f for f in _keys(cls)}
        for key in raw:
            if key not in fields:
                self.add(path + (str(key),), _unknown_key(key, cls, path))
        hints = _hints(cls)
        values = {}
        for name, field in fields.items():
            if name in raw:
                values[name] = self.value(field, hints[name], raw[name], path + (name,))
            elif dataclasses.is_dataclass(hints[name]):
                values[name] = self.section(hints[name], {}, path + (name,))
            else:
                values[name] = field.default
        return values

    def value(self, field, tp, value, path):
        if dataclasses.is_dataclass(tp):
            values = self.section(tp, value, path)
            return _INVALID if values is None else values
        before = field.metadata.get("before")
        if before is not None:
            try:
                value = before(value)
            except _Problem as problem:
                self.bad_value(path, value, problem.expected, problem.suggestion)
                return _INVALID
        converted = self.typed(tp, value, path, field.metadata.get("expected"))
        if converted is _INVALID or converted is None:
            return converted
        for rule in field.metadata.get("rules", ()):
            try:
                converted = rule(converted)
            except _Problem as problem:
                # Show what the user wrote (1, not 1.0), and where in a list.
                shown, at, expected = value, path, problem.expected
                if problem.index is not None:
                    shown, at = value[problem.index], path + (problem.index,)
                elif _optional_of(tp) is not None:
                    expected += " or null"
                self.bad_value(at, shown, expected, problem.suggestion)
                return _INVALID
        return converted

    def typed(self, tp, value, path, expected=None):
        """Checks `value` against a type annotation; converts int->float, list->tuple."""
        inner = _optional_of(tp)
        if inner is not None:
            if value is None:
                return None
            return self.typed(inner, value, path, expected or _describe_type(tp))
        if typing.get_origin(tp) is tuple:
            if not isinstance(value, list):
                self.bad_value(path, value, expected or _describe_type(tp))
                return _INVALID
            item_type = typing.get_args(tp)[0]
            items = [self.typed(item_type, v, path + (i,)) for i, v in enumerate(value)]
            return _INVALID if _INVALID in items else tuple(items)
        if tp is float:
            if isinstance(value, str) and _FLOAT_TEXT.match(value.strip()):
                # PyYAML reads 1e-3 (no dot) as a string; it means a number.
                return float(value)
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            if ok and not math.isfinite(value):
                self.bad_value(path, value, "a finite number")
                return _INVALID
            return float(value) if ok else self._wrong_type(tp, value, path, expected)
        if tp is int:
            ok = isinstance(value, int) and not isinstance(value, bool)
            return value if ok else self._wrong_type(tp, value, path, expected)
        if tp in (bool, str):
            return value if isinstance(value, tp) else self._wrong_type(tp, value, path, expected)
        raise TypeError(f"config schema: unsupported field type {tp!r} at {_path_text(path)}")

    def _wrong_type(self, tp, value, path, expected):
        hint = ""
        if tp is str and isinstance(value, bool):
            hint = " Quote it to mean text."
        elif tp is str and isinstance(value, (int, float)):
            hint = f' Quote it to mean text: "{value}".'
        self.bad_value(path, value, expected or _describe_type(tp), hint)
        return _INVALID


def _key_names(cls):
    return [f.name for f in _keys(cls)]


def _unknown_key(key, cls, path):
    names = _key_names(cls)
    under = f"under {_path_text(path)}" if path else "at the top level"
    return f"unknown key.{_closest(key, names)} Valid keys {under}: {', '.join(names)}."


# --- Rules that span fields. -------------------------------------------------


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


def registered_model_name(config, activation):
    """The registered model (and export directory) name for one activation."""
    return config.registry.model_name.format(
        experiment=config.experiment, dataset=config.data.dataset, activation=activation
    )


def _cross_checks(check, values, raw):
    if values["baseline"] is not _INVALID and values["activations"] is not _INVALID:
        activations = values["activations"]
        if "baseline" not in raw:
            values["baseline"] = "relu" if "relu" in activations else activations[0]
        elif values["baseline"] not in activations:
            check.bad_value(
                ("baseline",),
                values["baseline"],
                f"one of the activations ({', '.join(activations)})",
                _closest(values["baseline"], activations),
            )
            values["baseline"] = _INVALID

    data = values["data"]
    if data is not _INVALID and _INVALID not in data.values():
        train, validation, test = split_sizes(DataConfig(**data))
        if min(train, validation, test) < MIN_SPLIT_SAMPLES:
            n = train + validation + test
            check.add(
                ("data",),
                f"{n} samples split into {train} train / {validation} validation / "
                f"{test} test; expected at least {MIN_SPLIT_SAMPLES} in each. Raise "
                "data.n_samples or move data.test_fraction / data.validation_fraction "
                "away from 0 and 1.",
            )

    registry = values["registry"]
    parts = (values["experiment"], values["activations"], data, registry)
    if _INVALID not in parts and _INVALID not in (data["dataset"], registry["model_name"]):
        template = registry["model_name"]
        names = [
            template.format(experiment=values["experiment"], dataset=data["dataset"], activation=a)
            for a in values["activations"]
        ]
        path = ("registry", "model_name")
        for name in names:
            expected = _check_model_name(name)
            if expected:
                check.add(path, f"{_show(template)} gives {_show(name)}; expected {expected}.")
                break
        else:
            if len(set(names)) < len(names):
                check.add(
                    path,
                    f"{_show(template)} gives the same name for several activations; "
                    "expected a template with {activation} in it, so that each "
                    "activation gets its own registered model.",
                )


def _construct(cls, values):
    kwargs = {}
    hints = _hints(cls)
    for field in _keys(cls):
        value = values[field.name]
        tp = hints[field.name]
        kwargs[field.name] = _construct(tp, value) if dataclasses.is_dataclass(tp) else value
    return cls(**kwargs)


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
        tp, problem = _schema_type(path)
        if problem:
            check.add_override(label, problem)
            continue
        try:
            value = _override_value(tp, text)
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


def _schema_type(path):
    """Returns (type annotation at a key path, None) or (None, problem)."""
    cls = Config
    for i, part in enumerate(path):
        if not dataclasses.is_dataclass(cls):
            return None, (
                f"{_path_text(path[:i])} is a single setting, not a section; "
                f"it has no key {_show(part)}."
            )
        if part not in _key_names(cls):
            return None, f"{_path_text(path[: i + 1])}: {_unknown_key(part, cls, path[:i])}"
        cls = _hints(cls)[part]
    return cls, None


def _override_value(tp, text):
    """Parses a --set value: YAML, except that a string setting takes the text.

    So `--set registry.model_name={dataset}-{activation}` and
    `--set experiment=2024` work unquoted; null, ~ and "" still mean null
    for an optional string, and a quoted value is read as YAML.
    """
    inner = _optional_of(tp) or tp
    stripped = text.strip()
    if inner is str:
        if _optional_of(tp) is not None and stripped in ("", "null", "~", "Null", "NULL"):
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
    check = _Validation(raw, {})
    _apply_overrides(raw, overrides, check)
    values = check.section(Config, raw, ())
    _cross_checks(check, values, raw)
    if check.problems:
        lines = [f"{label}: {message}" for label, message in check.sorted_problems()]
        if len(lines) == 1:
            raise ServiceError(f"config file {path}: {lines[0]}")
        listing = "\n".join(f"  {line}" for line in lines)
        raise ServiceError(f"config file {path}: {len(lines)} problems:\n{listing}")
    config = _construct(Config, values)
    return dataclasses.replace(config, source=str(path))


def config_to_dict(config):
    """The resolved config as plain YAML/JSON types; `load_config` reads it back.

    `source` (not a key) is left out; tuples become lists.
    """

    def plain(value):
        if isinstance(value, tuple):
            return [plain(v) for v in value]
        return value

    out = {}
    for field in _keys(type(config)):
        value = getattr(config, field.name)
        out[field.name] = config_to_dict(value) if dataclasses.is_dataclass(value) else plain(value)
    return out


def resolve_tracking_uri(config, environ=None):
    """The MLflow tracking URI a run uses.

    `config.tracking.uri` (which `--tracking-uri` sets), else the
    `MLFLOW_TRACKING_URI` environment variable, else `sqlite:///mlflow.db`
    (a file in the working directory).
    """
    return _tracking_uri_and_origin(config, environ)[0]


def _tracking_uri_and_origin(config, environ=None):
    environ = os.environ if environ is None else environ
    if config.tracking.uri:
        return config.tracking.uri, "tracking.uri"
    if environ.get("MLFLOW_TRACKING_URI", "").strip():
        return environ["MLFLOW_TRACKING_URI"].strip(), "from MLFLOW_TRACKING_URI"
    return DEFAULT_TRACKING_URI, "default; set tracking.uri, MLFLOW_TRACKING_URI or --tracking-uri"


def _seeds_text(seeds):
    if seeds == tuple(range(len(seeds))) and len(seeds) > 2:
        return f"0..{len(seeds) - 1}"
    return ", ".join(str(s) for s in seeds)


def describe_plan(config, environ=None):
    """What a run of `config` would do, as the lines `--dry-run` prints."""
    data, model, training = config.data, config.model, config.training
    train, validation, test = split_sizes(data)
    task = tasks.get(data.dataset)
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
    rows = [
        ("data", source),
        ("split", f"{train} train / {validation} validation / {test} test "
                  "(test held out for the final evaluation only)"),
        ("model", arch),
        ("training", f"{training.optimizer}, learning rate {training.learning_rate:g}, "
                     f"batch size {training.batch_size}, {training.epochs} epochs, "
                     f"convergence at val accuracy {training.convergence_threshold:g}"),
        ("activations", activations),
        ("seeds", f"{_seeds_text(config.seeds)} ({n_seeds} seeds)"),
        ("members", f"{n_act} activations x {n_seeds} seeds = {n_act * n_seeds} training runs"),
        ("device", f"{device.type}, {precision}, XLA {'on' if device.xla else 'off'}"),
        ("tracking", f"{uri} ({origin})"),
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


def smoke(config):
    """`config` at smoke sizes: the same pipeline, done in seconds.

    Every activation and every stage stay (training, tracking, statistics,
    report, export, registry); what shrinks is the data (at most
    `SMOKE_SAMPLES` generated samples), the widths (at most `SMOKE_WIDTH`),
    the epochs (at most `SMOKE_EPOCHS`) and the seeds (the first
    `SMOKE_SEEDS`). The experiment and registered model names get a
    `-smoke` suffix, so a smoke run never moves the real models' aliases
    nor mixes its runs into the real experiment.

    Example:

    >>> smoke(Config(seeds=(3, 4, 5))).seeds
    (3, 4)
    """
    data = dataclasses.replace(
        config.data, n_samples=min(config.data.n_samples, SMOKE_SAMPLES)
    )
    model = dataclasses.replace(
        config.model,
        hidden_units=tuple(min(w, SMOKE_WIDTH) for w in config.model.hidden_units),
        d_model=min(config.model.d_model, SMOKE_WIDTH),
    )
    training = dataclasses.replace(
        config.training, epochs=min(config.training.epochs, SMOKE_EPOCHS)
    )
    registry = dataclasses.replace(
        config.registry, model_name=f"{config.registry.model_name}-smoke"
    )
    return dataclasses.replace(
        config,
        experiment=f"{config.experiment}-smoke",
        seeds=tuple(config.seeds[:SMOKE_SEEDS]),
        data=data,
        model=model,
        training=training,
        registry=registry,
    )
