"""The tasks' training under the JAX backend, in ONE fresh JAX process.

Two checks read that process's output: a classification sweep whose
member equals the plain model trained alone (issue 19's source seeds), and
the language model trained with bfloat16 and XLA and exported as a
SavedModel (jax2tf). They were one process each; a JAX process pays its
start before it trains: Python, Keras on JAX, TensorFlow (Keras'
`set_random_seed`, and the export) and kg_service, ~8 CPU s measured
(issue 17), now paid once. Each part runs in its own `try`, so that one
part's failure fails its own test with its traceback, not the other's.
"""

import json
import math
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)

SCRIPT = """
import json, sys, traceback
sys.path.insert(0, sys.argv[1])
out_dir = sys.argv[2]
import keras
import numpy as np


def classification_sweep():
    from kg_service.config.derived import member_source_seeds
    from kg_service.config.schema import Config, DataConfig, ModelConfig, TrainingConfig
    from kg_service.tasks import base as tasks
    from kg_service.tasks.classification.data import resplit
    from kg_service.tasks.base import load_dataset
    from kg_service.tasks.classification.models import build_model
    from kg_service.training.loop import train_sweep

    ds = load_dataset(DataConfig(n_samples=200))
    config = Config(
        activations=("gelu", "learnable_leaky_relu"),
        seeds=(0, 1),
        model=ModelConfig(hidden_units=(4,)),
        training=TrainingConfig(epochs=2, batch_size=24, learning_rate=0.01),
    )
    results = train_sweep(tasks.get(ds.name), ds, config)
    # Member gelu/seed 1 against the plain model trained alone: its split,
    # initial weights and batch order from its own source seeds.
    sources = member_source_seeds(config, 1)
    ds = resplit(ds, sources["split"])
    keras.utils.set_random_seed(sources["init"])
    ref = build_model(config.model, "gelu", ds.input_dim, ds.n_classes,
                      normalization=ds.normalization)
    ref.compile(optimizer=keras.optimizers.Adam(0.01),
                loss="sparse_categorical_crossentropy")
    rng = np.random.default_rng(sources["order"])
    for _ in range(2):
        order = rng.permutation(len(ds.y_train))
        for i in range(0, len(order), 24):
            ref.train_on_batch(ds.x_train[order[i:i + 24]], ds.y_train[order[i:i + 24]])
    diff = max(float(np.abs(a - b).max())
               for a, b in zip(ref.get_weights(), results[1].model.get_weights()))
    return {
        "members": [[r.activation, r.seed, len(r.history["val_loss"])] for r in results],
        "weight_diff": diff,
    }


def language_model_bfloat16_xla():
    from kg_service.serving import export
    from kg_service.tasks import base as tasks
    from kg_service.config.schema import Config, DeviceConfig, TrainingConfig
    from tests.service.tasks.test_language import SMALL_DATA, SMALL_MODEL

    config = Config(activations=("geglu",), baseline="geglu", seeds=(0, 1), data=SMALL_DATA,
                    model=SMALL_MODEL,
                    training=TrainingConfig(epochs=1, steps_per_epoch=3, batch_size=4),
                    device=DeviceConfig(type="cpu", mixed_precision="mixed_bfloat16", xla=True))
    task = tasks.get("python_code")
    corpus = task.load(config.data)
    # Both seeds as one stacked model; member 1 exported on its own.
    results = task.train(task, corpus, config, "geglu", (0, 1), lambda e, v: None)
    result = results[1]
    staged = export.stage(result.model, out_dir, "lm", corpus.x_test, 1e-5)
    return {"policy": result.model.dtype_policy.name, "seeds": [r.seed for r in results],
            "loss": [r.history["val_loss"] for r in results],
            "export_diff": staged.max_abs_diff,
            "tolerance": export.tolerance_for(result.model, 1e-5)}


outcome = {"backend": keras.backend.backend()}
for name, part in (("sweep", classification_sweep), ("language", language_model_bfloat16_xla)):
    try:
        outcome[name] = part()
    except Exception:
        outcome[name] = {"error": traceback.format_exc()}
print(json.dumps(outcome))
"""


@pytest.fixture(scope="module")
def jax_process(tmp_path_factory):
    """The JSON the one JAX process printed: `backend`, and per part
    (`sweep`, `language`) its numbers or its `error` traceback."""
    pytest.importorskip("jax")
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, ROOT, str(tmp_path_factory.mktemp("jax-export"))],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
        env={**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu",
             "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["backend"] == "jax"
    return result


def _part(jax_process, name):
    part = jax_process[name]
    assert "error" not in part, part.get("error")
    return part


def test_sweep_runs_on_the_jax_backend(jax_process):
    out = _part(jax_process, "sweep")
    assert out["members"] == [
        ["gelu", 0, 2],
        ["gelu", 1, 2],
        ["learnable_leaky_relu", 0, 2],
        ["learnable_leaky_relu", 1, 2],
    ]
    assert out["weight_diff"] < 1e-4


def test_the_language_model_trains_and_exports_under_jax_with_bfloat16_and_xla(jax_process):
    result = _part(jax_process, "language")
    assert result["policy"] == "mixed_bfloat16"
    assert result["seeds"] == [0, 1]
    assert all(math.isfinite(v) for loss in result["loss"] for v in loss)
    assert result["loss"][0] != result["loss"][1]
    # bfloat16 compute: export.tolerance_for widens the check to a few ulps
    # of bfloat16 at the logits' size; a fixed 1e-2 is met or missed by
    # the weights' luck (0.0110 in one run on the issue 20 branch).
    assert result["tolerance"] == 3e-2
    assert result["export_diff"] <= result["tolerance"]
