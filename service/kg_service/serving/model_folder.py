"""A MODEL as a local MLflow pyfunc model folder, for `kg serve` and `kg predict`.

A MODEL is a `models:/` or `runs:/` URI, a local MLflow model folder, or
a SavedModel folder (TF Serving's `<export dir>/<name>/<version>`);
`local_model` makes each a local MLflow pyfunc model folder (downloaded
from the store, checked in place, or a SavedModel wrapped in a pyfunc),
which MLflow's scoring server or `mlflow.pyfunc.load_model` loads.

MLflow and TensorFlow are imported where they are used: the CLI imports
this module for `kg serve` and `kg predict`, and `kg --help` must not
wait seconds for them.
"""

import contextlib
import difflib
import os
import pathlib
import re
import tempfile
import urllib.parse
import urllib.request
import warnings

import numpy as np

from kg_service.config import derived as config_lib
from kg_service.errors import ServiceError
from kg_service.errors import sentence
from kg_service.serving import saved_model_proto
from kg_service.tasks import base as tasks
from kg_service.tracking import client as mlflow_client
from kg_service.tracking import destinations
from kg_service.tracking import versions


MODEL_URI_HELP = (
    "Expected models:/NAME@ALIAS, models:/NAME/VERSION, runs:/RUN_ID/model, an "
    "MLflow model folder (with an MLmodel file) or a SavedModel folder (with "
    "saved_model.pb), as a path or a file:// URI; `kg models` lists the "
    "registered ones."
)


def import_mlflow():
    mlflow_client.quiet_downloads()
    return mlflow_client.import_mlflow()


# What MODEL may name: a registered model or a run's, or a local folder
# (`file://`). Not http(s):// or other remote stores: a URL is not a model
# (issue 30 §15; MLflow would fetch and copy whatever it points at).
STORE_SCHEMES = ("models", "runs")


@contextlib.contextmanager
def local_model(model_uri, tracking_uri=None):
    """Yields the path of a local MLflow pyfunc model folder for MODEL.

    A SavedModel folder is wrapped (for this block) in a pyfunc model that
    calls its `serving_default` signature. A local folder (or `file://`
    URI) is checked before anything is copied: a model's files, no
    dangling link.

    Raises:
        ServiceError: if MODEL names nothing loadable.
    """
    scheme, local_path = _source(model_uri)
    if local_path is not None:
        yield from _local_folder(model_uri, local_path)
        return
    uri = config_lib.tracking_uri_for(tracking_uri)
    destinations.check_store(uri, must_exist=True)  # MLflow would create an empty one
    mlflow = import_mlflow()
    # models:/ URIs resolve through MLflow's process-wide registry URI
    # (its ModelsArtifactRepository drops the registry_uri argument), so
    # --tracking-uri must set it, not only pass it.
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    with tempfile.TemporaryDirectory(prefix="kg-model-") as tmp:
        try:
            local = mlflow.artifacts.download_artifacts(
                artifact_uri=model_uri, dst_path=tmp, tracking_uri=uri, registry_uri=uri
            )
        except mlflow.exceptions.MlflowException as error:
            raise ServiceError(
                f"model {model_uri}: not found in the tracking store {uri}: "
                f"{sentence(first_line(error.message))}"
                f"{_closest_model(mlflow, uri, model_uri)} {MODEL_URI_HELP}"
            ) from None
        if not (pathlib.Path(local) / "MLmodel").is_file():
            raise ServiceError(
                f"model {model_uri}: holds no MLmodel file; point at the model's "
                f"folder (e.g. runs:/RUN_ID/model). {MODEL_URI_HELP}"
            )
        yield local


def _source(model_uri):
    """`(scheme, local path or None)`; a URI of another scheme refused."""
    match = re.match(r"([A-Za-z][A-Za-z0-9+.-]*):/", model_uri)
    scheme = match.group(1).lower() if match and len(match.group(1)) > 1 else None
    if scheme is None:  # a path (or a Windows drive letter)
        return None, pathlib.Path(model_uri)
    if scheme == "file":
        parsed = urllib.parse.urlsplit(model_uri)
        if parsed.netloc not in ("", "localhost"):
            raise ServiceError(
                f"model {model_uri}: a file:// URI names a local folder "
                f"(file:///path); this one names host {parsed.netloc!r}. {MODEL_URI_HELP}"
            )
        return scheme, pathlib.Path(urllib.parse.unquote(parsed.path))
    if scheme in STORE_SCHEMES:
        return scheme, None
    close = difflib.get_close_matches(scheme, (*STORE_SCHEMES, "file"), n=1)
    hint = f" Did you mean {close[0]}:/?" if close else ""
    raise ServiceError(
        f"model {model_uri}: a {scheme}: URI is not a model source kg serves; download "
        f"the model folder first, or register it.{hint} {MODEL_URI_HELP}"
    )


def _local_folder(model_uri, path):
    """Yields a local folder's pyfunc model folder, after its checks."""
    if (path / "MLmodel").is_file():
        _no_dangling_links(model_uri, path)
        yield str(path.resolve())
    elif (path / "saved_model.pb").is_file():
        _no_dangling_links(model_uri, path)
        with tempfile.TemporaryDirectory(prefix="kg-savedmodel-") as tmp:
            yield _wrap_saved_model(path.resolve(), pathlib.Path(tmp) / "model")
    elif path.exists():
        raise ServiceError(
            f"model {model_uri}: is neither an MLflow model folder (no MLmodel "
            f"file) nor a SavedModel folder (no saved_model.pb). {MODEL_URI_HELP}"
        )
    else:
        raise ServiceError(f"model {model_uri}: no such file or folder. {MODEL_URI_HELP}")


def _no_dangling_links(model_uri, path):
    """Refuses a model folder holding a link to nothing (its load, or the
    SavedModel's copy, would fail half-way with a traceback)."""
    for root, folders, files in os.walk(path):
        for name in folders + files:
            entry = pathlib.Path(root, name)
            if entry.is_symlink() and not entry.exists():
                raise ServiceError(
                    f"model {model_uri}: {entry} is a link to nothing "
                    f"({os.readlink(entry)}); the model folder is incomplete."
                )


def _closest_model(mlflow, uri, model_uri):
    """' Did you mean models:/NAME@...?' for a models:/ URI whose name is
    not registered but close to one that is (difflib, as config errors)."""
    match = re.match(r"models:/([^/@]+)(.*)", model_uri)
    if not match:
        return ""
    try:
        client = mlflow.MlflowClient(uri, registry_uri=uri)
        names = [m.name for m in client.search_registered_models(max_results=1000)]
    except mlflow.exceptions.MlflowException:
        return ""
    name, rest = match.groups()
    close = difflib.get_close_matches(name, names, n=1) if name not in names else []
    return f" Did you mean models:/{close[0]}{rest}?" if close else ""


def reason(message):
    """MLflow's prediction error as one line: its innermost "Error: ..."
    (the outer ones repeat the whole input)."""
    return " ".join(str(message).rsplit("Error: ", 1)[-1].split())


def first_line(text):
    return str(text).strip().splitlines()[0] if str(text).strip() else ""


def _wrap_saved_model(saved_model, target):
    """Saves a pyfunc model at `target` that serves `saved_model`."""
    # First: finding the task's file imports its pyfunc, which sets
    # TensorFlow's C++ log level before TF loads (`Serving.saved_model`).
    code = tasks.saved_model_code()
    mlflow = import_mlflow()
    # The signature from saved_model.pb, not tf.saved_model.load: TensorFlow's
    # import and the model's load cost this process ~7 CPU s, and the
    # server's workers load the model anyway (issue 17).
    try:
        signatures = saved_model_proto.signatures(saved_model)
    except (OSError, ValueError) as error:
        raise ServiceError(
            f"model {saved_model}: saved_model.pb cannot be read: {error}. {MODEL_URI_HELP}"
        ) from None
    if "serving_default" not in signatures:
        raise ServiceError(
            f"model {saved_model}: the SavedModel has no serving_default signature "
            f"(it has {sorted(signatures) or 'none'}); export it with "
            f"kg-train or keras' model.export()."
        )
    spec, output = _matrix_signature(saved_model, signatures["serving_default"])
    signature = mlflow.models.ModelSignature(
        inputs=mlflow.types.Schema(
            [mlflow.types.TensorSpec(np.dtype("float32"), (-1, int(spec[-1])))]
        ),
        outputs=mlflow.types.Schema(
            [mlflow.types.TensorSpec(np.dtype("float32"), (-1, int(output[-1])))]
        ),
    )
    tensorflow = versions.installed_version("tensorflow")
    with warnings.catch_warnings():
        # No input example, deliberately (as for the registered models).
        warnings.filterwarnings("ignore", message=".*input example was not provided")
        # Models from code, as kg-train registers: a pickled PythonModel
        # object makes MLflow warn that unpickling may run arbitrary code.
        mlflow.pyfunc.save_model(
            str(target),
            python_model=code,
            artifacts={"saved_model": str(saved_model)},
            signature=signature,
            # Explicit, as for the registered models: left to MLflow, it
            # infers them by loading the model in a subprocess of its own
            # (~7 CPU s, measured in the suite's `kg predict` tests). A
            # SavedModel needs TensorFlow and NumPy to be served, not Keras.
            pip_requirements=[f"tensorflow=={tensorflow}", f"numpy=={np.__version__}"],
        )
    return str(target)


def _matrix_signature(saved_model, signature):
    """`(input shape, output shape)` of a serving_default signature that is
    one float32 `[batch, features]` tensor in and one `[batch, outputs]`
    out, as kg-train exports; else a ServiceError saying what it is
    (issue 30 §15: two inputs were an unpacking traceback)."""
    inputs, outputs = signature
    try:
        kinds = saved_model_proto.dtypes(saved_model)["serving_default"]
    except (OSError, ValueError, KeyError):
        kinds = ({}, {})
    problems = []
    for role, tensors, types in (("input", inputs, kinds[0]), ("output", outputs, kinds[1])):
        if len(tensors) != 1:
            problems.append(f"{len(tensors)} {role}s ({', '.join(sorted(tensors)) or 'none'})")
            continue
        ((name, shape),) = tensors.items()
        dtype = types.get(name, "float32")
        if dtype != "float32" or shape is None or len(shape) != 2 or not shape[-1]:
            shown = "unknown rank" if shape is None else [-1 if d is None else d for d in shape]
            problems.append(f"{role} {name!r} is {dtype} of shape {shown}")
    if problems:
        raise ServiceError(
            f"model {saved_model}: its serving_default signature has "
            f"{'; '.join(problems)}; kg serves one float32 [batch, features] input "
            f"and one [batch, outputs] output (as kg-train and keras' model.export() "
            f"write for a classifier)."
        )
    return next(iter(inputs.values())), next(iter(outputs.values()))

