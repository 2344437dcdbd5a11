"""Draws docs/activations.png: the activations, their derivatives, and the
error of the two GELU approximations.

Usage (any Keras backend; the derivatives come from its autodiff, so the
picture also shows keras_gelu's custom gradients at work):

    KERAS_BACKEND=tensorflow .venv/bin/python docs/plot_activations.py

Every curve goes through keras_gelu's public functions, evaluated in
float64. The marked error peaks are found on the grid and checked against
the reference values in shared/reference/papers.md (tanh form: 4.7324e-4
at |x| ~= 2.6989; sigmoid form: 0.020335 at |x| ~= 2.2704).
"""

import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

try:
    import keras_gelu
except ImportError:  # Run from a checkout without `pip install -e .`.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import keras_gelu

import keras
import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 — after choosing the backend.

OUTPUT = Path(__file__).resolve().parent / "activations.png"

# (label, function, color, line style); GELU modes first, solid.
CURVES = [
    ("GELU exact, x·Φ(x)", keras_gelu.gelu, "#1f4e9c", "-"),
    ("GELU tanh", keras_gelu.gelu_tanh, "#2ca02c", "--"),
    ("GELU sigmoid (QuickGELU)", keras_gelu.gelu_sigmoid, "#d62728", "--"),
    ("ReLU", keras_gelu.relu, "#555555", "-"),
    ("SiLU / Swish", keras_gelu.silu, "#ff7f0e", "-."),
    ("leaky ReLU (0.01)", keras_gelu.leaky_relu, "#8c564b", ":"),
    ("ELU (α=1)", keras_gelu.elu, "#9467bd", "-."),
    ("Mish", keras_gelu.mish, "#17becf", ":"),
]

# Reference peaks of (approximation - exact), from papers.md.
TANH_PEAK = (2.6989, 4.7324e-4)
SIGMOID_PEAK = (2.2704, -0.020335)


def derivative(fn, x):
    """f'(x) elementwise, by the current backend's automatic differentiation."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        x = tf.constant(x)
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = fn(x)
        return tape.gradient(y, x).numpy()
    if backend == "jax":
        import jax

        return np.asarray(jax.vmap(jax.grad(lambda v: fn(v)))(x))
    if backend == "torch":
        import torch

        x = torch.tensor(x, requires_grad=True)
        (grad,) = torch.autograd.grad(fn(x).sum(), x)
        return grad.numpy()
    raise ValueError(f"plot_activations: unsupported backend {backend!r}.")


def value(fn, x):
    return keras.ops.convert_to_numpy(fn(keras.ops.convert_to_tensor(x)))


def peak(x, error, sign):
    """(|x|, error) at the largest `sign * error` on x > 0 (errors are even)."""
    positive = x > 0
    index = np.argmax(sign * error[positive])
    return x[positive][index], error[positive][index]


def _short(number):
    """4.73e-4 rather than 0.000473; 0.0203 as is."""
    if number >= 1e-3:
        return f"{number:.3g}"
    mantissa, exponent = f"{number:.2e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def main():
    if keras.backend.backend() == "jax":
        import jax

        # JAX computes in float32 unless told; the tanh error (4.7e-4) is
        # flat enough at its peak that float32 rounding moves the argmax.
        jax.config.update("jax_enable_x64", True)
    x = np.linspace(-4.0, 4.0, 8001)  # step 1e-3: peaks located to +-5e-4
    fig = plt.figure(figsize=(13, 10), constrained_layout=True)
    grid = fig.add_gridspec(2, 2, height_ratios=(1.15, 1))
    ax_f = fig.add_subplot(grid[0, 0])
    ax_d = fig.add_subplot(grid[0, 1])
    ax_e = fig.add_subplot(grid[1, :])

    for label, fn, color, style in CURVES:
        width = 2.4 if label.startswith("GELU exact") else 1.6
        ax_f.plot(x, value(fn, x), style, color=color, lw=width, label=label)
        ax_d.plot(
            x, derivative(fn, x), style, color=color, lw=width, label=label
        )

    gelu_min = (-0.7517915247, -0.1699712075)
    ax_f.plot(*gelu_min, "o", color="#1f4e9c", ms=5)
    ax_f.annotate(
        "GELU minimum\n(-0.752, -0.170)",
        gelu_min,
        xytext=(-3.9, 1.2),
        fontsize=9,
        arrowprops=dict(arrowstyle="->", color="#1f4e9c", lw=0.8),
    )
    ax_f.set(
        title="Activations f(x)", xlabel="x", ylabel="f(x)", ylim=(-1.2, 4.1)
    )
    ax_d.set(
        title="Derivatives f′(x) (backend autodiff)",
        xlabel="x",
        ylabel="f′(x)",
        ylim=(-0.25, 1.25),
    )
    ax_d.axhline(1.128904, color="#1f4e9c", lw=0.6, alpha=0.5)
    ax_d.annotate(
        "GELU′ max 1.1289 at x=√2",
        (1.414, 1.1289),
        xytext=(-3.9, 1.16),
        fontsize=9,
        color="#1f4e9c",
    )
    for ax in (ax_f, ax_d):
        ax.axhline(0, color="black", lw=0.5)
        ax.axvline(0, color="black", lw=0.5)
        ax.grid(alpha=0.3)
    ax_f.legend(loc="upper left", bbox_to_anchor=(0.0, 0.88), fontsize=9)

    # Errors: the sigmoid form's is 43x the tanh form's, so two y-axes.
    exact = value(keras_gelu.gelu, x)
    sigmoid_error = value(keras_gelu.gelu_sigmoid, x) - exact
    tanh_error = value(keras_gelu.gelu_tanh, x) - exact
    ax_t = ax_e.twinx()
    ax_e.plot(
        x,
        sigmoid_error,
        color="#d62728",
        lw=1.8,
        label="sigmoid − exact (left axis)",
    )
    ax_t.plot(
        x,
        tanh_error,
        color="#2ca02c",
        lw=1.8,
        label="tanh − exact (right axis)",
    )
    ax_e.set_ylim(-0.024, 0.024)
    ax_t.set_ylim(-6e-4, 6e-4)
    ax_e.set_ylabel("sigmoid − exact", color="#d62728")
    ax_t.set_ylabel("tanh − exact", color="#2ca02c")
    ax_e.tick_params(axis="y", colors="#d62728")
    ax_t.tick_params(axis="y", colors="#2ca02c")
    ax_t.ticklabel_format(axis="y", style="sci", scilimits=(0, 0))

    for ax, error, sign, reference, color, text_y in (
        (ax_t, tanh_error, 1, TANH_PEAK, "#2ca02c", 5.3e-4),
        (ax_e, sigmoid_error, -1, SIGMOID_PEAK, "#d62728", -0.0222),
    ):
        at, size = peak(x, error, sign)
        assert abs(at - reference[0]) < 2e-3, (at, reference)
        assert abs(size - reference[1]) < 1e-3 * abs(reference[1]), (
            size,
            reference,
        )
        for side in (-1, 1):
            ax.plot(
                side * at, size, "o", color=color, ms=6, mec="black", mew=0.6
            )
        ax.annotate(
            f"max |error| {_short(abs(size))} at |x| ≈ {at:.2f}",
            (at, size),
            xytext=(0.35, text_y),
            fontsize=9,
            color=color,
            arrowprops=dict(arrowstyle="->", color=color, lw=0.8),
        )
    ax_e.axhline(0, color="black", lw=0.5)
    ax_e.grid(alpha=0.3)
    ax_e.set(
        title="Error of the GELU approximations against exact GELU",
        xlabel="x",
        xlim=(-4, 4),
    )
    lines = ax_e.get_lines()[:1] + ax_t.get_lines()[:1]
    ax_e.legend(
        lines,
        [line.get_label() for line in lines],
        loc="lower left",
        fontsize=9,
    )

    fig.suptitle(
        f"keras_gelu activations (Keras backend: {keras.backend.backend()})",
        fontsize=13,
    )
    fig.savefig(OUTPUT, dpi=110)
    print(f"wrote {OUTPUT}")


if __name__ == "__main__":
    main()
