"""A request's input as the model takes it, for `kg serve` (the scoring
app) and `kg predict` alike: what the model's signature declares, CSV
bodies read into rows, and a JSON request split into data and params.
"""

import csv
import io
import json
import warnings

import pandas as pd
from mlflow.pyfunc import scoring_server


def feature_count(model):
    """The width of a numeric model's tensor input, or None (the language
    model's prompt column)."""
    schema = model.metadata.get_input_schema()
    try:
        return int(schema.inputs[0].shape[-1])
    except (AttributeError, IndexError, TypeError):
        return None


def param_names(model):
    """The `params` a model's signature declares."""
    schema = model.metadata.get_params_schema()
    return tuple(p.name for p in schema.params) if schema else ()


def split_data_and_params(request):
    """`(data, params)` of a decoded JSON request, as MLflow's scoring
    server splits it.

    MLflow keeps this in a private function
    (`mlflow.pyfunc.scoring_server._split_data_and_params`, MLflow 3.17);
    `kg predict` calls it so that a file is read exactly as `kg serve`
    reads the same body. The one place kg_service touches it: if a new
    MLflow renames it, this is what to mend.
    """
    return scoring_server._split_data_and_params(request)


def csv_rows(text):
    """The rows of a CSV text (a header row, then one row per example) as a
    DataFrame, read without the model's signature: MLflow's own CSV reader
    asks a tensor signature for pandas column types and fails.

    Raises:
        ValueError: naming what is wrong with the CSV.
    """
    try:
        # A row longer than the header: pandas would take its first field
        # as the row's index (or, index_col=False, drop the rest with a
        # warning); either way the wrong features. An error here.
        with warnings.catch_warnings():
            warnings.simplefilter("error", pd.errors.ParserWarning)
            frame = pd.read_csv(
                io.StringIO(text) if isinstance(text, str) else io.BytesIO(text),
                index_col=False,
            )
    except Exception as error:  # pandas raises many kinds for bad CSV
        raise ValueError(
            f"cannot read it as CSV ({type(error).__name__}: {error}); expected a "
            f"header row, then one row of numbers per example."
        ) from None
    if frame.empty:
        raise ValueError(
            "the CSV has no data rows: its first line is read as the header "
            "(column names), then one row of numbers per example."
        )
    return frame


def csv_width(text):
    """The number of columns in a CSV text's header row, read alone."""
    if isinstance(text, bytes):
        end = text.find(b"\n")
        text = (text if end < 0 else text[:end]).decode("utf-8", "replace")
    else:
        text = text.split("\n", 1)[0]
    return len(next(csv.reader([text]), []))


def csv_matrix(text, features):
    """A numeric model's CSV rows as a float64 matrix: the header's width is
    checked before any row is read (a 30,000-column body took pandas 24 s).

    Raises:
        ValueError: naming what is wrong with the CSV.
    """
    width = csv_width(text)
    if width != features:
        raise ValueError(
            f"the header row has {width} column{'s' * (width != 1)}; this model "
            f"takes {features} features: a header such as "
            f"{','.join('x%d' % k for k in range(min(features, 4)))}{',...' * (features > 4)}, "
            f"then one row of {features} numbers per example."
        )
    frame = csv_rows(text)
    for column in frame.columns:
        if frame[column].dtype.kind not in "iuf":
            raise ValueError(
                f"column {column!r} holds text, not numbers (e.g. "
                f"{str(frame[column].iloc[0])[:20]!r}); every feature must be a number."
            )
    return frame.to_numpy(dtype="float64")


def csv_as_json(body, features):
    """A CSV body as JSON MLflow parses, or a problem: `(json, problem)`."""
    try:
        if features is None:  # the language model's prompts: text columns
            split = csv_rows(body).to_json(orient="split", index=False).encode()
            return b'{"dataframe_split": ' + split + b"}", None
        # json.dumps writes inf as Infinity, which MLflow reads back: the
        # model reports "got inf" (pandas' to_json wrote null: "got nan").
        return json.dumps({"inputs": csv_matrix(body, features).tolist()}).encode(), None
    except ValueError as error:
        return None, f"CSV body: {error}"
