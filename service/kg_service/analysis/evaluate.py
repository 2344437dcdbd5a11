"""What the report's figures evaluate with Keras, as numpy arrays.

A trained model's class probabilities (`predict_proba`, for the decision
boundaries) and an activation's values and slope (`activation_values`,
for the activation curves). Keras is imported when one of these is
called, not with this module: importing it takes ~5.6 s (TensorFlow
backend, measured with `python -c "import keras"`), which a report of a
sweep without models (a language model's, `kg report`'s Markdown, the
golden tests) need not pay.
"""

import numpy as np

_BATCH = 8192  # grid points per model call


def predict_proba(model, x, batch_size=_BATCH):
    """Class probabilities [N, C] of a Keras model, in batches, as numpy."""
    import keras  # at call time: see the module docstring

    parts = []
    for start in range(0, len(x), batch_size):
        chunk = keras.ops.convert_to_tensor(x[start:start + batch_size], dtype="float32")
        parts.append(np.asarray(keras.ops.convert_to_numpy(model(chunk, training=False))))
    probs = np.concatenate(parts, axis=0).astype(float)
    return probs.reshape(len(x), -1)


def activation_curve(name):
    """(label, f, is_gate) for plotting `name` as a scalar function.

    Elementwise names plot themselves; gated names plot their gate
    ("geglu gate: gelu"); learnable_leaky_relu plots leaky ReLU at its
    initial slope 0.01. Returns None for names it cannot plot.
    """
    import keras_gelu  # imports Keras: at call time, see the module docstring
    from keras_gelu import activations as acts  # Keras, with the line above

    try:
        entry_kind = acts.kind(name)
    except ValueError:
        entry_kind = None
    if entry_kind == "gated":
        gate = acts.gate_function(name)
        return f"{name} gate: {getattr(gate, '__name__', 'gate')}", gate, True
    if entry_kind == "layer":
        return (f"{name}: leaky relu, initial slope 0.01",
                lambda x: keras_gelu.leaky_relu(x, negative_slope=0.01), False)
    try:
        f = keras_gelu.get(name)
    except ValueError:
        return None
    return (name, f, False) if callable(f) else None


def activation_values(names, x):
    """(name, label, f(x), df/dx, is_gate) for each of `names` that plots.

    `x` is a 1-D float array; the derivative is by finite differences
    (`np.gradient`); names `activation_curve` cannot plot are left out.
    """
    import keras  # at call time: see the module docstring

    xt = keras.ops.convert_to_tensor(x.astype(np.float32))
    curves = []
    for name in names:
        spec = activation_curve(name)
        if spec is None:
            continue
        label, f, is_gate = spec
        y = np.asarray(keras.ops.convert_to_numpy(f(xt)), dtype=float)
        curves.append((name, label, y, np.gradient(y, x), is_gate))
    return curves
