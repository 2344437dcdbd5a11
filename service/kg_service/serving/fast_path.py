"""A batch of numbers for one of kg's classifier pyfuncs: from the guard's
decoded request straight to the model, around MLflow's scoring app.

MLflow's app pays, for every request, what the guard has already done or
what kg's pyfunc does again (MLflow 3.17): Starlette's `BaseHTTPMiddleware` and a `wait_for` task for its
timeout, the body decoded a second time, `parse_tf_serving_input`, a
thread hop per request, `PyFuncModel.predict` (signature `inspect`, the
schema enforcement that `checked_input` repeats), and the answer written
through a `StringIO` with its `NumpyEncoder`. Here a request the guard
has decoded and checked is made a float32 matrix once (numpy), the
requests that arrive while the model runs are computed in one call in
one thread hop (the rows of kg's classifiers are independent: their
pyfunc already computes concurrent requests together, `Combined`), and
each answer is MLflow's `{"predictions": [...]}`, byte for byte. A
batch-1 request with 8 in flight: 109 µs of CPU here, 732 through
MLflow's app (`python benchmarks/bench_serving.py --fast-path`, in one
process; served, 4.9x the requests/s: docs/benchmarks.md "Serving,
round 8").

Only what this path answers exactly as MLflow's app would: a model whose
Python model is kg's `KerasGeluModel` or `SavedModelModel`
(tasks/classification/pyfunc.py: rows independent, input checked by the
model itself), with a float32 `[-1, features]` tensor signature or, as
kg-train logs its classifiers since issue 30 §2, no input schema (MLflow
then passes the parsed rows on as they are; the model casts them), and a
request `{"inputs": rows}` or `{"instances": rows}` of finite numbers,
`features` a row (named columns reach it as `{"inputs": rows}` in the
model's order: the guard rewrites them, `columns`). Anything else
(params, a wrong width, NaN or inf, CSV, the language model's prompts,
other models) goes to MLflow's app, whose answers and error messages are
unchanged.
"""

import asyncio
import json

import numpy as np
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import BAD_REQUEST
from mlflow.protos.databricks_pb2 import INVALID_PARAMETER_VALUE

from kg_service.serving.answers import NOT_FINITE

# kg's classifier pyfuncs (tasks/classification/pyfunc.py), by class name:
# MLflow loads each model's own copy of the file as a module of its own, so
# an isinstance check against kg_service's import would never match.
KG_PYFUNCS = ("KerasGeluModel", "SavedModelModel")
ROWS_KEYS = ("inputs", "instances")
# MLflow's words for an exception other than MlflowException in predict.
UNEXPECTED = (
    "Encountered an unexpected error while evaluating the model. Verify that the "
    "serialized input Dataframe is compatible with the model for inference."
)


class FastPath:
    """Answers the requests it takes: `matrix(request)` says which (and
    makes their float32 rows), `await predict(x)` returns the answer's
    JSON bytes or raises an `MlflowException` (status and message)."""

    def __init__(self, python_model, features):
        self.python_model = python_model
        self.features = features
        self.queue = []
        self.draining = None  # the task computing the queue, while it runs

    @classmethod
    def of(cls, model):
        """The fast path for a loaded pyfunc `model`, or None where it
        cannot answer as MLflow's app does (see the module docstring)."""
        metadata = model.metadata
        if metadata.get_params_schema() is not None:
            return None
        features = _tensor_width(metadata.get_input_schema())
        if features is False:
            return None
        try:
            python_model = model.unwrap_python_model()
        except MlflowException:  # not a PythonModel (another flavor)
            return None
        if type(python_model).__name__ not in KG_PYFUNCS:
            return None
        if features is None:  # no input schema: the model's own width
            features = getattr(python_model, "features", None)
        if not isinstance(features, int) or getattr(python_model, "features", None) != features:
            return None
        return cls(python_model, features)

    def matrix(self, request):
        """A decoded request's rows as a float32 `[n, features]` matrix of
        finite numbers, or None: not this path's (MLflow's app answers).

        `request` has passed `request_checks.check` (every value a number)."""
        if len(request) != 1:
            return None
        (key, rows), = request.items()
        if key not in ROWS_KEYS or not isinstance(rows, list) or not rows:
            return None
        if not all(type(row) is list for row in rows):
            return None
        try:
            # As MLflow casts to the signature's float32: beyond its range
            # is inf, which goes to MLflow's app (and the model's words).
            with np.errstate(over="ignore", invalid="ignore"):
                x = np.asarray(rows, dtype="float32")
        except (ValueError, TypeError, OverflowError):  # ragged rows, huge ints
            return None
        if x.ndim != 2 or x.shape[1] != self.features or not np.isfinite(x).all():
            return None
        return x

    async def predict(self, x):
        """The JSON answer for `x`: `{"predictions": [...]}` as bytes.

        Requests that arrive while a call runs wait and are computed
        together in the next; a lone request runs at once.

        Raises:
            MlflowException: what the model raised (its status and
                message), or MLflow's BAD_REQUEST for any other exception.
        """
        future = asyncio.get_running_loop().create_future()
        self.queue.append((x, future))
        if self.draining is None:
            self.draining = asyncio.ensure_future(self._drain())
        return await future

    async def _drain(self):
        try:
            while self.queue:
                batch, self.queue = self.queue, []
                try:
                    answers = await asyncio.to_thread(self._compute, [x for x, _ in batch])
                except Exception as error:  # every request of the call gets it
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(_as_mlflow_error(error))
                    continue
                for (_, future), answer in zip(batch, answers):
                    if future.done():  # a request that timed out is gone
                        continue
                    if isinstance(answer, Exception):
                        future.set_exception(answer)
                    else:
                        future.set_result(answer)
        finally:
            self.draining = None

    def _compute(self, xs):
        """In a worker thread: one model call for all of `xs`, and each
        one's answer as MLflow writes it."""
        x = xs[0] if len(xs) == 1 else np.concatenate(xs)
        try:
            # kg's pyfuncs take no context (their predict ignores it).
            output = np.asarray(self.python_model.predict(None, x))
        except MlflowException:
            if len(xs) == 1:
                raise
            # One request's refusal (an output that is not finite) is its
            # own: each computed alone, each gets its own answer.
            return [self._alone(each) for each in xs]
        if len(output) != len(x):
            raise ValueError(f"the model returned {len(output)} rows for {len(x)}")
        answers, start = [], 0
        for each in xs:
            part = output[start : start + len(each)]
            start += len(each)
            if not np.isfinite(part).all():
                # A model registered before its pyfunc checked its output:
                # never NaN in a 200 (issue 30 §3); this request's alone.
                answers.append(MlflowException(NOT_FINITE, error_code=INVALID_PARAMETER_VALUE))
                continue
            answers.append(json.dumps({"predictions": part.tolist()}).encode())
        return answers

    def _alone(self, x):
        try:
            return self._compute([x])[0]
        except Exception as error:  # this request's answer
            return _as_mlflow_error(error)


def _tensor_width(schema):
    """The width of a float32 `[-1, width]` tensor input schema; None for
    no input schema; False for any other."""
    if schema is None:
        return None
    if not schema.is_tensor_spec() or len(schema.inputs) != 1:
        return False
    spec = schema.inputs[0]
    if spec.type != np.dtype("float32") or len(spec.shape) != 2 or spec.shape[0] != -1:
        return False
    return int(spec.shape[1])


def _as_mlflow_error(error):
    if isinstance(error, MlflowException):
        return error
    return MlflowException(UNEXPECTED, error_code=BAD_REQUEST)
