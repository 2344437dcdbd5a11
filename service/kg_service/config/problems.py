"""pydantic's errors, as the user wrote the values.

Each of `ValidationError.errors()` becomes (key path, one sentence): the
value given, what the setting takes (read from the schema's JSON schema:
its type, bounds, choices; a section's keys) and the closest valid name.
`Problems` gathers them, each labelled with its YAML line or `--set`.
"""

import functools
import math

from kg_service.config import catalog
from kg_service.config.excerpts import kind_of
from kg_service.config.excerpts import path_text
from kg_service.config.excerpts import quoted
from kg_service.config.excerpts import show
from kg_service.config.fields import FLOAT_TEXT
from kg_service.config import schema
from kg_service.config.schema import SEEDS_FORMS
from kg_service.config.yaml_file import Mapping
from kg_service.errors import ServiceError


def json_schema():
    """pydantic's JSON schema of `Config`: what the messages and `--set` read
    about a setting (its type, bounds, choices; a section's keys)."""
    return _json_schema(schema.SCHEMA)


@functools.lru_cache(maxsize=None)
def _json_schema(adapter):  # one per composed schema (`schema.composed`)
    return adapter.json_schema()


def setting_schema(path):
    """The JSON schema of the setting at a key path; list indexes go into
    the items, a section is its definition (with its "properties")."""
    schema = node = json_schema()
    for part in path:
        if isinstance(part, int):
            node = without_null(list_form(node))[0]  # an optional list's item
            node = node["items"] if "items" in node else node["prefixItems"][part]  # a pair's
        else:
            node = mapping_form(node)["properties"][part]
        # An optional section (`tuning:`, null by default) is its section.
        node = next((o for o in node.get("anyOf", ()) if "$ref" in o), node)
        if "$ref" in node:
            node = schema["$defs"][node["$ref"].rsplit("/", 1)[-1]]
    return node


def list_form(setting):
    """A setting's list form (`seeds` may also be a mapping), else itself."""
    options = [o for o in setting.get("oneOf", ()) if o.get("type") == "array"]
    return options[0] if options else setting


def mapping_form(setting):
    """A setting's mapping form: itself, or of a setting written in several
    forms (`seeds`: a count, a list or a mapping), its mapping's schema."""
    for option in setting.get("oneOf", ()):
        if "$ref" in option:
            return json_schema()["$defs"][option["$ref"].rsplit("/", 1)[-1]]
        if "properties" in option:
            return option
    return setting


def without_null(setting):
    """(the setting's schema without its null option, whether it takes null)."""
    options = setting.get("anyOf", [])
    if {"type": "null"} not in options:
        return setting, False
    return next(s for s in options if s != {"type": "null"}), True


def unknown_key(key, path):
    keys = list(mapping_form(setting_schema(path))["properties"])
    under = f"under {path_text(path)}" if path else "at the top level"
    return f"unknown key.{catalog.closest(key, keys)} Valid keys {under}: {', '.join(keys)}."


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


def key_path(loc):
    """pydantic's error location as a key path: without the tags that
    tell a setting's forms apart (`schema.SEEDS_FORMS`)."""
    return tuple(part for part in loc if part not in SEEDS_FORMS)


def problem(error):
    """(key path, message) for one of pydantic's `ValidationError.errors()`."""
    kind, ctx = error["type"], error.get("ctx") or {}
    path = key_path(error["loc"]) + tuple(ctx.get("at", ()))
    given = error["input"]  # as the user wrote it, before any conversion
    if ctx.get("at") and isinstance(given, list):
        given = given[ctx["at"][0]]  # the item of a list at fault
    if kind in ("unexpected_keyword_argument", "invalid_key"):  # invalid: not a string
        return path[:-1] + (str(path[-1]),), unknown_key(path[-1], path[:-1])
    if "message" in ctx:
        return path, ctx["message"]
    setting, nullable = without_null(setting_schema(path))
    or_null, hint = " or null" if nullable else "", ""
    if kind == "config":
        expected, hint = ctx["expected"] + or_null, ctx["hint"]
    elif kind == "literal_error":
        expected = f"one of {quoted(setting['enum'])}{or_null}"
        hint = catalog.closest(given, setting["enum"])
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
        if setting.get("type") == "integer" and isinstance(given, str) and FLOAT_TEXT.fullmatch(given.strip()):
            hint = f" Write it in digits: {float(given):.0f}." if float(given).is_integer() else ""
        elif setting.get("type") == "string" and isinstance(given, bool):
            hint = " Quote it to mean text."
        elif setting.get("type") == "string" and isinstance(given, (int, float)):
            hint = f' Quote it to mean text: "{given}".'
    return path, f"got {show(given)} ({kind_of(given)}); expected {expected}.{hint}"


class Problems:
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
            if isinstance(node, Mapping) and part in node.lines:
                line = node.lines[part]
            if isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
                node = node[part]  # a list's item: its own keys have lines
            else:
                node = node.get(part) if isinstance(node, dict) else None
        return f"line {line}" if line else None

    def add(self, path, message):
        where = self.locate(path)
        label = path_text(path) + (f" ({where})" if where else "")
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
        locs = [key_path(e["loc"]) for e in error.errors()]
        for e in error.errors():
            loc = key_path(e["loc"])
            if not any(len(other) > len(loc) and other[: len(loc)] == loc for other in locs):
                self.add(*problem(e))

    def raise_if_any(self, path):
        if not self.problems:
            return
        lines = [f"{label}: {m}" for _, label, m in sorted(self.problems, key=lambda p: p[0])]
        if len(lines) == 1:
            raise ServiceError(f"config file {path}: {lines[0]}")
        listing = "\n".join(f"  {line}" for line in lines)
        raise ServiceError(f"config file {path}: {len(lines)} problems:\n{listing}")
