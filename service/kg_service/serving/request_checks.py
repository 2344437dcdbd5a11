"""What a scoring request must be: one check for `kg serve` (before MLflow's
scoring server parses the body) and `kg predict` (before the model runs),
so that both refuse the same requests with the same words.

Pure: bytes or decoded JSON in, `BadRequest` (a ValueError) out; no MLflow,
no network. The server answers a `BadRequest` with HTTP 400, `kg predict`
with exit code 2.

Measured against MLflow 3.17's scoring server, which answers these wrongly:
a body nested 1,000+ deep is a RecursionError in its decoder (a 500); an
invalid body is echoed back in the error; strings ("1e3") and booleans are
cast to float32 and answered 200; unknown `params` are dropped silently.
"""

import difflib
import itertools
import json

FORMATS = ("inputs", "instances", "dataframe_split", "dataframe_records")
ROWS = ("inputs", "instances")  # rows, or named columns {name: values}
KEYS = (*FORMATS, "params")  # every top-level key a request may hold
EXAMPLE = '{"inputs": [[...], ...]}'
NAMED_EXAMPLE = '{"inputs": {"x": [0.5, 1.0], "y": [-0.2, 0.3]}}'
NUMBERS = {int, float}  # what JSON numbers decode to
FLOAT64_MAX = 1.7976931348623157e308


class BadRequest(ValueError):
    """A request the model cannot take; the message says why and what to send."""


def decode(body):
    """The JSON body as a dict.

    Raises:
        BadRequest: for a body that is not a JSON object (never echoing it).
    """
    try:
        data = json.loads(body, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as error:
        raise BadRequest(
            f"the body is not valid JSON ({error.msg} at line {error.lineno}, "
            f"column {error.colno}); expected {EXAMPLE}."
        ) from None
    except UnicodeDecodeError:
        raise BadRequest(f"the body is not valid JSON (not UTF-8 text); expected {EXAMPLE}.") from None
    except BadRequest:
        raise
    except ValueError:
        # Python's int-string limit (4,300 digits): a ValueError, not a
        # JSONDecodeError (issue 30 §10: it was a 500).
        raise BadRequest(
            f"the body holds a number too long to read (over 4,300 digits); "
            f"features are numbers within float32's range, e.g. {EXAMPLE}."
        ) from None
    except RecursionError:
        # Python's decoder recurses once per level and stops near 1,000.
        raise BadRequest(
            f"the JSON is nested too deeply (over 900 levels); a request is "
            f"{EXAMPLE}, 3 levels."
        ) from None
    if not isinstance(data, dict):
        raise BadRequest(
            f"the body must be a JSON dictionary such as {EXAMPLE}; got a "
            f"{type(data).__name__}."
        )
    return data


def _unique_keys(pairs):
    """A JSON object as a dict; a key given twice is refused (json.loads
    keeps the last one silently)."""
    data = dict(pairs)
    if len(data) != len(pairs):
        seen = set()
        twice = next(key for key, _ in pairs if key in seen or seen.add(key))
        raise BadRequest(
            f"the JSON names {json.dumps(twice[:40])} twice in one object; "
            f"each key once, e.g. {EXAMPLE}."
        )
    return data


def check(request, features=None, param_names=()):
    """Refuses a decoded request the model cannot take.

    Args:
        request: the decoded JSON body (a dict).
        features: the width of a numeric model's rows; None for a model that
            takes other values (the language model's prompt strings).
        param_names: the `params` the model's signature declares.

    Raises:
        BadRequest: naming the problem: an empty batch, strings or booleans
            where features go, rows nested deeper than a matrix, unknown or
            nested `params`.
    """
    _check_keys(request)
    _check_params(request.get("params"), tuple(param_names))
    found = [key for key in FORMATS if key in request]
    data = request[found[0]]
    if features is not None and found[0] in ROWS and isinstance(data, dict) and len(data) > 1:
        return check_named_columns(data, found[0], features)
    rows = _rows(data, found[0])
    if rows is None:
        return
    if not isinstance(rows, list):  # {"inputs": {"x": false}}: a TypeError below (fuzzed)
        if features is None:
            return  # the language model's words
        raise BadRequest(f"{found[0]}: expected a list of rows, e.g. {EXAMPLE}.")
    check_not_empty(len(rows), features)
    if features is not None:
        check_numbers(rows, found[0])


def _check_keys(request):
    """Exactly one of FORMATS, and nothing but KEYS: MLflow ignored an
    unknown key and answered a typo (`input`) with words about tensor
    signatures (issue 30 §18)."""
    accepted = f"a request holds one of {', '.join(FORMATS)} (and optionally params)"
    unknown = [key for key in request if key not in KEYS]
    if unknown:
        hints = [
            f"{json.dumps(key[:40])} (did you mean {json.dumps(close[0])}?)"
            if close
            else json.dumps(key[:40])
            for key in unknown[:5]
            for close in [difflib.get_close_matches(key, KEYS, n=1)]
        ]
        raise BadRequest(f"unknown key {', '.join(hints)}; {accepted}, e.g. {EXAMPLE}.")
    found = [key for key in FORMATS if key in request]
    if len(found) != 1:
        given = f"it holds {', '.join(found)}" if found else "it holds none"
        raise BadRequest(f"{accepted}; {given}, e.g. {EXAMPLE}.")


def check_not_empty(rows, features=None):
    """Refuses a batch of no rows (TF Serving too: "No values in 'instances'
    array"); MLflow's own words for it name a Python type."""
    if rows == 0:
        raise BadRequest(
            "the batch is empty; send at least one row"
            + (f" of {features} features" if features else "")
            + f", e.g. {EXAMPLE}."
        )


def check_named_columns(columns, key, features=None):
    """`{"inputs": {"x": [...], "y": [...]}}`: each named column one JSON
    number per row (or one number: one row), all of one length. MLflow
    casts strings and booleans there, reads `[[a, b]]` in a column as two
    rows and answers an empty batch with no predictions, all with 200."""
    lengths = {}
    for name, values in columns.items():
        values = values if isinstance(values, list) else [values]
        for i, value in _non_numbers(values):
            raise BadRequest(
                f"{key}: column {json.dumps(str(name)[:40])}, row {i} is "
                f"{_shown(value, nested='')}; a named column holds one JSON number "
                f"per row, e.g. {NAMED_EXAMPLE}."
            )
        _check_ints(values, set(map(type, values)), key)
        lengths[name] = len(values)
    if len(set(lengths.values())) > 1:
        shown = ", ".join(f"{str(name)[:40]} {n}" for name, n in lengths.items())
        raise BadRequest(
            f"{key}: the named columns hold different numbers of rows ({shown}); "
            f"each holds one number per row, e.g. {NAMED_EXAMPLE}."
        )
    check_not_empty(next(iter(lengths.values())), features)


def _rows(data, key):
    if key == "dataframe_split":
        return data.get("data") if isinstance(data, dict) else None
    if key == "dataframe_records" or (
        key in ROWS and isinstance(data, list) and data and all(isinstance(r, dict) for r in data)
    ):  # records, or instances as TF Serving names them: [{name: value}, ...]
        if not isinstance(data, list):
            return None
        return [list(r.values()) if isinstance(r, dict) else r for r in data]
    if isinstance(data, dict):  # {"inputs": {"name": [...]}}: one named tensor
        return next(iter(data.values()), None) if len(data) == 1 else None
    return data if isinstance(data, list) else None


def check_numbers(rows, key="inputs"):
    """Every row a list of numbers (or one number): strings and booleans are
    not features, though numpy would read "1e3" and true as floats."""
    if not isinstance(rows, list):
        raise BadRequest(f"{key}: expected a list of rows, e.g. {EXAMPLE}.")
    # The usual request, every value's type collected in C: for 256 rows of
    # 2, 70 us against the loop's 185 us (side by side, load average 14).
    # (`type`, not isinstance: True is an int.) Anything else takes the
    # loop, which names the value.
    kinds = set(map(type, rows))
    if kinds <= NUMBERS:
        return _check_ints(rows, kinds, key)
    if kinds == {list}:
        values = set(map(type, itertools.chain.from_iterable(rows)))
        if values <= NUMBERS:
            if len(set(map(len, rows))) > 1:  # widths in C: the loop halved this path's speed
                _check_width(rows, key)
            return _check_ints(itertools.chain.from_iterable(rows), values, key)
    for i, row in enumerate(rows):
        for j, value in _non_numbers(row if isinstance(row, list) else [row]):
            raise BadRequest(
                f"{key}: row {i}, column {j} is {_shown(value)}; every feature "
                f"must be a JSON number (strings and booleans are not "
                f"features), e.g. {EXAMPLE}."
            )
    _check_width(rows, key)


def _non_numbers(values):
    """`(index, value)` of each value that is not a JSON number (`type`, not
    isinstance: True is an int)."""
    return ((i, value) for i, value in enumerate(values) if type(value) not in NUMBERS)


def _check_width(rows, key):
    """Every row a list of one width, or every row one number: numpy's
    words for anything else are "inhomogeneous shape"."""
    first = rows[0]
    for i, row in enumerate(rows):
        if isinstance(row, list) != isinstance(first, list):
            shown = ("a list", "a number") if isinstance(row, list) else ("a number", "a list")
            raise BadRequest(
                f"{key}: row {i} is {shown[0]}, row 0 {shown[1]}; every row is a "
                f"list of one value per feature, e.g. {EXAMPLE}."
            )
        if isinstance(row, list) and len(row) != len(first):
            raise BadRequest(
                f"{key}: row {i} has {len(row)} value{'s' * (len(row) != 1)}, row 0 has "
                f"{len(first)}; every row holds one value per feature, e.g. {EXAMPLE}."
            )


def _check_ints(values, kinds, key):
    """JSON integers past float64's range (10**400): numpy cannot cast
    them (an OverflowError, a 500 from MLflow's app: issue 30 §10)."""
    if int not in kinds:
        return
    for value in values:
        if type(value) is int and not -FLOAT64_MAX <= value <= FLOAT64_MAX:
            raise BadRequest(
                f"{key}: a number of {len(str(abs(value)))} digits is beyond any "
                f"float's range; features are numbers within float32's "
                f"(about 3.4e38)."
            )


def _shown(value, nested=" (rows nest one level: [[...], ...])"):
    if isinstance(value, bool):
        return f"a boolean ({json.dumps(value)})"
    if isinstance(value, str):
        return f"a string ({json.dumps(value[:20])}{'...' if len(value) > 20 else ''})"
    if isinstance(value, (list, dict)):
        return f"a {'list' if isinstance(value, list) else 'dictionary'}{nested}"
    return "null" if value is None else type(value).__name__


def _check_params(params, names):
    if params is None:
        return
    takes = (
        f"this model takes {', '.join(repr(n) for n in names)}"
        if names
        else "this model takes no params"
    )
    if not isinstance(params, dict):
        raise BadRequest(f"params: expected a dictionary of name: value; {takes}.")
    unknown = sorted(set(params) - set(names))
    if unknown:
        hints = [
            f"{name!r} (did you mean {close[0]!r}?)" if close else repr(name)
            for name in unknown
            for close in [difflib.get_close_matches(name, names, n=1)]
        ]
        raise BadRequest(f"params: unknown {', '.join(hints)}; {takes}.")
    for name, value in params.items():
        values = value if isinstance(value, list) else [value]
        if any(isinstance(v, (list, dict)) for v in values):
            raise BadRequest(
                f"params: {name!r} is nested; a param is a value or a list of values."
            )
