"""The tuning stage: each activation's own value of one setting, chosen on
validation before the comparison (issue 19; docs/tuning.md).

    preflight -> tune -> train -> track -> compare -> export -> register

For each activation, each candidate value (a grid, or the trials of
Optuna's TPE) trains its tuning members: the tuning seeds of that
candidate (`config.tuning.tuning_seeds`, a range apart from the
comparison's), as one stacked model, as a sweep's members train (the
optimizer of a stacked model has one learning rate, so the members of one
value stack, not those of several values). Each member is scored by its
final validation loss or accuracy; `analysis.reports.tuning.choose` picks the
value; the comparison then trains every activation at its own value.

Tuning members are members of the sweep: child runs of its parent run,
tagged `kg.role=tuning` with the tuned value (also their `tuning_value`
metric and the tuned setting's param), logged without their models (only
their scores are read), kept in the spool when the store fails, and not trained again by a resumed sweep (their seeds are their
keys, as any member's).

Each activation's choice is claimed once per sweep (`TrackingStore.claim_dict`): the candidates
it was made from go into a JSON artifact of the sweep's run
(`tuning/choice-<i>-<token>.json`), then its name into the write-once param
`kg.tuning.choice.<i>` (i: the activation's place in the config), which one
writer wins (`TrackingStore.claim`). A job that finds the claim made uses it
and trains none of that activation's tuning members; one that loses the
claim uses the winner's. So the jobs of a sharded sweep, which never wait
for nor talk to each other, tune deadlock-free: a job tunes every activation
whose comparison members it trains, taking the tuning members already whole
in the store and training the missing ones itself (their seeds are fixed, so
any job trains the same member); two jobs that both trained one (run at
once) may score it a rounding apart, but every job, the report, `kg report`
and the registering job use the one claimed choice and its candidates.
"""

import dataclasses
import math
import uuid

from kg_service.analysis.reports import tuning as analysis
from kg_service.config import schema
from kg_service.config import tuning as config_tuning
from kg_service.errors import ServiceError
from kg_service.errors import StoreUnavailable
from kg_service.tracking import spool
from kg_service.tracking.store import TUNING_ROLE

ROLE = TUNING_ROLE  # the kg.role tag of a tuning member's run
VALUE = "tuning_value"  # a tuning member's metric: the value it trained at
SECTIONS = {"model": schema.ModelConfig, "training": schema.TrainingConfig}


def check_supported(config):
    """Raises a ServiceError where a tuning block cannot run: a
    multi-worker distribution. (A sharded sweep tunes: module docstring.)"""
    if config.tuning is None:
        return
    if config.device.distribution == "multi_worker":
        raise ServiceError(
            "the config has a tuning block, and device.distribution: multi_worker cannot "
            "run it: the workers train the members the config names without reading the "
            "tracking store, so they cannot follow the tuning stage's choices. Use "
            "device.distribution mirrored or none (or shard the sweep: --shard I/N)."
        )


def is_tuning_seed(seed):
    return seed >= config_tuning.SEED_BASE


def candidate_of(seed):
    """The candidate index a tuning seed belongs to."""
    return (seed - config_tuning.SEED_BASE) // config_tuning.SEED_STRIDE


def tune(config, pre, sweep_run_id, progress, echo, activations=None, claim_on=None):
    """Trains (or finds in the store) every activation's candidates,
    chooses each activation's value (or takes the choice claimed already),
    tags the sweep's run with the choices, and returns `pre` that trains
    each activation at its value (`pre.task`), logs that value as its
    members' param (`pre.tuned`) and reports the tuning (`pre.tuning`).

    Args:
        activations: Those to tune (a shard's); default: all, and the
            tuning members already in the store are `pre.done`'s.
            Otherwise they are read from the store here.
        claim_on: A callable returning the run to claim choices on (a
            sharded sweep's earliest parent, read again before each
            claim); default: `sweep_run_id`.
    """
    tuning = config.tuning
    kind = config_tuning.kind_of(tuning, SECTIONS)
    claim_on = claim_on or (lambda: sweep_run_id)
    done = {key: result for key, (_, result) in pre.done.items()}
    spooled = {k: r for k, r in pre.spooled.items() if is_tuning_seed(k[1])}
    kept = spool.folder(config.output_dir, sweep_run_id)
    if spooled:  # trained by an earlier try, not in the store yet
        for result in spooled.values():
            _log(pre, [result], tuning.parameter, result.final[VALUE], kept)
            done[(result.activation, result.seed)] = result
    per_activation, read = [], activations is None
    for activation in activations or config.activations:
        claimed = _claimed(config, pre.store, claim_on(), activation)
        if claimed is not None:  # chosen already (by another job, or before a resume)
            per_activation.append(claimed)
            continue
        if not read:  # a shard's: whole tuning members other jobs logged
            read = True
            done.update({key: result for key, (_, result)
                         in pre.store.finished_members(sweep_run_id).items()
                         if is_tuning_seed(key[1])})
        search = analysis.Search(tuning, kind)
        candidates = []
        for index, value in search:
            sub = config_tuning.candidate_config(config, activation, index, value)
            results = _train_candidate(sub, pre, tuning.parameter, value, done, kept, progress)
            candidates.append(analysis.candidate(value, results, tuning.select_by))
            search.tell(candidates[-1])
        mine = analysis.choice(activation, tuple(candidates), tuning)
        # Claimed once per sweep (module docstring): this call's, or the first's.
        at, run_id = config.activations.index(activation), claim_on()
        won = pre.store.claim_dict(run_id, CHOICE.format(index=at), analysis.choice_as_dict(
            mine), f"tuning/choice-{at}-{uuid.uuid4().hex[:12]}.json")
        per_activation.append(analysis.choice_from_dict(won, activation, run_id))
    outcome = analysis.outcome(tuning, per_activation)
    pre.store.log_summary({}, analysis.tuning_tags(outcome), ())
    echo(
        f"Tuned {tuning.parameter} by mean {tuning.select_by} on validation: "
        + ", ".join(f"{a.activation} {a.chosen:g}" for a in outcome.activations)
    )
    return tuned(pre, outcome, kind)


def tuned(pre, outcome, kind):
    """`pre` whose task trains each activation at its chosen value."""
    chosen = {a: (int(v) if kind is int else v) for a, v in outcome.chosen().items()}
    train = pre.task.train
    parameter = outcome.parameter

    def train_at_chosen(task, dataset, config, activation, seeds, report):
        at = config_tuning.with_value(config, parameter, chosen[activation])
        return train(task, dataset, at, activation, seeds, report)

    return dataclasses.replace(
        pre,
        task=dataclasses.replace(pre.task, train=train_at_chosen),
        spooled={k: r for k, r in pre.spooled.items() if not is_tuning_seed(k[1])},
        tuned={a: {parameter: v} for a, v in chosen.items()},
        tuning=outcome,
    )


def stored(config, pre, sweep_run_id):
    """The `analysis.Tuning` of a sweep in the store (a report rebuilt by
    `kg report`, the registering shard's): each activation's claimed
    choice, or, for a sweep from before the claims, its choice made again
    from its tuning members; None without a tuning block."""
    if config.tuning is None:
        return None
    claimed = {a: _claimed(config, pre.store, sweep_run_id, a) for a in config.activations}
    found = {}
    if any(c is None for c in claimed.values()):  # a sweep from before the claims
        for (activation, seed), (_, result) in pre.store.finished_members(sweep_run_id).items():
            if is_tuning_seed(seed):
                found.setdefault(activation, {}).setdefault(
                    candidate_of(seed), []).append(result)
    per_activation = []
    for activation in config.activations:
        if claimed[activation] is not None:
            per_activation.append(claimed[activation])
            continue
        by_index = found.get(activation, {})
        candidates = tuple(
            analysis.candidate(rs[0].final[VALUE], rs, config.tuning.select_by)
            for _, rs in sorted(by_index.items())
        )
        per_activation.append(analysis.choice(activation, candidates, config.tuning))
    return analysis.outcome(config.tuning, per_activation)


# --- One choice per activation and sweep, claimed once. ---------------------

CHOICE = "kg.tuning.choice.{index}"  # write-once param: the choice's artifact


def _claimed(config, store, run_id, activation):
    """The `ActivationTuning` claimed for `activation` in sweep run
    `run_id`, or None if none is yet."""
    index = config.activations.index(activation)
    data = store.claimed_dict(run_id, CHOICE.format(index=index))
    return None if data is None else analysis.choice_from_dict(data, activation, run_id)


def _train_candidate(sub, pre, parameter, value, done, kept, progress):
    """The members of one candidate (`sub`: `kg_service.config.tuning.candidate_config`):
    from the store (`done`) or trained now as one stacked model and logged."""
    from kg_service.training import loop as train_lib  # TensorFlow: a real run only

    activation = sub.baseline
    for seed in sub.seeds:
        held = done.get((activation, seed))
        if held is not None and not math.isclose(held.final[VALUE], value, rel_tol=1e-9):
            raise ServiceError(
                f"tuning member {activation} seed {seed} in the store trained at "
                f"{parameter} {held.final[VALUE]:g}, but this sweep asks "
                f"{value:g} of it; the store holds another search's member. Start the "
                "sweep afresh (without --resume)."
            )
    progress.stage(f"tuning {activation}: {parameter} = {value:g}")
    if sub.execution.engine == "ray":  # its seeds as Ray tasks, which log them
        from kg_service.execution import groups  # Ray: only for execution.engine ray

        params, tags = _marks(pre, parameter, value)
        log = groups.member_log(sub, pre.tracking_uri, pre.store.parent_run_id, {activation: params},
                                tags, final={VALUE: value}, keep_model=False)
        return groups.train_sweep(pre.task, pre.dataset, sub, log, store=pre.store, done=done)
    return train_lib.train_sweep(
        pre.task, pre.dataset, sub, done=done,
        on_trained=lambda new: _log(pre, new, parameter, value, kept),
    )


def _marks(pre, parameter, value):
    """`(params, tags)` of a tuning member's run trained at `value`."""
    params = {k: v for k, v in pre.params.items() if k.startswith(("model.", "training."))}
    return {**params, parameter: value}, {
        **pre.tags, "kg.role": ROLE, "kg.tuning.parameter": parameter,
        "kg.tuning.value": f"{value!r}"}


def _log(pre, results, parameter, value, kept):
    """Logs tuning members as child runs of the sweep (`kg.role=tuning`),
    one at a time; members not logged when the store fails (or on an
    interrupt) are kept in the spool, as `stages.train` keeps members."""
    params, tags = _marks(pre, parameter, value)
    logged = set()
    for result in results:
        result.final = {**result.final, VALUE: value}
        # Only its scores count: its model is not saved, spooled nor read back.
        result.model = None
    try:
        for result in results:
            pre.store.log_member(result, params, tags)
            logged.add(result.seed)
    except (StoreUnavailable, KeyboardInterrupt):
        spool.write(kept, [r for r in results if r.seed not in logged])
        raise
    finally:
        for seed in logged:
            spool.discard(kept, results[0].activation, seed)
