"""Named columns matched to a model's feature names: the one rule.

A request's columns go to the model by name, never by place (issue 30
§2): every one of the model's features named once, no other name. Both
servers use this module: kg serve's scoring app (`serving.columns`) and
the classifier's pyfunc, which `mlflow models serve` runs in a process
with no kg_service: the registered model carries this file as an MLflow
code path (`tasks/classification/serving.py`), so it imports nothing
but the standard library. The caller words "no names" and the error's
type (kg serve's `BadRequest`, MLflow's `INVALID_PARAMETER_VALUE`).
"""

import collections
import difflib
import re


class Mismatch(ValueError):
    """The names given are not exactly the model's; the message says which
    (a name twice, an unknown one with a "did you mean", a missing one)
    and lists the model's."""


def order(given, names, unknown="unknown"):
    """For each of the model's `names`, its place in `given`.

    Args:
        given: the names a request gives, in its order.
        names: the model's feature names, in its order.
        unknown: the words before an unknown name ("unknown column" where
            nothing else in the message says what the name is of).

    Raises:
        Mismatch: `given` holds a name twice, holds one that is not among
            `names`, or lacks one of them.
    """
    expected = f"this model's features are {listed(names)}"
    counts = collections.Counter(given)
    repeated = sorted({str(n) for n, count in counts.items() if count > 1})
    if repeated:
        raise Mismatch(f"{listed(repeated)} named twice; {expected}.")
    strange = [n for n in given if n not in names]
    if strange:
        hints = [
            f"{n!r} (did you mean {close[0]!r}?)" if close else repr(n)
            for n in strange
            for close in [difflib.get_close_matches(str(n), names, n=1)]
        ]
        raise Mismatch(f"{unknown} {', '.join(hints)}; {expected}.")
    missing = [n for n in names if n not in given]
    if missing:
        raise Mismatch(f"{listed(missing)} missing; {expected}.")
    return [given.index(n) for n in names]


def listed(names):
    """`'a', 'b'`: names as a message shows them."""
    return ", ".join(repr(n) for n in names)


def number(text):
    """`text` as a float, or None: what a JSON or CSV number may be (no
    Python-only spellings such as '1_000')."""
    text = text.strip()
    if not text or "_" in text:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def first_row(given, names=None):
    """The numbers of a CSV's first row that pandas read as its header, if
    every name in `given` is a number, else None (names). pandas renames a
    repeated name: "0.5,0.5" is read as "0.5", "0.5.1".

    Raises:
        Mismatch: where the row cannot be read back exactly: "0,0" is read
            as "0", "0.1", also the row 0, 0.1; and "0", "1", ... are
            pandas' names for an unnamed frame's columns too (its records
            as JSON), so which value is which feature cannot be told.
    """
    if not all(isinstance(name, str) for name in given):
        return None
    features = f"name the features ({listed(names)})" if names else "send a header row"
    if sorted(given) == [str(i) for i in range(len(given))]:
        raise Mismatch(
            f"the columns carry the names {listed(given)}: pandas' names for an unnamed "
            f"frame's columns, or a CSV's first row of numbers; which value is which "
            f'feature cannot be told. {features[0].upper() + features[1:]}, or send '
            f'rows in the model\'s order, {{"inputs": [[...], ...]}}.'
        )
    values, seen = [], set()
    for name in given:
        value = number(name)
        repeated = re.fullmatch(r"(.+)\.\d+", name)
        if repeated is not None and repeated.group(1) in seen:
            if value is not None:  # "0.1" after "0": the value 0.1, or "0" again?
                raise Mismatch(
                    f"a CSV's first row of numbers ({', '.join(given)} as read) cannot be "
                    f"read back exactly: pandas reads it as the header and renames a "
                    f"repeated value ('0,0' reads as '0', '0.1', which is also the row 0, "
                    f"0.1). Send the CSV with a header row of the feature names, or the "
                    f'rows as JSON, {{"inputs": [[...], ...]}}; kg serve reads such a CSV '
                    f"exactly."
                )
            value = number(repeated.group(1))
        if value is None:
            return None
        seen.add(name)
        values.append(value)
    return values
