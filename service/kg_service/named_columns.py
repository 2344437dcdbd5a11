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
