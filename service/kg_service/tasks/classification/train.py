"""Training a sweep: every activation, every seed, all seeds at once.

Member (activation, seed) is defined by three things: its initial weights
(`keras.utils.set_random_seed(seed)`, then the task's `build_model`), its per-epoch
data order (`np.random.default_rng(seed)`, one permutation per epoch) and
the configured optimizer. `train_sweep` trains all seeds of one
activation as ONE stacked model (`models.stack_model`): each step
feeds member m its own batch, and the loss is each member's mean batch
loss summed over members, so each member's gradient, and with an
elementwise optimizer (Adam, AdamW, SGD, RMSprop) its update, is exactly
that of the plain model trained alone. Per-step overhead, which dominates
small models on a CPU, is paid once per step instead of once per member.

Pure apart from the device settings: no MLflow, no files.
"""

import contextlib
import logging
import platform
import time

import keras
import numpy as np

from kg_service.config import catalog
from kg_service.sweep import parallel as distribution
from kg_service.sweep import shards
from kg_service.errors import ServiceError
from kg_service.tasks.classification.models import stack_model
from kg_service.tasks.classification.models import stack_weights
from kg_service.tasks.classification.models import unstack_weights
from kg_service.results import MemberResult

HISTORY_KEYS = ("loss", "accuracy", "val_loss", "val_accuracy")


# Probabilities are clipped like Keras' crossentropy on probabilities.
_EPSILON = 1e-7


def make_optimizer(training_cfg):
    """Returns a new optimizer for `training_cfg` (name, learning rate,
    weight decay if set).

    Raises:
        ServiceError: for an unknown optimizer name.
    """
    class_name = catalog.OPTIMIZERS.get(training_cfg.optimizer)
    if class_name is None:
        raise ServiceError(
            f"training.optimizer: unknown optimizer {training_cfg.optimizer!r}; "
            f"expected one of {', '.join(sorted(catalog.OPTIMIZERS))}."
        )
    factory = getattr(keras.optimizers, class_name)
    options = {}
    if training_cfg.weight_decay is not None:
        options["weight_decay"] = training_cfg.weight_decay
    return factory(learning_rate=training_cfg.learning_rate, **options)


# --- Device. ---------------------------------------------------------------


def _tensorflow_gpus(hide):
    import tensorflow as tf

    gpus = tf.config.get_visible_devices("GPU")
    if hide and gpus:
        try:
            tf.config.set_visible_devices([], "GPU")
        except RuntimeError:  # TensorFlow has already set them up.
            raise ServiceError(
                "device.type: cpu, but TensorFlow is already using the GPU in "
                "this process. Run with CUDA_VISIBLE_DEVICES= (empty) instead."
            ) from None
        return []
    return [
        tf.config.experimental.get_device_details(gpu).get(
            "device_name", gpu.name
        )
        for gpu in gpus
    ]


def _jax_gpus(hide):
    import jax

    try:
        gpus = jax.devices("gpu")
    except RuntimeError:  # No GPU backend.
        gpus = []
    if hide and gpus:
        jax.config.update("jax_default_device", jax.devices("cpu")[0])
        return []
    return [gpu.device_kind for gpu in gpus]


def _torch_gpus(hide):
    import torch

    if hide or not torch.cuda.is_available():
        return []
    return [
        torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())
    ]


# One line per Keras backend: hide=bool -> names of the GPUs it will use.
_GPU_PROBES = {
    "tensorflow": _tensorflow_gpus,
    "jax": _jax_gpus,
    "torch": _torch_gpus,
}


def describe_device(device_cfg):
    """Applies `device_cfg.type` and says what the sweep will run on.

    `"cpu"` hides the GPUs from the backend (TensorFlow: only before it
    first touches them); `"gpu"` requires one; `"auto"` uses one if any.

    Args:
        device_cfg: A `kg_service.config.schema.DeviceConfig`.

    Returns:
        A dict: `device` ("cpu" or "gpu"), `device_name`, `backend` (the
        Keras backend), `mixed_precision` (policy name or None), `xla`,
        `distribution` and `replicas` (how many devices share each batch;
        `kg_service.sweep.parallel` makes its engine here, once the GPUs
        are hidden or not).

    Raises:
        ServiceError: for `type: gpu` when the backend sees no GPU; for a
            distribution the backend does not run.

    Example:

    >>> from kg_service.config.schema import DeviceConfig
    >>> describe_device(DeviceConfig(type="cpu"))["device"]
    'cpu'
    """
    backend = keras.backend.backend()
    probe = _GPU_PROBES.get(backend, lambda hide: [])
    gpus = probe(device_cfg.type == "cpu")
    if device_cfg.type == "gpu" and not gpus:
        raise ServiceError(
            f"device.type: gpu, but the {backend} backend sees no GPU. Set "
            f"device.type to auto or cpu, or check the CUDA installation "
            f"(nvidia-smi, and a GPU build of {backend})."
        )
    on_gpu = bool(gpus)
    return {
        "device": "gpu" if on_gpu else "cpu",
        "device_name": gpus[0] if on_gpu else (platform.processor() or "cpu"),
        "backend": backend,
        "mixed_precision": device_cfg.mixed_precision,
        "xla": bool(device_cfg.xla),
        "distribution": device_cfg.distribution,
        "replicas": distribution.replicas(device_cfg),
    }


@contextlib.contextmanager
def _dtype_policy(name):
    """Sets the global dtype policy inside the block (None: unchanged)."""
    if not name:
        yield
        return
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(name)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)


class _DropRetracingWarnings(logging.Filter):
    def filter(self, record):
        return "triggered tf.function retracing" not in record.getMessage()


@contextlib.contextmanager
def _quiet_retracing_warnings():
    """Drops TensorFlow's "excessive retracing" warning inside the block.

    Each activation builds new models, whose tf.functions share their
    code with the previous models'; TensorFlow counts each new model's
    first traces as retracing and warns, wrongly, from the third
    activation on.
    """
    logger = logging.getLogger("tensorflow")
    quiet = _DropRetracingWarnings()
    logger.addFilter(quiet)
    try:
        yield
    finally:
        logger.removeFilter(quiet)


# --- Metrics. --------------------------------------------------------------


def member_metrics(probs, labels):
    """Crossentropy and accuracy of each member, in float64.

    Args:
        probs: `(N, M, C)` class probabilities of M members.
        labels: `(N,)` int labels, the same for every member.

    Returns:
        `(loss, accuracy)`, each an `(M,)` array.
    """
    probs = np.asarray(probs, dtype=np.float64)
    p_true = np.take_along_axis(probs, labels[:, None, None], axis=2)[..., 0]
    loss = -np.log(np.clip(p_true, _EPSILON, 1.0 - _EPSILON)).mean(axis=0)
    accuracy = (probs.argmax(axis=2) == labels[:, None]).mean(axis=0)
    return loss, accuracy


def epochs_to_threshold(val_accuracy, threshold):
    """First epoch (1-based) whose validation accuracy is >= threshold."""
    for epoch, value in enumerate(val_accuracy, start=1):
        if value >= threshold:
            return epoch
    return None


def _members_loss(members):
    # Keras averages the (batch, M) per-example losses over batch AND
    # members; times M that is the sum over members of each member's mean
    # batch loss, whose gradient for member m is member m's own gradient.
    def loss(y_true, y_pred):
        return members * keras.losses.sparse_categorical_crossentropy(
            y_true, y_pred
        )

    return loss


def _tile(x, members):
    """`(N, F)` -> `(N, M, F)`: every member sees the same examples."""
    shape = (len(x), members) + x.shape[1:]
    return np.ascontiguousarray(np.broadcast_to(x[:, None], shape))


class _MemberBatches(keras.utils.PyDataset):
    """Every training batch of every epoch, for one `fit()` call.

    Batch i is step `i % steps` of epoch `i // steps`; member m's rows come
    from its own permutation of the training set, drawn from
    `np.random.default_rng(seed_m)` once per epoch, in epoch order. The
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
        super().__init__()
        self.x, self.y, self.seeds = x, y, tuple(seeds)
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
        return self.x[rows], self.y[rows]


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
        import tensorflow as tf

        if tf.distribute.has_strategy():
            return keras.ops.convert_to_numpy(model(x, training=False))
    return model.predict_on_batch(x)


class _MemberHistory(keras.callbacks.Callback):
    """Per epoch: each member's loss and accuracy on train and validation.

    One forward pass of the stacked model over both sets per epoch;
    metrics in numpy.
    """

    def __init__(self, dataset, members, report):
        super().__init__()
        self.n_train = len(dataset.y_train)
        self.x_eval = _tile(
            np.concatenate([dataset.x_train, dataset.x_val]), members
        )
        self.y_train, self.y_val = dataset.y_train, dataset.y_val
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


# --- The sweep. ------------------------------------------------------------


def check_distribution(task, dataset, config):
    """Raises a ServiceError, before any training, for a task or batches
    that `device.distribution` cannot run (nothing to check for none)."""
    if config.device.distribution == "none":
        return
    distribution.check_language_model(task)
    distribution.check_batches(config.device, batch_sizes(dataset, config.training))


def batch_sizes(dataset, training_cfg):
    """`{what: size}` of every batch a stacked model sees: training steps
    (the last one partial, if any), the per-epoch evaluation of the training
    and validation splits, and the test split."""
    n_train = len(dataset.y_train)
    batch = min(training_cfg.batch_size, n_train)  # larger: the whole split
    sizes = {"training.batch_size": batch}
    if n_train % batch:
        sizes["the last training batch"] = n_train % batch
    sizes["the training + validation splits"] = n_train + len(dataset.y_val)
    sizes["the test split"] = len(dataset.y_test)
    return sizes


def train_sweep(
    task, dataset, config, progress=None, done=None, on_trained=None, members=None
):
    """Trains every (activation, seed) member of `config` on `dataset`.

    Each activation's seeds go to `task.train` together; for the
    classification tasks that is `train_activation`, which trains them as
    one stacked model.

    Args:
        task: A `kg_service.tasks.base.Task`.
        dataset: What `task.load` returned.
        config: A `kg_service.config.schema.Config` (activations, seeds, model,
            training, device).
        done: Optional `{(activation, seed): MemberResult}` of members
            already trained (a resumed sweep's, from the tracking store):
            they are not trained again.
        on_trained: Optional callable, called with the list of new
            `MemberResult`s as soon as each activation's missing seeds
            have trained, so they reach the tracking store before the
            next activation starts.
        members: Optional (activation, seed) pairs to train (a shard's
            slice); default: every pair of the config. The others are
            neither trained nor returned.
        progress: Optional callable, called once per epoch per activation
            with a dict: `activation`, `epoch`, `epochs`, `members_done`
            (members of the activations before this one), `group_size`
            (members training now), `members_total` and `val_accuracy`
            (mean over the members training now of the epoch's value of
            the task's selection metric).

    Returns:
        A list of `MemberResult` (of `members`, if given), activations in
        config order, seeds in config order within each.

    Raises:
        ServiceError: for an unavailable device, an unknown optimizer
            or block, or batches the distribution cannot split.
    """
    describe_device(config.device)
    check_distribution(task, dataset, config)
    grid = shards.grid(config)
    wanted = set(grid if members is None else members)
    total = len(wanted)
    done = dict(done or {})
    results = []
    with _quiet_retracing_warnings():
        for activation in config.activations:
            seeds = tuple(s for a, s in grid if a == activation and (a, s) in wanted)
            missing = tuple(s for s in seeds if (activation, s) not in done)
            finished = len(results) + len(seeds) - len(missing)

            def report(epoch, values, activation=activation, finished=finished):
                if progress is not None:
                    progress(
                        {
                            "activation": activation,
                            "epoch": epoch,
                            "epochs": config.training.epochs,
                            "members_done": finished,
                            "group_size": len(missing),
                            "members_total": total,
                            "val_accuracy": float(np.mean(values)),
                        }
                    )

            new = []
            if missing:
                new = task.train(task, dataset, config, activation, missing, report)
                if on_trained is not None:
                    on_trained(new)
            by_seed = {r.seed: r for r in new}
            results.extend(by_seed.get(s) or done[(activation, s)] for s in seeds)
    return results


def train_activation(task, dataset, config, activation, seeds, report):
    """Trains every seed of one activation of a classification task.

    All seeds train together as one stacked model; each member's weights,
    data order and results are those of the plain model trained alone with
    that seed (see the module docstring). Per epoch, each member's loss
    and accuracy on the whole training and validation sets are recorded
    after the epoch's last step. The test set is used once, after
    training. Exactness holds for dropout 0 and float32; dropout masks are
    drawn for the stacked model as a whole, and under `mixed_float16`
    Keras' dynamic loss scale is shared, so a step that overflows for one
    member is skipped for all.

    Args:
        task: The `kg_service.tasks.base.Task` (its `build_model`).
        dataset: A `kg_service.tasks.classification.data.Dataset`.
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
        its number of members.
    """
    training = config.training
    members = len(seeds)
    start = time.perf_counter()

    with _dtype_policy(config.device.mixed_precision):
        plain_models = []
        for seed in seeds:
            keras.utils.set_random_seed(seed)
            plain_models.append(
                task.build_model(
                    config.model, activation, dataset, name=f"{activation}_seed{seed}"
                )
            )
        # Only the stacked model is data-parallel: the plain models stay
        # ordinary one-device models, for tracking and export.
        with distribution.scope(config.device):
            stacked = stack_model(plain_models[0], members)

    with distribution.scope(config.device):
        stack_weights(stacked, plain_models)
        batches = _MemberBatches(
            dataset.x_train, dataset.y_train, seeds, training.batch_size
        )
        recorder = _MemberHistory(dataset, members, report)
        # One fit() for all epochs and one compiled call per epoch: of
        # train_on_batch per step, fit() per epoch and this, measured the
        # fastest on TensorFlow (2.9 vs 3.4 and 4.6 ms/step, 10 members of
        # 64-64 GELU, CPU) and on JAX (1.07 vs 2.1 and 1.1 ms/step). Under
        # a tf.distribute strategy Keras 3.15 / TF 2.21 fail a
        # multi-step execution ("You must feed a value for placeholder
        # tensor" in multi_step_on_iterator): one step per call there.
        stacked.compile(
            optimizer=make_optimizer(training),
            loss=_members_loss(members),
            jit_compile=True if config.device.xla else "auto",
            steps_per_execution=1 if _on_tf_distribute(config) else batches.steps,
        )
        stacked.fit(
            batches,
            epochs=training.epochs,
            steps_per_epoch=batches.steps,
            callbacks=[recorder],
            shuffle=False,
            verbose=0,
        )
        seconds = time.perf_counter() - start

        test_loss, test_accuracy = member_metrics(
            predict(stacked, _tile(dataset.x_test, members)), dataset.y_test
        )
    unstack_weights(stacked, plain_models)

    results = []
    for m, (seed, model) in enumerate(zip(seeds, plain_models)):
        model.compile(
            optimizer=make_optimizer(training),
            loss="sparse_categorical_crossentropy",
            metrics=["accuracy"],
        )
        member_history = {
            key: [float(values[m]) for values in recorder.history[key]]
            for key in HISTORY_KEYS
        }
        diverged = first_non_finite_epoch(member_history)
        results.append(
            MemberResult(
                activation=activation,
                seed=seed,
                history=member_history,
                test_loss=float(test_loss[m]),
                test_accuracy=float(test_accuracy[m]),
                epochs_to_threshold=epochs_to_threshold(
                    member_history["val_accuracy"],
                    training.convergence_threshold,
                ),
                model=model,
                train_seconds=seconds / members,
                failure=(
                    None
                    if diverged is None
                    else f"loss not finite from epoch {diverged} (diverged)"
                ),
                failed_epoch=diverged,
            )
        )
    return results


def first_non_finite_epoch(history):
    """The first epoch (1-based) whose training or validation loss is NaN
    or inf, else None.

    A diverged member's weights are NaN from then on; in a stacked group
    the other members train on unharmed (the loss is a sum of per-member
    terms, so each member's gradient is its own).

    Example:

    >>> first_non_finite_epoch({"loss": [0.5, float("nan")], "val_loss": [0.6, 0.7]})
    2
    """
    for epoch, values in enumerate(zip(history["loss"], history["val_loss"]), start=1):
        if not np.all(np.isfinite(values)):
            return epoch
    return None
