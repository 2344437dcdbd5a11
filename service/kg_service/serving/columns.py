"""Named columns matched to the model's features by name, never by place.

A request may name its columns (`dataframe_records`, the `columns` of
`dataframe_split`, `inputs` or `instances` as `{name: values}` or as
`[{name: value}, ...]`, a CSV header). MLflow's scoring server turns a
DataFrame into a tensor by position, so `{"y": -0.2, "x": 0.5}` was
answered as x = -0.2, y = 0.5 (issue 30 §2). Here every named form is
checked against the model's feature names (the `feature_names` of its
MLmodel metadata) and rewritten as `{"inputs": rows}` in the model's
order; a missing, unknown or repeated name is a `BadRequest` naming the
expected ones. A model that declares no names (a SavedModel folder, a
foreign pyfunc) cannot match names, so it takes unnamed rows only.

CSV (issue 30 §17): a first row of numbers only is data (no header);
any other first row is a header, and must be the model's feature names.
Read with the csv module (CR, LF or CRLF line ends: issue 30 §10); a bad
value is named by its line and column.

Pure: decoded JSON or text in, rows or `BadRequest` out.
"""

import csv
import io

import numpy as np

from kg_service import named_columns
from kg_service.serving.request_checks import EXAMPLE
from kg_service.serving.request_checks import ROWS
from kg_service.serving.request_checks import BadRequest

NAMED = ("dataframe_records", "dataframe_split")


def positional(request, names):
    """`request` with a named format rewritten as `{"inputs": rows}` whose
    columns are in `names`' order (params kept); any other request as it is.

    Args:
        request: a decoded request that passed `request_checks.check`.
        names: the model's feature names, or None where it declares none.

    Raises:
        BadRequest: for names that are not exactly the model's.
    """
    key = next((k for k in NAMED if k in request), None)
    if key is None:
        key = next((k for k in ROWS if k in request), None)
        data = request.get(key)
        if isinstance(data, dict) and len(data) > 1:  # {name: values}: named columns
            rows = _columns(data, names, key)
        elif isinstance(data, list) and data and all(isinstance(r, dict) for r in data):
            rows = _records(data, names, key)  # [{name: value}, ...], as TF Serving names rows
        else:
            return request
    elif key == "dataframe_records":
        rows = _records(request[key], names)
    else:
        rows = _split(request[key], names)
    rewritten = {"inputs": rows}
    if "params" in request:
        rewritten["params"] = request["params"]
    return rewritten


def _records(records, names, key="dataframe_records"):
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise BadRequest(
            f"{key}: expected a list of {{name: value}} records, e.g. "
            f"{_records_example(names)}."
        )
    wanted = set(names or ())
    for i, record in enumerate(records):
        if names is None or record.keys() != wanted:  # the usual record: one set compare
            order(list(record), names, f"{key}: record {i}")
    return [[record[name] for name in names] for record in records]


def _columns(data, names, key):
    """`{name: values}` (checked: `request_checks.check_named_columns`) as
    rows in `names`' order; a lone number per name is one row."""
    index = order(list(data), names, f"{key}: names")
    given = list(data.values())
    columns = [given[k] if isinstance(given[k], list) else [given[k]] for k in index]
    return [list(row) for row in zip(*columns)]


def _split(data, names):
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise BadRequest(
            'dataframe_split: expected {"columns": [names...], "data": [[...], ...]}.'
        )
    rows, given = data["data"], data.get("columns")
    if given is None:
        return rows  # no names: rows in the model's order, as `inputs`
    if not isinstance(given, list) or not all(isinstance(c, str) for c in given):
        raise BadRequest("dataframe_split: columns must be a list of names (strings).")
    index = order(given, names, "dataframe_split: columns")
    for i, row in enumerate(rows):
        if not isinstance(row, list) or len(row) != len(given):
            raise BadRequest(
                f"dataframe_split: row {i} does not have one value per column "
                f"({len(given)} columns)."
            )
    return [[row[k] for k in index] for row in rows]


def order(given, names, where):
    """For each of the model's `names`, its place in `given`
    (`named_columns.order`, the rule the served pyfunc applies too).

    Raises:
        BadRequest: `given` holds a name twice, lacks one of `names` or
            holds one that is not among them; or the model has no names.
    """
    if names is None:
        raise BadRequest(
            f"{where}: this model declares no feature names, so named columns "
            f"cannot be matched to its inputs; send rows in its order, {EXAMPLE}"
            f" (or CSV rows without a header)."
        )
    try:
        return named_columns.order(given, names)
    except named_columns.Mismatch as error:
        raise BadRequest(f"{where}: {error}") from None


def _records_example(names):
    shown = names[:2] if names else ("x0", "x1")
    return "[{" + ", ".join(f'"{n}": 0.5' for n in shown) + "}]"


# --- CSV. --------------------------------------------------------------------------


def csv_matrix(text, features, names):
    """A numeric model's CSV rows as a float64 `[n, features]` matrix in
    the model's column order.

    The first row's width is checked before any other row is read (a
    30,000-column body took pandas 24 s to refuse, issue 15).

    Raises:
        BadRequest: naming the line and column of what is wrong.
    """
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise BadRequest("the CSV is not UTF-8 text.") from None
    elif text.startswith("\ufeff"):
        text = text[1:]
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        # (line, values) of each row; blank lines are no rows.
        lines = ((reader.line_num, row) for row in reader if row)
        first = next(lines, None)
        if first is None:
            raise BadRequest(_no_rows(features, names))
        header = None if all(named_columns.number(v) is not None for v in first[1]) else first[1]
        if len(first[1]) != features:
            raise BadRequest(_width(len(first[1]), features, names, header is not None))
        index = list(range(features)) if header is None else order(header, names, "the CSV header")
        rows = [] if header is not None else [first]
        rows.extend(lines)
    except csv.Error as error:
        raise BadRequest(f"cannot read it as CSV (line {reader.line_num}: {error}).") from None
    if not rows:
        raise BadRequest(_no_rows(features, names))
    return _numbers(rows, features, index, header)


def _numbers(rows, features, index, header):
    """`(line, values)` rows as float64, each row's width and value checked."""
    for line, row in rows:
        if len(row) != features:
            raise BadRequest(
                f"line {line} has {len(row)} values; every row has {features}, one per feature."
            )
    table = np.array([row for _, row in rows], dtype=str)[:, index]
    if not (np.char.find(table, "_") >= 0).any():  # float() reads '1_0'; not a number here
        try:
            # numpy parses as float() does, in C: 10x the loop below.
            return table.astype("float64")
        except ValueError:
            pass  # the loop names the bad value
    matrix = np.empty((len(rows), features), dtype="float64")
    for i, (line, row) in enumerate(rows):
        for j, k in enumerate(index):
            value = named_columns.number(row[k])
            if value is None:
                column = repr(header[k]) if header else str(k)
                raise BadRequest(
                    f"line {line}, column {column}: {_shown(row[k])} is not a "
                    f"number; every feature must be a number."
                )
            matrix[i, j] = value
    return matrix


def _shown(value):
    shown = value if len(value) <= 20 else value[:20] + "..."
    return "an empty value" if not value.strip() else repr(shown)


def _no_rows(features, names):
    return (
        f"the CSV has no data rows; send one row of {features} numbers per example, "
        f"after a header row of the feature names ({_header_of(names, features)}) "
        f"or without one."
    )


def _width(width, features, names, is_header):
    what = "the header row" if is_header else "the first row"
    return (
        f"{what} has {width} column{'s' * (width != 1)}; this model takes "
        f"{features} features: a header such as {_header_of(names, features)} "
        f"(or none), then one row of {features} numbers per example."
    )


def _header_of(names, features):
    if names:
        return ",".join(names[:4]) + (",..." if len(names) > 4 else "")
    return ",".join("x%d" % k for k in range(min(features, 4))) + (",..." if features > 4 else "")
