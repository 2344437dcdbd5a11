"""The stages after pre-flight, one function each:

    train (with track) -> compare -> record -> export -> register

Each takes what the stages before it returned and returns a small frozen
dataclass. The heavy modules (TensorFlow, MLflow, scipy) are imported
inside the stages: importing the pipeline stays cheap, so that
pre-flight's checks of paths and servers come before TensorFlow's start-up.
"""

import dataclasses
import pathlib
from typing import Any
from typing import Mapping
from typing import Optional

from kg_service import redact
from kg_service.errors import ServiceError
from kg_service.errors import StoreUnavailable
from kg_service.tracking import spool


# --- What each stage hands on. ---------------------------------------------


@dataclasses.dataclass(frozen=True)
class Tracked:
    sweep_run_id: str
    run_ids: Mapping[tuple, str]  # (activation, seed) -> member run id


@dataclasses.dataclass(frozen=True)
class Trained:
    results: tuple  # MemberResult per (activation, seed), config order
    tracked: Tracked  # every member's run, this process's and earlier ones
    # Every member the store holds now, as `Preflight.done` holds them:
    # (activation, seed) -> (run id, MemberResult); what a next look skips.
    in_store: Mapping[tuple, tuple] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Compared:
    summary: Any  # kg_service.analysis.numbers.comparisons.Summary (of the members that did not fail)
    report_paths: tuple
    champions: Mapping[str, Any]  # activation -> its selected MemberResult
    failed: tuple  # MemberResults that diverged, listed, never averaged
    # A sequential sweep's looks (kg_service.analysis.numbers.sequential.SweepLooks).
    looks: Any = None
    claims: tuple = ()  # the config's claims labelled (analysis.numbers.claims.Label)


@dataclasses.dataclass(frozen=True)
class Exported:
    staged: Mapping[str, Any]  # activation -> export.StagedExport


@dataclasses.dataclass(frozen=True)
class RegisteredModel:
    activation: str
    name: str
    version: str
    member: Any  # MemberResult
    export_path: Optional[pathlib.Path]


@dataclasses.dataclass(frozen=True)
class Registered:
    models: tuple  # RegisteredModel, config order


# --- The stages. ------------------------------------------------------------


def train(config, pre, sweep_run_id, progress, logged=None, members=None):
    """Trains every member the store does not hold yet (of `members`, if
    given: a shard's), tracking each activation's members as soon as they
    finish (`track`).

    Members an earlier try kept locally (`pre.spooled`) are logged first,
    not trained again. `logged`, if given, is updated with each member's
    run id as it lands in the store (what an interrupt leaves behind).
    Members that trained but could not be logged (the store stayed down,
    or an interrupt) are kept in `spool` before the error goes on.
    """
    # TensorFlow: after pre-flight's cheap checks (see the module's docstring).
    from kg_service.training import loop as train_lib

    run_ids = {key: run_id for key, (run_id, _) in pre.done.items()}
    kept = spool.folder(config.output_dir, sweep_run_id)

    def on_trained(results):
        try:
            track(pre, results, progress, run_ids, logged)
        except (StoreUnavailable, KeyboardInterrupt):
            spool.write(kept, [r for r in results if (r.activation, r.seed) not in run_ids])
            raise
        finally:
            for result in results:
                if (result.activation, result.seed) in run_ids:
                    spool.discard(kept, result.activation, result.seed)

    if pre.spooled:
        on_trained(list(pre.spooled.values()))
    done = {**{key: result for key, (_, result) in pre.done.items()}, **pre.spooled}
    if config.execution.engine == "ray":  # each group a Ray task, which logs its members
        results = on_cluster(config, pre, sweep_run_id, progress, done, run_ids, logged, members)
    else:
        results = train_lib.train_sweep(
            pre.task, pre.dataset, config, progress=progress, done=done,
            on_trained=on_trained, members=members,
        )  # fmt: skip
    progress.close()
    results = tuple(results)
    # Members logged from the spool count too, whatever look they are of.
    every = {**done, **{(r.activation, r.seed): r for r in results}}
    return Trained(
        results=results,
        tracked=Tracked(sweep_run_id=sweep_run_id, run_ids=dict(run_ids)),
        in_store={key: (run_ids[key], r) for key, r in every.items() if key in run_ids},
    )


def on_cluster(config, pre, sweep_run_id, progress, done, run_ids, logged, members):
    """`train`'s members on the Ray cluster (`kg_service.execution`): each
    task logs its members; their run ids go into `run_ids` (and `logged`)."""
    from kg_service.execution import groups  # Ray: only for execution.engine ray

    def landed(key, run_id):
        run_ids[key] = run_id
        if logged is not None:
            logged[key] = run_id

    log = groups.member_log(
        config, pre.tracking_uri, sweep_run_id,
        {a: {**member_params(pre), **pre.tuned.get(a, {})} for a in config.activations},
        {**pre.tags, "kg.role": "member"},
    )  # fmt: skip
    return groups.train_sweep(pre.task, pre.dataset, config, log, store=pre.store, done=done,
                              members=members, landed=landed, progress=progress)


def member_params(pre):
    """The sweep's params every member run carries (model and training)."""
    return {k: v for k, v in pre.params.items() if k.startswith(("model.", "training."))}


def track(pre, results, progress, run_ids, logged=None):
    """Logs members as child runs of the sweep's run (FAILED if diverged),
    one at a time: each run id goes into `run_ids` (and `logged`) as it
    lands, so a failure part-way says exactly which are in the store."""
    progress.stage(f"logging {len(results)} runs to {redact.uri(pre.tracking_uri)}")
    params = member_params(pre)
    for result in results:
        key = (result.activation, result.seed)
        run_ids[key] = pre.store.log_member(
            result,
            {**params, **pre.tuned.get(result.activation, {})},  # its tuned value
            {**pre.tags, "kg.role": "member"},
        )
        if logged is not None:
            logged[key] = run_ids[key]


def compare(config, pre, trained, looks=None):
    """Statistics over seeds on the task's metric, the report files, and
    each activation's champion (by the task's selection metric). Writes
    nothing to the tracking store (`record` does). A sequential sweep's
    `looks` go into the report and summary.json too."""
    from kg_service.analysis.reports import report  # matplotlib: after pre-flight's checks

    ok = [r for r in trained.results if r.ok]
    failed = tuple(r for r in trained.results if not r.ok)
    if not any(r.activation == config.baseline for r in ok):
        raise ServiceError(
            f"every seed of the baseline {config.baseline!r} diverged (loss "
            f"not finite); no comparison is possible. They are logged as "
            f"FAILED runs. Lower training.learning_rate, or set another "
            f"baseline."
        )
    summary = summarize(config, pre, trained, looks)
    sections, drawn = [], []
    if looks is not None:
        from kg_service.analysis.reports import sequential_report  # scipy: as above

        sections.append(sequential_report.looks_section(looks))
    if pre.tuning is not None:  # the tuning stage's table, curves and choices
        from kg_service.analysis.reports import tuning  # matplotlib: as above

        section, figure = tuning.tuning_section(pre.tuning, pre.out_dir)
        sections.append(section)
        drawn.append(figure)
    from kg_service.analysis.numbers import claim_data  # scipy: as above

    # A sequential sweep's claims from its looks (issue 32 §2): `config` is
    # at the seeds it used, which alone would give the fixed-design label.
    labels = claim_data.label_sweep(config, ok, looks)
    report_paths = report.write_report(
        summary,
        ok,
        pre.out_dir,
        title=f"{config.experiment}: {', '.join(config.activations)}",
        dataset=pre.dataset,
        config=config,
        figures=pre.task.figures,
        failed=failed,
        resolved=pre.resolved,
        sections=sections,
        claims=labels,
    ) + drawn
    if looks is not None:
        sequential_report.add_looks_summary(report_paths[1], looks)
    if pre.tuning is not None:
        tuning.add_tuning_summary(report_paths[1], pre.tuning)
    champions = {
        s.activation: best_member(summary, ok, s.activation)
        for s in summary.activations
    }
    return Compared(
        summary=summary,
        report_paths=tuple(report_paths),
        champions=champions,
        failed=failed,
        looks=looks,
        claims=labels,
    )


def summarize(config, pre, trained, looks=None):
    """The `comparisons.Summary` of a sweep's members on the task's metric.

    Every member, the diverged ones included: they count as failures of
    their activation (issue 18), and only the others enter the metric's
    statistics."""
    # scipy: after pre-flight's cheap checks.
    from kg_service.analysis.numbers import comparisons
    from kg_service.analysis.numbers import stats  # scipy: after pre-flight's checks

    analysis = config.analysis
    return comparisons.summarize(
        trained.results,
        config.baseline,
        metric=pre.task.compared.name,
        higher_is_better=pre.task.compared.higher_is_better,
        select_by=stats.Metric.of(
            pre.task.selects.name, pre.task.selects.higher_is_better
        ),
        confidence=1.0 - analysis.alpha,
        margin=analysis.margin_for(pre.task.compared.name),
        power=analysis.power,
        contrasts=analysis.contrasts,
        # A sequential sweep states its looks' decisions only (issue 30 §7).
        sequential=None if looks is None else looks.outcomes(),
    )


def record(pre, compared):
    """The summary's metrics, the winner and the report on the sweep's run."""
    from kg_service.analysis.numbers import plain  # scipy: after pre-flight's checks

    metrics = plain.flat_metrics(compared.summary)
    tags = {"winner": compared.summary.winner.activation, **plain.verdict_tags(compared.summary)}
    if compared.looks is not None:
        from kg_service.analysis.numbers import sequential  # scipy: only for a sequential sweep
        from kg_service.analysis.reports import sequential_report  # scipy: only for a sequential sweep

        metrics = {**metrics, **sequential.looks_metrics(compared.looks)}
        tags = {**tags, **sequential_report.looks_tags(compared.looks)}
    if pre.tuning is not None:
        from kg_service.analysis.reports import tuning  # matplotlib: only for a tuned sweep

        tags = {**tags, **tuning.tuning_tags(pre.tuning)}
    pre.store.log_summary(metrics, tags, compared.report_paths)


def export(config, pre, compared, progress, sweep_run_id=""):
    """Exports and verifies each champion's SavedModel into staging.

    Nothing is registered or promoted here; a failed verification discards
    every staged export and raises. Staging folders that an earlier,
    killed try of the same sweep left are removed first.
    """
    # TensorFlow: after pre-flight's cheap checks.
    from kg_service.serving import export as export_lib

    staged = {}
    if not (config.registry.enabled and config.export.enabled):
        return Exported(staged=staged)
    progress.stage("exporting and verifying SavedModels")
    if sweep_run_id:
        for name in pre.model_names.values():
            export_lib.discard_leftovers(config.export.dir, name, sweep_run_id)
    try:
        for activation, member in compared.champions.items():
            staged[activation] = export_lib.stage(
                member.model,
                config.export.dir,
                pre.model_names[activation],
                pre.dataset.x_test,
                config.export.tolerance,
                owner=sweep_run_id,
            )
    except BaseException:  # an interrupt too: nothing half-exported stays
        for item in staged.values():
            export_lib.discard(item)
        raise
    return Exported(staged=staged)


def register(config, pre, compared, tracked, exported, progress):
    """Registers each champion, moves the alias, promotes its export."""
    # TensorFlow, MLflow, scipy: after pre-flight's cheap checks.
    from kg_service.analysis.words import verdict_wording
    from kg_service.analysis.words import wording  # scipy: after pre-flight's cheap checks
    from kg_service.serving import export as export_lib  # TensorFlow: only when registering
    from kg_service.tracking import model_logging  # MLflow: only when registering

    if not config.registry.enabled:
        return Registered(models=())
    progress.stage("registering models")
    selected_by = wording.shown(compared.summary.select_by.name).label
    models = []
    for activation, member in compared.champions.items():
        name = pre.model_names[activation]
        version = pre.store.register(
            tracked.run_ids[(activation, member.seed)],
            member.model,
            name,
            config.registry.alias,
            tags={
                "activation": activation,
                "seed": member.seed,
                "dataset": config.data.dataset,
                **{
                    metric.name: f"{getattr(member, metric.name):.6f}"
                    for metric in (pre.task.selects, pre.task.compared)
                },
                "test_accuracy": f"{member.test_accuracy:.6f}",
                "selected_by": f"final {selected_by}",
                "git_commit": pre.tags["git_commit"],
                "sweep_run_id": tracked.sweep_run_id,
            },
            description=verdict_wording.model_description(
                compared.summary, activation, member, len(config.seeds),
                config.data.dataset, pre.dataset,
            ),
            pip_requirements=model_logging.pip_requirements(),
            metadata=pre.dataset.metadata(),
            serving=pre.task.serving,
        )
        export_path = None
        if activation in exported.staged:
            export_path = export_lib.promote(
                exported.staged[activation], config.export.dir, version
            )
            pre.store.set_version_tag(
                name, version, "saved_model", export_path.resolve()
            )
        models.append(
            RegisteredModel(
                activation=activation,
                name=name,
                version=version,
                member=member,
                export_path=export_path,
            )
        )
    return Registered(models=tuple(models))


def best_member(summary, results, activation):
    """The member of `activation` that the summary selected (best seed)."""
    (seed,) = [s.best_seed for s in summary.activations if s.activation == activation]
    for result in results:
        if result.activation == activation and result.seed == seed:
            return result
    raise AssertionError(f"no result for {activation} seed {seed}")


def conclude(config, pre, trained, progress, looks=None):
    """compare -> record -> export -> register; returns `(Compared, Registered)`.
    `looks`: a sequential sweep's (`compare`)."""
    compared = compare(config, pre, trained, looks)
    record(pre, compared)
    exported = export(config, pre, compared, progress, trained.tracked.sweep_run_id)
    registered = register(config, pre, compared, trained.tracked, exported, progress)
    return compared, registered
