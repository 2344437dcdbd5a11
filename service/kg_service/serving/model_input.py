"""A request's input as the model takes it, for `kg serve` (the scoring
app) and `kg predict` alike: what the model's signature declares, CSV
bodies read into rows, and a JSON request split into data and params.
"""

import io
import json
import warnings

import pandas as pd
from mlflow.pyfunc import scoring_server

from kg_service.serving import columns


def feature_count(model):
    """The width of a numeric model's input, or None (the language model's
    prompt column).

    A tensor input schema's width; where there is no input schema (kg's
    classifiers since issue 30 §2: their pyfunc matches named columns
    itself), one per feature name the metadata declares."""
    schema = model.metadata.get_input_schema()
    if schema is None:
        names = feature_names(model)
        return len(names) if names else None
    try:
        return int(schema.inputs[0].shape[-1])
    except (AttributeError, IndexError, TypeError):
        return None


def feature_names(model):
    """The feature names a model's MLmodel metadata declares (kg-train
    writes them), or None."""
    names = (model.metadata.metadata or {}).get("feature_names")
    if isinstance(names, (list, tuple)) and names and all(isinstance(n, str) for n in names):
        return tuple(names)
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


def csv_as_json(body, features, names=None):
    """A CSV body as JSON MLflow parses, or a problem: `(json, problem)`.

    A numeric model's rows come in its feature order (`columns`)."""
    try:
        if features is None:  # the language model's prompts: text columns
            split = csv_rows(body).to_json(orient="split", index=False).encode()
            return b'{"dataframe_split": ' + split + b"}", None
        # json.dumps writes inf as Infinity, which MLflow reads back: the
        # model reports "got inf" (pandas' to_json wrote null: "got nan").
        return json.dumps({"inputs": columns.csv_matrix(body, features, names).tolist()}).encode(), None
    except ValueError as error:  # BadRequest, or csv_rows' words
        return None, f"CSV body: {error}"
