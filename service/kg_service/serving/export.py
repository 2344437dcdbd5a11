"""SavedModel export in the TF Serving layout, verified before registration.

Layout: `<export_dir>/<model_name>/<version>/` (TF Serving's model base path
is `<export_dir>/<model_name>`). The version matches the registry version.
A model is exported into a staging folder, reloaded with
`tf.saved_model.load` and compared with the in-memory model; only a
verified export is promoted to its version folder after registration.
"""

import dataclasses
import pathlib
import shutil
import uuid

import keras
import numpy as np

import keras_gelu
from kg_service.errors import ServiceError


class ExportVerificationError(ServiceError):
    """The reloaded SavedModel disagrees with the in-memory model."""

    exit_code = 1


@dataclasses.dataclass
class StagedExport:
    model_name: str
    path: pathlib.Path
    max_abs_diff: float


def check_can_export():
    """Raises a ServiceError if this environment cannot write SavedModels."""
    backend = keras.backend.backend()
    if backend not in ("tensorflow", "jax"):
        raise ServiceError(
            f"SavedModel export needs the tensorflow or jax Keras backend; "
            f"KERAS_BACKEND is {backend!r}. Set KERAS_BACKEND=tensorflow, or "
            f"turn export off with `--set export.enabled=false`."
        )
    try:
        import tensorflow  # noqa: F401 -- is it installed? (a jax backend may lack it)
    except ImportError:
        raise ServiceError(
            "SavedModel export needs TensorFlow, which is not installed here "
            f"(Keras backend: {backend}). Install it (`pip install "
            "tensorflow`), or turn export off with `--set export.enabled=false`."
        ) from None


# Half-precision models: the SavedModel (plain TF ops) and the in-memory
# model (XLA-fused activations) round differently, by a few ulps of the
# compute dtype (measured 2e-3 on probabilities for mixed_bfloat16).
_HALF_PRECISION_TOLERANCE = {"bfloat16": 3e-2, "float16": 4e-3}


def tolerance_for(model, configured):
    """The verification tolerance: `configured`, widened to a few ulps of a
    half-precision compute dtype."""
    compute = keras.backend.standardize_dtype(model.dtype_policy.compute_dtype)
    return max(configured, _HALF_PRECISION_TOLERANCE.get(compute, 0.0))


def version_dir(export_dir, model_name, version):
    return pathlib.Path(export_dir) / model_name / str(version)


def staging_dir(export_dir, model_name, owner=""):
    """A new staging folder's path: `.staging-<owner>-<random>`."""
    prefix = f".staging-{owner}-" if owner else ".staging-"
    return pathlib.Path(export_dir) / model_name / f"{prefix}{uuid.uuid4().hex[:8]}"


def discard_leftovers(export_dir, model_name, owner):
    """Removes the staging folders `owner` (a sweep's run id) left behind
    when it was killed (kill -9 while exporting or registering); other
    sweeps' stay, one may be staging now. Returns the paths removed."""
    removed = sorted((pathlib.Path(export_dir) / model_name).glob(f".staging-{owner}-*"))
    for path in removed:
        shutil.rmtree(path, ignore_errors=True)
    return removed


def stage(model, export_dir, model_name, inputs, tolerance, owner=""):
    """Exports `model` to a staging folder and verifies it.

    Args:
        model: The trained keras model.
        export_dir: Root of the TF Serving layout.
        model_name: Registered model name (the TF Serving model name).
        inputs: real inputs to compare predictions on (float32 features,
            or int32 token ids for a language model).
        tolerance: Max allowed absolute difference of the predictions
            (widened by `tolerance_for` for half-precision models).
        owner: Named in the staging folder (the sweep's run id), so that a
            resumed sweep removes what its killed try left
            (`discard_leftovers`).

    Returns:
        A `StagedExport`.

    Raises:
        ExportVerificationError: if the reloaded SavedModel's predictions
            differ by more than `tolerance`.
    """
    import tensorflow as tf  # installed: check_can_export ran; not on every backend

    tolerance = tolerance_for(model, tolerance)
    path = staging_dir(export_dir, model_name, owner)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Plain TF ops in the graph (no nested XLA clusters): any TF Serving
    # build runs it, and it needs nothing from keras_gelu to load.
    try:
        with keras_gelu.xla_fusion(False):
            write_saved_model(model, path)
    except BaseException:  # a full disk, an interrupt: no half-written folder stays
        shutil.rmtree(path, ignore_errors=True)
        raise
    inputs = np.asarray(inputs, dtype=model.inputs[0].dtype)  # features or token ids
    expected = keras.ops.convert_to_numpy(model(inputs, training=False))
    reloaded = tf.saved_model.load(str(path))
    actual = reloaded.signatures["serving_default"](tf.constant(inputs))
    actual = next(iter(actual.values())).numpy()
    max_abs_diff = float(np.max(np.abs(actual.astype("float64") - expected)))
    if not max_abs_diff <= tolerance:
        shutil.rmtree(path, ignore_errors=True)
        raise ExportVerificationError(
            f"the SavedModel exported for {model_name!r} does not reproduce "
            f"the trained model: max |difference| {max_abs_diff:.3g} > "
            f"tolerance {tolerance:g} on {len(inputs)} test inputs. Nothing "
            f"was registered."
        )
    return StagedExport(model_name, path, max_abs_diff)


def write_saved_model(model, path):
    """Writes `model`'s forward pass as a SavedModel at `path`: what
    `model.export(path, format="tf_saved_model")` writes (the `serve`
    endpoint, also `serving_default`, and the variable collections), less
    the walk of every object the model holds that `ExportArchive.track`
    makes to find lookup tables (a small language model's export: 1.2 ->
    0.7 CPU s, measured side by side, issue 17); these models hold none.
    A model that did would fail its verification in `stage`.
    `tests/service/serving/test_export.py` compares the two writers."""
    if keras.backend.backend() != "tensorflow":  # JAX: converted by jax2tf, Keras' way
        model.export(str(path), format="tf_saved_model", verbose=False)
        return
    from keras.src.export.export_utils import get_input_signature  # what model.export uses

    archive = keras.export.ExportArchive()
    archive.add_endpoint("serve", model.__call__, get_input_signature(model))
    archive.add_variable_collection("variables", model.variables)
    archive.add_variable_collection("trainable_variables", model.trainable_variables)
    archive.add_variable_collection("non_trainable_variables", model.non_trainable_variables)
    archive.write_out(str(path), verbose=False)


def promote(staged, export_dir, version):
    """Moves a verified staged export to `<export_dir>/<name>/<version>`."""
    target = version_dir(export_dir, staged.model_name, version)
    if target.exists():
        raise ServiceError(
            f"cannot place the SavedModel of {staged.model_name!r} version "
            f"{version} at {target}: that folder already exists. The verified "
            f"export is kept at {staged.path}; move it there by hand."
        )
    staged.path.rename(target)
    return target


def discard(staged):
    shutil.rmtree(staged.path, ignore_errors=True)
