"""The MLflow pyfunc model of a kg-train language model ("models from code").

A client sends prompt strings; the model answers each with a greedy
continuation of `max_new_tokens` bytes (a request parameter) and the
log-probabilities of the byte that follows the prompt:

    POST /invocations
    {"dataframe_split": {"columns": ["prompt"], "data": [["def main("]]},
     "params": {"max_new_tokens": 16}}
    -> {"predictions": [{"continuation": "...", "next_token_logprobs": [...256]}]}

MLflow copies this file into the logged model; the model's copies of
`keras_gelu` and of `lm_layers.py` (code paths) come first on `sys.path`,
so a fresh serving process loads the `.keras` file without kg_service.
This file must stay importable with only keras, numpy and mlflow.
"""

import os

os.environ.setdefault(
    "TF_CPP_MIN_LOG_LEVEL",
    "2" if os.path.exists("/proc/driver/nvidia/version") else "3",
)

import gc  # noqa: E402

import mlflow.pyfunc  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402 -- mlflow.pyfunc imports it already
from mlflow.exceptions import MlflowException  # noqa: E402
from mlflow.protos.databricks_pb2 import INVALID_PARAMETER_VALUE  # noqa: E402

DEFAULT_NEW_TOKENS = 32
MAX_NEW_TOKENS = 1024  # one forward pass per byte: bound a request's work
MAX_PROMPTS = 256


class KerasGeluLanguageModel(mlflow.pyfunc.PythonModel):
    """Serves a byte-level causal language model saved as `.keras`.

    Bad input (no prompt, not a string, an empty prompt, a bad
    `max_new_tokens`) raises an `MlflowException` with
    `INVALID_PARAMETER_VALUE`: HTTP 400 with the message when served.
    """

    def load_context(self, context):
        import keras  # Keras: when MLflow loads the model

        import keras_gelu.api  # noqa: F401 -- registers the custom objects
        import lm_layers  # noqa: F401 -- the model's own layers (code path)

        self.model = keras.saving.load_model(
            context.artifacts["keras_model"], compile=False
        )
        self.context = int(self.model.get_layer("position_embedding").sequence_length)
        self.forward = forward_function(self.model, self.context)
        self.forward(np.zeros((1, self.context), dtype="int32"))  # compile now
        gc.freeze()  # see mlflow_model.py: no full-collection pauses per request

    # `pd.DataFrame`, what the scoring server passes (the logged signature
    # has one `prompt` column): a hint MLflow infers no schema from (its
    # type_hints_no_signature_inference), so the signature given at log
    # time stays the model's, nothing is converted (`checked_prompts` still
    # takes a list or a string in process), and neither "Add type hints"
    # nor, as `Any` did, "Type hint ... is not supported" is printed.
    def predict(self, context, model_input: pd.DataFrame, params=None) -> pd.DataFrame:
        prompts = checked_prompts(model_input)
        new_tokens = checked_new_tokens((params or {}).get("max_new_tokens"))
        continuations, logprobs = generate(self.forward, prompts, self.context, new_tokens)
        return pd.DataFrame(
            {
                "continuation": [bytes(c).decode("utf-8", errors="replace") for c in continuations],
                "next_token_logprobs": [row.tolist() for row in logprobs],
            }
        )


def checked_prompts(model_input):
    """The prompts of a request as lists of UTF-8 byte ids.

    Takes a DataFrame with a `prompt` column (or one row holding a list
    of prompts, as MLflow passes `{"inputs": {"prompt": [...]}}`), a list
    of strings, or one string.

    Raises:
        MlflowException: (HTTP 400) for anything else, or an empty prompt.
    """
    if hasattr(model_input, "columns"):
        if "prompt" not in model_input.columns:
            raise _bad_input(
                f"expected a column named 'prompt'; got columns {list(model_input.columns)}."
            )
        model_input = model_input["prompt"].tolist()
        # {"inputs": {"prompt": ["a", "b"]}} reaches the model as one row
        # holding the list: the client meant a column.
        if len(model_input) == 1 and isinstance(model_input[0], (list, tuple, np.ndarray)):
            model_input = list(model_input[0])
    if isinstance(model_input, str):
        model_input = [model_input]
    if not isinstance(model_input, (list, tuple)) or not model_input:
        raise _bad_input("expected one or more prompt strings.")
    if len(model_input) > MAX_PROMPTS:
        raise _bad_input(f"at most {MAX_PROMPTS} prompts per request; got {len(model_input)}.")
    prompts = []
    for i, prompt in enumerate(model_input):
        if not isinstance(prompt, str):
            raise _bad_input(f"prompt {i} is a {type(prompt).__name__}; expected a string.")
        if not prompt:
            raise _bad_input(
                f"prompt {i} is empty; the model continues text, so send at least one character."
            )
        prompts.append(list(prompt.encode("utf-8")))
    return prompts


def checked_new_tokens(value):
    if value is None:
        return DEFAULT_NEW_TOKENS
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise _bad_input(f"max_new_tokens must be an integer; got {value!r}.")
    if not 0 <= value <= MAX_NEW_TOKENS:
        raise _bad_input(f"max_new_tokens must be in 0..{MAX_NEW_TOKENS}; got {value}.")
    return int(value)


def _bad_input(message):
    return MlflowException(f"bad model input: {message}", error_code=INVALID_PARAMETER_VALUE)


def forward_function(model, context):
    """`int32 [n, context] -> float32 [n, context, vocabulary]` logits.

    On TensorFlow one concrete function for every batch size; elsewhere
    the backend's `predict_on_batch` (jitted on JAX).
    """
    import keras  # Keras: when MLflow loads the model

    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf  # TensorFlow: on that backend only

        spec = tf.TensorSpec([None, context], tf.int32)
        graph = tf.function(
            lambda x: model(x, training=False), input_signature=[spec]
        ).get_concrete_function()
        return lambda x: graph(tf.constant(x)).numpy()
    return lambda x: np.asarray(model.predict_on_batch(x), dtype="float32")


def generate(forward, prompts, context, new_tokens):
    """Greedy continuations and the first next-byte log-probabilities.

    Every step runs all prompts as one `[n, context]` batch: each row
    holds its last `context` bytes, right-padded with zeros (a causal
    model's logits at a position do not see what follows it).

    Returns:
        `(continuations, logprobs)`: lists of new byte ids, and a float64
        `[n, vocabulary]` array, the log-probabilities after each prompt.
    """
    rows = [list(p) for p in prompts]
    continuations = [[] for _ in rows]
    first = None
    for step in range(max(new_tokens, 1)):
        batch = np.zeros((len(rows), context), dtype="int32")
        last = []
        for i, row in enumerate(rows):
            window = row[-context:]
            batch[i, : len(window)] = window
            last.append(len(window) - 1)
        logits = np.asarray(forward(batch), dtype=np.float64)[np.arange(len(rows)), last]
        if not np.isfinite(logits).all():  # never NaN log-probabilities with a 200 (issue 30 §3)
            bad = int(np.nonzero(~np.isfinite(logits).all(axis=-1))[0][0])
            raise _bad_input(
                f"the model's output is not a finite number (NaN or infinite) for "
                f"prompt {bad}: the input is outside what the model can compute."
            )
        logits -= logits.max(axis=-1, keepdims=True)
        logprobs = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
        if first is None:
            first = logprobs
        if step < new_tokens:
            for i, token in enumerate(logprobs.argmax(axis=-1)):
                rows[i].append(int(token))
                continuations[i].append(int(token))
    return continuations, first


mlflow.models.set_model(KerasGeluLanguageModel())
