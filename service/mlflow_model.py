"""The MLflow pyfunc model that kg-train registers ("models from code").

MLflow copies this file into each logged model and runs it at load time,
with the model's own copy of `keras_gelu` (logged as a code path) first on
`sys.path`. The plain keras flavor cannot do that: in a fresh serving
process nothing imports keras_gelu, so its registered layers and functions
are unknown and the `.keras` file does not load (safe_mode stays on here).

This file must stay importable with only keras, numpy and mlflow: no
`service` imports.
"""

import mlflow.pyfunc
import numpy as np


class KerasGeluModel(mlflow.pyfunc.PythonModel):
    """Serves a `.keras` model that uses keras_gelu objects.

    Input: a float32 matrix [n, features] (or a DataFrame / list of rows).
    Output: class probabilities, float32 [n, classes].
    """

    def load_context(self, context):
        import keras

        import keras_gelu  # noqa: F401 -- registers the custom objects

        self.model = keras.saving.load_model(
            context.artifacts["keras_model"], compile=False
        )

    def predict(self, context, model_input, params=None):
        if hasattr(model_input, "to_numpy"):
            model_input = model_input.to_numpy()
        x = np.asarray(model_input, dtype="float32")
        if x.ndim == 1:
            x = x[None, :]
        return np.asarray(self.model.predict(x, verbose=0), dtype="float32")


mlflow.models.set_model(KerasGeluModel())
