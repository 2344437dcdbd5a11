"""What a language model's `--smoke` training costs, and what issue 17's
cuts to it buy: keras_gelu's XLA-fused activation kernels off for a short
run (`tasks/language/train.py`'s `FUSION_MIN_STEPS`) and the optimizer
built before `fit` (`_build_optimizer`: the training step traced once,
not twice).

Each variant trains the config's activations (`train_sweep`, stacked as
kg-train stacks them) in a fresh Python process, as kg-train does: XLA
kernels and traces are cached per process, so a second run in one process
would hide what a first one pays. The variants run interleaved, round by
round, from this one process; CPU seconds are each child's (every
thread), the imports and corpus excluded.

    KERAS_BACKEND=tensorflow .venv/bin/python benchmarks/bench_smoke_lm.py \\
        --config configs/glu-variants.yaml --rounds 2

At full sizes (the threshold's other side: do fused kernels pay off over
a long run?), fused vs not, a few epochs of some activations:

    KERAS_BACKEND=tensorflow .venv/bin/python benchmarks/bench_smoke_lm.py \\
        --sizes full --epochs 3 --activations glu,geglu,swiglu --rounds 1
"""

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SMOKE_VARIANTS = {
    "fused kernels, optimizer built in the first trace (before)": dict(fused=True, prebuilt=False),
    "fused kernels, optimizer built before fit": dict(fused=True, prebuilt=True),
    "unfused, optimizer built before fit (a short run now)": dict(fused=False, prebuilt=True),
}
FULL_VARIANTS = {
    "fused kernels (a long run now)": dict(fused=True, prebuilt=True),
    "unfused": dict(fused=False, prebuilt=True),
}


def config_for(args):
    from kg_service.config import derived
    from kg_service.config.loading import load_config

    config = load_config(args.config)
    if args.sizes == "smoke":
        config = derived.smoke(config)
    else:
        config = dataclasses.replace(
            config, seeds=config.seeds[:2],
            training=dataclasses.replace(config.training, epochs=args.epochs))
    if args.activations:
        activations = tuple(args.activations.split(","))
        config = dataclasses.replace(config, activations=activations, baseline=activations[0])
    return config


def child(args):
    """One variant's training, in this (fresh) process: prints its JSON."""
    from kg_service.tasks import base as tasks
    from kg_service.tasks.language import train as language
    from kg_service.training.loop import train_sweep

    variant = {**SMOKE_VARIANTS, **FULL_VARIANTS}[args.child]
    language.FUSION_MIN_STEPS = 0 if variant["fused"] else 10**12
    if not variant["prebuilt"]:
        language._build_optimizer = lambda model: None  # Keras' default: built while tracing
    config = config_for(args)
    task = tasks.get(config.data.dataset)
    dataset = task.load(config.data)
    cpu, wall = time.process_time(), time.perf_counter()
    results = train_sweep(task, dataset, config)
    print(json.dumps({
        "cpu": time.process_time() - cpu, "wall": time.perf_counter() - wall,
        "test_loss": sum(r.test_loss for r in results) / len(results),
    }))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=os.path.join(ROOT, "configs", "glu-variants.yaml"))
    parser.add_argument("--sizes", choices=("smoke", "full"), default="smoke")
    parser.add_argument("--epochs", type=int, default=3, help="--sizes full only")
    parser.add_argument("--activations", default="", help="comma-separated; default: the config's")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)
    variants = SMOKE_VARIANTS if args.sizes == "smoke" else FULL_VARIANTS
    forwarded = ["--config", args.config, "--sizes", args.sizes, "--epochs", str(args.epochs),
                 "--activations", args.activations]
    totals = {label: [0.0, 0.0, 0.0] for label in variants}
    load = [os.getloadavg()[0]]
    for _ in range(args.rounds):
        for label in variants:
            out = subprocess.run(
                [sys.executable, __file__, *forwarded, "--child", label],
                capture_output=True, text=True, check=True, cwd=ROOT,
                env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
            ).stdout
            run = json.loads(out.strip().splitlines()[-1])
            for i, key in enumerate(("cpu", "wall", "test_loss")):
                totals[label][i] += run[key] / args.rounds
            load.append(os.getloadavg()[0])
    config = config_for(args)
    print(f"{args.config} at {args.sizes} sizes ({', '.join(config.activations)}; "
          f"{len(config.seeds)} seeds, {config.training.epochs} epochs of "
          f"{config.training.steps_per_epoch} steps): train_sweep in a fresh process per "
          f"variant, mean of {args.rounds} round(s) interleaved; load average "
          f"{min(load):.1f}-{max(load):.1f}")
    print("| variant | CPU s | wall s | CPU vs the first | mean test loss |")
    print("|---|---|---|---|---|")
    reference = next(iter(totals.values()))[0]
    for label, (cpu, wall, loss) in totals.items():
        print(f"| {label} | {cpu:.1f} | {wall:.1f} | {reference / cpu:.2f}x less | {loss:.4f} |")


if __name__ == "__main__":
    main()
