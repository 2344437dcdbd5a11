"""The driver's side: a sweep's stacked groups as Ray tasks.

`train_sweep` is `kg_service.training.loop.train_sweep` on a cluster: the
same groups (`loop.activation_groups`: an activation's seeds, or the
activations that stack together), each split into tasks of
`execution.members_per_task` members if set, all submitted at once with
`execution.group_resources`; each task trains and logs its members
(`remote.train_and_log`). As each task lands, `landed(key, run_id)` hears
of its members, so an interrupted driver leaves the store knowing
exactly what is done, and `kg-train --resume` trains only the rest.
"""

import keras

from kg_service.config.derived import grid
from kg_service.errors import ServiceError
from kg_service.execution import cluster
from kg_service.execution import remote
from kg_service.tracking import member_runs
from kg_service.training import loop

TASK_NAME = "kg-train group"  # what `ray list tasks` and the dashboard show


def train_sweep(task, dataset, config, log, *, store, done=None, members=None, landed=None,
                progress=None):
    """Trains every (activation, seed) member of `config` (of `members`,
    if given) not in `done` on the Ray cluster this process is connected
    to (`cluster.connect`).

    Args:
        log: A `remote.MemberLog`: where and how the tasks log members.
        store: The driver's `TrackingStore`: a champion's model is read
            from its run through it, when registration first needs it.
        done, members: as for `loop.train_sweep`.
        landed: Optional callable `(key, run_id)`, called as each member lands.
        progress: Optional; its `stage(message)` hears of each task that lands.

    Returns:
        `MemberResult`s as `loop.train_sweep` returns them, config order.
    """
    import ray  # Ray: only for execution.engine ray

    together = loop.activation_groups(task, config)  # each one stacked model, split into tasks
    keys = grid(config)
    wanted = set(keys if members is None else members)
    trained = dict(done or {})
    chunks = tasks_of(together, [k for k in keys if k in wanted and k not in trained],
                      config.execution.members_per_task)
    pending = submit(ray, task, dataset, config, log, chunks)
    total = sum(len(chunk) for chunk in chunks)
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            pending.pop(ready[0])
            for item in landed_of(ray, ready[0]):
                trained[item.key] = result_of(item, store, log)
                if landed is not None:
                    landed(item.key, item.run_id)
            if progress is not None:
                done_now = total - sum(len(c) for c in pending.values())
                progress.stage(f"{done_now} of {total} members trained on the Ray cluster")
    finally:
        # An error or an interrupt: nothing trains on unseen. Not `force`:
        # that would kill the workers, which the next sweep (a --resume)
        # would start again, TensorFlow and all.
        for ref in pending:
            ray.cancel(ref)
    return [trained[k] for k in keys if k in wanted]


def member_log(config, tracking_uri, sweep_run_id, params, tags, final=None, keep_model=True):
    """The `remote.MemberLog` of a sweep's tasks: `params` by activation,
    `tags` on every member run, `final` numbers added to each member's."""
    return remote.MemberLog(
        tracking_uri=tracking_uri, experiment=config.experiment,
        retry_seconds=config.tracking.retry_seconds, sweep_run_id=sweep_run_id,
        params=params, tags=tags, final=dict(final or {}), keep_model=keep_model,
        backend=keras.backend.backend(),
    )  # fmt: skip


def tasks_of(together, missing, size):
    """`missing` (activation, seed) pairs in Ray tasks: each training
    group's of `together` (`loop.activation_groups`), cut into `size`
    members (`execution.members_per_task`; 0: the group whole)."""
    chunks = []
    for group in together:
        pairs = tuple(k for k in missing if k[0] in group)
        step = size or len(pairs) or 1
        chunks += [pairs[i:i + step] for i in range(0, len(pairs), step)]
    return chunks


def submit(ray, task, dataset, config, log, chunks):
    """`{object ref: chunk}` of one Ray task per chunk; the dataset goes
    to the object store once, not once per task."""
    if not chunks:
        return {}
    cluster.warmed(ray)  # the first tasks go to the workers that imported already
    resources = config.execution.group_resources
    train = ray.remote(remote.train_and_log).options(
        name=TASK_NAME,
        num_cpus=resources.num_cpus,
        num_gpus=resources.num_gpus,
        max_retries=config.execution.max_retries,
    )
    data = ray.put(dataset)
    return {train.remote(task, data, config, chunk, log): chunk for chunk in chunks}


def landed_of(ray, ref):
    """The task's `Landed` list; a task that raised the service's own
    error (a store that stayed down, a worker on another backend)
    re-raises it as it is, without Ray's wrapping and remote traceback."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as error:
        if isinstance(error.cause, ServiceError):
            raise error.cause from None
        raise


def result_of(item, store, log):
    """The driver's `MemberResult` of a `remote.Landed`: the task's
    numbers, its model read from its run on first use; a member an
    earlier try logged, read whole from the store."""
    if item.result is None:
        return store.finished_members(log.sweep_run_id)[item.key][1]
    return member_runs.from_run(item.result, lambda: store.member_model_file(item.run_id)
                                if log.keep_model else None)
