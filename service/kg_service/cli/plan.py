"""What a run of a config would do, in words: the lines `--dry-run` prints."""

from kg_service.config import catalog
from kg_service.config import schema
from kg_service.config import tuning as tuning_lib
from kg_service.config.derived import look_counts
from kg_service.config.derived import registered_model_name
from kg_service.config.derived import sequential
from kg_service.config.derived import tracking_uri_and_origin
from kg_service.config.excerpts import show
from kg_service.config.fields import split_sizes
from kg_service.config.schema import DEFAULT_MARGINS


def _retry_text(seconds):
    if not seconds:
        return "not retried if it fails mid-sweep"
    return f"retried for {seconds:g} s if it fails mid-sweep"


def _seeds_text(seeds):
    if seeds == tuple(range(len(seeds))) and len(seeds) > 2:
        return f"0..{len(seeds) - 1}"
    return ", ".join(str(s) for s in seeds)


_SPENDING = {
    "obrien_fleming": "O'Brien-Fleming-type alpha spending",
    "pocock": "Pocock-type alpha spending",
}


def _seed_rows(config, n_act):
    """The plan's seeds and members rows; a sequential sweep's batches."""
    schedule = sequential(config)
    if schedule is None:
        n_seeds = len(config.seeds)
        return [
            ("seeds", f"{_seeds_text(config.seeds)} ({n_seeds} seeds)"),
            ("members", f"{n_act} activations x {n_seeds} seeds = {n_act * n_seeds} "
                        "training runs"),
        ]
    looks = look_counts(schedule)
    shown = ", ".join(str(n) for n in looks[:4]) + (f", ..., {looks[-1]}" if len(looks) > 4 else "")
    first, most = schedule.start, schedule.max
    return [
        ("seeds", f"{first} seeds, then +{schedule.step} until decided, at most {most} "
                  f"(sequential: {len(looks)} looks at {shown} seeds, "
                  f"{_SPENDING[schedule.spending]}"
                  + (f"; stops for futility when the smallest effect {schedule.smallest_effect:g} "
                     "is out of reach" if schedule.futility else "") + ")"),
        ("members", f"{n_act} activations x {first}..{most} seeds = {n_act * first}.."
                    f"{n_act * most} training runs"),
    ]


def _tuning_text(config):
    """What the tuning stage trains before the comparison, and how it chooses."""
    tuning, n_act = config.tuning, len(config.activations)
    kind = tuning_lib.kind_of(tuning, {"model": schema.ModelConfig,
                                       "training": schema.TrainingConfig})
    values = tuning_lib.grid(tuning, kind)
    n = tuning_lib.candidate_count(tuning, kind)
    if values is not None:
        over = f"grid [{', '.join(f'{v:g}' for v in values)}]"
    else:
        over = (f"{tuning.trials} trials of Optuna's TPE over [{tuning.low:g}, {tuning.high:g}]"
                + (" (log-uniform)" if tuning.log else ""))
    return (f"{tuning.parameter} per activation, {over}; {tuning.seeds} tuning seeds per "
            f"value (from {tuning_lib.SEED_BASE}, apart from the comparison's), chosen by "
            f"{tuning.select_by} on validation: {n_act} activations x {n} values x "
            f"{tuning.seeds} seeds = {n_act * n * tuning.seeds} tuning members, one stacked "
            "model per value, before the comparison")


def _vary_text(config):
    """What each seed varies (`vary`), and what stays fixed."""
    fixed = [s for s in ("init", "order", "split") if s not in config.vary]
    text = f"{', '.join(config.vary)}: each from its own seed derived from the member's"
    if not catalog.task(config.data.dataset).sample_splits and "split" in config.vary:
        # tasks/language: corpus.resplit, held-out blocks of the data seed's corpus.
        text += (" (split: which contiguous blocks of the corpus of data seed "
                 f"{config.data.seed} each member validates and tests on)")
    return text + (f"; fixed for every member: {', '.join(fixed)}" if fixed else "")


def _engine_text(execution):
    """Where members train: here, or as Ray tasks (issue 33)."""
    if execution.engine == "local":
        return "local: every member trains in this process"
    where = execution.address or "$RAY_ADDRESS, else a local Ray started here (as ray.init())"
    size = (f"{execution.members_per_task} members" if execution.members_per_task
            else "a stacked group")
    res = execution.group_resources
    return (f"ray at {where}: a task per {size}, {res.num_cpus:g} CPU and {res.num_gpus:g} GPU "
            f"each, retried {execution.max_retries}x if its worker dies")


def _distribution_text(device):
    if device.distribution == "none":
        return ""
    over = f" over {', '.join(device.devices)}" if device.devices else ""
    return f", data-parallel {device.distribution}{over} (global batch split across replicas)"


def _analysis_text(analysis):
    """How the statistics decide: the margin, alpha, power and contrasts."""
    if isinstance(analysis.margin, dict):
        margins = {**DEFAULT_MARGINS, **analysis.margin}
        margin = "margin " + ", ".join(
            f"±{v:g} {k}" + ("" if k in analysis.margin else " (default)")
            for k, v in margins.items())
    elif analysis.margin is not None:
        margin = f"margin ±{analysis.margin:g} on the compared metric"
    else:
        margin = "margin " + ", ".join(f"±{v:g} {k}" for k, v in DEFAULT_MARGINS.items()) + (
            " (defaults)")
    text = (f"{margin}; better / worse / equivalent / inconclusive at alpha "
            f"{analysis.alpha:g} (Holm); seed plan for power {analysis.power:g}")
    for c in analysis.contrasts:
        text += f"; contrast {c.name}: mean({', '.join(c.plus)}) − mean({', '.join(c.minus)})"
    return text


def _claims_text(config):
    """The declared claims, and where their seeds are planned."""
    names = ", ".join(c.name for c in config.claims)
    where = f"kg plan --config {config.source}" if config.source else "kg plan --config FILE"
    return (f"{len(config.claims)} declared ({names}); each labelled reproduced / "
            "contradicted / not tested / inconclusive after the run, Holm over them; "
            f"the seeds each needs: {where}")


def describe_plan(config, environ=None, uri_flag=False):
    """What a run of `config` would do, as the lines `--dry-run` prints.
    `uri_flag`: its tracking URI came from `--tracking-uri` (the plan says so)."""
    data, model, training = config.data, config.model, config.training
    task = catalog.task(data.dataset)
    if not task.sample_splits:
        return _describe_language_plan(config, task, environ, uri_flag)
    train, validation, test = split_sizes(data)
    if task.fixed_samples:
        source = f"{data.dataset}: {task.fixed_samples} samples, {task.description}"
    else:
        source = f"{data.dataset}: {data.n_samples} samples, noise {data.noise}"
    source += f", data seed {data.seed}"
    source += (
        ", features standardized inside the model"
        if data.standardize
        else ", raw features"
    )
    arch = f"{model.block} block, hidden {list(model.hidden_units)}"
    if model.block == "feedforward":
        arch += f", d_model {model.d_model}"
        arch += ", gated widths matched to plain parameters" if model.match_params else ""
    arch += f", dropout {model.dropout}"
    rows = [
        ("data", source),
        ("split", f"{train} train / {validation} validation / {test} test "
                  "(test held out for the final evaluation only)"),
        ("model", arch),
        ("training", f"{training.optimizer}, learning rate {training.learning_rate:g}, "
                     f"batch size {training.batch_size}, {training.epochs} epochs, "
                     f"convergence at val accuracy {training.convergence_threshold:g}, "
                     f"{_loss_threshold_text(training)}"),
    ]
    return _plan(config, rows, environ, uri_flag)


def _loss_threshold_text(training):
    if training.loss_threshold is None:
        return "epochs to the largest final training loss of the members"
    return f"epochs to training loss {training.loss_threshold:g}"


def _describe_language_plan(config, task, environ, uri_flag):
    data, model, training = config.data, config.model, config.training
    steps = training.steps_per_epoch or "one pass over the training bytes"
    rows = [
        ("data", f"{data.dataset}: {task.description}; first {data.corpus_bytes:,} "
                 f"bytes of sorted files, split by file (seed {data.seed}), windows of "
                 f"{data.context} bytes"),
        ("split", f"test {data.test_fraction:g} / validation "
                  f"{data.validation_fraction:g} of the rest, by file; "
                  f"{data.eval_windows} validation windows per epoch, the whole test "
                  "split once at the end"),
        ("model", f"decoder-only transformer, {len(model.hidden_units)} blocks, "
                  f"d_model {model.d_model}, {model.heads} heads, FFN widths "
                  f"{list(model.hidden_units)}"
                  + (", gated widths matched to plain parameters" if model.match_params else "")
                  + f", LayerNorm {'on' if model.layer_norm else 'off (normalization-free)'}"
                  + f", {'tied' if model.tie_embeddings else 'untied'} embeddings"
                  + f", dropout {model.dropout}"),
        ("training", f"{training.optimizer}, learning rate {training.learning_rate:g}"
                     + (f", weight decay {training.weight_decay:g}"
                        if training.weight_decay is not None else "")
                     + f", batch size {training.batch_size} windows, {training.epochs} "
                     f"epochs of {steps} steps"),
    ]
    return _plan(config, rows, environ, uri_flag)


def _plan(config, rows, environ, uri_flag):
    activations = ", ".join(
        a + (" (baseline)" if a == config.baseline else "") for a in config.activations
    )
    n_act = len(config.activations)
    uri, origin = tracking_uri_and_origin(config, environ)
    origin = "--tracking-uri" if uri_flag else origin
    device = config.device
    precision = device.mixed_precision or "float32"
    if config.registry.enabled:
        names = ", ".join(f"{registered_model_name(config, a)}" for a in config.activations)
        registry = f"{names} (alias {show(config.registry.alias)})"
    else:
        registry = "off"
    if config.export.enabled:
        export = (
            f"{config.export.dir}/<model name>/<version>/ (SavedModel, max abs diff "
            f"{config.export.tolerance:g})"
        )
    else:
        export = "off"
    rows = rows + [
        ("activations", activations),
        *_seed_rows(config, n_act),
        ("varies", _vary_text(config)),
        ("device", f"{device.type}, {precision}, XLA {'on' if device.xla else 'off'}"
                   + _distribution_text(device)),
        ("engine", _engine_text(config.execution)),
        ("tracking", f"{uri} ({origin}), {_retry_text(config.tracking.retry_seconds)}"),
        ("registry", registry),
        ("export", export),
        ("analysis", _analysis_text(config.analysis)),
        *([("claims", _claims_text(config))] if config.claims else []),
        ("output", config.output_dir),
    ] + ([("tuning", _tuning_text(config))] if config.tuning else []) + (
        [("study", f"{config.study} (one family with its other sweeps: "
                    f"kg report --study {config.study})")] if config.study else [])
    head = f'kg-train plan for experiment "{config.experiment}"'
    head += f" ({config.source})" if config.source else ""
    return "\n".join([head] + [f"  {k:<12} {v}" for k, v in rows])
