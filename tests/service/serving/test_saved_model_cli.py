"""TF Serving's contract, checked with TensorFlow's own tool (issue 9 §5).

No TF Serving binary installs here, but TensorFlow ships
`saved_model_cli`, which reads a SavedModel the way TF Serving does: the
`serve` tag set, the `serving_default` signature and its tensors. An
exported model (through `export.stage`, as kg-train exports) is shown and
run with it, and the outputs equal the in-memory model's.
"""

import os
import re
import subprocess

import numpy as np

from kg_service.serving import export
from kg_service.tasks.classification import models
from kg_service.config.schema import ModelConfig
from tests.service import servers


def _cli(*args):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    out = subprocess.run(
        [os.path.join(servers.VENV_BIN, "saved_model_cli"), *args],
        capture_output=True, text=True, timeout=300, env=env,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def _show_all(path):
    """What `saved_model_cli show --dir PATH --all` prints, by the function
    that command calls, in this process: TensorFlow is loaded here already,
    and a process of its own would cost its import again (~7 CPU s, issue
    17). `run` below stays a process of its own, TensorFlow's tool alone
    running the SavedModel, as TF Serving does."""
    import contextlib
    import io

    from tensorflow.python.tools import saved_model_cli

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        saved_model_cli._show_all(str(path))
    return printed.getvalue()


def test_saved_model_cli_shows_and_runs_the_serving_signature(tmp_path):
    import keras

    keras.utils.set_random_seed(0)
    model = models.build_model(ModelConfig(hidden_units=(8,)), "geglu", 2, 2)
    x = np.random.default_rng(0).normal(size=(5, 2)).astype("float32") * 3
    staged = export.stage(model, tmp_path / "exports", "m", x, 1e-5)
    path = export.promote(staged, tmp_path / "exports", 1)

    shown = _show_all(path)
    assert "signature_def['serving_default']" in shown
    assert re.search(r"inputs\['features'\] tensor_info:\s+dtype: DT_FLOAT\s+shape: \(-1, 2\)", shown)
    assert re.search(r"outputs\['output_0'\] tensor_info:\s+dtype: DT_FLOAT\s+shape: \(-1, 2\)", shown)

    np.save(tmp_path / "x.npy", x)
    _cli(
        "run", "--dir", str(path), "--tag_set", "serve",
        "--signature_def", "serving_default",
        "--inputs", f"features={tmp_path / 'x.npy'}",
        "--outdir", str(tmp_path / "out"),
    )
    served = np.load(tmp_path / "out" / "output_0.npy")
    expected = keras.ops.convert_to_numpy(model(x))
    np.testing.assert_allclose(served, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(served.sum(axis=1), 1.0, rtol=1e-5)
