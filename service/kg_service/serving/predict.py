"""`kg predict`: a model's predictions for the rows of a file, without a
server, refused and answered as `kg serve` refuses and answers them.

MLflow and pandas are imported where they are used: the CLI imports this
module for `kg predict`, and `kg --help` must not wait seconds for them.
"""

import csv
import dataclasses
import io
import json
import pathlib
import sys

import numpy as np

from kg_service.errors import ServiceError
from kg_service.serving import columns
from kg_service.serving import request_checks
from kg_service.serving import model_folder

DEFAULT_MAX_INPUT_BYTES = 64 * 10**6
NPY_MAGIC = b"\x93NUMPY"


def predict(model_uri, input_path, *, tracking_uri=None, max_bytes=DEFAULT_MAX_INPUT_BYTES):
    """MODEL's predictions for the rows of a .csv, .json or .npy file (or
    stdin, `-`), checked as `kg serve` checks a request (`request_checks`,
    named columns matched by name: `columns`), parsed as MLflow's scoring
    server parses a request body of that type and computed by the same
    pyfunc model, with its input checks. An input over `max_bytes` is
    refused without being read whole (`/dev/zero` never ends).

    Raises:
        ServiceError: for a file it cannot read or parse, bad rows, or an
            output that is not finite (the input is outside what the model
            can compute).
    """
    from mlflow.exceptions import MlflowException  # start-up: see the module docstring

    kind, content = _read(input_path, max_bytes)
    mlflow = model_folder.import_mlflow()
    with model_folder.local_model(model_uri, tracking_uri) as path:
        model = mlflow.pyfunc.load_model(path)
        rows, params = _parse(content, kind, input_path, model)
        try:
            output = model.predict(rows, params=params)
        except MlflowException as error:
            raise ServiceError(f"model {model_uri}: {model_folder.reason(error.message)}") from None
    names = (model.metadata.metadata or {}).get("class_names")
    values = np.asarray(output)
    if values.dtype.kind in "fc" and not np.isfinite(values).all():
        # A model registered before its pyfunc checked its own output.
        raise ServiceError(
            f"model {model_uri}: the model's output is not a finite number (NaN or "
            f"infinite) for these rows: the input is outside what the model can "
            f"compute; send features of the training data's order of magnitude."
        )
    return Predictions(values, tuple(names) if names else None)


def _read(path, max_bytes):
    """`(kind, content)`: "csv"/"json" with text, or "npy" with an array."""
    if path == "-":
        text = _decoded(_bounded(sys.stdin.buffer, max_bytes, "--input -"), "--input -")
        return ("json" if text.lstrip().startswith(("{", "[")) else "csv"), text
    file = pathlib.Path(path)
    kind = file.suffix.lower().lstrip(".")
    if kind not in ("csv", "json", "npy"):
        raise ServiceError(
            f"--input {path}: unknown file type {file.suffix or '(none)'!r}; "
            f"expected .csv, .json or .npy (or - for CSV or JSON on stdin)."
        )
    try:
        with open(file, "rb") as stream:
            data = _bounded(stream, max_bytes, f"--input {path}")
    except OSError as error:
        raise ServiceError(f"--input {path}: cannot be read: {error}") from None
    if kind != "npy":
        return kind, _decoded(data, f"--input {path}")
    if not data.startswith(NPY_MAGIC):
        found = "a .npz archive" if data.startswith(b"PK") else "not a .npy file"
        raise ServiceError(
            f"--input {path}: is {found}; expected one array saved by numpy.save "
            f"(float [n, features])."
        )
    try:
        return kind, np.load(io.BytesIO(data), allow_pickle=False)
    except (OSError, ValueError) as error:
        raise ServiceError(f"--input {path}: cannot be read: {error}") from None


def _bounded(stream, max_bytes, shown):
    """At most `max_bytes` of a stream, read in parts; more is refused
    (a size limit like the server's --max-request-mb)."""
    parts, size = [], 0
    while size <= max_bytes:
        part = stream.read(min(1 << 20, max_bytes + 1 - size))
        if not part:
            return b"".join(parts)
        parts.append(part)
        size += len(part)
    raise ServiceError(
        f"{shown}: over the input limit of {max_bytes} bytes; split it, or raise "
        f"--max-input-mb."
    )


def _decoded(data, shown):
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ServiceError(f"{shown}: is not UTF-8 text.") from None


def _parse(content, kind, shown, model):
    """`(rows, params)` for the model, or a ServiceError naming the problem."""
    # MLflow and pandas: start-up, see the module docstring.
    from mlflow.exceptions import MlflowException
    from mlflow.pyfunc import scoring_server  # MLflow: start-up, see the module docstring

    from kg_service.serving import model_input  # pandas: start-up, see the module docstring

    features = model_input.feature_count(model)
    names = model_input.feature_names(model)
    names = names if names and len(names) == features else None
    try:
        if kind == "npy":
            return _matrix(content, features), None
        if kind == "csv":
            if features is None:
                return model_input.csv_rows(content), None
            # As a matrix: a tensor signature does not take named columns.
            return _matrix(columns.csv_matrix(content, features, names), features), None
        request = request_checks.decode(content)
        request_checks.check(request, features, model_input.param_names(model))
        if features is not None:
            request = columns.positional(request, names)
        data, params = model_input.split_data_and_params(request)
        return scoring_server.infer_and_parse_data(data, model.metadata.get_input_schema()), params
    except ValueError as error:  # request_checks, columns, csv_rows
        raise ServiceError(f"--input {shown}: {error}") from None
    except MlflowException as error:
        raise ServiceError(f"--input {shown}: {model_folder.first_line(error.message)}") from None


def _matrix(array, features):
    """A numeric array as the model's float32 rows. Cast as the server casts
    JSON numbers (float64, numpy's default, and ints): a value beyond
    float32's range becomes inf, which the model then reports."""
    if array.dtype.kind not in "iuf":
        raise request_checks.BadRequest(
            f"holds {array.dtype} values; features are numbers (float32, or "
            f"float64/int cast to float32)."
        )
    request_checks.check_not_empty(len(array) if array.ndim else 1, features)
    with np.errstate(over="ignore"):
        return array.astype("float32")


@dataclasses.dataclass(frozen=True)
class Predictions:
    values: np.ndarray  # [n, classes]
    class_names: tuple = None


def format_predictions(predictions, output_format):
    """CSV (a header of class names) or the server's JSON answer."""
    values = predictions.values
    if output_format == "json":
        return json.dumps({"predictions": values.tolist()}) + "\n"
    columns_ = values.shape[1] if values.ndim == 2 else 1
    header = predictions.class_names or tuple(f"class_{k}" for k in range(columns_))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(values.reshape(len(values), -1).tolist())
    return out.getvalue()
