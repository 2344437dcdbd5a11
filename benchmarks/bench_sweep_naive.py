"""Training time: the naive seed loop vs kg-train's vectorized sweep.

Naive (the seed article's loop): for every (activation, seed), a fresh
plain Keras model and `model.fit(batch_size=32, epochs=E, verbose=0)`,
with `validation_data` so that it, too, yields per-epoch validation
metrics. Vectorized: `kg_service.training.loop.train_sweep` on the same config,
which trains all seeds of an activation as one stacked model and records
train/validation loss and accuracy of every member every epoch.

Both run in this process, on the same moons data; only training is
timed (no MLflow, no export). Prints seconds, time per optimizer step and
the ratio.

    python benchmarks/bench_sweep_naive.py            # 2 x 10 seeds x 100 epochs
    python benchmarks/bench_sweep_naive.py --quick    # 2 x 3 seeds x 10 epochs
    KERAS_BACKEND=jax python benchmarks/bench_sweep_naive.py --quick
"""

import argparse
import dataclasses
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import keras  # noqa: E402

from kg_service.config.schema import Config  # noqa: E402
from kg_service.config.schema import DataConfig  # noqa: E402
from kg_service.config.schema import DeviceConfig  # noqa: E402
from kg_service.config.schema import TrainingConfig  # noqa: E402
from kg_service.tasks.base import load_dataset  # noqa: E402
from kg_service.tasks.classification.models import build_model  # noqa: E402
from kg_service.tasks import base as tasks  # noqa: E402
from kg_service.training.loop import train_sweep  # noqa: E402


def naive(dataset, config):
    """One fresh model and one fit() per (activation, seed)."""
    training = config.training
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
                optimizer=keras.optimizers.Adam(training.learning_rate),
                loss="sparse_categorical_crossentropy",
                metrics=["accuracy"],
                jit_compile=True if config.device.xla else "auto",
            )
            model.fit(
                dataset.x_train,
                dataset.y_train,
                validation_data=(dataset.x_val, dataset.y_val),
                batch_size=training.batch_size,
                epochs=training.epochs,
                verbose=0,
            )


def timed(fn, *args):
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--activations", default="relu,gelu")
    parser.add_argument("--n-samples", type=int, default=2000)
    parser.add_argument("--xla", action="store_true", help="jit_compile both")
    parser.add_argument(
        "--quick", action="store_true", help="3 seeds, 10 epochs"
    )
    parser.add_argument("--skip-naive", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds, args.epochs = 3, 10

    dataset = load_dataset(
        DataConfig(dataset="moons", n_samples=args.n_samples)
    )
    config = Config(
        activations=tuple(args.activations.split(",")),
        seeds=tuple(range(args.seeds)),
        training=TrainingConfig(epochs=args.epochs, batch_size=32),
        device=DeviceConfig(xla=args.xla),
    )
    # One-off runtime start-up (thread pools, first kernels) outside both.
    warmup = dataclasses.replace(
        config,
        seeds=(0,),
        training=dataclasses.replace(config.training, epochs=1),
    )
    train_sweep(tasks.get(dataset.name), dataset, warmup)

    members = len(config.activations) * len(config.seeds)
    steps = -(-len(dataset.y_train) // config.training.batch_size) * args.epochs
    print(
        f"backend={keras.backend.backend()} xla={args.xla} moons n={args.n_samples} "
        f"(train {len(dataset.y_train)}), {len(config.activations)} activations x "
        f"{args.seeds} seeds x {args.epochs} epochs, hidden "
        f"{config.model.hidden_units}, batch {config.training.batch_size}",
        flush=True,
    )
    vectorized = timed(train_sweep, tasks.get(dataset.name), dataset, config)
    print(
        f"vectorized train_sweep: {vectorized:8.1f} s   "
        f"{vectorized / (len(config.activations) * steps) * 1e3:6.2f} ms per "
        f"stacked step ({args.seeds} members)",
        flush=True,
    )
    if args.skip_naive:
        return
    plain = timed(naive, dataset, config)
    print(
        f"naive fit per member:   {plain:8.1f} s   "
        f"{plain / (members * steps) * 1e3:6.2f} ms per step (incl. validation)",
        flush=True,
    )
    print(f"speed-up: {plain / vectorized:.1f}x", flush=True)


if __name__ == "__main__":
    main()
