"""What a registered classifier is: its pyfunc file, its signature and the
code it carries (`Task.serving`, read by `kg_service.tracking`).

MLflow is imported by the signature, when a model is logged: registering
the task happens at every start.
"""

import pathlib

import numpy as np

from kg_service.tasks.base import Serving


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


SERVING = Serving(
    python_model=str(pathlib.Path(__file__).with_name("pyfunc.py")),
    signature=signature,
    code_paths=(),
)
