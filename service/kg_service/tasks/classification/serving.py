"""What a registered classifier is: its pyfunc file, its signature and the
code it carries (`Task.serving`, read by `kg_service.tracking`).

MLflow is imported by the signature, when a model is logged: registering
the task happens at every start.
"""

import pathlib

import numpy as np

from kg_service import named_columns
from kg_service.tasks.base import Serving

HERE = pathlib.Path(__file__).parent


def signature(mlflow, model):
    """No input schema; float32 `[-1, classes]` probabilities out.

    An input schema is enforced by MLflow's scoring server before the
    pyfunc sees a request. A float32 `[-1, features]` tensor spec turned a
    DataFrame (`dataframe_records`, `dataframe_split`, CSV) into a matrix
    by position: `{"y": -0.2, "x": 0.5}` was answered as x = -0.2 (issue
    30 §2). A column spec per feature name refuses `{"inputs": [[...]]}`
    (its rows become columns 0..n-1) and only warns about unknown names.
    Without one, MLflow passes on what it parsed, and the pyfunc matches
    named columns to the feature names it is given (`model_config`),
    refuses missing and unknown ones (400) and takes unnamed rows in its
    order. The inputs stay documented in the MLmodel `metadata`
    (`feature_names`, `inputs`) and the version's description.
    """
    return mlflow.models.ModelSignature(
        inputs=None,
        outputs=mlflow.types.Schema(
            [mlflow.types.TensorSpec(np.dtype("float32"), (-1, model.output_shape[-1]))]
        ),
    )


def saved_model():
    """The pyfunc model file that serves a bare SavedModel folder of a
    classifier (`kg serve exports/NAME/VERSION`: `SavedModelModel`)."""
    # Imported first, when a SavedModel is wrapped: it sets TensorFlow's C++
    # log level (no "failed call to cuInit" ERROR line on a machine without
    # a GPU) before TensorFlow loads, and it imports MLflow.
    from kg_service.tasks.classification import pyfunc  # noqa: F401 -- see above

    return str(HERE / "saved_model_code.py")


SERVING = Serving(
    python_model=str(HERE / "pyfunc.py"),
    signature=signature,
    # The pyfunc's column-name rule, one file shared with kg serve: the
    # served model imports it from its own copy.
    code_paths=(named_columns.__file__,),
    saved_model=saved_model,
)
