"""Loading a sweep config: the file, its `--set` overrides, validation.

`load_config` is the edge: it reads the YAML (`yaml_file`), applies each
`--set key.path=value`, validates the result against the schema
(`schema.SCHEMA`) and raises every problem at once (`problems`), each
with its key path, its line or `--set`, the value given and what was
expected. Importing this module, loading and describing a config import
neither Keras nor TensorFlow, so `kg-train --dry-run` and config errors
are fast.
"""

import dataclasses

import pydantic
import yaml

from kg_service.config.excerpts import kind_of
from kg_service.config.excerpts import path_text
from kg_service.config.excerpts import SHOW_LIMIT
from kg_service.config.excerpts import show
from kg_service.config.problems import Problems
from kg_service.config.problems import mapping_form
from kg_service.config.problems import setting_schema
from kg_service.config.problems import unknown_key
from kg_service.config.problems import without_null
from kg_service.config import schema
from kg_service.config.yaml_file import Mapping
from kg_service.config.yaml_file import parse_yaml
from kg_service.config.yaml_file import read


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
    raw = read(path)
    check = Problems(raw)
    _apply_overrides(raw, overrides, check)
    try:
        config = schema.SCHEMA.validate_python(raw)
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

    `source` (not a key) is left out; tuples become lists. So is an absent
    `tuning:` block: a sweep without one keeps the params and sharded sweep
    id (`sweep.shards.sweep_id`) it had before the block existed.
    A claim lists only the keys it sets, so a claim kind added later (an
    optional key, None when unset) changes no sweep's params or id.
    """
    exclude = {"source"} | ({"tuning"} if config.tuning is None else set())
    tree = schema.SCHEMA.dump_python(config, mode="json", exclude=exclude, warnings=False)
    if tree.get("claims"):
        tree["claims"] = [_set_keys(c) for c in tree["claims"]]
    return tree


def _set_keys(entry):
    return {k: v for k, v in entry.items() if v is not None}


def flatten(tree, prefix=""):
    """`{"a": {"b": 1}}` -> `{"a.b": 1}`: a resolved config as key paths."""
    flat = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


# --- Overrides: --set key.path=value. ----------------------------------------


def _apply_overrides(raw, overrides, check):
    """Applies each `key.path=value` to the raw mapping; bad ones become problems."""
    for override in overrides:
        label = f"--set {_cut(str(override))}"
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
                node[part] = Mapping()
            elif not isinstance(node[part], dict):
                check.add_override(
                    label,
                    f"{path_text(path[: i + 1])} in the file is {kind_of(node[part])}, "
                    "not a mapping of settings; fix the file first.",
                )
                break
            node = node[part]
        else:
            node[path[-1]] = value
            if isinstance(node, Mapping):
                node.lines.pop(path[-1], None)
            check.origins[path] = label


def _cut(text, limit=SHOW_LIMIT):
    """`text` cut at `limit` characters: a message quotes an override, not
    a 5,000-digit one whole."""
    return text if len(text) <= limit else f"{text[:limit]} ... ({len(text):,} characters)"


def _setting_or_problem(path):
    """Returns (the JSON schema of the setting at a key path, None) or (None, problem)."""
    for i, part in enumerate(path):
        section = mapping_form(setting_schema(path[:i]))
        if "properties" not in section:
            return None, (
                f"{path_text(path[:i])} is a single setting, not a section; "
                f"it has no key {show(part)}."
            )
        if part not in section["properties"]:
            return None, f"{path_text(path[: i + 1])}: {unknown_key(part, path[:i])}"
    return setting_schema(path), None


def _override_value(setting, text):
    """Parses a --set value: YAML, except that a string setting takes the text.

    So `--set registry.model_name={dataset}-{activation}` and
    `--set experiment=2024` work unquoted; null, ~ and "" still mean null
    for an optional string, and a quoted value is read as YAML.
    """
    setting, nullable = without_null(setting)
    stripped = text.strip()
    if setting.get("type") == "string":
        if nullable and stripped in ("", "null", "~", "Null", "NULL"):
            return None
        if stripped[:1] in ("'", '"'):
            return parse_yaml(stripped)
        return stripped
    return parse_yaml(stripped)
