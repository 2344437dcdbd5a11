"""The MLflow pyfunc model that kg-train registers ("models from code").

MLflow copies this file into each logged model and runs it at load time,
with the model's own copy of `keras_gelu` (logged as a code path) first on
`sys.path`. The plain keras flavor cannot do that: in a fresh serving
process nothing imports keras_gelu, so its registered layers and functions
are unknown and the `.keras` file does not load (safe_mode stays on here).

This file must stay importable with only keras, numpy, mlflow and
`named_columns` (the column-name rule kg serve shares, carried as a code
path too): no other `service` imports.
"""

import os


def _nvidia_driver_present():
    return os.path.exists("/proc/driver/nvidia/version")


# TensorFlow's C++ log, set before keras imports TensorFlow: INFO and
# WARNING lines are start-up chatter in a server's log. Where no NVIDIA
# driver is installed, ERROR too: there its one ERROR line is "failed call
# to cuInit", which says only that the machine has no GPU. A value the
# user set wins.
os.environ.setdefault(
    "TF_CPP_MIN_LOG_LEVEL", "2" if _nvidia_driver_present() else "3"
)

import gc  # noqa: E402
import threading  # noqa: E402

import mlflow.pyfunc  # noqa: E402
import numpy as np  # noqa: E402
from mlflow.exceptions import MlflowException  # noqa: E402
from mlflow.protos.databricks_pb2 import INVALID_PARAMETER_VALUE  # noqa: E402

try:  # the served model's copy of it (an MLflow code path, see serving.py)
    import named_columns  # noqa: E402
except ImportError:  # imported from the installed service (kg serve, the tests)
    from kg_service import named_columns  # noqa: E402

# The largest batch one compiled call takes; bigger inputs run in chunks.
# Batches are padded to a power of two rows up to it, so at most 13 shapes
# are ever compiled, whatever sizes the requests come in.
MAX_BATCH = 4096


class KerasGeluModel(mlflow.pyfunc.PythonModel):
    """Serves a `.keras` model that uses keras_gelu objects.

    Input: a float32 matrix [n, features] (or a list of rows), or named
    columns (a DataFrame, or {name: values}) matched to the model's
    feature names by name (`in_model_order`).
    Output: class probabilities, float32 [n, classes].

    Bad input (non-finite values, the wrong number of features, not
    numbers, a missing or unknown column name) raises an `MlflowException` with `INVALID_PARAMETER_VALUE`,
    which MLflow's scoring server answers with HTTP 400 and the message.
    """

    def load_context(self, context):
        import keras  # Keras: when MLflow loads the model

        import keras_gelu.api  # noqa: F401 -- registers the custom objects

        self.model = keras.saving.load_model(
            context.artifacts["keras_model"], compile=False
        )
        self.features = int(self.model.input_shape[-1])
        self.names = feature_names(context.model_config, self.features)
        self.forward = Combined(forward_function(self.model))
        # Compile now, so that the first request does not pay for it.
        self.forward(np.zeros((1, self.features), dtype="float32"))
        # Keras and TensorFlow leave ~650,000 objects that the cyclic
        # garbage collector would walk on each full collection: a 0.4 s
        # pause of every request in flight (measured, 2 cores). They live
        # as long as the server does; frozen, they are never walked.
        gc.freeze()

    # `np.ndarray` is a hint MLflow infers no schema from and validates no
    # input against (it is in its type_hints_no_signature_inference), so the
    # signature given at log time stays the model's signature, what MLflow
    # parsed reaches `in_model_order` as it is (a DataFrame too), and
    # MLflow's "Add type hints" warning is not printed.
    def predict(self, context, model_input: np.ndarray, params=None) -> np.ndarray:
        rows = in_model_order(model_input, self.names)
        return checked_output(self.forward(checked_input(rows, self.features)))


class SavedModelModel(mlflow.pyfunc.PythonModel):
    """Serves a SavedModel folder (`kg serve exports/NAME/VERSION`) through
    its `serving_default` signature, as TF Serving would; the same input
    checks, padding and combining as `KerasGeluModel`. Needs TensorFlow,
    not keras_gelu: the exported graph holds plain TF ops.
    """

    def load_context(self, context):
        import tensorflow as tf  # TensorFlow: when MLflow loads the model

        # Kept: the signature's variables live as long as the loaded object.
        self.loaded = tf.saved_model.load(context.artifacts["saved_model"])
        function = self.loaded.signatures["serving_default"]
        (spec,) = function.structured_input_signature[1].values()
        (output,) = function.structured_outputs
        self.features = int(spec.shape[-1])
        call = direct_call(function, np.zeros((1, self.features), dtype="float32"))
        self.forward = Combined(padded(lambda x: call(tf.constant(x))[output].numpy()))
        self.forward(np.zeros((1, self.features), dtype="float32"))

    def predict(self, context, model_input: np.ndarray, params=None) -> np.ndarray:
        return checked_output(self.forward(checked_input(model_input, self.features)))


def checked_input(model_input, features):
    """`model_input` as a float32 [n, features] matrix of finite numbers.

    Raises:
        MlflowException: (INVALID_PARAMETER_VALUE, HTTP 400 when served)
            naming the problem, for anything else.
    """
    if hasattr(model_input, "to_numpy"):
        model_input = model_input.to_numpy()
    try:
        given = np.asarray(model_input)
    except ValueError:  # rows of different lengths
        raise _bad_input(
            f"expected rows of {features} features each (a matrix of shape [n, "
            f"{features}]); got rows of different lengths."
        ) from None
    what = _not_numbers(given)
    if what is not None:
        # numpy would read "0.5" and True as floats (MLflow's server hands
        # over JSON strings and booleans as they came).
        raise _bad_input(
            f"not numbers ({what}): every feature must be a number; strings and "
            f"booleans are not features."
        )
    # Beyond float32's range is inf, which the check below names.
    with np.errstate(over="ignore"):
        x = given.astype("float32", copy=False)
    if x.ndim == 1:
        x = x[None, :]
    if x.ndim != 2 or x.shape[1] != features:
        raise _bad_input(
            f"expected rows of {features} features each (a matrix of shape "
            f"[n, {features}]); got shape {list(x.shape)}."
        )
    if not len(x):
        raise _bad_input(f"the batch is empty; send at least one row of {features} features.")
    finite = np.isfinite(x)
    if not finite.all():
        rows, columns = np.nonzero(~finite)
        raise _bad_input(
            f"every feature must be a finite number; got "
            f"{x[rows[0], columns[0]]} in row {rows[0]}, column {columns[0]} "
            f"({len(rows)} non-finite value{'s' * (len(rows) != 1)} in all; "
            f"values beyond float32's range, about 3.4e38, count as inf)."
        )
    return x


def feature_names(model_config, features):
    """The feature names kg-train logs in the model's `model_config`, one
    per feature, or None (a model logged before issue 30 §2, or none)."""
    names = (model_config or {}).get("feature_names")
    if (
        isinstance(names, (list, tuple))
        and len(names) == features
        and all(isinstance(n, str) for n in names)
        and len(set(names)) == len(names)
    ):
        return tuple(names)
    return None


def in_model_order(model_input, names):
    """`model_input`'s rows, their columns in the model's order.

    The classifier's signature declares no input schema (issue 30 §2: a
    tensor schema made MLflow's scoring server turn a DataFrame into a
    matrix by position, so `{"y": -0.2, "x": 0.5}` was read as x = -0.2),
    so MLflow hands over what it parsed. Named columns (`dataframe_records`,
    `dataframe_split` with `columns`, a CSV header: a DataFrame; `inputs`
    or `instances` of {name: values}: a dict) are matched to `names`.
    Rows without names (`inputs`, `instances`, `dataframe_split` without
    `columns`: a matrix, or a DataFrame with columns 0..n-1) are in the
    model's order already. pandas reads a CSV's first row as its header:
    a header of numbers only is that first data row (a CSV without one).

    Raises:
        MlflowException: (INVALID_PARAMETER_VALUE, HTTP 400 when served)
            for names that are not exactly the model's, naming them.
    """
    if isinstance(model_input, dict):
        order(list(model_input), names)
        columns = [np.asarray(model_input[n]) for n in names]
        if any(c.ndim > 1 for c in columns) or len({c.size for c in columns}) > 1:
            raise _bad_input("every named column must hold one value per row.")
        return np.column_stack([np.ravel(c) for c in columns])
    if not hasattr(model_input, "columns"):
        return model_input
    frame, given = model_input, list(model_input.columns)
    if not np.array_equal(np.asarray(frame.index), np.arange(len(frame))):
        raise _bad_input(
            "the rows carry labels the model cannot take (an index other than "
            "0, 1, ...): a CSV row with more values than its header has names, "
            'or a dataframe_split "index"; send one value per feature name.'
        )
    if given == list(range(len(given))):
        return frame.to_numpy()
    try:
        first = named_columns.first_row(given, names)
    except named_columns.Mismatch as error:
        raise _bad_input(str(error)) from None
    if first is not None:
        return [first] + frame.to_numpy().tolist()
    return frame.iloc[:, order(given, names)].to_numpy()


def order(given, names):
    """For each of the model's `names`, its place in `given`
    (`named_columns.order`: the rule kg serve applies too).

    Raises:
        MlflowException: `given` holds a name twice, lacks one of `names`
            or holds one that is not among them; or there are no `names`.
    """
    if names is None:
        raise _bad_input(
            f"named columns ({named_columns.listed(given)}) cannot be matched to this model's "
            f'features: it declares no feature names; send rows in its order, '
            f'e.g. {{"inputs": [[...], ...]}}.'
        )
    try:
        return named_columns.order(given, names, unknown="unknown column")
    except named_columns.Mismatch as error:
        raise _bad_input(str(error)) from None


def _not_numbers(array):
    """What `array` holds that is not a number ("strings", "booleans"...),
    or None for an array of numbers only."""
    kind = array.dtype.kind
    if kind in "iuf":
        return None
    if kind != "O":
        return {"b": "booleans", "U": "strings", "S": "strings"}.get(kind, f"values of type {array.dtype}")
    for value in array.ravel():
        if isinstance(value, (bool, np.bool_)):
            return "booleans"
        if isinstance(value, (str, bytes)):
            return "strings"
        if not isinstance(value, (int, float, np.number)):
            return "nulls" if value is None else f"values of type {type(value).__name__}"
    return None


def checked_output(output):
    """The model's output, if every value is finite.

    A finite but huge input (3e38) overflows inside the network: the
    answer was `{"predictions": [[NaN, NaN]]}` with HTTP 200, not even
    JSON (issue 30 §3). Checked per request, after `Combined` splits a
    joint call, so that one request's overflow fails no other.

    Raises:
        MlflowException: (INVALID_PARAMETER_VALUE, HTTP 400 when served)
            saying the input is outside what the model can compute.
    """
    finite = np.isfinite(output)
    if not finite.all():
        rows = np.unique(np.nonzero(~finite)[0])
        raise _bad_input(
            f"the model's output is not a finite number (NaN or infinite) for "
            f"row {rows[0]}{f' and {len(rows) - 1} more' if len(rows) > 1 else ''}: "
            f"the input is outside what the model can compute (features far "
            f"beyond the training data's range); send features of the training "
            f"data's order of magnitude."
        )
    return output


def _bad_input(message):
    return MlflowException(f"bad model input: {message}", error_code=INVALID_PARAMETER_VALUE)


def forward_function(model):
    """`x -> probabilities`, float32 numpy in and out, compiled once per shape.

    `model.predict` builds a data pipeline and a callback list on every
    call: 87 ms for a 2x64 MLP. Here, on TensorFlow: one XLA-compiled
    concrete function for a [None, features] input (0.19 ms of CPU per
    batch-1 call, against 0.37 ms for the same graph without XLA: a
    rational-function GELU is 47 small ops); on JAX, the jitted
    `predict_on_batch`. Both see only padded power-of-two batches (see
    `MAX_BATCH`), so no request size triggers a new compilation beyond the
    first of its size class. On PyTorch, the eager `predict_on_batch`,
    which compiles nothing.
    """
    import keras  # Keras: when MLflow loads the model

    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf  # TensorFlow: on that backend only

        spec = tf.TensorSpec([None, model.input_shape[-1]], tf.float32)
        graph = tf.function(
            lambda x: model(x, training=False), input_signature=[spec], jit_compile=True
        ).get_concrete_function()
        call = direct_call(graph, np.zeros((1, model.input_shape[-1]), dtype="float32"))
        return padded(lambda x: call(tf.constant(x)).numpy())
    if backend == "jax":
        return padded(model.predict_on_batch)
    return lambda x: np.asarray(model.predict_on_batch(x), dtype="float32")


def direct_call(function, probe):
    """`function(x)` for one float32 tensor `x`, without the cost of
    `ConcreteFunction.__call__`.

    The public call binds its arguments to the function's signature with
    `inspect` on every call: 39 of a batch-1 call's 83 us of CPU
    (TensorFlow 2.21, the moons model; `bench_serving.py --stages`, in
    docs/benchmarks.md). Under it, the flat call (`_call_flat`) still
    looks for gradient tapes, enters three context managers and packs the
    outputs: another ~35 us of a 67 us call, where the op that runs the
    function (`TFE_Py_Execute`, what `tf.raw_ops` and every eager op end
    in) takes the rest. `checked_input` has already made `x` what the
    signature says, and a served model records no gradients, so the
    fastest of these that exists and gives, on `probe`, exactly what the
    public call gives is used: the op itself, else the flat call, else
    the public call. Both are private API, hence the probe.
    """
    import tensorflow as tf  # TensorFlow: when MLflow loads the model

    try:
        expected = tf.nest.map_structure(np.asarray, function(tf.constant(probe)))
    except Exception:  # the public call is all there is
        return function
    for make in (_executed_call, _flat_call):
        try:
            call = make(function)
            if call is None:
                continue
            got = tf.nest.map_structure(np.asarray, call(tf.constant(probe)))
            tf.nest.assert_same_structure(expected, got)
            if all(
                np.array_equal(a, b)
                for a, b in zip(tf.nest.flatten(expected), tf.nest.flatten(got))
            ):
                return call
        except Exception:  # any change in the private API: the next one
            continue
    return function


def _flat_call(function):
    call_flat = getattr(function, "_call_flat", None)
    if call_flat is None:
        return None
    captured = list(function.captured_inputs)

    def call(x):
        return call_flat([x], captured)

    return call


def _executed_call(function):
    """The function's op run as `tf.raw_ops` runs an op (TensorFlow's
    `execute.quick_execute`), with the captured variables as the trailing
    inputs, as `_call_flat` passes them; None where that is not there."""
    import itertools  # with the private TensorFlow API below, on its probe's path only

    from tensorflow.python import pywrap_tfe  # TensorFlow's private API: on the probe's path only
    from tensorflow.python.eager import context  # TensorFlow's private API: on the probe's path only

    inference = getattr(function, "_inference_function", None)
    if inference is None or not hasattr(pywrap_tfe, "TFE_Py_Execute"):
        return None
    ctx = context.context()
    ctx.ensure_initialized()
    name = inference.name.decode() if isinstance(inference.name, bytes) else inference.name
    outputs = len(inference.function_type.flat_outputs)
    attrs = tuple(itertools.chain(*ctx.function_call_options.as_attrs().items()))
    captured = list(function.captured_inputs)
    execute = pywrap_tfe.TFE_Py_Execute
    # The closures hold `inference`: when it is garbage collected, its
    # function is removed from the context, and the op is not found.
    pack = inference.function_type.pack_output
    if outputs == 1 and not isinstance(function.structured_outputs, (dict, list, tuple)):

        def call(x, inference=inference):
            return execute(ctx._handle, ctx.device_name, name, [x, *captured], attrs, 1)[0]

    else:

        def call(x):
            return pack(execute(ctx._handle, ctx.device_name, name, [x, *captured], attrs, outputs))

    return call


def padded(run):
    """`run` applied to `x` in chunks padded to power-of-two row counts."""

    def forward(x):
        outputs = []
        for start in range(0, max(len(x), 1), MAX_BATCH):
            chunk = x[start : start + MAX_BATCH]
            rows = len(chunk)
            size = 1 << max(rows - 1, 0).bit_length()
            if size != rows:
                chunk = np.concatenate([chunk, np.zeros((size - rows,) + x.shape[1:], x.dtype)])
            outputs.append(np.asarray(run(chunk), dtype="float32")[:rows])
        return np.concatenate(outputs) if len(outputs) > 1 else outputs[0]

    return forward


class Combined:
    """Calls `forward` once for all the requests that wait on it together.

    MLflow's scoring server runs each request's `predict` in a thread of
    its own. Each framework call costs far more than the rows it computes
    (batch 1: 0.3 ms of CPU hot, about 1 ms when 8 threads contend for 2
    cores), so while one call runs, the requests that arrive queue up, and
    the next caller computes all of them in one call (leader/followers).
    A lone request runs at once: nothing waits for a batch to fill.
    """

    def __init__(self, forward):
        self.forward = forward
        self.condition = threading.Condition()
        self.queue = []
        self.busy = False

    def __call__(self, x):
        slot = _Slot(x)
        with self.condition:
            self.queue.append(slot)
            while self.busy and not slot.done:
                self.condition.wait()
            if not slot.done:
                self.busy = True
                batch, self.queue = self.queue, []
        if not slot.done:
            self._run(batch)
        if slot.error is not None:
            raise slot.error
        return slot.output

    def _run(self, batch):
        try:
            if len(batch) == 1:
                outputs = [self.forward(batch[0].x)]
            else:
                ends = np.cumsum([len(s.x) for s in batch])[:-1]
                joined = self.forward(np.concatenate([s.x for s in batch]))
                outputs = np.split(joined, ends)
            for s, output in zip(batch, outputs):
                s.output = output
        except Exception as error:  # every waiting request gets it
            for s in batch:
                s.error = error
        finally:
            with self.condition:
                for s in batch:
                    s.done = True
                self.busy = False
                self.condition.notify_all()


class _Slot:
    __slots__ = ("x", "output", "error", "done")

    def __init__(self, x):
        self.x, self.output, self.error, self.done = x, None, None, False


mlflow.models.set_model(KerasGeluModel())
