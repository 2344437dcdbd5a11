"""Values as the user wrote them, cut short: what every config message quotes."""


def kind_of(value):
    if value is None:
        return "null"
    kinds = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    kinds.update({list: "a list", dict: "a mapping"})
    for types, label in kinds.items():
        if isinstance(value, types):
            return label
    return type(value).__name__


SHOW_LIMIT = 120  # characters of a value an error message shows


def show(value, limit=SHOW_LIMIT):
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
    """`show`'s pieces, in order, produced as the walk goes."""
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


def path_text(path):
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


def quoted(names):
    return ", ".join(f'"{n}"' for n in names)
