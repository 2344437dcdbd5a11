"""What a registered language model is: its pyfunc file, its signature,
the code it carries (its own layers), and the layers a saved member needs
to load (`Task.serving`, `Task.layers`, read by `kg_service.tracking`).

MLflow and Keras are imported when a model is logged or loaded:
registering the task happens at every start.
"""

import pathlib

from kg_service.tasks.base import Serving

HERE = pathlib.Path(__file__).parent
DEFAULT_NEW_TOKENS = 32  # pyfunc.py's DEFAULT_NEW_TOKENS: the same when no params come


def signature(mlflow, model):
    """A `prompt` string column in; `continuation` and the next-byte
    log-probabilities out; `max_new_tokens` a request parameter."""
    types = mlflow.types  # the caller's MLflow: a model is being logged
    ColSpec, DataType, Schema = types.ColSpec, types.DataType, types.Schema
    ParamSchema, ParamSpec, Array = types.ParamSchema, types.ParamSpec, types.schema.Array

    return mlflow.models.ModelSignature(
        inputs=Schema([ColSpec(DataType.string, "prompt")]),
        outputs=Schema(
            [
                ColSpec(DataType.string, "continuation"),
                ColSpec(Array(DataType.double), "next_token_logprobs"),
            ]
        ),
        params=ParamSchema(
            [ParamSpec("max_new_tokens", DataType.long, DEFAULT_NEW_TOKENS)]
        ),
    )


def layers():
    """Registers the language model's own layers with Keras (`Task.layers`)."""
    # Keras at its point of use: a member is being loaded (see the module docstring).
    from kg_service.tasks.language import lm_layers  # noqa: F401 -- registers its layers


SERVING = Serving(
    python_model=str(HERE / "pyfunc.py"),
    signature=signature,
    code_paths=(str(HERE / "lm_layers.py"),),
)
