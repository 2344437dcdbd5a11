"""End to end: the seed article's naive loop vs a full `kg-train` run.

Naive: for every (activation, seed) a fresh plain Keras model and
`model.fit(batch_size=32, epochs=100, verbose=0)` on the training split,
in this process, TensorFlow already imported, no validation data, no
tracking, no export: the cheapest possible version of the loop.

kg-train: the real command line in a subprocess, on a fresh sqlite MLflow
store in a temporary directory, including start-up, tracking of every
member, statistics, report and plots, SavedModel export and verification,
and registration.

Both use the same config (configs/moons.yaml by default) and run one
after the other in one invocation; the ratio is what the issue's target
(<= 0.25) is about.

    python benchmarks/bench_kg_train.py                      # 2 x 10 seeds x 100 epochs
    python benchmarks/bench_kg_train.py --seeds 3 --epochs 20
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def naive_seconds(config):
    import keras

    from kg_service.tasks.base import load_dataset
    from kg_service.tasks.classification.models import build_model

    dataset = load_dataset(config.data)
    started = time.perf_counter()
    for activation in config.activations:
        for seed in config.seeds:
            keras.utils.set_random_seed(seed)
            model = build_model(
                config.model,
                activation,
                dataset.input_dim,
                dataset.n_classes,
                normalization=dataset.normalization,  # as train_sweep's models
            )
            model.compile(
                optimizer=keras.optimizers.Adam(config.training.learning_rate),
                loss="sparse_categorical_crossentropy",
                metrics=["accuracy"],
            )
            model.fit(
                dataset.x_train,
                dataset.y_train,
                batch_size=config.training.batch_size,
                epochs=config.training.epochs,
                verbose=0,
            )
    return time.perf_counter() - started


def kg_train_seconds(config_path, overrides):
    kg_train = os.path.join(os.path.dirname(sys.executable), "kg-train")
    with tempfile.TemporaryDirectory() as tmp:
        command = [kg_train, "--config", config_path, "--quiet"]
        for override in overrides:
            command += ["--set", override]
        env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
        started = time.perf_counter()
        result = subprocess.run(command, cwd=tmp, env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - started
    if result.returncode != 0:
        sys.exit(f"kg-train failed:\n{result.stdout}\n{result.stderr[-3000:]}")
    return seconds, result.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=os.path.join(ROOT, "configs", "moons.yaml"))
    parser.add_argument("--seeds", type=int, help="override the config's seed count")
    parser.add_argument("--epochs", type=int, help="override the config's epochs")
    args = parser.parse_args()

    from kg_service.config.loading import load_config

    overrides = []
    if args.seeds:
        overrides.append(f"seeds={args.seeds}")
    if args.epochs:
        overrides.append(f"training.epochs={args.epochs}")
    config = load_config(args.config, overrides)
    members = len(config.activations) * len(config.seeds)
    print(
        f"config {os.path.relpath(args.config, ROOT)}: {members} members "
        f"({', '.join(config.activations)} x {len(config.seeds)} seeds), "
        f"{config.training.epochs} epochs, batch {config.training.batch_size}"
    )
    git = subprocess.run(
        ["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    print(f"commit {git}, {os.cpu_count()} CPUs, KERAS_BACKEND={os.environ.get('KERAS_BACKEND', 'tensorflow')}")

    kg_seconds, stdout = kg_train_seconds(args.config, overrides)
    naive = naive_seconds(config)
    print()
    print("| run | wall time (s) | ratio to naive |")
    print("|---|---|---|")
    print(f"| naive: fresh `model.fit` per member (training only) | {naive:.1f} | 1.00 |")
    print(
        f"| `kg-train` end to end (start-up, training, {members} tracked runs, "
        f"report, export + verify, registry) | {kg_seconds:.1f} | {kg_seconds / naive:.2f} |"
    )
    print(f"\ntarget: kg-train <= 0.25 x naive -> {'PASS' if kg_seconds <= 0.25 * naive else 'MISS'}")
    print("\nkg-train's summary:\n" + stdout.split("Registered models")[0].strip())


if __name__ == "__main__":
    main()
