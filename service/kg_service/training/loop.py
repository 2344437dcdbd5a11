"""The loop over a sweep's activations, and what every task's members share.

`train_sweep` hands each activation's missing seeds to `task.train`
(whatever the task: it reads the task object, never its name), keeps the
members a resumed sweep already trained, and reports progress;
`epochs_to_threshold` and `first_non_finite_epoch` read a member's
history the same way for every task, and `member_result` builds the
`MemberResult` every task returns from them.
"""

import numpy as np

from kg_service.config.derived import grid
from kg_service.results import MemberResult
from kg_service.training import device
from kg_service.training import parallel


def epochs_to_threshold(val_accuracy, threshold):
    """First epoch (1-based) whose validation accuracy is >= threshold."""
    for epoch, value in enumerate(val_accuracy, start=1):
        if value >= threshold:
            return epoch
    return None


# Keras runs `steps_per_execution > 1` as a tf.while_loop and traces the
# training step twice for it (once more than one step per call does); a
# call per epoch saves per-step overhead (2.9 vs 3.4 ms/step, a 64-64
# classifier) but pays that trace once per model. Measured (issue 17, a
# `--smoke` member group, CPU s per activation, interleaved in one
# process, load 19-22): glu-variants 7.49 vs 6.88 at one step per call,
# moons-glu 1.57 vs 1.44. Below this many steps in all, one step per call.
MULTI_STEP_MIN_STEPS = 256


def steps_per_execution(steps, epochs):
    """Keras' `steps_per_execution` for `epochs` epochs of `steps` steps:
    the whole epoch per call when the run is long enough to pay for the
    second trace (`MULTI_STEP_MIN_STEPS`), else 1.

    >>> steps_per_execution(40, 100), steps_per_execution(4, 2)
    (40, 1)
    """
    return steps if steps * epochs >= MULTI_STEP_MIN_STEPS else 1


def check_distribution(task, dataset, config):
    """Raises a ServiceError, before any training, for a task or batches
    that `device.distribution` cannot run (nothing to check for none)."""
    if config.device.distribution == "none":
        return
    parallel.check_supported(task)
    parallel.check_batches(config.device, batch_sizes(dataset, config.training))


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

    Each activation's seeds go to `task.train` together; a classification
    task trains them as one stacked model
    (`kg_service.tasks.classification.train.train_activation`). A task
    with `train_members` trains the members of several activations of one
    architecture at once (`activation_groups`): classification's ReLU,
    GELU, Swish... MLPs in one stacked model, its gated ones in another.

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
            have trained (each group's, `activation_groups`), so they
            reach the tracking store before the next one starts.
        members: Optional (activation, seed) pairs to train (a shard's
            slice); default: every pair of the config. The others are
            neither trained nor returned.
        progress: Optional callable, called once per epoch per training
            group with a dict: `activation` (the group's activations now
            training, joined by "+": "relu+gelu"), `epoch`, `epochs`,
            `members_done` (members of the groups before this one), `group_size`
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
    device.describe_device(config.device)
    check_distribution(task, dataset, config)
    keys = grid(config)
    wanted = set(keys if members is None else members)
    total = len(wanted)
    done = dict(done or {})
    trained = {}
    with device.quiet_retracing_warnings():
        for group in activation_groups(task, config):
            pairs = tuple(k for k in keys if k[0] in group and k in wanted)
            missing = tuple(k for k in pairs if k not in done)
            finished = len(trained) + len(pairs) - len(missing)
            training_now = tuple(dict.fromkeys(a for a, _ in missing))
            report = group_progress(progress, config, training_now, finished, len(missing), total)
            new = train_group(task, dataset, config, missing, report) if missing else []
            if missing and on_trained is not None:
                on_trained(new)
            by_key = {(r.activation, r.seed): r for r in new}
            trained.update({k: by_key.get(k) or done[k] for k in pairs})
    return [trained[k] for k in keys if k in wanted]


def group_progress(progress, config, training_now, finished, size, total):
    """The per-epoch callable a group's training calls with `(epoch,
    values)`: one `progress` dict (see `train_sweep`), or nothing when
    there is no `progress`."""
    # "relu+gelu": the activations training now, a resumed group's
    # missing ones only (the progress line names each of them).
    activation = "+".join(training_now)

    def report(epoch, values):
        if progress is not None:
            progress(
                {
                    "activation": activation,
                    "epoch": epoch,
                    "epochs": config.training.epochs,
                    "members_done": finished,
                    "group_size": size,
                    "members_total": total,
                    "val_accuracy": float(np.mean(values)),
                }
            )

    return report


def train_group(task, dataset, config, missing, report):
    """The new `MemberResult`s of one group's `missing` (activation, seed)
    pairs: one activation's seeds through `task.train`, several
    activations' through `task.train_members`."""
    (one, *more) = tuple(dict.fromkeys(a for a, _ in missing))
    if more:
        return task.train_members(task, dataset, config, missing, report)
    return task.train(task, dataset, config, one, tuple(s for _, s in missing), report)


def activation_groups(task, config):
    """The sweep's activations in training groups, each a tuple trained in
    one `task.train` (one activation) or `task.train_members` call.

    Activations of one non-None `task.stack_key` form a group (issue 20:
    activations x seeds in one stacked model), at the place of its first
    activation; the others train alone. Nothing is grouped when the
    optimizer may differ between activations (a tuning block sets each
    activation's own value) or the task has no `train_members`.

    >>> import types
    >>> key = {"relu": "plain", "glu": "gated", "gelu": "plain", "swiglu": "gated"}
    >>> task = types.SimpleNamespace(train_members=print, stack_key=lambda c, a: key.get(a))
    >>> config = types.SimpleNamespace(activations=("relu", "glu", "prelu", "gelu", "swiglu"),
    ...                                tuning=None)
    >>> activation_groups(task, config)
    [('relu', 'gelu'), ('glu', 'swiglu'), ('prelu',)]
    """
    if task.train_members is None or task.stack_key is None or config.tuning is not None:
        return [(a,) for a in config.activations]
    groups = {}
    for activation in config.activations:
        key = task.stack_key(config, activation)
        groups.setdefault(activation if key is None else ("stack", key), []).append(activation)
    return [tuple(group) for group in groups.values()]


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


def member_result(activation, seed, model, history, test_loss, test_accuracy, training,
                  seconds, final=None):
    """One trained member's `MemberResult`: its convergence epoch and, if
    its loss stopped being finite, the failure that says from which epoch.

    `history` is the member's own (per-epoch lists with at least `loss`,
    `val_loss` and `val_accuracy`); `final`: task-specific final numbers.
    """
    diverged = first_non_finite_epoch(history)
    return MemberResult(
        activation=activation,
        seed=seed,
        history=history,
        test_loss=float(test_loss),
        test_accuracy=float(test_accuracy),
        epochs_to_threshold=epochs_to_threshold(
            history["val_accuracy"], training.convergence_threshold
        ),
        model=model,
        train_seconds=seconds,
        failure=(
            None if diverged is None else f"loss not finite from epoch {diverged} (diverged)"
        ),
        failed_epoch=diverged,
        final=final or {},
    )
