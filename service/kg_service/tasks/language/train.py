"""Training the language model, and the attention entropy of "ReLU's Revival".

Members train one after another (`train_language_model`); each epoch is
`training.steps_per_epoch` steps of `training.batch_size` windows drawn
at random offsets of the training split by the member's own
`np.random.default_rng(seed)`, the weights from
`keras.utils.set_random_seed(seed)` (the model: `model.py`). After each
epoch: validation loss, next-byte accuracy, perplexity, bits per byte,
training tokens/s, the attention entropy of every layer and head on a
fixed validation batch, and the slope of every learnable leaky ReLU.

Pure apart from the device settings: no MLflow, no files.
"""

import math
import time

import keras
import numpy as np

import keras_gelu
from kg_service.results import MemberResult
from kg_service.training.device import dtype_policy
from kg_service.training.loop import epochs_to_threshold
from kg_service.training.loop import first_non_finite_epoch
from kg_service.training.optimizers import make_optimizer

# The first validation windows, the same for every member and epoch, that
# the attention entropy is averaged over (data.eval_windows sets how many
# windows the validation loss uses; the test split is evaluated whole).
ENTROPY_BATCH = 8
QUARTERS = 4


# --- What the paper measures. ---------------------------------------------


def attention_probe(model):
    """`tokens -> [scores of block 0, ...]`, each `[batch, heads, t, t]`.

    Calls each block's attention layer on its own normalized input with
    `return_attention_scores=True`: the same weights and the same causal
    softmax as the model's forward pass.
    """
    attentions = [
        layer for layer in model.layers
        if isinstance(layer, keras.layers.MultiHeadAttention)
    ]
    inputs = [layer.input[0] if isinstance(layer.input, list) else layer.input
              for layer in attentions]
    feeder = keras.Model(model.inputs, inputs)

    def probe(tokens):
        hidden = feeder.predict_on_batch(tokens)
        if not isinstance(hidden, (list, tuple)):
            hidden = [hidden]
        return [
            keras.ops.convert_to_numpy(
                layer(h, h, use_causal_mask=True, return_attention_scores=True)[1]
            )
            for layer, h in zip(attentions, hidden)
        ]

    return probe


def attention_entropy(scores):
    """Shannon entropy (nats) of each head's attention rows.

    Args:
        scores: `[batch, heads, queries, keys]` attention probabilities
            (each row sums to 1 over the keys it may see; masked keys 0).

    Returns:
        `[heads]`: each head's entropy, averaged over queries and batch.
        0 log 0 counts as 0.

    Example:

    >>> uniform = np.full((1, 1, 1, 4), 0.25)
    >>> round(float(attention_entropy(uniform)[0]), 6) == round(math.log(4), 6)
    True
    """
    p = np.asarray(scores, dtype=np.float64)
    terms = np.where(p > 0, -p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return terms.sum(axis=-1).mean(axis=(0, 2))


def entropy_quarters(entropies):
    """The share of heads in each quarter of [0, max entropy].

    As "ReLU's Revival": max is the highest head entropy observed (over
    all layers and heads of the model); quarters [0, max/4), [max/4,
    max/2), [max/2, 3max/4), [3max/4, max].

    Example:

    >>> entropy_quarters([0.1, 1.0, 2.0, 4.0]).tolist()
    [0.25, 0.25, 0.25, 0.25]
    """
    h = np.asarray(entropies, dtype=np.float64).ravel()
    top = h.max()
    if not top > 0:
        return np.eye(QUARTERS)[0]
    index = np.minimum((h / top * QUARTERS).astype(int), QUARTERS - 1)
    return np.bincount(index, minlength=QUARTERS) / len(h)


def leaky_slopes(model):
    """`{block index: slope}` of every LearnableLeakyReLU in the FFNs."""
    slopes = {}
    for layer in model.layers:
        if not isinstance(layer, keras_gelu.FeedForward):
            continue
        block = int(layer.name.split("_")[1])
        for weight in layer.weights:
            if "alpha" in weight.path or "slope" in weight.path:
                slopes[block] = float(np.mean(keras.ops.convert_to_numpy(weight)))
    return slopes


# --- Training. -------------------------------------------------------------


def _random_windows(data, context, count, rng):
    starts = rng.integers(0, len(data) - context - 1, size=count)
    rows = starts[:, None] + np.arange(context + 1)
    windows = data[rows].astype("int32")
    return windows[:, :-1], windows[:, 1:]


def _evaluate(model, x, y, batch_size):
    """Mean next-byte loss (nats) and accuracy over windows, in float64."""
    total_loss, correct, count = 0.0, 0, 0
    for start in range(0, len(x), batch_size):
        logits = np.asarray(
            model.predict_on_batch(x[start : start + batch_size]), dtype=np.float64
        )
        target = y[start : start + batch_size]
        shifted = logits - logits.max(axis=-1, keepdims=True)
        log_z = np.log(np.exp(shifted).sum(axis=-1))
        picked = np.take_along_axis(shifted, target[..., None], axis=-1)[..., 0]
        total_loss += float((log_z - picked).sum())
        correct += int((logits.argmax(axis=-1) == target).sum())
        count += target.size
    return total_loss / count, correct / count


def language_metrics(loss):
    """`{perplexity, bits_per_byte}` of a mean loss in nats per byte."""
    return {"perplexity": math.exp(min(loss, 700.0)), "bits_per_byte": loss / math.log(2)}


def train_language_model(task, corpus, config, activation, seeds, report):
    """Trains every seed of one activation, one member after another.

    Args / returns: as `kg_service.tasks.classification.train.train_activation`. Each result's
    `history` holds per epoch "loss", "accuracy" (training batches of the
    epoch, next-byte), "val_loss", "val_accuracy", "val_perplexity",
    "val_bits_per_byte", "tokens_per_second", "entropy.block{i}.head{j}",
    "entropy_quarter{k}" (share of heads) and "leaky_slope.block{i}"
    (learnable leaky ReLU only); `final` holds "test_perplexity" and
    "test_bits_per_byte".
    """
    training = config.training
    val_x, val_y = corpus.windows("validation", limit=config.data.eval_windows)
    test_x, test_y = corpus.windows("test")
    steps = training.steps_per_epoch or max(
        1, (len(corpus.train) - 1) // (corpus.context * training.batch_size)
    )
    results = []
    for seed in seeds:
        start = time.perf_counter()
        model = _compiled_member(task, corpus, config, activation, seed, steps)
        history = _fit_member(model, corpus, training, seed, steps, (val_x, val_y), report)
        test_loss, test_accuracy = _evaluate(model, test_x, test_y, training.batch_size)
        diverged = first_non_finite_epoch(history)
        results.append(
            MemberResult(
                activation=activation,
                seed=seed,
                history=history,
                test_loss=test_loss,
                test_accuracy=test_accuracy,
                epochs_to_threshold=epochs_to_threshold(
                    history["val_accuracy"], training.convergence_threshold
                ),
                model=model,
                train_seconds=time.perf_counter() - start,
                failure=(
                    None if diverged is None
                    else f"loss not finite from epoch {diverged} (diverged)"
                ),
                failed_epoch=diverged,
                final={f"test_{k}": v for k, v in language_metrics(test_loss).items()},
            )
        )
    return results


def _compiled_member(task, corpus, config, activation, seed, steps):
    """Member `seed`'s model, its weights from the seed, compiled."""
    with dtype_policy(config.device.mixed_precision):
        keras.utils.set_random_seed(seed)
        model = task.build_model(
            config.model, activation, corpus, name=f"{activation}_seed{seed}"
        )
    model.compile(
        optimizer=make_optimizer(config.training),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
        jit_compile=True if config.device.xla else "auto",
        steps_per_execution=steps,
    )
    return model


def _fit_member(model, corpus, training, seed, steps, validation, report):
    """Trains one member epoch by epoch; returns its history (see above)."""
    val_x, val_y = validation
    probe, probe_x = attention_probe(model), val_x[:ENTROPY_BATCH]
    rng = np.random.default_rng(seed)
    history = {}

    def record(key, value):
        history.setdefault(key, []).append(float(value))

    for epoch in range(1, training.epochs + 1):
        x, y = _random_windows(corpus.train, corpus.context, steps * training.batch_size, rng)
        tic = time.perf_counter()
        logs = model.fit(
            x, y, batch_size=training.batch_size, epochs=1, shuffle=False, verbose=0
        ).history
        seconds = time.perf_counter() - tic
        val_loss, val_accuracy = _evaluate(model, val_x, val_y, training.batch_size)
        record("loss", logs["loss"][-1])
        record("accuracy", logs["accuracy"][-1])
        record("val_loss", val_loss)
        record("val_accuracy", val_accuracy)
        for key, value in language_metrics(val_loss).items():
            record(f"val_{key}", value)
        record("tokens_per_second", x.size / seconds)
        entropies = [attention_entropy(s) for s in probe(probe_x)]
        for i, heads in enumerate(entropies):
            for j, value in enumerate(heads):
                record(f"entropy.block{i}.head{j}", value)
        for k, share in enumerate(entropy_quarters(np.concatenate(entropies))):
            record(f"entropy_quarter{k + 1}", share)
        for block, slope in leaky_slopes(model).items():
            record(f"leaky_slope.block{block}", slope)
        report(epoch, np.array([val_accuracy]))
        if not math.isfinite(val_loss):
            break  # diverged: NaN weights from here on
    return history
