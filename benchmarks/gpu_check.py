"""Training throughput of each paper config under its GPU preset (issue 20).

Run through `benchmarks/gpu_check.sh` (KERAS_BACKEND=jax). For every paper
config the GPU preset is a list of `--set` overrides (`PRESETS` below, the
same text as docs/gpu.md): the GPU required, XLA, and for the language
models bfloat16, a batch size and the paper-like shape of the config's own
comment.
Each preset is loaded through kg-train's own config loading, so a preset
that stops validating fails here as it would for `kg-train --set`.

For each config the script builds one member's model with the task's own
builder (`task.build_model`), compiles it as kg-train does (the config's
optimizer; XLA if `device.xla`, else Keras' "auto"), trains two warm-up
steps, then times `--steps` steps of `fit` on random inputs of the right
shape and prints a Markdown table: tokens/s (language models) or
examples/s (classifiers), model FLOP/s (6 x parameters per token, plus attention),
and that as a fraction of a bf16 (GPU) or float32 (CPU) matrix product
timed in the same process just before and after the model.

    bash benchmarks/gpu_check.sh                  # on a GPU machine
    bash benchmarks/gpu_check.sh --require-gpu    # ... and fail without one
    bash benchmarks/gpu_check.sh --cpu-baseline   # here: the expected column
    bash benchmarks/gpu_check.sh --tiny           # smoke run, any machine

`--cpu-baseline` runs each config as it is (float32, its CPU size; no
preset) and scales to the GPU: expected = (this CPU's model FLOP/s as a
fraction of its own matmul FLOP/s) x the GPU's bf16 matmul FLOP/s
(`--gpu-matmul-tflops`, default 790: an H200, measured 769-798 TFLOP/s on
an 8192^3 product) / the preset's FLOPs per token, capped at
batch / `--step-floor-ms` (a step never costs less than launching it).
That assumes the GPU reaches the same fraction of its matmul peak as this
CPU does; the small classifiers cannot, which the cap stands for.
"""

import argparse
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for folder in (ROOT, ROOT / "service"):
    if str(folder) not in sys.path:  # Run from a checkout without install.
        sys.path.insert(0, str(folder))

EXIT_NO_GPU = 2

# Every preset: the GPU required (kg-train stops clearly without one), the
# training step compiled by XLA; the language models in bfloat16 too.
_GPU = ("device.type=gpu", "device.xla=true")
_BF16 = ("device.mixed_precision=mixed_bfloat16",)


@dataclass(frozen=True)
class Preset:
    config: str  # path from the repository root
    activation: str
    overrides: tuple  # `--set` overrides, as kg-train takes them
    # tokens/s or examples/s: `--cpu-baseline` on 2026-12-01 (docs/gpu.md)
    expected: float
    note: str = ""


PRESETS = {
    "glu-variants": Preset(
        "configs/glu-variants.yaml",
        "geglu",
        (
            *_GPU,
            *_BF16,
            "model.d_model=768",
            "model.heads=12",
            "model.hidden_units=[3072,3072,3072,3072,3072,3072]",
            "data.context=512",
            "training.batch_size=64",
        ),
        expected=428_222.0,
        note="T5-base-like widths, GEGLU at match_params (2048 wide)",
    ),
    "revival": Preset(
        "configs/revival.yaml",
        "gelu",
        (
            *_GPU,
            *_BF16,
            "model.d_model=768",
            "model.heads=12",
            "model.hidden_units=[3072,3072,3072,3072,3072,3072,3072,3072,"
            "3072,3072,3072,3072]",
            "data.context=512",
            "training.batch_size=64",
        ),
        expected=388_835.0,
        note="GPT-2 small's shape (12 x 768, FFN 3072)",
    ),
    "digits": Preset(
        "configs/digits.yaml",
        "gelu",
        _GPU,
        expected=128_000.0,
        note="the paper's batch 128 and float32 kept: the study's setting",
    ),
    "moons": Preset(
        "configs/moons.yaml",
        "gelu",
        _GPU,
        expected=32_000.0,
        note="2 x 64 MLP, batch 32: launch-bound on any GPU",
    ),
    "moons-glu": Preset(
        "configs/moons-glu.yaml",
        "geglu",
        _GPU,
        expected=32_000.0,
        note="as moons",
    ),
}

# --tiny: every model a toy, so the whole run takes seconds on a CPU.
TINY = (
    "model.hidden_units=[16,16]",
    "data.context=16",
    "training.batch_size=8",
)
TINY_LANGUAGE = ("model.d_model=16", "model.heads=2")


def require_gpu(platforms):
    """Raises SystemExit(2) with one paragraph unless a GPU is in `platforms`.

    Args:
        platforms: the `platform` of each JAX device ("cpu", "gpu", ...).
    """
    if "gpu" in platforms or "cuda" in platforms:
        return
    sys.stderr.write(
        "gpu_check: --require-gpu, but JAX sees no GPU (devices: "
        f"{', '.join(sorted(set(platforms))) or 'none'}). Install JAX with "
        "CUDA (pip install 'jax[cuda13]') on a machine with an NVIDIA GPU, or "
        "leave out --require-gpu to time the CPU.\n"
    )
    raise SystemExit(EXIT_NO_GPU)


def preset_overrides(name, tiny=False, cpu_baseline=False):
    """The `--set` overrides a run of `name` applies."""
    preset = PRESETS[name]
    overrides = () if cpu_baseline else preset.overrides
    if tiny:
        overrides = tuple(o for o in overrides if o.startswith("device."))
        overrides += TINY
        if _is_language(load(name)):
            overrides += TINY_LANGUAGE
    return overrides


def load(name, overrides=()):
    from kg_service.config.loading import load_config

    return load_config(ROOT / PRESETS[name].config, overrides)


def _is_language(config):
    from kg_service.tasks import base
    from kg_service.tasks.language import serving

    return base.get(config.data.dataset).serving is serving.SERVING


def flops_per_item(config, parameters):
    """Training FLOPs per token (LM) or per example: 6 N (+ attention).

    Kaplan et al. 2020, table 1: forward 2 N + 2 n_layer n_ctx d per
    token, backward twice the forward.
    """
    flops = 6.0 * parameters
    if _is_language(config):
        layers = len(config.model.hidden_units)
        flops += 6.0 * layers * config.data.context * config.model.d_model
    return flops


def build(config, activation, steps):
    """(model, inputs, targets, items per batch) for one member: `steps`
    batches of random inputs (a `fit` that runs out of data stops early)."""
    import keras
    import numpy as np

    from kg_service.tasks import base
    from kg_service.training.device import dtype_policy
    from kg_service.training.optimizers import make_optimizer

    task = base.get(config.data.dataset)
    batch = config.training.batch_size
    rows = batch * steps
    rng = np.random.default_rng(0)
    if _is_language(config):
        from kg_service.tasks.language.corpus import Corpus

        empty = np.zeros(0, np.uint8)
        corpus = Corpus(
            "gpu_check", empty, empty, empty, (0, 0, 0), "", "",
            config.data.context,
        )
        shape = (rows, config.data.context)
        x = rng.integers(0, corpus.n_classes, shape).astype("int32")
        y = rng.integers(0, corpus.n_classes, shape).astype("int32")
        data, per_batch = corpus, batch * config.data.context
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    else:
        data = task.load(config.data)
        features = data.x_train.shape[1]
        x = rng.standard_normal((rows, features)).astype("float32")
        y = rng.integers(0, data.n_classes, rows).astype("int32")
        per_batch = batch
        loss = "sparse_categorical_crossentropy"
    with dtype_policy(config.device.mixed_precision):
        model = task.build_model(config.model, activation, data)
    model.compile(
        optimizer=make_optimizer(config.training),
        loss=loss,
        # As kg-train compiles (tasks/*/train.py): "auto" is XLA on JAX.
        jit_compile=True if config.device.xla else "auto",
    )
    return model, x, y, per_batch


def items_per_second(model, x, y, batch, per_batch, steps):
    """Median over three timed `fit`s of `steps` steps each."""
    rates = []
    for _ in range(3):
        start = time.perf_counter()
        model.fit(
            x, y, batch_size=batch, epochs=1, steps_per_epoch=steps,
            shuffle=False, verbose=0,
        )
        rates.append(steps * per_batch / (time.perf_counter() - start))
    return statistics.median(rates)


def matmul_flops(gpu, size):
    """FLOP/s of one n x n x n product: bf16 on a GPU, float32 on a CPU."""
    import jax
    import jax.numpy as jnp

    dtype = jnp.bfloat16 if gpu else jnp.float32
    a = jnp.ones((size, size), dtype)
    product = jax.jit(lambda m: m @ m)
    product(a).block_until_ready()
    times = []
    for _ in range(5):
        start = time.perf_counter()
        product(a).block_until_ready()
        times.append(time.perf_counter() - start)
    return 2.0 * size**3 / statistics.median(times)


def _rate(value):
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def run_one(name, args, gpu, size):
    import keras

    preset = PRESETS[name]
    config = load(name, preset_overrides(name, args.tiny, args.cpu_baseline))
    model, x, y, per_batch = build(config, preset.activation, args.steps)
    batch = config.training.batch_size
    model.fit(x, y, batch_size=batch, epochs=1, steps_per_epoch=2, verbose=0)
    # The matrix product just before and after the model, so that a shared
    # machine's load weighs on both alike.
    matmul = matmul_flops(gpu, size)
    rate = items_per_second(model, x, y, batch, per_batch, args.steps)
    matmul = (matmul + matmul_flops(gpu, size)) / 2
    parameters = model.count_params()
    achieved = rate * flops_per_item(config, parameters)
    unit = "tokens/s" if _is_language(config) else "examples/s"
    row = {
        "config": name,
        "activation": preset.activation,
        "parameters": parameters,
        "batch": batch,
        "rate": rate,
        "unit": unit,
        "tflops": achieved / 1e12,
        "fraction": achieved / matmul,
        "expected": preset.expected,
        "matmul": matmul,
    }
    if args.cpu_baseline:
        gpu_config = load(name, preset_overrides(name, tiny=args.tiny))
        keras.backend.clear_session()
        gpu_model, *_ = build(gpu_config, preset.activation, 2)
        gpu_flops = flops_per_item(gpu_config, gpu_model.count_params())
        items = gpu_config.training.batch_size * (
            gpu_config.data.context if _is_language(gpu_config) else 1
        )
        scaled = row["fraction"] * args.gpu_matmul_tflops * 1e12 / gpu_flops
        cap = items / (args.step_floor_ms / 1e3)
        row["expected"] = min(scaled, cap)
        row["bound"] = "FLOPs" if scaled <= cap else "step floor"
    keras.backend.clear_session()
    return row


def _table(rows, args, device, size):
    mode = "CPU baseline, scaled to the GPU" if args.cpu_baseline else device
    matmul = ", ".join(f"{r['matmul'] / 1e12:.3g}" for r in rows)
    lines = [
        f"GPU presets, KERAS_BACKEND=jax, {mode}; {args.steps} steps per "
        f"timing, median of 3. Matrix product {size}^3 "
        f"({'bf16' if 'gpu' in device.lower() else 'float32'}) beside each "
        f"config: {matmul} TFLOP/s. Load average "
        + " / ".join(f"{v:.1f}" for v in os.getloadavg())
        + ".",
        "",
    ]
    if args.cpu_baseline:
        lines += [
            "| config | activation | CPU rate (config as is) | model TFLOP/s "
            "| of matmul | expected on the GPU preset | bound |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            lines.append(
                f"| {r['config']} | {r['activation']} | {_rate(r['rate'])} "
                f"{r['unit']} | {r['tflops']:.3g} | {r['fraction']:.1%} | "
                f"{_rate(r['expected'])} {r['unit']} | {r['bound']} |"
            )
        return "\n".join(lines)
    lines += [
        "| config | activation | parameters | batch | measured | model "
        "TFLOP/s | of matmul | expected | measured / expected |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        # --tiny times toys: the presets' expected figures do not apply.
        expected, ratio = "—", "—"
        if not args.tiny:
            expected = _rate(r["expected"])
            ratio = f"{r['rate'] / r['expected']:.2f}"
        lines.append(
            f"| {r['config']} | {r['activation']} | {r['parameters']:,} | "
            f"{r['batch']} | {_rate(r['rate'])} {r['unit']} | "
            f"{r['tflops']:.3g} | {r['fraction']:.1%} | {expected} | {ratio} |"
        )
    return "\n".join(lines)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--require-gpu", action="store_true",
                        help="exit 2 with a message if JAX sees no GPU")
    parser.add_argument("--tiny", action="store_true",
                        help="toy sizes: a smoke run of the whole script")
    parser.add_argument("--cpu-baseline", action="store_true",
                        help="run the configs as they are and scale the "
                        "result to the GPU presets (the expected column)")
    parser.add_argument("--steps", type=int, default=20,
                        help="training steps per timing (default 20)")
    parser.add_argument("--configs", nargs="+", choices=list(PRESETS),
                        default=list(PRESETS))
    parser.add_argument("--gpu-matmul-tflops", type=float, default=790.0)
    parser.add_argument("--step-floor-ms", type=float, default=1.0)
    args = parser.parse_args(argv)
    if args.tiny:
        args.steps = min(args.steps, 3)
    return args


def main(argv=None):
    args = parse_args(argv)
    # Here, not at import: tests import this module for its presets.
    os.environ.setdefault("KERAS_BACKEND", "jax")
    import jax

    platforms = [d.platform for d in jax.devices()]
    if args.require_gpu:
        require_gpu(platforms)
    gpu = "gpu" in platforms or "cuda" in platforms
    device = jax.devices()[0].device_kind
    size = 256 if args.tiny else (8192 if gpu else 2048)
    rows = []
    for name in args.configs:
        rows.append(run_one(name, args, gpu, size))
        print(f"... {name}: {_rate(rows[-1]['rate'])} {rows[-1]['unit']}",
              file=sys.stderr, flush=True)
    print(_table(rows, args, f"{device} ({platforms[0]})", size))
    return 0


if __name__ == "__main__":
    sys.exit(main())
