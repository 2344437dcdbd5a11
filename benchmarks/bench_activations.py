"""Speed of keras_gelu's activations relative to ReLU, on one Keras backend.

Usage (the backend comes from KERAS_BACKEND, as for any Keras program):

    KERAS_BACKEND=tensorflow .venv/bin/python benchmarks/bench_activations.py
    KERAS_BACKEND=jax .venv/bin/python benchmarks/bench_activations.py
    KERAS_BACKEND=torch .venv/bin/python benchmarks/bench_activations.py

Absolute times drift on a shared machine, so every candidate of a section
runs in the same process, round-robin in a shuffled order, and the report
is the median over rounds of (candidate time / baseline time in the same
round), with the interquartile range of those ratios beside it.

Sections:
  a. elementwise, forward and forward+backward, on a float32 vector
     (graph mode: TF tf.function without jit_compile, JAX jax.jit, torch
     eager plus torch.compile when it compiles within a time budget);
  b. an FFN train step, batch 1024 x 512 -> 2048 -> 512, MSE, Adam
     (`train_on_batch`, jit_compile=False; JAX keeps jax.jit); forward =
     the model call in graph mode;
  c. the fused gated projection `keras_gelu.GLU(units)` (one Dense of
     2 * units, then split) against two Dense layers and a multiply;
  d. the sigmoid mode's two forms, x * sigmoid(1.702 x) and
     0.5 * x * (1 + tanh(0.851 x)), as section a measures keras_gelu's
     kernels, with their accuracy (issue 6: is the tanh form, where it
     is accurate, cheaper?);
  e. the exact mode's kernels over time (before the tail change, the tail
     change, the +-inf guard with ops.exp, the bit-level exp), interleaved
     with ReLU, tf.nn.gelu and XLA's own GELU formulas (issues 15 and 20);
  f. where the exact kernel's time goes: the kernel with one part changed
     at a time (the exp, the Mills rational, its division), the previous
     kernel (main at c6699d9), a cheaper candidate kernel (not shipped),
     and XLA's erf formula, with each one's largest relative error
     (`--sections exact_parts`);
  g. the tanh and sigmoid modes' kernels beside their previous forward
     forms, with their errors against the float64 formulas
     (`--sections modes`, issue 20);
  h. each mode's kernel as shipped beside the exact mode's previous
     forward and cheaper candidates (not shipped), with each
     one's largest relative error and, on TensorFlow, its operations a
     lane in XLA's optimized HLO (`--sections kernels`, issue 20).

Absolute times drift on a shared machine; `--clock process` times the
process's CPU time instead of the wall clock (steadier under load).

The output is Markdown, for docs/benchmarks.md. It is a report, not a
test: the exit status is 0 whether targets pass or not, and a section that
raises is reported as FAILED (traceback on stderr) while the others run.
"""

import argparse
import datetime
import math
import os
import platform
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

try:
    import keras_gelu
except ImportError:  # Run from a checkout without `pip install -e .`.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import keras_gelu

import keras
import numpy as np
from keras import ops

BACKEND = keras.backend.backend()

# Targets, set for the TensorFlow backend (the main target); on JAX and
# torch the same numbers are shown for information.
# Issue 20: exact GELU forward <= 1.3x ReLU and forward+backward <= 1.25x;
# the tanh and sigmoid modes forward <= 1.2x.
EXACT_TARGET = (1.30, 1.25)
APPROXIMATE_TARGET = (1.20, None)
FFN_TARGET = 1.03  # GELU train step x ReLU train step
GLU_TARGET = 1.00  # fused GLU x two Dense layers


# --- One harness per backend: compile a function once, return a thunk. ----


class _Harness:
    """Builds zero-argument calls that run one step and wait for it.

    `forward(fn, x)` times `fn(x)`; `forward_backward(fn, x, dy, layer)`
    times `fn(x)` and its vector-Jacobian product with `dy`, with respect
    to `x` and to `layer`'s trainable weights when a layer is given.
    """

    def sync(self, result):
        return result

    def tensor(self, array):
        return ops.convert_to_tensor(array)


class _TensorFlowHarness(_Harness):
    name = "tf.function (graph, no jit_compile)"

    def __init__(self, threads=None):
        import tensorflow as tf

        if threads:
            tf.config.threading.set_intra_op_parallelism_threads(threads)
            tf.config.threading.set_inter_op_parallelism_threads(threads)
        # Every candidate is its own tf.function: the retracing warning is
        # expected here, and noise in a report.
        tf.get_logger().setLevel("ERROR")
        self.tf = tf

    def forward(self, fn, x, jit=False):
        step = self.tf.function(fn, autograph=False, jit_compile=jit)
        return lambda: step(x)

    def forward_backward(self, fn, x, dy, layer=None, jit=False):
        tf = self.tf
        weights = list(layer.trainable_weights) if layer is not None else []

        @tf.function(autograph=False, jit_compile=jit)
        def step(x, dy):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = fn(x)
            return y, tape.gradient(y, [x, *weights], output_gradients=dy)

        return lambda: step(x, dy)


class _JaxHarness(_Harness):
    name = "jax.jit"

    def __init__(self, threads=None):
        import jax

        self.jax = jax

    def sync(self, result):
        return self.jax.block_until_ready(result)

    def _pure(self, fn, layer):
        # A layer's weights become explicit arguments (stateless_call).
        if layer is None:
            return (lambda params, x: fn(x)), []
        # Copies: a JAX train step donates (deletes) the variables' buffers.
        trainable = [
            self.jax.numpy.array(v.value) for v in layer.trainable_variables
        ]
        frozen = [
            self.jax.numpy.array(v.value) for v in layer.non_trainable_variables
        ]

        def pure(params, x):
            return layer.stateless_call(params, frozen, x)[0]

        return pure, trainable

    def forward(self, fn, x, layer=None):
        pure, params = self._pure(fn, layer)
        step = self.jax.jit(pure)
        return lambda: step(params, x)

    def forward_backward(self, fn, x, dy, layer=None):
        jax = self.jax
        pure, params = self._pure(fn, layer)

        @jax.jit
        def step(params, x, dy):
            y, vjp = jax.vjp(pure, params, x)
            return y, vjp(dy)

        return lambda: step(params, x, dy)


class _TorchHarness(_Harness):
    name = "torch eager"

    def __init__(self, threads=None):
        import torch

        if threads:
            torch.set_num_threads(threads)
        self.torch = torch

    def forward(self, fn, x, compiled=False):
        torch = self.torch
        fn = torch.compile(fn) if compiled else fn

        def step():
            with torch.no_grad():
                return fn(x)

        return step

    def forward_backward(self, fn, x, dy, layer=None, compiled=False):
        torch = self.torch
        fn = torch.compile(fn) if compiled else fn
        weights = [v.value for v in layer.trainable_variables] if layer else []
        x = x.detach().requires_grad_(True)

        def step():
            y = fn(x)
            return y, torch.autograd.grad(y, [x, *weights], dy)

        return step


HARNESSES = {
    "tensorflow": _TensorFlowHarness,
    "jax": _JaxHarness,
    "torch": _TorchHarness,
}


# --- Timing. ---------------------------------------------------------------


# Wall time, or the CPU time of the whole process (all its threads): on a
# shared machine the wall clock also counts the time this process waited
# for a core, which other jobs' load makes vary from round to round.
CLOCKS = {"wall": time.perf_counter, "process": time.process_time}
_clock = CLOCKS["wall"]


def _time_once(call, sync, inner):
    start = _clock()
    for _ in range(inner):
        sync(call())
    return (_clock() - start) / inner


def interleaved_ratios(calls, baseline, sync, rounds, min_seconds, seed=0):
    """Times `calls` round-robin; returns per-candidate ratio lists.

    Args:
        calls: dict name -> zero-argument callable (already warmed up).
        baseline: the key every ratio is taken against, round by round.
        sync: waits for a call's result (JAX dispatch is asynchronous).
        rounds: number of rounds; each times every call once, in a
            shuffled order so that no candidate always follows another.
        min_seconds: each timing repeats a call until the baseline would
            take about this long, so timer resolution does not matter.

    Returns:
        (ratios, baseline_seconds): name -> list of per-round ratios, and
        the list of the baseline's per-call times.
    """
    probe = min(_time_once(calls[baseline], sync, 1) for _ in range(3))
    inner = max(1, math.ceil(min_seconds / max(probe, 1e-9)))
    rng = np.random.default_rng(seed)
    names = list(calls)
    times = {name: [] for name in names}
    for _ in range(rounds):
        for index in rng.permutation(len(names)):
            name = names[index]
            times[name].append(_time_once(calls[name], sync, inner))
    base = times[baseline]
    ratios = {
        name: [t / b for t, b in zip(times[name], base)] for name in names
    }
    return ratios, base


def _summary(ratios):
    if not ratios:
        return "—"
    q1, median, q3 = np.percentile(ratios, [25, 50, 75])
    return f"{median:.2f} [{q1:.2f}–{q3:.2f}]"


def _median(values):
    return statistics.median(values) if values else float("nan")


def _warm(calls, sync, times=2):
    for call in calls.values():
        for _ in range(times):
            sync(call())


def _ms(seconds):
    return f"{seconds * 1e3:.2f} ms"


def _verdict(pairs):
    """'pass' / 'MISS (x over)' for [(median, limit), ...]; '' if none."""
    # Judged at the precision printed: a median shown as 1.00 meets <= 1.00.
    pairs = [(round(m, 2), limit) for m, limit in pairs if limit is not None]
    if not pairs:
        return ""
    misses = [(m, limit) for m, limit in pairs if m > limit]
    if not misses:
        return "pass"
    worst = max(m / limit for m, limit in misses)
    return f"**MISS** (+{(worst - 1) * 100:.0f}% over)"


def _table(rows, columns=("fwd ratio", "fwd+bwd ratio")):
    lines = [
        f"| candidate | {columns[0]} | {columns[1]} | target | result |",
        "|---|---|---|---|---|",
    ]
    for name, fwd, fwd_bwd, targets in rows:
        target_text = ", ".join(
            f"{label} ≤ {limit:.2f}"
            for label, limit in zip(("fwd", "f+b"), targets)
            if limit is not None
        )
        verdict = _verdict(
            [(_median(fwd), targets[0]), (_median(fwd_bwd), targets[1])]
        )
        lines.append(
            f"| {name} | {_summary(fwd)} | {_summary(fwd_bwd)} | "
            f"{target_text or '—'} | {verdict or 'info'} |"
        )
    return "\n".join(lines)


# --- a. Elementwise. -------------------------------------------------------


def _erf_gelu(x):
    import tensorflow as tf

    return 0.5 * x * (1.0 + tf.math.erf(x * (1.0 / math.sqrt(2.0))))


def elementwise_candidates():
    """name -> (fn, targets, options) for the current backend."""
    no_target = (None, None)
    candidates = {
        "relu (keras.ops.relu), baseline": (ops.relu, no_target, {}),
    }
    for mode in ("none", "tanh", "sigmoid"):
        candidates[f"keras_gelu.gelu {mode}"] = (
            lambda x, mode=mode: keras_gelu.gelu(x, approximate=mode),
            EXACT_TARGET if mode == "none" else APPROXIMATE_TARGET,
            {},
        )
    candidates["keras.activations.gelu (exact)"] = (
        keras.activations.gelu,
        no_target,
        {},
    )
    candidates["keras.ops.gelu (tanh)"] = (ops.gelu, no_target, {})
    if BACKEND == "tensorflow":
        import tensorflow as tf

        candidates["tf.nn.gelu (exact)"] = (tf.nn.gelu, no_target, {})
        candidates["erf formula, full XLA (jit_compile=True)"] = (
            _erf_gelu,
            no_target,
            {"jit": True},
        )
        candidates["keras_gelu.gelu none, xla_fusion(False)"] = (
            lambda x: keras_gelu.gelu(x),
            no_target,
            {"fusion": False},
        )
    return candidates


def _build(harness, fn, x, dy, options):
    """Traces/compiles fwd and fwd+bwd calls for one candidate."""
    options = dict(options)
    fusion = options.pop("fusion", True)
    # keras_gelu picks its kernels at trace time, so trace inside the block
    # and warm up (which traces) there too.
    with keras_gelu.xla_fusion(fusion):
        calls = (
            harness.forward(fn, x, **options),
            harness.forward_backward(fn, x, dy, **options),
        )
        for call in calls:
            harness.sync(call())
    return calls


def time_elementwise(harness, candidates, x, dy, args):
    """Sections a, e and f's timing: forward and forward+backward ratios
    to ReLU, each its own interleaved run.

    Args:
        candidates: name -> (fn, options for `_build`); the first one,
            "relu (keras.ops.relu), baseline", is the baseline.

    Returns:
        (fwd, fwd_bwd, fwd_base, fwd_bwd_base): name -> per-round ratios,
        twice, and the baseline's per-call seconds, twice.
    """
    fwd_calls, fwd_bwd_calls = {}, {}
    for name, (fn, options) in candidates.items():
        fwd_calls[name], fwd_bwd_calls[name] = _build(harness, fn, x, dy, options)
    return _time_built(harness, fwd_calls, fwd_bwd_calls, args)


def _time_built(harness, fwd_calls, fwd_bwd_calls, args):
    fwd, fwd_base = interleaved_ratios(
        fwd_calls, BASELINE, harness.sync, args.repeats, args.min_seconds
    )
    fwd_bwd, fwd_bwd_base = interleaved_ratios(
        fwd_bwd_calls, BASELINE, harness.sync, args.repeats, args.min_seconds
    )
    return fwd, fwd_bwd, fwd_base, fwd_bwd_base


BASELINE = "relu (keras.ops.relu), baseline"


def bench_elementwise(harness, args, out):
    rng = np.random.default_rng(0)
    # Standard normal inputs: the range activations see after a LayerNorm.
    x = harness.tensor(rng.standard_normal(args.size).astype("float32"))
    dy = harness.tensor(rng.standard_normal(args.size).astype("float32"))
    candidates = elementwise_candidates()
    fwd_calls, fwd_bwd_calls, targets = {}, {}, {}
    for name, (fn, target, options) in candidates.items():
        fwd_calls[name], fwd_bwd_calls[name] = _build(
            harness, fn, x, dy, options
        )
        targets[name] = target

    skipped = []
    if BACKEND == "torch" and args.torch_compile:
        budget_end = time.perf_counter() + args.compile_budget
        for name in ("relu (keras.ops.relu), baseline", *list(candidates)[1:]):
            fn, target, _ = candidates[name]
            if time.perf_counter() > budget_end:
                skipped.append(name)
                continue
            short = name.replace(", baseline", "")
            try:
                calls = _build(harness, fn, x, dy, {"compiled": True})
            except Exception as error:  # noqa: BLE001 — report, don't crash.
                skipped.append(f"{name} ({type(error).__name__})")
                continue
            label = f"{short} [torch.compile]"
            fwd_calls[label], fwd_bwd_calls[label] = calls
            targets[label] = target

    fwd, fwd_bwd, fwd_base, fwd_bwd_base = _time_built(
        harness, fwd_calls, fwd_bwd_calls, args
    )
    rows = [(n, fwd[n], fwd_bwd[n], targets[n]) for n in fwd_calls]
    out(
        f"#### a. Elementwise, {args.size:,} float32 elements "
        f"({harness.name})\n"
    )
    out(_table(rows))
    out(
        f"\nReLU absolute (median): forward {_ms(_median(fwd_base))}, "
        f"forward+backward {_ms(_median(fwd_bwd_base))}."
    )
    if BACKEND == "torch":
        if not args.torch_compile:
            out("torch.compile rows: skipped (--no-torch-compile).")
        elif skipped:
            out(f"torch.compile skipped (over budget or failed): {skipped}.")
    out("")


# --- b. FFN train step. ----------------------------------------------------


def _ffn_model(activation, hidden, width, match_params=False):
    inputs = keras.Input((width,))
    ffn = keras_gelu.FeedForward(
        hidden, activation=activation, match_params=match_params, name="ffn"
    )
    model = keras.Model(inputs, ffn(inputs))
    # jit_compile=False: TF runs the plain graph (the activation's own XLA
    # fusion is what is measured) and torch runs eagerly. JAX has no
    # graph mode without jit, so it keeps jax.jit.
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss="mse",
        jit_compile=BACKEND == "jax",
    )
    return model, ffn.inner_dim


def bench_ffn(harness, args, out):
    batch, width, hidden = args.ffn_batch, 512, 2048
    rng = np.random.default_rng(1)
    x_np = rng.standard_normal((batch, width)).astype("float32")
    y_np = rng.standard_normal((batch, width)).astype("float32")
    x = harness.tensor(x_np)
    specs = {
        "FFN relu, baseline": ("relu", False, (None, None)),
        "FFN keras_gelu.gelu (exact)": ("gelu", False, (None, FFN_TARGET)),
        "FFN keras_gelu.gelu_tanh": ("gelu_tanh", False, (None, FFN_TARGET)),
        "FFN keras_gelu.gelu_sigmoid": (
            "gelu_sigmoid",
            False,
            (None, FFN_TARGET),
        ),
        "FFN geglu, match_params": ("geglu", True, (None, None)),
        "FFN swiglu, match_params": ("swiglu", True, (None, None)),
    }
    fwd_calls, step_calls, targets, labels = {}, {}, {}, {}
    for name, (activation, match, target) in specs.items():
        keras.utils.set_random_seed(0)
        model, inner = _ffn_model(activation, hidden, width, match)
        label = f"{name} (hidden {inner})"
        labels[name] = label
        if BACKEND == "jax":
            fwd_calls[label] = harness.forward(model, x, layer=model)
        else:
            fwd_calls[label] = harness.forward(model, x)
        step_calls[label] = lambda model=model: model.train_on_batch(x_np, y_np)
        targets[label] = target
    _warm(fwd_calls, harness.sync)
    _warm(step_calls, harness.sync)
    baseline = labels["FFN relu, baseline"]
    rounds = max(3, args.repeats // 2)
    fwd, fwd_base = interleaved_ratios(
        fwd_calls, baseline, harness.sync, rounds, args.min_seconds
    )
    step, step_base = interleaved_ratios(
        step_calls, baseline, harness.sync, rounds, args.min_seconds
    )
    rows = [(n, fwd[n], step[n], targets[n]) for n in fwd_calls]
    out(
        f"#### b. FFN, batch {batch} x {width} -> {hidden} -> {width}, "
        f"MSE, Adam\n"
    )
    out(_table(rows, columns=("fwd ratio", "train step ratio")))
    out(
        f"\nReLU FFN absolute (median): forward {_ms(_median(fwd_base))}, "
        f"train_on_batch {_ms(_median(step_base))}. Forward = model call "
        f"({harness.name}); train step = `train_on_batch` (forward, "
        f"backward, Adam), jit_compile={BACKEND == 'jax'}. Gated FFNs use "
        f"match_params=True (hidden width 2/3, same weight count).\n"
    )


# --- c. Fused gated projection. ---------------------------------------------


class _TwoDenseGLU(keras.layers.Layer):
    """The unfused reference: gelu(x W) * (x V) with two Dense layers."""

    def __init__(self, units, name="two_dense_glu", **kwargs):
        super().__init__(name=name, **kwargs)
        self.gate_proj = keras.layers.Dense(units, name="gate_proj")
        self.up_proj = keras.layers.Dense(units, name="up_proj")

    def build(self, input_shape):
        self.gate_proj.build(input_shape)
        self.up_proj.build(input_shape)

    def call(self, inputs):
        return keras_gelu.gelu(self.gate_proj(inputs)) * self.up_proj(inputs)


def bench_glu(harness, args, out):
    batch, width, units = args.ffn_batch, 512, 2048
    rng = np.random.default_rng(2)
    x = harness.tensor(rng.standard_normal((batch, width)).astype("float32"))
    dy = harness.tensor(rng.standard_normal((batch, units)).astype("float32"))
    layers = {
        "two Dense + multiply, baseline": (_TwoDenseGLU(units), (None, None)),
        "keras_gelu.GLU(units, 'gelu') fused": (
            keras_gelu.GLU(units, activation="gelu"),
            (GLU_TARGET, GLU_TARGET),
        ),
    }
    fwd_calls, fwd_bwd_calls, targets = {}, {}, {}
    for name, (layer, target) in layers.items():
        layer.build((batch, width))
        if BACKEND == "jax":
            fwd_calls[name] = harness.forward(layer, x, layer=layer)
        else:
            fwd_calls[name] = harness.forward(layer, x)
        fwd_bwd_calls[name] = harness.forward_backward(
            layer, x, dy, layer=layer
        )
        targets[name] = target
    _warm(fwd_calls, harness.sync)
    _warm(fwd_bwd_calls, harness.sync)
    baseline = "two Dense + multiply, baseline"
    fwd, fwd_base = interleaved_ratios(
        fwd_calls, baseline, harness.sync, args.repeats, args.min_seconds
    )
    fwd_bwd, fwd_bwd_base = interleaved_ratios(
        fwd_bwd_calls, baseline, harness.sync, args.repeats, args.min_seconds
    )
    rows = [(n, fwd[n], fwd_bwd[n], targets[n]) for n in fwd_calls]
    out(
        f"#### c. Gated projection, GEGLU, batch {batch} x {width} -> {units}\n"
    )
    out(_table(rows))
    out(
        f"\nTwo-Dense absolute (median): forward {_ms(_median(fwd_base))}, "
        f"forward+backward {_ms(_median(fwd_bwd_base))} (gradients with "
        f"respect to the input and all weights).\n"
    )


# --- d. The sigmoid mode's two forms. ---------------------------------------

# x * sigmoid(1.702 x) = 0.5 * x * (1 + tanh(0.851 x)) exactly, but in
# float32 1 + tanh cancels for negative x: the tanh form stays within the
# sigmoid form's accuracy (1.3e-6 relative) only for x > -1.5 (-2: 2.0e-6
# under XLA; -4: 6.5e-5), so an accurate kernel selects between the two.
SIGMOID_TANH_FROM = -1.5
_SIGMOID_SCALE = 1.702  # keras_gelu's sigmoid mode


def _sigmoid_form(x):
    return x * ops.sigmoid(_SIGMOID_SCALE * x)


def _sigmoid_form_grad(x):
    s = ops.sigmoid(_SIGMOID_SCALE * x)
    return s + x * s * (1.0 - s) * _SIGMOID_SCALE


def _tanh_form(x):
    return 0.5 * x * (1.0 + ops.tanh(0.5 * _SIGMOID_SCALE * x))


def _tanh_form_grad(x):
    t = ops.tanh(0.5 * _SIGMOID_SCALE * x)
    return 0.5 * (1.0 + t) + 0.25 * _SIGMOID_SCALE * x * (1.0 - t * t)


def _select_form(x):
    tail = x > SIGMOID_TANH_FROM
    return ops.where(tail, _tanh_form(x), _sigmoid_form(x))


def _select_form_grad(x):
    tail = x > SIGMOID_TANH_FROM
    return ops.where(tail, _tanh_form_grad(x), _sigmoid_form_grad(x))


def sigmoid_form_candidates():
    """name -> kernel, each built the way keras_gelu builds its own.

    `fusion.fused` gives each form the path the library's kernels take
    on this backend (TF: nested XLA kernel with the analytic gradient;
    JAX: custom_jvp; torch: the formula, op by op).
    """
    from keras_gelu.activations import fusion

    forms = {
        "x·σ(1.702x)": (_sigmoid_form, _sigmoid_form_grad),
        "0.5·x·(1 + tanh(0.851x)) everywhere (inaccurate tail)": (
            _tanh_form,
            _tanh_form_grad,
        ),
        f"select: tanh form for x > {SIGMOID_TANH_FROM}, σ form below": (
            _select_form,
            _select_form_grad,
        ),
    }
    candidates = {
        "relu (keras.ops.relu), baseline": ops.relu,
        "keras_gelu.gelu sigmoid (the library)": (
            lambda x: keras_gelu.gelu(x, approximate="sigmoid")
        ),
    }
    for index, (name, (forward, derivative)) in enumerate(forms.items()):
        candidates[name] = fusion.fused(
            f"bench_sigmoid_form_{index}", forward, derivative
        )
    return candidates


def _sigmoid_form_error(fn):
    """Max relative error against float64 x * sigmoid(1.702 x), [-12, 12]."""
    x = np.linspace(-12.0, 12.0, 400_001).astype("float32")
    x64 = x.astype("float64")
    expected = x64 / (1.0 + np.exp(-_SIGMOID_SCALE * x64))
    y = ops.convert_to_numpy(fn(ops.convert_to_tensor(x))).astype("float64")
    nonzero = expected != 0
    return np.max(np.abs(y - expected)[nonzero] / np.abs(expected[nonzero]))


def bench_sigmoid_forms(harness, args, out):
    rng = np.random.default_rng(3)
    x = harness.tensor(rng.standard_normal(args.size).astype("float32"))
    dy = harness.tensor(rng.standard_normal(args.size).astype("float32"))
    candidates = sigmoid_form_candidates()
    fwd, fwd_bwd, fwd_base, _ = time_elementwise(
        harness, {name: (fn, {}) for name, fn in candidates.items()}, x, dy, args
    )
    rows = [(n, fwd[n], fwd_bwd[n], (None, None)) for n in candidates]
    out(
        f"#### d. Sigmoid mode, its two forms, {args.size:,} float32 "
        f"elements ({harness.name})\n"
    )
    out(_table(rows))
    errors = ", ".join(
        f"{name}: {_sigmoid_form_error(fn):.2g}"
        for name, fn in list(candidates.items())[1:]
    )
    out(
        f"\nReLU absolute (median): forward {_ms(_median(fwd_base))}. Max "
        f"relative error against float64 x·σ(1.702x) on 400,001 points in "
        f"[−12, 12]: {errors}.\n"
    )


# --- e. Exact-mode kernel history, A/B in one process. ----------------------

# Earlier exact-mode kernels, copied so that they run beside the current
# one, each through `fusion.fused` as the library builds its own (issue
# 15: was the tail change of 19f24cf slower, and does the +-inf guard cost
# anything? issue 20: which of the conflicting reports was right, and what
# does the bit-level exp of formulas._exp gain?). Built from the library's
# Mills-ratio pieces; every earlier kernel used ops.exp.


def _mills(t):
    # The (4, 5) rational these kernels had (as keras_gelu's has).
    from keras_gelu.activations import formulas as a

    return a._horner(t, _MILLS_45_P) / a._horner(t, _MILLS_45_Q)


def _kernel_before_tail_change(x):
    # 19f24cf~1: x * Phi(x), Phi from the Mills ratio. GELU(-inf) = NaN.
    gaussian = ops.exp(-0.5 * x * x)
    t = ops.minimum(ops.where(x < 0, -x, x), 20.0)
    lower = gaussian * _mills(t)
    return x * ops.where(x < 0, lower, 1.0 - lower)


def _kernel_tail_change(x):
    # 19f24cf..d8f338a~1: (x * m) * exp(-x**2 / 2). GELU(+-inf) = NaN.
    gaussian = ops.exp(-0.5 * x * x)
    t = ops.minimum(ops.where(x < 0, -x, x), 20.0)
    tail = (x * _mills(t)) * gaussian
    return ops.where(x < 0, tail, x - tail)


def _kernel_guard_ops_exp(x):
    # a743fa2..issue 20 (main at feeec68): the +-inf guard, ops.exp.
    t = ops.minimum(ops.where(x < 0, -x, x), 20.0)
    tail = (t * _mills(t)) * ops.exp(-0.5 * t * t)
    return ops.where(x < 0, -tail, x - tail)


def _grad_guard_ops_exp(x):
    # The derivative of the same commits, ops.exp.
    t = ops.minimum(ops.where(x < 0, -x, x), 20.0)
    gaussian = ops.exp(-0.5 * t * t)
    lower_tail = gaussian * _mills(t)
    density = (1.0 / math.sqrt(2.0 * math.pi)) * t * gaussian
    return ops.where(x < 0, lower_tail - density, (1.0 - lower_tail) + density)


# XLA's own GELU formulas (issue 20's anchors), compiled whole.
def _xla_erf_formula(x):
    return 0.5 * x * (1.0 + ops.erf(x * (1.0 / math.sqrt(2.0))))


def _xla_tanh_formula(x):
    inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)
    return 0.5 * x * (1.0 + ops.tanh(inner))


def _xla_sigmoid_formula(x):
    return x * ops.sigmoid(1.702 * x)


THIS_KERNEL = "exact, keras_gelu.gelu (this kernel)"
PREVIOUS_KERNEL = "exact, bit-level exp (main at c6699d9)"


def exact_history_candidates():
    """name -> (fn, options), the kernels of section e on this backend."""
    from keras_gelu.activations import fusion

    # The derivative in use at each commit (the bit-level exp is new).
    old_grad = _grad_guard_ops_exp
    candidates = {
        "relu (keras.ops.relu), baseline": (ops.relu, {}),
        "exact, before the tail change (19f24cf~1)": (
            fusion.fused(
                "bench_exact_before_tail", _kernel_before_tail_change, old_grad
            ),
            {},
        ),
        "exact, tail change, no ±inf guard (d8f338a~1)": (
            fusion.fused("bench_exact_tail", _kernel_tail_change, old_grad),
            {},
        ),
        "exact, ±inf guard, ops.exp (main at feeec68)": (
            fusion.fused(
                "bench_exact_guard", _kernel_guard_ops_exp, _grad_guard_ops_exp
            ),
            {},
        ),
        PREVIOUS_KERNEL: (
            fusion.fused("bench_exact_previous", *_exact_variant()),
            {},
        ),
        THIS_KERNEL: (
            keras_gelu.gelu,
            {},
        ),
    }
    if BACKEND == "tensorflow":
        import tensorflow as tf

        candidates["tf.nn.gelu (exact)"] = (tf.nn.gelu, {})
        jit = {"jit": True}
        candidates["relu, full XLA (jit_compile=True)"] = (ops.relu, jit)
    else:
        jit = {}
    if BACKEND in ("tensorflow", "jax"):
        candidates["XLA: erf formula 0.5x(1+erf(x/√2))"] = (
            _xla_erf_formula,
            jit,
        )
        candidates["XLA: tanh formula"] = (_xla_tanh_formula, jit)
        candidates["XLA: x·σ(1.702x)"] = (_xla_sigmoid_formula, jit)
    return candidates


def _time_on_normal_inputs(harness, candidates, args, seed):
    """`time_elementwise` on standard-normal x and dy of `args.size` (sections e, f, g)."""
    rng = np.random.default_rng(seed)
    x = harness.tensor(rng.standard_normal(args.size).astype("float32"))
    dy = harness.tensor(rng.standard_normal(args.size).astype("float32"))
    return time_elementwise(harness, candidates, x, dy, args)


def _exact_rows(candidates, fwd, fwd_bwd):
    """Table rows of sections e and f: the target on keras_gelu's kernel."""
    return [
        (n, fwd[n], fwd_bwd[n], EXACT_TARGET if n == THIS_KERNEL else (None, None))
        for n in candidates
    ]


def bench_exact_history(harness, args, out):
    candidates = exact_history_candidates()
    fwd, fwd_bwd, fwd_base, _ = _time_on_normal_inputs(harness, candidates, args, seed=4)
    rows = _exact_rows(candidates, fwd, fwd_bwd)
    out(
        f"#### e. Exact mode, its kernels over time beside XLA's formulas, "
        f"{args.size:,} float32 elements ({harness.name})\n"
    )
    out(_table(rows))
    out(
        f"\nReLU absolute (median): forward {_ms(_median(fwd_base))}. Each "
        f"earlier kernel runs with the derivative of its time (ops.exp); "
        f"the XLA rows are differentiated by autodiff (on torch the old "
        f"forms run as formulas, op by op: compare TF/JAX).\n"
    )


# Section f: where the exact kernel's time goes (issue 20 item 4). Each row
# is the kernel with one part changed; "time only" rows compute something
# else (their values are wrong) and only show what that part costs.
# The (4, 5) Mills rational of keras_gelu's kernel, for the history rows of
# section e (they had it too).
_MILLS_45_P = tuple(
    c / math.sqrt(2.0 * math.pi)
    for c in (1.2533141461512733, 1.1056872405905365, 0.4645457154621001,
              0.10362647528744941, 0.01058306574059824)
)  # fmt: skip
_MILLS_45_Q = (1.0, 1.680095836035833, 1.2111707967767669, 0.4749946656711991,
               0.10363201547629125, 0.010582967851537204)  # fmt: skip
# A cheaper candidate, tried and not shipped: exp's polynomial of degree 5
# with minimax relative error on |r| <= ln2 / 2 (1.6e-7 in float32; the
# kernel's degree-6 Taylor: 1.2e-7) and a (3, 4) Mills rational fitted for
# minimax relative error on [0, 20] (8.9e-7 in float32; the kernel's
# (4, 5): 4e-7). GELU itself stays within 4.5e-6, but its derivatives do
# not: tests/keras_gelu/test_activations.py's gradient (atol 2e-7), second
# derivative (rtol 1e-5) and minimum (3 ulps) tests fail with it.
_MINIMAX_EXP_5 = (1.0, 0.9999997071884889, 0.499991495297584, 0.16667636197782498,
                  0.041897929387382606, 0.008290314529051447)  # fmt: skip
_MILLS_34_P = tuple(
    c / math.sqrt(2.0 * math.pi)
    for c in (1.253313403777626, 0.9280706235470801, 0.311689430369147, 0.045633538797094)
)  # fmt: skip
_MILLS_34_Q = (1.0, 1.5383497332373721, 0.9763311828623806, 0.3115521042000287,
               0.04563636244153376)  # fmt: skip


def _bit_exp(poly):
    """formulas._exp with the polynomial `poly` (the range reduction as is)."""
    from keras_gelu.activations import formulas as a
    from keras_gelu.activations import fusion

    def exp(y):
        if not fusion.compiled(y):
            return ops.exp(y)
        y = ops.clip(y, *a._EXP_RANGE)
        n_bits = fusion.bits_of_float32(y * a._LOG2E + a._ROUNDER) - a._ROUNDER_BITS
        n = ops.cast(n_bits, "float32")
        r = (y - n * a._LN2_HIGH) - n * a._LN2_LOW
        scale = fusion.float32_of_bits(ops.left_shift(n_bits + 127, 23))
        return a._horner(r, poly) * scale

    return exp


def _exact_variant(exp=None, mills=None):
    """(f, f') of the previous exact kernel (main at c6699d9: formulas._exp,
    the (4, 5) rational as it was, the sign select) with `exp` or `mills`
    swapped; None keeps its own part."""
    from keras_gelu.activations import formulas as a

    exp = exp or a._exp
    mills = mills or (lambda t: a._horner(t, a._MILLS_P_PDF) / a._horner(t, a._MILLS_Q))

    def parts(x):
        t = ops.minimum(ops.where(x < 0, -x, x), a._EXACT_CLIP)
        return t, exp(-0.5 * t * t), mills(t)

    def forward(x):
        t, gaussian, m = parts(x)
        tail = (t * m) * gaussian
        return ops.where(x < 0, -tail, x - tail)

    def derivative(x):
        t, gaussian, m = parts(x)
        lower_tail = gaussian * m
        density = a._INV_SQRT_2PI * t * gaussian
        return ops.where(x < 0, lower_tail - density, (1.0 - lower_tail) + density)

    return forward, derivative


CANDIDATE_KERNEL = "candidate: degree-5 minimax exp, (3, 4) rational (not shipped)"


def _this_variant(gaussian=None, mills=None):
    """(f, f') of keras_gelu's compiled exact kernel (formulas.py) with
    exp(-t**2/2) or the Mills rational swapped; None keeps its own part.
    Compiled kernels only (XLA drops the part that is replaced)."""
    from keras_gelu.activations import formulas as a

    def parts(t, constants):
        t, g, m, c = a._compiled_gaussian_and_mills(t, constants)
        g = gaussian(t) * constants[0] if gaussian else g
        return t, g, mills(t) if mills else m, c

    def forward(x):
        t, g, m, _ = parts(ops.abs(x), a._GAUSS_FORWARD)
        return ops.maximum(x, 0.0) - (t * m) * g

    def derivative(x):
        t, g, m, c = parts(ops.where(x < 0, -x, x), a._GAUSS_DERIVATIVE)
        below = g * (m - c * t)
        return ops.where(x < 0, below, 1.0 - below)

    return forward, derivative


def exact_parts_candidates():
    """name -> (fn, options), the kernels of section f."""
    from keras_gelu.activations import formulas as a
    from keras_gelu.activations import fusion

    def horner(p, q):
        return lambda t: a._horner(t, p) / a._horner(t, q)

    variants = {
        PREVIOUS_KERNEL: _exact_variant(),
        CANDIDATE_KERNEL: _exact_variant(_bit_exp(_MINIMAX_EXP_5), horner(_MILLS_34_P, _MILLS_34_Q)),
        "this kernel, exp(-t²/2) by ops.exp (XLA's)": _this_variant(
            gaussian=lambda t: ops.exp(-0.5 * t * t)
        ),
        "this kernel, no exp (g -> 1 - t²/2: time only)": _this_variant(gaussian=lambda t: 1.0 - 0.5 * t * t),
        "this kernel, no rational (m -> 0.4: time only)": _this_variant(mills=lambda t: 0.4),
        "this kernel, no division (P·Q for P/Q: time only)": _this_variant(
            mills=lambda t: a._horner(t, a._GAUSS_FORWARD[2]) * a._horner_monic(t, a._GAUSS_FORWARD[3])
        ),
    }
    candidates = {
        "relu (keras.ops.relu), baseline": (ops.relu, {}),
        THIS_KERNEL: (keras_gelu.gelu, {}),
    }
    for k, (name, (forward, derivative)) in enumerate(variants.items()):
        candidates[name] = (fusion.fused(f"bench_exact_parts_{k}", forward, derivative), {})
    if BACKEND in ("tensorflow", "jax"):
        jit = {"jit": True} if BACKEND == "tensorflow" else {}
        candidates["XLA: erf formula 0.5x(1+erf(x/√2))"] = (_xla_erf_formula, jit)
    return candidates


def _worst_relative_error(fn, harness):
    """Largest |fn(x) / GELU(x) - 1| wherever GELU(x) is a normal float32
    (x in [-13.14, 12], 400,001 points), compiled as section f runs it."""
    from scipy.special import ndtr

    x = np.linspace(-13.14, 12.0, 400_001).astype(np.float32)
    step = harness.forward(fn, harness.tensor(x))
    y = np.asarray(ops.convert_to_numpy(harness.sync(step())), np.float64)
    x64 = x.astype(np.float64)
    reference = x64 * ndtr(x64)
    keep = reference != 0.0
    return float(np.max(np.abs(y[keep] / reference[keep] - 1.0)))


def bench_exact_parts(harness, args, out):
    candidates = exact_parts_candidates()
    fwd, fwd_bwd, fwd_base, _ = _time_on_normal_inputs(harness, candidates, args, seed=5)
    rows = _exact_rows(candidates, fwd, fwd_bwd)
    out(
        f"#### f. Exact mode: where the kernel's time goes, {args.size:,} float32 "
        f"elements ({harness.name})\n"
    )
    out(_table(rows))
    errors = {
        name: _worst_relative_error(candidates[name][0], harness)
        for name in (THIS_KERNEL, PREVIOUS_KERNEL, CANDIDATE_KERNEL, "XLA: erf formula 0.5x(1+erf(x/√2))")
        if name in candidates
    }
    out(
        f"\nReLU absolute (median): forward {_ms(_median(fwd_base))}. Largest "
        f"relative error against float64 x·Φ(x) where GELU is a normal float32 "
        f"(x in [-13.14, 12]), as compiled here: "
        + "; ".join(f"{name}: {error:.1e}" for name, error in errors.items())
        + ".\n"
    )


# --- g. The tanh and sigmoid modes: this kernel vs the previous one. -------


def modes_candidates():
    """name -> (fn, options): ReLU, each approximate mode's kernel and its
    previous forward (the formula through `_saturating`, with `_exp` in
    the sigmoid; main before issue 20's `_exp2` forms), same derivative."""
    from keras_gelu.activations import formulas as a
    from keras_gelu.activations import fusion

    return {
        BASELINE: (ops.relu, {}),
        "tanh, keras_gelu.gelu_tanh (this kernel: x / (1 + 2**w))": (keras_gelu.gelu_tanh, {}),
        "tanh, previous kernel (0.5x(1 + tanh u), XLA's tanh)": (
            fusion.fused("bench_modes_tanh", a._gelu_tanh_saturating, a._gelu_tanh_grad), {}
        ),
        "sigmoid, keras_gelu.gelu_sigmoid (this kernel: x / (1 + 2**w))": (keras_gelu.gelu_sigmoid, {}),
        "sigmoid, previous kernel (x·σ(1.702x), formulas._exp)": (
            fusion.fused("bench_modes_sigmoid", a._gelu_sigmoid_saturating, a._gelu_sigmoid_grad), {}
        ),
    }


def _mode_errors(candidates, harness):
    """Largest |y - formula| over [-130, 130] (400,001 points), and the
    largest relative error where the float64 formula is >= 1e-30."""
    x = np.linspace(-130.0, 130.0, 400_001).astype(np.float32)
    x64 = x.astype(np.float64)
    with np.errstate(over="ignore"):
        # 0.5 x (1 + tanh(u)) as x sigmoid(2u): float64's 1 + tanh(u) cancels for u << 0.
        tanh = x64 / (1.0 + np.exp(-2.0 * math.sqrt(2.0 / math.pi) * x64 * (1.0 + 0.044715 * x64**2)))
        sigmoid = x64 / (1.0 + np.exp(-_SIGMOID_SCALE * x64))
    errors = {}
    for name, (fn, _) in list(candidates.items())[1:]:
        step = harness.forward(fn, harness.tensor(x))
        y = np.asarray(ops.convert_to_numpy(harness.sync(step())), np.float64)
        expected = tanh if name.startswith("tanh") else sigmoid
        keep = np.abs(expected) >= 1e-30
        errors[name] = (
            float(np.max(np.abs(y - expected))),
            float(np.max(np.abs(y[keep] / expected[keep] - 1.0))),
        )
    return errors


def bench_modes(harness, args, out):
    candidates = modes_candidates()
    fwd, fwd_bwd, fwd_base, _ = _time_on_normal_inputs(harness, candidates, args, seed=7)
    rows = [(n, fwd[n], fwd_bwd[n], (None, None)) for n in candidates]
    out(f"#### g. tanh and sigmoid modes, this kernel and the previous, {args.size:,} float32 elements ({harness.name})\n")
    out(_table(rows))
    errors = _mode_errors(candidates, harness)
    out(
        f"\nReLU absolute (median): forward {_ms(_median(fwd_base))}. Against the float64 formula "
        f"on 400,001 points in [−130, 130], largest absolute error / largest relative error where "
        f"it is ≥ 1e-30: "
        + "; ".join(f"{name}: {ab:.1e} / {rel:.1e}" for name, (ab, rel) in errors.items())
        + ".\n"
    )


# --- h. Fifth round: each mode's kernel beside other forwards. -----------
# Issue 20 item 4: each mode's forward as shipped, the exact mode's
# previous forward and cheaper candidates (not shipped), each with its
# mode's derivative kernel unchanged (the derivative's tests bound its
# slope, not only its values: section f). The candidates' polynomials,
# fitted for minimax relative error by linear programming: exp(r) on
# |r| <= ln2 / 2 and 2**f on |f| <= 1/2 by degree 4 (2.8e-6 each;
# degree 5: 7e-8).
_EXP_MINIMAX_4 = (1.0, 0.9999671722992499, 0.5000320522529009, 0.1678723899865425,
                  0.04149833214210375)  # fmt: skip
_EXP2_MINIMAX_4 = (1.0, 0.6931241184421075, 0.24024107278673373, 0.05590682995345042,
                   0.009582576647333349)  # fmt: skip


def _exact_forward(constants):
    """keras_gelu's compiled exact forward with `constants`
    (formulas._gauss_constants)."""
    from keras_gelu.activations import formulas as a

    def forward(x):
        t, g, m, _ = a._compiled_gaussian_and_mills(ops.abs(x), constants)
        return ops.maximum(x, 0.0) - (t * m) * g

    return forward


def _tanh_forward(polynomial):
    """keras_gelu's compiled tanh forward with `polynomial` for 2**f."""
    from keras_gelu.activations import formulas as a

    def forward(x):
        x = ops.maximum(x, -11.0)
        w = ops.clip(x * (a._TANH_W_LINEAR + a._TANH_W_CUBIC * (x * x)), -127.0, 128.0)
        return x / (1.0 + a._exp2(w, polynomial))

    return forward


def _sigmoid_forward(polynomial):
    """keras_gelu's compiled sigmoid forward with `polynomial` for 2**f."""
    from keras_gelu.activations import formulas as a

    def forward(x):
        x = ops.maximum(x, -a.SIGMOID_CLIP)
        w = ops.clip(x * (-a.SIGMOID_SCALE * a._LOG2E), -127.0, 128.0)
        return x / (1.0 + a._exp2(w, polynomial))

    return forward


def kernel_candidates():
    """name -> (fn, options, mode): ReLU, each mode's kernel as shipped, the
    exact mode's previous forward and the candidates (each with its mode's
    derivative kernel)."""
    from keras_gelu.activations import formulas as a
    from keras_gelu.activations import fusion

    shipped = a._GAUSS_FORWARD
    previous = a._gauss_constants(a._EXP_MINIMAX_5)
    exp_4 = a._gauss_constants(_EXP_MINIMAX_4, a._MILLS_34_P, a._MILLS_34_Q)
    grad = a._gelu_exact_grad
    variants = {
        "exact, previous forward ((4, 5) Mills rational)": ("none", _exact_forward(previous), grad),
        "exact, shipped with a degree-4 exp (not shipped)": ("none", _exact_forward(exp_4), grad),
        "exact, shipped, rebuilt here (same constants)": ("none", _exact_forward(shipped), grad),
        "tanh, shipped, rebuilt here (degree-5 2**f)": ("tanh", _tanh_forward(a._EXP2_MINIMAX_5), a._gelu_tanh_grad),
        "tanh, degree-4 2**f (not shipped)": ("tanh", _tanh_forward(_EXP2_MINIMAX_4), a._gelu_tanh_grad),
        "sigmoid, degree-4 2**f (not shipped)": ("sigmoid", _sigmoid_forward(_EXP2_MINIMAX_4), a._gelu_sigmoid_grad),
    }
    candidates = {
        BASELINE: (ops.relu, {}, None),
        "exact, keras_gelu.gelu (as shipped)": (keras_gelu.gelu, {}, "none"),
        "tanh, keras_gelu.gelu_tanh (as shipped)": (keras_gelu.gelu_tanh, {}, "tanh"),
        "sigmoid, keras_gelu.gelu_sigmoid (as shipped)": (keras_gelu.gelu_sigmoid, {}, "sigmoid"),
    }
    for k, (name, (mode, forward, derivative)) in enumerate(variants.items()):
        candidates[name] = (fusion.fused(f"bench_kernels_{k}", forward, derivative), {}, mode)
    return candidates


def _kernel_error(fn, mode, harness):
    """Largest relative error of `fn`'s compiled forward: exact mode against
    float64 x·Φ(x) where GELU is a normal float32 (x in [-13.14, 12]); the
    other modes against float64 x·σ(2u) / x·σ(1.702x) on [-130, 130] where
    that is >= 1e-30."""
    if mode == "none":
        return _worst_relative_error(fn, harness)
    x = np.linspace(-130.0, 130.0, 400_001).astype(np.float32)
    x64 = x.astype(np.float64)
    scale = 2.0 * math.sqrt(2.0 / math.pi) * (1.0 + 0.044715 * x64**2) if mode == "tanh" else _SIGMOID_SCALE
    with np.errstate(over="ignore"):
        expected = x64 / (1.0 + np.exp(-scale * x64))
    step = harness.forward(fn, harness.tensor(x))
    y = np.asarray(ops.convert_to_numpy(harness.sync(step())), np.float64)
    keep = np.abs(expected) >= 1e-30
    return float(np.max(np.abs(y[keep] / expected[keep] - 1.0)))


_NOT_A_LANE_OPERATION = {"parameter", "constant", "broadcast", "fusion", "tuple", "get-tuple-element", "bitcast", "copy"}


def hlo_operations(fn, gradient=False):
    """TensorFlow: operations a lane in XLA's optimized HLO of `fn`'s
    forward (or of its vector-Jacobian product alone), compiled whole;
    constants, broadcasts and bitcasts of layout not counted. A multiply
    and an add are two (XLA's CPU backend does not contract them to FMAs)."""
    import re

    import tensorflow as tf

    def vjp(x, dy):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = fn(x)
        return tape.gradient(y, x, output_gradients=dy)

    x = tf.constant(np.linspace(-3.0, 3.0, 1024, dtype=np.float32))
    step = tf.function(vjp if gradient else (lambda x: fn(x)), jit_compile=True, autograph=False)
    hlo = step.experimental_get_compiler_ir(*((x, x) if gradient else (x,)))(stage="optimized_hlo")
    ops_found = re.findall(r"= \S+ ([a-z][\w-]*)\(", hlo)
    return sum(1 for op in ops_found if op not in _NOT_A_LANE_OPERATION)


def bench_kernels(harness, args, out):
    candidates = kernel_candidates()
    timed = {name: (fn, options) for name, (fn, options, _) in candidates.items()}
    fwd, fwd_bwd, fwd_base, fwd_bwd_base = _time_on_normal_inputs(harness, timed, args, seed=8)
    targets = {None: (None, None), "none": EXACT_TARGET, "tanh": APPROXIMATE_TARGET, "sigmoid": APPROXIMATE_TARGET}
    rows = [(n, fwd[n], fwd_bwd[n], targets[mode]) for n, (_, _, mode) in candidates.items()]
    out(
        f"#### h. Each mode's kernel beside its previous forward and cheaper ones, {args.size:,} float32 "
        f"elements ({harness.name})\n"
    )
    out(_table(rows))
    errors = {
        name: _kernel_error(fn, mode, harness)
        for name, (fn, _, mode) in list(candidates.items())[1:]
    }
    pairs = [
        ("exact, shipped / previous", "exact, shipped, rebuilt here (same constants)",
         "exact, previous forward ((4, 5) Mills rational)"),
        ("tanh, degree-4 / shipped", "tanh, degree-4 2**f (not shipped)", "tanh, shipped, rebuilt here (degree-5 2**f)"),
    ]  # fmt: skip
    out(
        "\nSame rounds, one forward against another, both built here "
        "(median of the per-round time ratios, [interquartile range]): "
        + "; ".join(
            f"{mode} forward {_summary([a / b for a, b in zip(fwd[new], fwd[old])])}, "
            f"forward+backward {_summary([a / b for a, b in zip(fwd_bwd[new], fwd_bwd[old])])}"
            for mode, new, old in pairs
        )
        + "."
    )
    if BACKEND == "tensorflow":
        counts = {
            name: (hlo_operations(fn), hlo_operations(fn, gradient=True))
            for name, (fn, _, _) in candidates.items()
        }
        out(
            "\nOperations a lane in XLA's optimized HLO, forward / backward (the "
            "vector-Jacobian product alone, dy times f'(x)), each compiled whole: "
            + "; ".join(f"{name}: {f} / {b}" for name, (f, b) in counts.items())
            + "."
        )
    out(
        f"\nReLU absolute (median): forward {_ms(_median(fwd_base))}, forward+backward "
        f"{_ms(_median(fwd_bwd_base))}. Largest relative error, as compiled here (exact: "
        f"against float64 x·Φ(x) where GELU is a normal float32; tanh, sigmoid: against "
        f"float64 x·σ(2u), x·σ(1.702x) on [−130, 130] where ≥ 1e-30): "
        + "; ".join(f"{name}: {error:.1e}" for name, error in errors.items())
        + ".\n"
    )


# --- CLI. ------------------------------------------------------------------

SECTIONS = {
    "elementwise": bench_elementwise,
    "ffn": bench_ffn,
    "glu": bench_glu,
    "sigmoid": bench_sigmoid_forms,
    "exact_history": bench_exact_history,
    "exact_parts": bench_exact_parts,
    "modes": bench_modes,
    "kernels": bench_kernels,
}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=(
            "Time keras_gelu's activations against ReLU on the current "
            "Keras backend (set KERAS_BACKEND) and print Markdown tables."
        )
    )
    parser.add_argument(
        "--size",
        type=int,
        default=4 * 1024 * 1024,
        help="elements of the elementwise benchmark (default 4M = 2**22)",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=30,
        help="round-robin rounds per section (FFN: half; default 30)",
    )
    parser.add_argument(
        "--min-seconds",
        type=float,
        default=0.03,
        help="repeat each timed call until the baseline takes about this long",
    )
    parser.add_argument(
        "--ffn-batch",
        type=int,
        default=1024,
        help="batch of the FFN and GLU benchmarks (default 1024)",
    )
    parser.add_argument(
        "--sections",
        nargs="+",
        choices=list(SECTIONS),
        default=list(SECTIONS),
        help="which sections to run (default: all)",
    )
    parser.add_argument(
        "--no-torch-compile",
        dest="torch_compile",
        action="store_false",
        help="torch backend: skip the torch.compile rows",
    )
    parser.add_argument(
        "--compile-budget",
        type=float,
        default=180.0,
        help="torch backend: seconds allowed for torch.compile before "
        "the remaining compiled rows are skipped (default 180)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="intra-op threads for TensorFlow and torch (default: theirs). "
        "On a loaded machine torch's OpenMP threads spin against other "
        "processes; --threads 1 gives steadier numbers. Ignored on JAX.",
    )
    parser.add_argument(
        "--clock",
        choices=list(CLOCKS),
        default="wall",
        help="what a round times: wall time (default) or the process's CPU "
        "time, steadier on a loaded machine (a run of one thread per op, "
        "e.g. --threads 1, then measures cycles spent, not cores waited for)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: 256K elements, 5 rounds, batch 128, no torch.compile",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.size, args.repeats, args.ffn_batch = 2**18, 5, 128
        args.min_seconds, args.torch_compile = 0.005, False
    return args


def _revision():
    """'abc1234' (+ ' with local changes') of the checkout, or 'unknown'."""
    root = Path(__file__).resolve().parents[1]

    def git(*command):
        return subprocess.run(
            ["git", *command], cwd=root, capture_output=True, text=True
        ).stdout.strip()

    try:
        commit = git("rev-parse", "--short", "HEAD")
        dirty = git(
            "status", "--porcelain", "--untracked-files=no", "keras_gelu"
        )
    except OSError:
        return "unknown"
    return (commit or "unknown") + (" with local changes" if dirty else "")


def main(argv=None):
    global _clock
    args = parse_args(argv)
    _clock = CLOCKS[args.clock]
    harness = HARNESSES[BACKEND](threads=args.threads)
    versions = {
        "keras": keras.__version__,
        "keras_gelu": keras_gelu.__version__,
    }
    backend_module = {
        "tensorflow": "tensorflow",
        "jax": "jax",
        "torch": "torch",
    }
    module = __import__(backend_module[BACKEND])
    versions[BACKEND] = module.__version__
    print(
        f"### Backend `{BACKEND}` — "
        f"{datetime.date.today().isoformat()}, {os.cpu_count()} cores, "
        f"{platform.machine()}, "
        + ", ".join(f"{k} {v}" for k, v in versions.items())
        + (f", --threads {args.threads}" if args.threads else "")
        + (
            f", XLA_FLAGS={os.environ['XLA_FLAGS']}"
            if os.environ.get("XLA_FLAGS")
            else ""
        )
        + f", --clock {args.clock}, load average "
        + " / ".join(f"{v:.1f}" for v in os.getloadavg())
        + f", commit {_revision()}"
    )
    print(
        f"\nRatios: median over rounds of (candidate / baseline in the same "
        f"round), [interquartile range]; {args.repeats} rounds "
        f"(FFN {max(3, args.repeats // 2)}), shuffled order each round. "
        f"Lower is faster.\n",
        flush=True,
    )
    for section in args.sections:
        try:
            SECTIONS[section](
                harness, args, lambda text: print(text, flush=True)
            )
        except (
            Exception
        ):  # noqa: BLE001 — one broken section must not hide the rest.
            traceback.print_exc()
            print(
                f"#### {section}: FAILED on this backend "
                "(traceback on stderr)\n"
            )
    print(
        "Load average at the end: "
        + " / ".join(f"{v:.1f}" for v in os.getloadavg())
        + " (1, 5, 15 minutes)."
    )
    return 0


if __name__ == "__main__":
    main()
    sys.exit(0)
