"""One sweep, end to end: data -> train -> track -> report -> export -> register.

Data moves one way; each stage is a module of its own. Everything that can
fail on the user's side (tracking store, export prerequisites, existing
export folders) is checked before training, so a mistake costs nothing.
"""

import datetime
import logging
import os
import pathlib
import subprocess
import sys
import time

from service import config as config_lib
from service.errors import ServiceError

log = logging.getLogger("kg-train")


def run(config, quiet=False, echo=print):
    """Runs the sweep described by `config`; returns the exit code (0).

    Args:
        config: A validated `service.config.Config`.
        quiet: Log lines instead of a live progress line.
        echo: Prints one line of the final summary.
    """
    started = time.monotonic()
    # Heavy imports only once the config is known to be good.
    from service import data
    from service import export
    from service import report
    from service import stats
    from service import tasks
    from service import tracking
    from service import train
    from service.progress import SweepProgress

    progress = SweepProgress(quiet=quiet)
    tracking_uri = config_lib.resolve_tracking_uri(config)
    names = {
        a: config_lib.registered_model_name(config, a) for a in config.activations
    }

    # --- Pre-flight: fail before any training. ---
    device = train.describe_device(config.device)
    task = tasks.get(config.data.dataset)
    dataset = task.load(config.data)
    if config.export.enabled:
        export.check_can_export()
    tracker = tracking.Tracker(tracking_uri, config.experiment)
    if config.registry.enabled and config.export.enabled:
        for name in names.values():
            target = export.version_dir(
                config.export.dir, name, tracker.next_version(name)
            )
            if target.exists():
                raise ServiceError(
                    f"export folder {target} already exists, but the "
                    f"registry's next version of {name!r} would be written "
                    f"there. Move or delete it, or set export.dir to a new "
                    f"folder (--set export.dir=...)."
                )
    out_dir = pathlib.Path(config.output_dir) / (
        f"{config.experiment}-{datetime.datetime.now():%Y%m%d-%H%M%S}"
    )

    resolved = config_lib.config_to_dict(config)
    common_tags = {
        **tracking.library_versions(),
        **{f"device.{k}": v for k, v in device.items()},
        "git_commit": git_commit(),
        "config_file": config.source,
        "dataset": config.data.dataset,
    }
    params = flatten(
        {k: v for k, v in resolved.items() if k not in ("activations", "seeds")}
    )
    with tracker.sweep_run(
        config.experiment,
        {
            **params,
            "activations": list(config.activations),
            "seeds": list(config.seeds),
        },
        {**common_tags, "kg.role": "sweep"},
    ) as sweep_run_id:
        tracker.log_dict(sweep_run_id, resolved, "config.json")

        # --- Train. ---
        results = train.train_sweep(task, dataset, config, progress=progress)
        progress.close()

        # --- Track every member. ---
        progress.stage(f"logging {len(results)} runs to {tracking_uri}")
        member_params = {
            k: v for k, v in params.items() if k.startswith(("model.", "training."))
        }
        run_ids = {}
        for result in results:
            run_ids[(result.activation, result.seed)] = tracker.log_member(
                result, member_params, {**common_tags, "kg.role": "member"}
            )

        # --- Statistics and report. ---
        summary = stats.summarize(
            results, config.baseline, metric=stats.ACCURACY, higher_is_better=True
        )
        report_paths = report.write_report(
            summary,
            results,
            out_dir,
            title=f"{config.experiment}: {', '.join(config.activations)}",
            dataset=dataset,
            config=config,
        )
        tracker.log_summary(
            stats.flat_metrics(summary),
            {"winner": summary.winner.activation},
            report_paths,
        )

        # --- Export and verify every winner, then register them. ---
        best = {a: best_member(summary, results, a) for a in config.activations}
        registered = []
        if config.registry.enabled:
            staged = {}
            if config.export.enabled:
                progress.stage("exporting and verifying SavedModels")
                try:
                    for activation, member in best.items():
                        staged[activation] = export.stage(
                            member.model,
                            config.export.dir,
                            names[activation],
                            dataset.x_test,
                            config.export.tolerance,
                        )
                except Exception:
                    for item in staged.values():
                        export.discard(item)
                    raise
            progress.stage("registering models")
            for activation, member in best.items():
                name = names[activation]
                run_id = run_ids[(activation, member.seed)]
                version = tracker.register(
                    run_id,
                    member.model,
                    name,
                    config.registry.alias,
                    tags={
                        "activation": activation,
                        "seed": member.seed,
                        "dataset": config.data.dataset,
                        "val_accuracy": f"{member.val_accuracy:.6f}",
                        "test_accuracy": f"{member.test_accuracy:.6f}",
                        "selected_by": "final validation accuracy",
                        "git_commit": common_tags["git_commit"],
                        "sweep_run_id": sweep_run_id,
                    },
                    description=registry_description(
                        summary, activation, member, config, dataset
                    ),
                    pip_requirements=tracking.pip_requirements(),
                    metadata=model_metadata(dataset),
                )
                export_path = None
                if activation in staged:
                    export_path = export.promote(
                        staged[activation], config.export.dir, version
                    )
                    tracker.set_version_tag(
                        name, version, "saved_model", export_path.resolve()
                    )
                registered.append((activation, name, version, member, export_path))
        progress.close()

    print_summary(
        echo,
        config,
        summary,
        registered,
        out_dir,
        tracking_uri,
        time.monotonic() - started,
    )
    return 0


def best_member(summary, results, activation):
    """The member of `activation` with the best validation accuracy."""
    (seed,) = [s.best_seed for s in summary.activations if s.activation == activation]
    for result in results:
        if result.activation == activation and result.seed == seed:
            return result
    raise AssertionError(f"no result for {activation} seed {seed}")


def registry_description(summary, activation, member, config, dataset):
    """The model version's description: what it takes, returns and scored."""
    from service import data
    from service import wording

    selected_by = wording.shown(summary.select_by.name).label
    metric = summary.metric.name
    return (
        f"Input: {data.describe_inputs(dataset)} "
        f"Output: {data.describe_outputs(dataset)} "
        f"Best of {len(config.seeds)} seeds (by final {selected_by}, "
        f"seed {member.seed}) of a kg-train sweep on {config.data.dataset}: "
        f"{wording.shown(metric).label} {getattr(member, metric):.4f}. "
        f"{wording.comparison_sentence(summary, activation)}"
    )


def model_metadata(dataset):
    """The logged model's MLmodel `metadata`: its inputs and outputs."""
    from service import data

    return {
        "inputs": data.describe_inputs(dataset),
        "feature_names": list(dataset.feature_names),
        "standardized_inside_model": dataset.normalization is not None,
        "outputs": data.describe_outputs(dataset),
        "class_names": list(dataset.class_names),
    }


def flatten(tree, prefix=""):
    flat = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def git_commit():
    """The commit of the kg-train code, or None outside a git checkout."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=os.path.dirname(os.path.abspath(__file__)),
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def absolute_uri(uri):
    """`sqlite:///mlflow.db` -> `sqlite:////abs/path/mlflow.db` (cwd-proof)."""
    prefix = "sqlite:///"
    if uri.startswith(prefix) and not uri.startswith(prefix + "/"):
        return prefix + os.path.abspath(uri[len(prefix) :])
    return uri


def print_summary(echo, config, summary, registered, out_dir, uri, seconds):
    from service import wording

    uri = absolute_uri(uri)
    echo("")
    echo(wording.format_table(summary))
    echo("")
    if registered:
        echo(f"Registered models (alias @{config.registry.alias}):")
        for activation, name, version, member, export_path in registered:
            line = (
                f"  models:/{name}/{version}  {activation}, seed {member.seed}, "
                f"val acc {member.val_accuracy:.4f}"
            )
            if export_path is not None:
                line += f"  SavedModel: {export_path}"
            echo(line)
        echo("")
    echo(f"Report:     {out_dir / 'report.md'}")
    # The venv's bin first: `mlflow models serve` needs its uvicorn on PATH.
    bin_dir = os.path.dirname(sys.executable)
    env = f'PATH="{bin_dir}:$PATH" MLFLOW_TRACKING_URI={uri}'
    echo(f"MLflow UI:  {env} mlflow ui --backend-store-uri {uri}")
    if registered:
        _, name, _, _, export_path = registered[0]
        for activation, n, _, _, p in registered:
            if activation == summary.winner.activation:
                name, export_path = n, p
        echo(
            f"Serve:      {env} mlflow models serve "
            f"-m models:/{name}@{config.registry.alias} --env-manager local "
            f"-p 5001"
        )
        if export_path is not None:
            base = export_path.parent.resolve()
            echo(
                f"TF Serving: docker run -p 8501:8501 -v {base}:/models/{name} "
                f"-e MODEL_NAME={name} tensorflow/serving"
            )
    echo(f"Done in {seconds:.0f} s.")
