"""CPU of a sweep's last stage and of a new MLflow store, before and after
issue 17's changes, side by side in one process.

Usage:

    KERAS_BACKEND=tensorflow TF_CPP_MIN_LOG_LEVEL=2 .venv/bin/python benchmarks/bench_store_export.py

Sections (each round runs both candidates, in a shuffled order; the report
is the median process CPU seconds of each and the median of the per-round
ratios, steadier than wall time on a shared machine):
  a. a new sqlite store opened by `MlflowClient` (tracking and registry):
     MLflow's own migrations against a copy of the cached empty store
     (`kg_service.tracking.empty_store.place`);
  b. a SavedModel export of glu-variants' language model (d_model 64,
     4 heads, two geglu FFNs of 128, context 64, 256 tokens): Keras'
     `model.export` against `kg_service.serving.export.write_saved_model`;
  c. the served model's .keras: `model.save` again against copying the
     member's file.
"""

import os
import random
import shutil
import statistics
import sys
import tempfile
import time
import types

import numpy as np

ROUNDS = int(os.environ.get("ROUNDS", "5"))


def cpu(fn):
    start = time.process_time()
    fn()
    return time.process_time() - start


def compare(title, before, after):
    times = {"before": [], "after": []}
    for _ in range(ROUNDS):
        order = [("before", before), ("after", after)]
        random.shuffle(order)
        for name, make in order:
            times[name].append(cpu(make()))
    ratios = [a / b for a, b in zip(times["after"], times["before"])]
    print(
        f"{title}: before {statistics.median(times['before']):.3f} CPU s, "
        f"after {statistics.median(times['after']):.3f} CPU s, "
        f"after/before {statistics.median(ratios):.2f} (median of {ROUNDS} rounds)"
    )


def store_section(root):
    import mlflow

    from kg_service.tracking import empty_store

    empty_store.template()  # made once, as the first kg-train on a machine does

    def opened(place):
        def make():
            path = os.path.join(tempfile.mkdtemp(dir=root), "mlflow.db")

            def run():
                if place:
                    empty_store.place(path)
                uri = f"sqlite:///{path}"
                mlflow.MlflowClient(uri, registry_uri=uri).search_registered_models(max_results=1)

            return run

        return make

    compare("a. new sqlite store", opened(False), opened(True))


def export_section(root):
    import keras_gelu
    from kg_service.serving import export
    from kg_service.tasks.language import model as lm

    shape = types.SimpleNamespace(d_model=64, heads=4, hidden_units=[128, 128], layer_norm=True,
                                  tie_embeddings=True, dropout=0.0, match_params=False)
    model = lm.build_language_model(shape, "geglu", types.SimpleNamespace(n_classes=256, context=64))
    model(np.zeros((2, 64), "int32"))

    def writer(write):
        def make():
            path = tempfile.mkdtemp(dir=root)

            def run():
                with keras_gelu.xla_fusion(False):
                    write(path)

            return run

        return make

    compare(
        "b. SavedModel export, glu-variants' language model",
        writer(lambda path: model.export(path, format="tf_saved_model", verbose=False)),
        writer(lambda path: export.write_saved_model(model, path)),
    )
    saved = os.path.join(root, "member.keras")
    model.save(saved)
    compare(
        "c. the served model's .keras",
        lambda: lambda: model.save(os.path.join(tempfile.mkdtemp(dir=root), "model.keras")),
        lambda: lambda: shutil.copyfile(saved, os.path.join(tempfile.mkdtemp(dir=root), "model.keras")),
    )


def main():
    print(f"load average {os.getloadavg()[0]:.2f}, python {sys.version.split()[0]}")
    root = tempfile.mkdtemp()
    try:
        store_section(root)
        export_section(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
