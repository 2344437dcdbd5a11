"""Reading a config file: YAML with each key's line, duplicate keys caught,
and a file that cannot be read said as the user can fix it."""

import difflib
import pathlib
import re

import yaml

from kg_service.config.excerpts import kind_of
from kg_service.errors import ServiceError


class Mapping(dict):
    """A YAML mapping that remembers the line of each key."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.lines = {}


# Issue 30 §13: a file (or a --set value) nested thousands deep ran
# PyYAML's recursive composer into a RecursionError traceback, and an
# integer of more digits than Python converts from text (4,300 by
# default, sys.get_int_max_str_digits) into a ValueError. A config's
# deepest setting is a few levels down; both are refused as YAML problems.
MAX_DEPTH = 50


class _Loader(yaml.SafeLoader):
    def compose_node(self, parent, index):
        self._depth = getattr(self, "_depth", 0) + 1
        try:
            if self._depth > MAX_DEPTH:
                raise yaml.composer.ComposerError(
                    None, None,
                    f"lists or mappings nested more than {MAX_DEPTH} deep; a config's "
                    "settings are a few levels deep",
                    self.peek_event().start_mark,
                )  # fmt: skip
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


# YAML 1.1 (PyYAML's) reads these as numbers other than they look: 010 is
# octal 8, 1:30 base 60 (a time of day), 90. A skeptic's probe: `epochs: 010`
# trained 8 epochs, silently. Hex (0x0a) and 1_000 read as written.
_OCTAL = re.compile(r"[-+]?0[0-7_]+")
_BASE_60 = re.compile(r"[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+(\.[0-9_]*)?")


def _looks_other(node, value):
    """A ConstructorError for a YAML 1.1 number that reads as another, else None."""
    text = node.value
    if _OCTAL.fullmatch(text) and text.strip("+-0_"):
        decimal = int(text.replace("_", ""), 10)
        problem = f"{text} is an octal number in YAML 1.1 (it reads as {value}); write {decimal}"
    elif _BASE_60.fullmatch(text):
        problem = (
            f"{text} is a base-60 number in YAML 1.1 (it reads as {value:g}, as a time "
            f"of day would); write the number itself, or quote it for text"
        )
    else:
        return None
    return yaml.constructor.ConstructorError(None, None, problem, node.start_mark)


def _construct_float(loader, node):
    value = yaml.constructor.SafeConstructor.construct_yaml_float(loader, node)
    error = _looks_other(node, value)
    if error is not None:
        raise error
    return value


def _construct_int(loader, node):
    try:
        value = yaml.constructor.SafeConstructor.construct_yaml_int(loader, node)
        str(value)  # a hex or octal one reads, then cannot be written back in decimal
    except ValueError:
        raise yaml.constructor.ConstructorError(
            None, None,
            f"an integer of {len(node.value):,} characters, more than Python reads from "
            "text; no setting takes a number that large",
            node.start_mark,
        ) from None  # fmt: skip
    error = _looks_other(node, value)
    if error is not None:
        raise error
    return value


def _construct_mapping(loader, node):
    explicit = sum(1 for key, _ in node.value if key.tag != "tag:yaml.org,2002:merge")
    loader.flatten_mapping(node)  # `<<:` merge keys come first, then the rest
    merged = len(node.value) - explicit
    mapping = Mapping()
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
_Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)
_Loader.add_constructor("tag:yaml.org,2002:float", _construct_float)


def parse_yaml(text):
    return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass


def _yaml_problem(error):
    mark = getattr(error, "problem_mark", None)
    what = getattr(error, "problem", None) or str(error)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
    return f"{where}not valid YAML: {what}"


def read(path):
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
        raw = parse_yaml(text)
    except yaml.YAMLError as error:
        raise ServiceError(f"config file {shown}: {_yaml_problem(error)}.") from None
    if raw is None:
        written = any(line.strip() and not line.lstrip().startswith("#") for line in text.splitlines())
        raise ServiceError(
            f"config file {shown}: "
            + ("holds no settings (its YAML reads as null)" if written else "is empty")
            + f"; expected a mapping of settings such as {_top_level_example()}."
        )
    if not isinstance(raw, dict):
        raise ServiceError(
            f"config file {shown}: the top level is {kind_of(raw)}; expected a mapping of "
            f"settings such as {_top_level_example()}."
        )
    return raw


def _closest_file(path):
    try:
        candidates = {c.stem: c.name for c in path.parent.iterdir() if c.suffix in (".yaml", ".yml")}
    except OSError:
        return ""
    # By name without the suffix: ".yaml" alone made "nonexist.yaml" close to "list.yaml".
    match = difflib.get_close_matches(path.stem, list(candidates), n=1, cutoff=0.6)
    return f' Did you mean "{path.parent / candidates[match[0]]}"?' if match else ""


def _top_level_example():
    return "experiment: ..., activations: [relu, gelu], seeds: 5, data: {dataset: moons}"
