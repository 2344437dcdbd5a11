"""GELU's cost beside ReLU's on TensorFlow's CPU, pass by pass (issue 20 §3).

Where ReLU's FFN step gets its edge, what each activation costs alone, in
float32 and in bfloat16, and what the one GELU that fuses costs in accuracy.

A Dense -> activation -> Dense block, `x (1024, 512) @ W1 (512, 2048) + b1`,
the activation, `@ W2 (2048, 512)`, trained through `tf.GradientTape` in a
`tf.function` (graph mode, no `jit_compile`, as Keras runs a CPU step),
with ReLU, no activation at all, keras_gelu's exact and tanh GELU, and
`tf.nn.gelu` after `tf.nn.bias_add` (the pattern TensorFlow's grappler
remapper hands to oneDNN as one `_FusedMatMul` with a GELU epilogue).
Rounds are interleaved in one process, shuffled, and each row's median
ratio to ReLU in the same round is printed, forward and step.

If ReLU's step equals the no-activation step, ReLU's forward and backward
passes cost nothing: oneDNN runs them inside the matmuls. keras_gelu's
kernels are passes of their own over the hidden activations (a nested XLA
kernel forward, one backward); the second table prints what each costs
alone on the same (1024, 2048) tensor, so the FFN's gap can be read as
whole passes. The third is the same under bfloat16 (a (4096, 512) tensor,
mixed_bfloat16's hidden activations), each mode with its casts inside the
nested kernel (`fusion._in_float32`, as shipped) and around it (as before
issue 20 §3's round 9; `lm_models.casts_around`). The last table is the
accuracy of the one GELU that fuses, oneDNN's epilogue, against the
float64 formula x * erfc(-x / sqrt 2) / 2, in the negative tail that
keras_gelu's accuracy promise (1e-5 relative wherever GELU is a normal
float32) covers:

    KERAS_BACKEND=tensorflow .venv/bin/python benchmarks/bench_ffn_fusion.py
"""

import argparse
import os
import random
import statistics
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import keras_gelu  # noqa: E402


def no_activation(h):
    return h


def keras_gelu_exact(h):
    return keras_gelu.gelu(h, approximate="none")


def keras_gelu_tanh(h):
    return keras_gelu.gelu(h, approximate="tanh")


def tf_gelu_exact(h):
    return tf.nn.gelu(h, approximate=False)


ACTIVATIONS = {
    "relu (tf.nn.relu)": tf.nn.relu,
    "no activation": no_activation,
    "keras_gelu.gelu, exact": keras_gelu_exact,
    "keras_gelu.gelu, tanh": keras_gelu_tanh,
    "tf.nn.gelu, exact (oneDNN epilogue)": tf_gelu_exact,
}


def ffn_functions(activation, x, w1, b1, w2):
    """The block's forward and its training step (gradients of all weights)."""

    @tf.function(autograph=False)
    def forward():
        return tf.matmul(activation(tf.nn.bias_add(tf.matmul(x, w1), b1)), w2)

    @tf.function(autograph=False)
    def step():
        with tf.GradientTape() as tape:
            y = tf.matmul(activation(tf.nn.bias_add(tf.matmul(x, w1), b1)), w2)
            loss = tf.reduce_mean(y * y)
        return tape.gradient(loss, [w1, b1, w2])

    return forward, step


def interleaved(functions, rounds, calls):
    """Median seconds per call of each function, rounds shuffled."""
    for fn in functions.values():
        for _ in range(3):
            tf.nest.map_structure(np.asarray, fn())
    seconds = {name: [] for name in functions}
    for _ in range(rounds):
        names = list(functions)
        random.shuffle(names)
        for name in names:
            start = time.perf_counter()
            for _ in range(calls):
                out = functions[name]()
            tf.nest.map_structure(np.asarray, out)
            seconds[name].append((time.perf_counter() - start) / calls)
    return seconds


def ratio(seconds, name, base):
    return statistics.median(a / b for a, b in zip(seconds[name], seconds[base]))


def ffn_table(args):
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=(args.batch, 512)).astype("float32"))
    w1 = tf.Variable(rng.normal(0, 0.04, (512, args.hidden)).astype("float32"))
    b1 = tf.Variable(np.zeros(args.hidden, "float32"))
    w2 = tf.Variable(rng.normal(0, 0.02, (args.hidden, 512)).astype("float32"))
    functions = {}
    for name, activation in ACTIVATIONS.items():
        forward, step = ffn_functions(activation, x, w1, b1, w2)
        functions[(name, "forward")] = forward
        functions[(name, "step")] = step
    seconds = interleaved(functions, args.rounds, 5)
    relu = next(iter(ACTIVATIONS))
    print(f"FFN ({args.batch}, 512) -> {args.hidden} -> 512, tf.function (no jit_compile), "
          f"median of {args.rounds} shuffled rounds; load average {os.getloadavg()[0]:.1f}")
    print("| activation | forward ms | vs ReLU | training step ms | vs ReLU |")
    print("|---|---|---|---|---|")
    for name in ACTIVATIONS:
        f, s = (name, "forward"), (name, "step")
        print(f"| {name} | {statistics.median(seconds[f]) * 1e3:.2f} | "
              f"{ratio(seconds, f, (relu, 'forward')):.3f}x | "
              f"{statistics.median(seconds[s]) * 1e3:.2f} | {ratio(seconds, s, (relu, 'step')):.3f}x |")


def pass_table(args):
    h = tf.constant(np.random.default_rng(1).normal(size=(args.batch, args.hidden)).astype("float32"))
    dy = tf.constant(np.random.default_rng(2).normal(size=(args.batch, args.hidden)).astype("float32"))
    functions = {}
    for name in ("relu (tf.nn.relu)", "keras_gelu.gelu, exact", "keras_gelu.gelu, tanh"):
        activation = ACTIVATIONS[name]
        functions[(name, "forward")] = tf.function(lambda a=activation: a(h), autograph=False)

        def backward(a=activation):
            with tf.GradientTape() as tape:
                tape.watch(h)
                y = a(h)
            return y, tape.gradient(y, h, output_gradients=dy)  # y: the forward runs too

        functions[(name, "forward + backward")] = tf.function(backward, autograph=False)
    seconds = interleaved(functions, args.rounds, 20)
    print(f"\nThe activation alone on ({args.batch}, {args.hidden}) float32, tf.function, "
          f"median of {args.rounds} shuffled rounds")
    print("| activation | forward ms | forward + backward ms |")
    print("|---|---|---|")
    for name in ("relu (tf.nn.relu)", "keras_gelu.gelu, exact", "keras_gelu.gelu, tanh"):
        print(f"| {name} | {statistics.median(seconds[(name, 'forward')]) * 1e3:.2f} | "
              f"{statistics.median(seconds[(name, 'forward + backward')]) * 1e3:.2f} |")


def half_table(args):
    from lm_models import casts_around

    x = tf.cast(tf.random.stateless_normal([4096, 512], (1, 2)), tf.bfloat16)
    dy = tf.cast(tf.random.stateless_normal([4096, 512], (3, 4)), tf.bfloat16)
    modes = {"relu (tf.nn.relu)": (tf.nn.relu, (False,)),
             "keras_gelu.gelu, exact": (keras_gelu_exact, (False, True)),
             "keras_gelu.gelu, tanh": (keras_gelu_tanh, (False, True)),
             "keras_gelu.gelu, sigmoid": (lambda h: keras_gelu.gelu(h, "sigmoid"), (False, True))}
    functions, rows = {}, []
    for name, (activation, ways) in modes.items():
        for around in ways:
            row = name + (", casts around (before)" if around else "")
            rows.append(row)

            def both(v, g, a=activation):
                with tf.GradientTape() as tape:
                    tape.watch(v)
                    y = a(v)
                return y, tape.gradient(y, v, output_gradients=g)

            forward = tf.function(lambda v, a=activation: a(v), autograph=False)
            backward = tf.function(both, autograph=False)
            with casts_around(around):  # traced here, with or without the casts around
                forward.get_concrete_function(x)
                backward.get_concrete_function(x, dy)
            functions[(row, "forward")] = lambda f=forward: f(x)
            functions[(row, "forward + backward")] = lambda b=backward: b(x, dy)
    seconds = interleaved(functions, args.rounds, 10)
    relu = rows[0]
    print(f"\nbfloat16 (4096, 512), tf.function, median of {args.rounds} shuffled rounds "
          f"of the ratio to ReLU")
    print("| activation | forward vs ReLU | forward + backward vs ReLU |")
    print("|---|---|---|")
    for row in rows:
        print(f"| {row} | {ratio(seconds, (row, 'forward'), (relu, 'forward')):.2f}x | "
              f"{ratio(seconds, (row, 'forward + backward'), (relu, 'forward + backward')):.2f}x |")


def epilogue_accuracy():
    from scipy.special import erfc

    x = np.linspace(-13.0, 5.0, 256 * 64).astype("float32").reshape(256, 64)
    eye = tf.constant(np.eye(64, dtype="float32"))  # x @ I + 0: the pre-activation is x
    zeros = tf.zeros([64])

    @tf.function(autograph=False)
    def fused(v):
        return tf.nn.gelu(tf.nn.bias_add(tf.matmul(v, eye), zeros), approximate=False)

    xd = x.astype("float64")
    exact = 0.5 * xd * erfc(-xd / np.sqrt(2.0))
    rows = {"tf.nn.gelu after MatMul + BiasAdd (oneDNN epilogue)": fused(tf.constant(x)),
            "keras_gelu.gelu, exact": keras_gelu_exact(tf.constant(x))}
    normal = np.abs(exact) >= np.finfo("float32").tiny
    print("\nLargest relative error against x * erfc(-x / sqrt 2) / 2 (float64), x in "
          "[-13, 5], where GELU is a normal float32")
    print("| GELU | all x | x in [-5, -4] | x < -6 | value at x = -7 (exact -9.0e-12) |")
    print("|---|---|---|---|---|")
    at = np.argmin(np.abs(xd + 7.0))
    for name, y in rows.items():
        y = np.asarray(y, "float64")
        rel = np.where(normal, np.abs(y - exact) / np.where(normal, np.abs(exact), 1.0), 0.0)
        band = (xd >= -5) & (xd <= -4)
        print(f"| {name} | {rel.max():.1e} | {rel[band].max():.1e} | "
              f"{rel[normal & (xd < -6)].max():.1e} | {y.flat[at]:.2e} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    ffn_table(args)
    pass_table(args)
    half_table(args)
    epilogue_accuracy()


if __name__ == "__main__":
    main()
