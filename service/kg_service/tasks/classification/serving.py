"""What a registered classifier is: its pyfunc file, its signature and the
code it carries (`Task.serving`, read by `kg_service.tracking`).

MLflow is imported by the signature, when a model is logged: registering
the task happens at every start.
"""

import pathlib

import numpy as np

from kg_service.tasks.base import Serving


def signature(mlflow, model):
    """float32 `[-1, features]` in, `[-1, classes]` probabilities out."""
    return mlflow.models.ModelSignature(
        inputs=mlflow.types.Schema(
            [mlflow.types.TensorSpec(np.dtype("float32"), (-1, model.input_shape[-1]))]
        ),
        outputs=mlflow.types.Schema(
            [mlflow.types.TensorSpec(np.dtype("float32"), (-1, model.output_shape[-1]))]
        ),
    )


SERVING = Serving(
    python_model=str(pathlib.Path(__file__).with_name("pyfunc.py")),
    signature=signature,
    code_paths=(),
)
