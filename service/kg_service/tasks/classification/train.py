"""Training a classification task: the members of one architecture at once.

Member (activation, seed) is defined by four things, each source of
variance from its own seed derived from the member's
(`kg_service.config.derived.member_source_seeds`; `vary` says which ones
change from seed to seed): its data split (`data.resplit` with the split
seed), its initial weights (`keras.utils.set_random_seed(init seed)`,
then the task's `build_model`), its per-epoch data order
(`np.random.default_rng(order seed)`, one permutation per epoch) and the
configured optimizer. `train_activation` trains all seeds of one
activation as ONE stacked model (`models.stack_model`): each step
feeds member m its own batch, and the loss is each member's mean batch
loss summed over members, so each member's gradient, and with an
elementwise optimizer (Adam, AdamW, SGD, RMSprop) its update, is exactly
that of the plain model trained alone. Per-step overhead, which dominates
small models on a CPU, is paid once per step instead of once per member.
Activations of one architecture (ReLU, GELU, Swish... MLPs; the gated
units: `stack_key`) train in one stacked model too (`train_members`,
issue 20's activations x seeds), member m with its own activation: a
sweep traces one model per architecture instead of one per activation.

Pure apart from the device settings: no MLflow, no files.
"""

import time

import keras
import numpy as np

import keras_gelu_names as name_table
from kg_service.config.derived import member_source_seeds
from kg_service.tasks.classification.data import resplit
from kg_service.tasks.classification.models import stack_model
from kg_service.tasks.classification.models import stack_weights
from kg_service.tasks.classification.models import unstack_weights
from kg_service.training import parallel
from kg_service.training.device import dtype_policy
from kg_service.training.loop import member_result
from kg_service.training.loop import steps_per_execution
from kg_service.training.optimizers import make_optimizer

HISTORY_KEYS = ("loss", "accuracy", "val_loss", "val_accuracy")


# Probabilities are clipped like Keras' crossentropy on probabilities.
_EPSILON = 1e-7


# --- Metrics. --------------------------------------------------------------


def member_metrics(probs, labels):
    """Crossentropy and accuracy of each member, in float64.

    Args:
        probs: `(N, M, C)` class probabilities of M members.
        labels: `(N,)` int labels, the same for every member, or `(N, M)`,
            member m's in column m.

    Returns:
        `(loss, accuracy)`, each an `(M,)` array.
    """
    probs = np.asarray(probs, dtype=np.float64)
    labels = labels[:, None] if labels.ndim == 1 else labels
    p_true = np.take_along_axis(probs, labels[..., None], axis=2)[..., 0]
    loss = -np.log(np.clip(p_true, _EPSILON, 1.0 - _EPSILON)).mean(axis=0)
    accuracy = (probs.argmax(axis=2) == labels).mean(axis=0)
    return loss, accuracy


def _members_loss(members):
    # Keras averages the (batch, M) per-example losses over batch AND
    # members; times M that is the sum over members of each member's mean
    # batch loss, whose gradient for member m is member m's own gradient.
    def loss(y_true, y_pred):
        return members * keras.losses.sparse_categorical_crossentropy(
            y_true, y_pred
        )

    return loss


def _per_member(arrays):
    """M arrays `(N, ...)` -> `(N, M, ...)`: member m's in column m."""
    return np.ascontiguousarray(np.stack(arrays, axis=1))


class _MemberBatches(keras.utils.PyDataset):
    """Every training batch of every epoch, for one `fit()` call.

    Batch i is step `i % steps` of epoch `i // steps`; member m's rows come
    from its own permutation of its own training split (`x[:, m]`), drawn
    from `np.random.default_rng(seed_m)` once per epoch, in epoch order. The
    dataset is infinite (`num_batches` None) so that Keras keeps one
    iterator across epochs; tf.data may prefetch ahead, even past the end,
    but always in order, so epochs are drawn lazily and in sequence. Keras
    reads the first batches once more after peeking at them for the tensor
    spec (two batches, which reach into epoch 1 when one batch holds the
    whole split): a request for an earlier epoch replays the member's
    generator from its seed, so every epoch's order stays the same.

    A `batch_size` of the split's size or more gives one batch of the
    whole split per epoch, as `model.fit` does.
    """

    def __init__(self, x, y, seeds, batch_size):
        """x `(N, M, F)` and y `(N, M)`: member m's training split in column m."""
        super().__init__()
        self.x, self.y, self.seeds = x, y, tuple(seeds)
        self._columns = np.arange(len(self.seeds))[None, :]
        self.batch_size = min(batch_size, len(x))
        self.steps = -(-len(x) // self.batch_size)
        self._rngs = [np.random.default_rng(seed) for seed in self.seeds]
        self._epoch = -1
        self._order = None  # (N, M): row of example n for member m

    @property
    def num_batches(self):
        return None

    def __getitem__(self, index):
        epoch, step = divmod(index, self.steps)
        if epoch < self._epoch:  # Keras' re-read after its peek: replay
            self._rngs = [np.random.default_rng(seed) for seed in self.seeds]
            self._epoch = -1
        while self._epoch < epoch:
            self._order = np.stack(
                [rng.permutation(len(self.x)) for rng in self._rngs], axis=1
            )
            self._epoch += 1
        rows = self._order[
            step * self.batch_size : (step + 1) * self.batch_size
        ]
        return self.x[rows, self._columns], self.y[rows, self._columns]


def _on_tf_distribute(config):
    return (
        config.device.distribution != "none" and keras.backend.backend() == "tensorflow"
    )


def predict(model, x):
    """The model's outputs for all of `x` as one batch, as numpy.

    `predict_on_batch` is the fast path (one compiled call). Under a
    tf.distribute strategy Keras 3.15 hands its whole batch to every
    replica and concatenates their outputs (N x replicas rows), and
    `predict` re-creates its distributed input each call (1 to 3 s per
    call, against 16 ms per training step, 2 logical CPUs); a plain call
    reads the replicas' (identical) weights and needs no collective, so
    every worker gets the same outputs on its own.
    """
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf  # TensorFlow: on that backend only

        if tf.distribute.has_strategy():
            return keras.ops.convert_to_numpy(model(x, training=False))
    return model.predict_on_batch(x)


class _MemberHistory(keras.callbacks.Callback):
    """Per epoch: each member's loss and accuracy on train and validation.

    One forward pass of the stacked model over both sets per epoch;
    metrics in numpy.
    """

    def __init__(self, datasets, report):
        super().__init__()
        self.n_train = len(datasets[0].y_train)
        self.x_eval = _per_member(
            [np.concatenate([d.x_train, d.x_val]) for d in datasets]
        )
        self.y_train = _per_member([d.y_train for d in datasets])
        self.y_val = _per_member([d.y_val for d in datasets])
        self.report = report
        self.history = {key: [] for key in HISTORY_KEYS}

    def on_epoch_end(self, epoch, logs=None):
        probs = predict(self.model, self.x_eval)
        loss, accuracy = member_metrics(probs[: self.n_train], self.y_train)
        val_loss, val_accuracy = member_metrics(
            probs[self.n_train :], self.y_val
        )
        for key, values in zip(
            HISTORY_KEYS, (loss, accuracy, val_loss, val_accuracy)
        ):
            self.history[key].append(values)
        self.report(epoch + 1, val_accuracy)


# --- One activation's seeds, as one stacked model. -------------------------


def train_activation(task, dataset, config, activation, seeds, report):
    """Trains every seed of one activation of a classification task.

    All seeds train together as one stacked model; each member's split,
    weights, data order and results are those of the plain model trained
    alone with that seed (see the module docstring). Per epoch, each
    member's loss and accuracy on its whole training and validation splits
    are recorded after the epoch's last step. The test split is used once,
    after training. Exactness holds for dropout 0 and float32; dropout
    masks are drawn for the stacked model as a whole, and under
    `mixed_float16` Keras' dynamic loss scale is shared, so a step that
    overflows for one member is skipped for all.

    Args:
        task: The `kg_service.tasks.base.Task` (its `build_model`).
        dataset: A `kg_service.tasks.classification.data.Dataset`, split
            with `data.seed`; a member whose split seed differs gets it
            split again (`data.resplit`).
        config: A `kg_service.config.schema.Config`.
        activation: The activation name.
        seeds: The members' seeds.
        report: `report(epoch, val_accuracy)` after each epoch, with one
            value per member.

    Returns:
        A list of `MemberResult` in seed order. `model` is the trained
        plain `keras.Model` (compiled with the configured optimizer, sparse
        crossentropy and accuracy), which takes raw features: with
        `dataset.normalization` it standardizes them itself.
        `train_seconds` is the activation's training wall time divided by
        its number of members. `test_correct` is, per test example of the
        member's split, whether its prediction was right (McNemar's test,
        `kg_service.analysis.numbers.paired_examples`).
    """
    return train_members(task, dataset, config, tuple((activation, s) for s in seeds), report)


def train_members(task, dataset, config, members, report):
    """Trains `members`, `(activation, seed)` pairs, as one stacked model.

    As `train_activation`, whose seeds of one activation are the case of
    one activation; here the members may also differ in their activation
    where the models share one architecture (issue 20's activations x
    seeds, `stack_key`): ReLU, GELU and Swish MLPs of one width are one,
    the gated units another. Member m applies its own activation to its
    own slice (`keras_gelu.stacking`), so each member's split, weights,
    data order and results are still those of the member trained alone.
    `train_seconds` is the group's wall time over its number of members.

    Returns:
        A list of `MemberResult` in `members` order.

    Raises:
        ValueError: for members whose models differ in more than their
            activation (`models.stack_model`).
    """
    start = time.perf_counter()
    sources = [member_source_seeds(config, seed) for _, seed in members]
    datasets = _member_datasets(dataset, config, sources)
    plain_models, stacked = _build_members(
        task, datasets, config, members, [s["init"] for s in sources]
    )
    with parallel.scope(config.device):
        stack_weights(stacked, plain_models)
        recorder = _fit_stacked(
            stacked, datasets, config, [s["order"] for s in sources], report
        )
        seconds = time.perf_counter() - start
        probs = np.asarray(predict(stacked, _per_member([d.x_test for d in datasets])))
        y_test = _per_member([d.y_test for d in datasets])
        test_loss, test_accuracy = member_metrics(probs, y_test)
        correct = probs.argmax(axis=2) == y_test
    unstack_weights(stacked, plain_models)
    results = [
        _member_result(
            activation, seed, model, config.training, recorder.history, m,
            test_loss[m], test_accuracy[m], seconds / len(members),
        )
        for m, ((activation, seed), model) in enumerate(zip(members, plain_models))
    ]
    for m, result in enumerate(results):
        result.test_correct = correct[:, m]
    return results


def stack_key(config, activation):
    """Activations with one key train in one stacked model
    (`train_members`); None: alone (its seeds stacked).

    In one config every activation's model has the same layers and widths
    (`model` is shared): the activation's kind fixes the weights. Every
    elementwise activation (ReLU, GELU, Swish...) gives one Dense layer
    per width, every gated one a fused GLU projection of one width
    (`match_params` or not, the same for all); a learnable activation has
    weights of its own, and a name outside keras_gelu's table is not
    known to be stateless, so both train alone.
    """
    key = name_table.lookup(activation)
    kind = None if key is None else name_table.kind(key)
    return kind if kind in ("elementwise", "gated") else None


def _member_datasets(dataset, config, sources):
    """Each member's split: its own (`resplit`) where `vary` has split,
    else `dataset` itself. A seed listed twice (two activations' members)
    shares one split, and so one set of statistics."""
    if "split" not in config.vary:
        return [dataset for _ in sources]
    # As `data.member_split` (the report's figures read the same split).
    splits = {}
    for s in sources:
        if s["split"] not in splits:
            splits[s["split"]] = resplit(dataset, s["split"])
    return [splits[s["split"]] for s in sources]


def _build_members(task, datasets, config, members, init_seeds):
    """(each member's plain model, the stacked model of them all)."""
    with dtype_policy(config.device.mixed_precision):
        plain_models = []
        for (activation, seed), init_seed, member_data in zip(members, init_seeds, datasets):
            keras.utils.set_random_seed(init_seed)
            plain_models.append(
                task.build_model(
                    config.model, activation, member_data, name=f"{activation}_seed{seed}"
                )
            )
        # Members on different splits standardize with their own statistics.
        normalizations = [d.normalization for d in datasets]
        shared = all(d is datasets[0] for d in datasets) or normalizations[0] is None
        one_activation = len({activation for activation, _ in members}) == 1
        # Only the stacked model is data-parallel: the plain models stay
        # ordinary one-device models, for tracking and export.
        with parallel.scope(config.device):
            stacked = stack_model(
                plain_models[0] if one_activation else plain_models, len(members),
                normalizations=None if shared else normalizations,
            )
    return plain_models, stacked


def _fit_stacked(stacked, datasets, config, order_seeds, report):
    """Trains the stacked model for every epoch; returns its `_MemberHistory`."""
    training = config.training
    batches = _MemberBatches(
        _per_member([d.x_train for d in datasets]),
        _per_member([d.y_train for d in datasets]),
        order_seeds,
        training.batch_size,
    )
    recorder = _MemberHistory(datasets, report)
    # One fit() for all epochs and one compiled call per epoch: of
    # train_on_batch per step, fit() per epoch and this, measured the
    # fastest on TensorFlow (2.9 vs 3.4 and 4.6 ms/step, 10 members of
    # 64-64 GELU, CPU) and on JAX (1.07 vs 2.1 and 1.1 ms/step). Under
    # a tf.distribute strategy Keras 3.15 / TF 2.21 fail a
    # multi-step execution ("You must feed a value for placeholder
    # tensor" in multi_step_on_iterator): one step per call there. A short
    # run (a --smoke one) calls one step at a time too (loop.steps_per_execution).
    stacked.compile(
        optimizer=make_optimizer(training),
        loss=_members_loss(len(order_seeds)),
        jit_compile=True if config.device.xla else "auto",
        steps_per_execution=(1 if _on_tf_distribute(config)
                             else steps_per_execution(batches.steps, training.epochs)),
    )
    stacked.fit(
        batches,
        epochs=training.epochs,
        steps_per_epoch=batches.steps,
        callbacks=[recorder],
        shuffle=False,
        verbose=0,
    )
    return recorder


def _member_result(
    activation, seed, model, training, history, m, test_loss, test_accuracy, seconds
):
    """Member m's `MemberResult`: its plain model compiled, its history."""
    model.compile(
        optimizer=make_optimizer(training),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    member_history = {key: [float(values[m]) for values in history[key]] for key in HISTORY_KEYS}
    return member_result(
        activation, seed, model, member_history, test_loss, test_accuracy, training, seconds
    )
