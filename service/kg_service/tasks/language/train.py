"""Training the language model.

Member (activation, seed) is, each source of variance from its own seed
derived from the member's (`kg_service.config.derived.member_source_seeds`;
`vary` says which change from seed to seed, as for classification): its
corpus split (`corpus.resplit` with the split seed: which contiguous
blocks it validates and tests on), its initial weights
(`keras.utils.set_random_seed(init seed)`, then `model.py`), its training
windows (each epoch `training.steps_per_epoch` steps of
`training.batch_size` windows drawn at random offsets of its training
split by `np.random.default_rng(order seed)`) and the configured
optimizer. `train_language_model` trains all seeds of one
activation as ONE stacked model (`stacked.py`, a member axis on every
weight): each step feeds member m its own windows, and the loss is the sum
over members of each member's mean loss, so each member's gradient, and
with an elementwise optimizer its update, is that of the model trained
alone (`train_one_by_one`, kept as the reference and for the benchmark).
One trace and one step for all members instead of one per member: on a
CPU tracing and per-step overhead are most of a small model's time
(issue 20). Activations whose models share one architecture (ReLU, GELU
and Swish FFNs; the gated units at one width: `stack_key`) train in one
stacked model too (`train_members`), member m with its own activation:
the glu-variants sweep traces two models instead of eight (issue 17).
After each epoch, per member: validation loss, next-byte accuracy,
perplexity, bits per byte, training tokens/s, the attention entropy of
every layer and head on a fixed validation batch, and the slope of every
learnable leaky ReLU (`probes.py`).

Pure apart from the device settings: no MLflow, no files.
"""

import contextlib
import math
import time

import keras
import numpy as np
from keras import ops

import keras_gelu
import keras_gelu_names as name_table
from keras_gelu.stacking import stack_weights
from keras_gelu.stacking import unstack_weights
from kg_service.config.derived import member_source_seeds
from kg_service.tasks.language.corpus import resplit
from kg_service.tasks.language.entropy import normalised_head_entropy
from kg_service.tasks.language.entropy import top_quarter_shares
from kg_service.tasks.language.probes import ENTROPY_BATCH
from kg_service.tasks.language.probes import attention_entropy
from kg_service.tasks.language.probes import attention_probe
from kg_service.tasks.language.probes import entropy_quarters
from kg_service.tasks.language.probes import leaky_slopes
from kg_service.tasks.language.probes import stacked_attention_probe
from kg_service.tasks.language.stacked import stack_language_model
from kg_service.training.device import dtype_policy
from kg_service.training.loop import member_result
from kg_service.training.loop import steps_per_execution
from kg_service.training.optimizers import make_optimizer

# --- Training. -------------------------------------------------------------


def _random_windows(data, context, count, rng):
    starts = rng.integers(0, len(data) - context - 1, size=count)
    rows = starts[:, None] + np.arange(context + 1)
    windows = data[rows].astype("int32")
    return windows[:, :-1], windows[:, 1:]


def _evaluate(model, x, y, batch_size):
    """Mean next-byte loss (nats) and accuracy over windows, in float64.

    `x`, `y`: `[n, t]` windows for a plain model, a float each; `[n, M, t]`
    for a stacked one, an `[M]` array each (member m's over its windows).
    A short batch (the last one, or all of a split smaller than
    `batch_size`: a smoke run's validation windows) is padded to
    `batch_size` and the padding dropped: one compiled shape for every
    split, not a predict function traced per size (issue 17).
    """
    total_loss, correct, count = 0.0, 0, 0
    for start in range(0, len(x), batch_size):
        batch = x[start : start + batch_size]
        target = y[start : start + batch_size]
        if len(batch) < batch_size:
            padding = np.zeros((batch_size - len(batch),) + batch.shape[1:], batch.dtype)
            batch = np.concatenate([batch, padding])
        logits = np.asarray(model.predict_on_batch(batch), dtype=np.float64)[: len(target)]
        shifted = logits - logits.max(axis=-1, keepdims=True)
        log_z = np.log(np.exp(shifted).sum(axis=-1))
        picked = np.take_along_axis(shifted, target[..., None], axis=-1)[..., 0]
        total_loss = total_loss + (log_z - picked).sum(axis=(0, -1))
        correct = correct + (logits.argmax(axis=-1) == target).sum(axis=(0, -1))
        count += target.shape[0] * target.shape[-1]
    return total_loss / count, correct / count


def language_metrics(loss):
    """`{perplexity, bits_per_byte}` of a mean loss in nats per byte."""
    return {"perplexity": math.exp(min(loss, 700.0)), "bits_per_byte": loss / math.log(2)}


# keras_gelu runs each activation as one XLA-fused kernel on TensorFlow
# (`keras_gelu.xla_fusion`): cheaper steps, but every kernel is compiled
# when first run, per shape, forward and backward, which a few steps never
# earn back. Measured (issue 17, benchmarks/bench_smoke_lm.py, a fresh
# process per variant, interleaved): glu-variants --smoke (4 steps) trains
# in 6.5 CPU s unfused vs 7.6 fused (load 7-9); at its full sizes
# (glu, geglu, swiglu, 2 seeds, 150 steps) fused saves ~0.1 CPU s a step
# (76 vs 91 s, load 7-9), so the compiles pay off after a few dozen steps.
FUSION_MIN_STEPS = 32


def fusion_for(steps, epochs):
    """keras_gelu's fusion setting for a run of `epochs` x `steps` steps:
    as configured (on by default) from `FUSION_MIN_STEPS` on, off below."""
    if steps * epochs >= FUSION_MIN_STEPS:
        return contextlib.nullcontext()
    return keras_gelu.xla_fusion(False)


def _build_optimizer(model):
    """Creates the compiled `model`'s optimizer variables before `fit`.

    Keras on TensorFlow (no distribution strategy) creates them while
    tracing the first training step, and tf.function then traces the
    step once more, now forbidden to create variables: built here, the
    step is traced once (issue 17, benchmarks/bench_smoke_lm.py:
    glu-variants --smoke trains in 7.6 CPU s instead of 9.8, load 7-9)."""
    model.optimizer.build(model.trainable_variables)


def _timed_epoch(model, x, y, batch_size):
    """One epoch of `fit` on the windows in order: its logs and wall seconds."""
    tic = time.perf_counter()
    logs = model.fit(x, y, batch_size=batch_size, epochs=1, shuffle=False, verbose=0).history
    return logs, time.perf_counter() - tic


def _steps(corpus, training):
    return training.steps_per_epoch or max(
        1, (len(corpus.train) - 1) // (corpus.context * training.batch_size)
    )


def _member_result(activation, seed, model, history, test_loss, test_accuracy, training,
                   seconds):
    return member_result(
        activation, seed, model, history, test_loss, test_accuracy, training, seconds,
        final={f"test_{k}": v for k, v in language_metrics(float(test_loss)).items()},
    )


def _record_epoch(history, logs, val_loss, val_accuracy, tokens_per_second, scores, slopes):
    """Appends one epoch's values to one member's history (see below)."""

    def record(key, value):
        history.setdefault(key, []).append(float(value))

    record("loss", logs["loss"])
    record("accuracy", logs["accuracy"])
    record("val_loss", val_loss)
    record("val_accuracy", val_accuracy)
    for key, value in language_metrics(val_loss).items():
        record(f"val_{key}", value)
    record("tokens_per_second", tokens_per_second)
    entropies = [attention_entropy(s) for s in scores]
    for i, heads in enumerate(entropies):
        for j, value in enumerate(heads):
            record(f"entropy.block{i}.head{j}", value)
    for k, share in enumerate(entropy_quarters(np.concatenate(entropies))):
        record(f"entropy_quarter{k + 1}", share)
    # As the paper: per layer, each row's entropy over log t (entropy.py).
    normalised = [normalised_head_entropy(s) for s in scores]
    for i, heads in enumerate(normalised):
        record(f"entropy_norm.block{i}", heads.mean())
        for j, value in enumerate(heads):
            record(f"entropy_norm.block{i}.head{j}", value)
    for k, share in enumerate(top_quarter_shares(np.concatenate(normalised))):
        record(f"entropy_norm_quarter{k + 1}", share)
    for block, slope in slopes.items():
        record(f"leaky_slope.block{block}", slope)
        # Its magnitude: "the slope tends to zero" (Jha & Reagen) is |slope|
        # falling, which a signed slope through zero would misread.
        record(f"leaky_slope_abs.block{block}", abs(slope))


# --- All seeds of one activation, as one stacked model. ----------------------


class MemberMean(keras.metrics.Metric):
    """Each member's mean of `fn(y_true, y_pred)` over its batches' tokens.

    `fn` maps `(batch, M, t)` targets and `(batch, M, t, V)` logits to
    `(batch, M, t)` values; the result is `(M,)`, member m's mean, which is
    what a plain model's metric of `fn` shows for member m alone (every
    batch has the same size).
    """

    def __init__(self, fn, members, **kwargs):
        super().__init__(**kwargs)
        self.fn, self.members = fn, members
        self.total = self.add_variable(shape=(members,), initializer="zeros", name="total")
        self.count = self.add_variable(shape=(), initializer="zeros", name="count")

    def update_state(self, y_true, y_pred, sample_weight=None):
        values = ops.cast(self.fn(y_true, y_pred), "float32")
        self.total.assign(self.total + ops.sum(values, axis=(0, 2)))
        shape = ops.shape(values)
        self.count.assign(self.count + ops.cast(shape[0] * shape[2], "float32"))

    def result(self):
        return self.total / ops.maximum(self.count, 1.0)


def _token_loss(y_true, y_pred):
    return keras.losses.sparse_categorical_crossentropy(y_true, y_pred, from_logits=True)


def _members_loss(members):
    # Keras averages the (batch, M, t) token losses over all three axes;
    # times M that is the sum over members of each member's mean loss,
    # whose gradient for member m's weights is member m's own gradient.
    def loss(y_true, y_pred):
        return members * _token_loss(y_true, y_pred)

    return loss


def train_language_model(task, corpus, config, activation, seeds, report):
    """Trains every seed of one activation as one stacked model.

    Each member's weights, windows and results are those of the model
    trained alone with that seed (`train_one_by_one`; see the module
    docstring), up to float rounding; exactly so for dropout 0 and
    float32: dropout masks are drawn for the stacked model as a whole, and
    under `mixed_float16` the dynamic loss scale is shared.

    Args / returns: as `kg_service.tasks.classification.train.train_activation`. Each result's
    `history` holds per epoch "loss", "accuracy" (training batches of the
    epoch, next-byte), "val_loss", "val_accuracy", "val_perplexity",
    "val_bits_per_byte", "tokens_per_second" (the stacked model's: all
    members' training tokens over the epoch's wall time),
    "entropy.block{i}.head{j}", "entropy_quarter{k}" (share of heads),
    "entropy_norm.block{i}[.head{j}]", "entropy_norm_quarter{k}" (entropy.py),
    "leaky_slope.block{i}" and its magnitude "leaky_slope_abs.block{i}"
    (learnable leaky ReLU only); `final` holds
    "test_perplexity" and "test_bits_per_byte". `model` is the member's
    plain model, trained and compiled; `train_seconds` the activation's
    wall time over its number of members.
    """
    return train_members(task, corpus, config, tuple((activation, s) for s in seeds), report)


def train_members(task, corpus, config, members, report):
    """Trains `members`, `(activation, seed)` pairs, as one stacked model.

    As `train_language_model`, whose seeds of one activation are the case
    of one activation; here the members may also differ in their FFN
    activation where the models share one architecture (issue 20's
    activations x seeds): ReLU, GELU and Swish FFNs are one, the gated
    units at one width another (`stack_key`). Member m applies its own
    activation to its own slice (`keras_gelu.member_ops.apply_per_member`),
    so each member's windows, weights and results are still those of the
    member trained alone (`train_one_by_one`). Results in `members` order.

    Raises:
        ValueError: for members whose models differ in more than their
            activation (`stack_language_model`).
    """
    if len(members) == 1:
        # Nothing to share; and TensorFlow 2.21's oneDNN graph rewrite
        # corrupts the heap on a one-member stacked graph ("corrupted size
        # vs. prev_size" in predict_on_batch; fine with
        # TF_ENABLE_ONEDNN_OPTS=0, and eagerly).
        ((activation, seed),) = members
        return train_one_by_one(task, corpus, config, activation, (seed,), report)
    start = time.perf_counter()
    training = config.training
    sources, corpora = member_sources(config, corpus, [seed for _, seed in members])
    steps = _steps(corpora[0], training)  # every member's training split: one size
    count = len(members)
    with dtype_policy(config.device.mixed_precision):
        plain = []
        for (activation, seed), source in zip(members, sources):
            keras.utils.set_random_seed(source["init"])
            plain.append(task.build_model(
                config.model, activation, corpus, name=f"{activation}_seed{seed}"))
        one_activation = len({activation for activation, _ in members}) == 1
        stacked = stack_language_model(plain[0] if one_activation else plain, count)
    stack_weights(stacked, plain)
    stacked.compile(
        optimizer=make_optimizer(training),
        loss=_members_loss(count),
        metrics=[MemberMean(_token_loss, count, name="member_loss"),
                 MemberMean(_token_accuracy, count, name="member_accuracy")],
        jit_compile=True if config.device.xla else "auto",
        steps_per_execution=steps_per_execution(steps, training.epochs),
    )
    _build_optimizer(stacked)
    with fusion_for(steps, training.epochs):  # traced in here: fit, evaluate, probe
        histories = _fit_stacked(stacked, plain, corpora, config,
                                 [s["order"] for s in sources], steps, report)
        test_x, test_y = _per_member([c.windows("test") for c in corpora])
        test_loss, test_accuracy = _evaluate(stacked, test_x, test_y, training.batch_size)
    unstack_weights(stacked, plain)
    seconds = (time.perf_counter() - start) / count
    for model in plain:
        _compile_plain(model, config, steps)
    return [
        _member_result(activation, seed, model, history, test_loss[m], test_accuracy[m],
                       training, seconds)
        for m, ((activation, seed), model, history) in enumerate(zip(members, plain, histories))
    ]


def stack_key(config, activation):
    """Activations with one key train in one stacked model
    (`train_members`); None: alone (its seeds stacked).

    The FFN's kind fixes the model's weights: every elementwise activation
    (ReLU, GELU, Swish...) gives one plain FFN, every gated one a GLU
    projection of one width (`match_params` or not, the same for all);
    a learnable activation has weights of its own, so trains alone.
    """
    kind = name_table.kind(activation)
    return None if kind == "layer" else kind


def _token_accuracy(y_true, y_pred):
    predicted = ops.cast(ops.argmax(y_pred, axis=-1), y_true.dtype)
    return ops.cast(ops.equal(predicted, y_true), "float32")


def member_sources(config, corpus, seeds):
    """Each member's source seeds (`member_source_seeds`) and corpus: its
    own split (`resplit`) where `vary` has split, else `corpus` itself.
    A seed listed twice (two activations' members) shares one split."""
    sources = [member_source_seeds(config, seed) for seed in seeds]
    splits = {}
    corpora = []
    for s in sources:
        if "split" not in config.vary:
            corpora.append(corpus)
            continue
        if s["split"] not in splits:
            splits[s["split"]] = resplit(corpus, s["split"])
        corpora.append(splits[s["split"]])
    return sources, corpora


def _per_member(windows):
    """`[(x, y) of member m]`, each `(n, t)` -> `(x, y)`, each `(n, M, t)`."""
    return tuple(np.ascontiguousarray(np.stack(parts, axis=1)) for parts in zip(*windows))


def _fit_stacked(stacked, plain, corpora, config, orders, steps, report):
    """Trains the stacked model epoch by epoch; returns each member's history."""
    training = config.training
    members = len(orders)
    val_x, val_y = _per_member(
        [c.windows("validation", limit=config.data.eval_windows) for c in corpora])
    probe, probe_x = stacked_attention_probe(stacked), val_x[:ENTROPY_BATCH]
    rngs = [np.random.default_rng(order) for order in orders]
    histories = [{} for _ in orders]
    alive = np.ones(members, dtype=bool)  # members whose loss is still finite
    count = steps * training.batch_size
    for epoch in range(1, training.epochs + 1):
        windows = [_random_windows(c.train, c.context, count, rng)
                   for c, rng in zip(corpora, rngs)]
        x = np.stack([w[0] for w in windows], axis=1)
        y = np.stack([w[1] for w in windows], axis=1)
        logs, seconds = _timed_epoch(stacked, x, y, training.batch_size)
        val_loss, val_accuracy = _evaluate(stacked, val_x, val_y, training.batch_size)
        scores = probe(probe_x)
        unstack_weights(stacked, plain)  # for the slopes, read from the plain layers
        loss, accuracy = logs["member_loss"][-1], logs["member_accuracy"][-1]
        for m in np.flatnonzero(alive):
            _record_epoch(
                histories[m], {"loss": loss[m], "accuracy": accuracy[m]}, val_loss[m],
                val_accuracy[m], x.size / seconds, [s[:, m] for s in scores],
                leaky_slopes(plain[m]),
            )
        report(epoch, np.asarray(val_accuracy))
        # A diverged member's weights are NaN from here on and its history
        # stops, as alone; the others train on unharmed (each member's
        # gradient is its own).
        alive &= np.isfinite(val_loss)
        if not alive.any():
            break
    return histories


def _compile_plain(model, config, steps):
    model.compile(
        optimizer=make_optimizer(config.training),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
        jit_compile=True if config.device.xla else "auto",
        steps_per_execution=steps,
    )
    return model


# --- One member after another: the reference, and the benchmark's baseline. ---


def train_one_by_one(task, corpus, config, activation, seeds, report):
    """As `train_language_model`, each member trained alone in turn.

    What the service did before the stacked model (issue 20); the
    stacked model's members must equal these (tests), and
    `benchmarks/bench_language_model.py --sweep` times the two side by
    side. "tokens_per_second" is the member's own.
    """
    training = config.training
    results = []
    for seed, source, own in zip(seeds, *member_sources(config, corpus, seeds)):
        val_x, val_y = own.windows("validation", limit=config.data.eval_windows)
        test_x, test_y = own.windows("test")
        steps = _steps(own, training)
        start = time.perf_counter()
        with dtype_policy(config.device.mixed_precision):
            keras.utils.set_random_seed(source["init"])
            model = task.build_model(
                config.model, activation, corpus, name=f"{activation}_seed{seed}"
            )
        _build_optimizer(_compile_plain(model, config, steps))
        with fusion_for(steps, training.epochs):
            history = _fit_member(model, own, training, source["order"], steps, (val_x, val_y),
                                  report)
            test_loss, test_accuracy = _evaluate(model, test_x, test_y, training.batch_size)
        results.append(_member_result(activation, seed, model, history, test_loss,
                                      test_accuracy, training, time.perf_counter() - start))
    return results


def _fit_member(model, corpus, training, order, steps, validation, report):
    """Trains one member epoch by epoch, its windows drawn by
    `default_rng(order)`; returns its history (see above)."""
    val_x, val_y = validation
    probe, probe_x = attention_probe(model), val_x[:ENTROPY_BATCH]
    rng = np.random.default_rng(order)
    history = {}
    for epoch in range(1, training.epochs + 1):
        x, y = _random_windows(corpus.train, corpus.context, steps * training.batch_size, rng)
        logs, seconds = _timed_epoch(model, x, y, training.batch_size)
        val_loss, val_accuracy = _evaluate(model, val_x, val_y, training.batch_size)
        _record_epoch(
            history, {"loss": logs["loss"][-1], "accuracy": logs["accuracy"][-1]}, val_loss,
            val_accuracy, x.size / seconds, probe(probe_x), leaky_slopes(model),
        )
        report(epoch, np.array([val_accuracy]))
        if not math.isfinite(val_loss):
            break  # diverged: NaN weights from here on
    return history
