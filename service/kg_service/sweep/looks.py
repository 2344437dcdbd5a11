"""A sequential sweep (`seeds: {start, step, max}`): seeds in batches, a
look after each, until every comparison is decided or `max` seeds are
trained.

Each batch is more members of the same sweep: the same parent run, and
each activation's new seeds trained together as one stacked model, by
the same `stages.train` at `derived.with_seeds(config, n)`, which trains
only the members the store does not hold yet. So a look adds members
exactly as a resumed sweep does, and the sweep that ends is an ordinary
sweep of the seeds it used: compared, reported, exported and registered
as one (`stages.conclude`), with the looks beside it.

The looks are a function of the members alone (the statistics of
`kg_service.analysis.numbers.sequential` are deterministic): a resumed sequential
sweep replays the looks whose members the store holds, without training,
and carries on from the last finished one; a look cut short trains only
its missing members.

Sharded sequential sweeps are refused (`check_supported`): shard jobs do
not talk to each other, so none knows when a look's batch is complete,
and a job that finished its slice would have to wait, polling the store,
for the others before the next look could be decided. A multi-worker
sweep is refused too: its workers train the seeds the config names,
without reading the store, so they cannot follow the looks.
"""

import dataclasses
from typing import Any

from kg_service.config import derived
from kg_service.errors import ServiceError
from kg_service.sweep import stages


@dataclasses.dataclass(frozen=True)
class Looked:
    """A sequential sweep's training, done: where its looks stopped."""

    config: Any  # the config at the seeds used (`derived.with_seeds`)
    trained: stages.Trained  # every member of those seeds
    looks: Any  # kg_service.analysis.numbers.sequential.SweepLooks


def check_supported(config, shard=None):
    """Raises a ServiceError for sequential seeds where they cannot run:
    with `shard` (a sharded sweep), or a multi-worker distribution."""
    if not derived.sequential(config):
        return
    if shard is not None:
        raise ServiceError(
            f"seeds is sequential ({{start, step, max}}), and a sharded sweep cannot "
            f"run it: the shard jobs do not talk to each other, so none knows when a "
            f"look's batch of seeds is complete. Run it as one job (without "
            f"--shard/--sweep-id), or give seeds as a count or a list "
            f"(--set seeds={config.seeds.max})."
        )
    if config.device.distribution == "multi_worker":
        raise ServiceError(
            "seeds is sequential ({start, step, max}), and device.distribution: "
            "multi_worker cannot run it: the workers train the seeds the config "
            "names without reading the tracking store, so they cannot follow the "
            "looks. Use device.distribution mirrored or none, or give seeds as a "
            f"count or a list (--set seeds={config.seeds.max})."
        )


def train_in_looks(planned, schedule, pre, sweep_run_id, progress, logged, echo):
    """Trains a sequential sweep's batches until its looks decide.

    Args:
        planned: `derived.look_configs`: each look's seed count and the
            config at those seeds.
        schedule: the sweep's `SequentialSeeds`.
        pre, sweep_run_id, progress, logged: as for `stages.train`.
        echo: prints the line of each look.

    Returns:
        A `Looked`.
    """
    from kg_service.analysis.numbers import sequential  # scipy: after pre-flight's checks
    from kg_service.analysis.reports import sequential_report  # scipy: after pre-flight's checks

    counts = tuple(n for n, _ in planned)
    for k, (_, now) in enumerate(planned):
        trained = stages.train(now, pre, sweep_run_id, progress, logged)
        # The next look trains only new seeds.
        pre = dataclasses.replace(pre, done=trained.in_store, spooled={})
        looks = sequential.member_looks(trained.results, pre.task.compared, now.baseline,
                                        counts[: k + 1], schedule, now.analysis)
        last = looks.decided or k == len(counts) - 1
        echo(sequential_report.look_line(looks, None if last else counts[k + 1]))
        if last:
            return Looked(config=now, trained=trained, looks=looks)
    raise AssertionError("a sequential sweep has at least one look")


def replay(config, pre, trained, used):
    """The looks of a sequential sweep that trained seeds 0..used-1, from
    its members (what `kg report` rebuilds): its looks up to `used`,
    stopped at the first that decided every comparison."""
    from kg_service.analysis.numbers import sequential  # scipy: after pre-flight's checks

    schedule = derived.sequential(config)
    counts = [n for n in derived.look_counts(schedule) if n <= used] or [used]
    for k in range(len(counts)):
        looks = sequential.member_looks(trained.results, pre.task.compared, config.baseline,
                                        counts[: k + 1], schedule, config.analysis)
        if looks.decided:
            break
    return looks


def stored_seeds(config, pre, sweep_run_id):
    """`(config, replay)` of a stored sweep: a sequential one's config at
    the seeds it trained (those every activation holds, 0..n-1), and a
    callable that replays its looks from its `Trained` members; for any
    other sweep, `(config, None)`."""
    if not derived.sequential(config):
        return config, None
    held = pre.store.member_keys(sweep_run_id)  # keys only: no model loaded twice
    used = 0
    while all((a, used) in held for a in config.activations):
        used += 1
    if used < 2:
        raise ServiceError(
            f"sweep run {sweep_run_id} (sequential seeds) holds {used} seed(s) of every "
            "activation; its first look needs 2. Resume it first."
        )
    return derived.with_seeds(config, used), (
        lambda trained: replay(config, pre, trained, used)
    )
