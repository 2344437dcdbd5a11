"""What kg-train and kg report print when a sweep ends.

The pipeline returns its outcome (`kg_service.sweep.pipeline`'s
`SweepOutcome`, `ShardOutcome`, `WorkerOutcome`); this module writes it
for the user: the summary table, the registered models, and the commands
that come next (the report, MLflow's UI, `kg serve`, TF Serving).
"""

import os
import shlex
import sys

from kg_service.sweep.sharded import ShardOutcome
from kg_service.sweep.pipeline import SweepOutcome
from kg_service.sweep.roles import WorkerOutcome
from kg_service.sweep.preflight import absolute_uri


def show(echo, outcome):
    """Prints `outcome`, whichever the pipeline returned."""
    if isinstance(outcome, SweepOutcome):
        print_sweep(echo, outcome)
    elif isinstance(outcome, ShardOutcome):
        print_shard(echo, outcome)
    elif isinstance(outcome, WorkerOutcome):
        echo(
            f"kg-train: {outcome.role}: trained {outcome.members} members in lockstep "
            "with the chief, which tracks, registers and exports them."
        )


def print_shard(echo, outcome):
    """A shard that ended without comparing the sweep."""
    if not outcome.complete:
        echo(
            f"Shard {outcome.shard} done in {outcome.seconds:.0f} s; the "
            f"sweep holds {outcome.held} of {outcome.total} members. The job that "
            f"completes it compares and registers (or: kg report "
            f"--experiment {outcome.experiment} --sweep-id {outcome.sweep_id} --register)."
        )
    else:
        echo(
            f"Shard {outcome.shard} done in {outcome.seconds:.0f} s; the "
            f"sweep is complete, and compared and registered by "
            f"{outcome.registrar} (sweep run {outcome.status}). To run this "
            f"config again as a new sweep, pass a new --sweep-id."
        )


def kg_command():
    """`kg` as this interpreter's environment installed it: its full path
    when it sits beside the interpreter (a venv not on PATH), else `kg`."""
    beside = os.path.join(os.path.dirname(sys.executable), "kg")
    return shlex.quote(beside) if os.path.exists(beside) else "kg"


def print_sweep(echo, outcome):
    """The summary of a compared sweep: the table, failed members, the
    registered models, and where to look next (report, UI, serving)."""
    # scipy (wording's statistics): loaded by the sweep already.
    from kg_service.analysis.reports import sequential_report
    from kg_service.analysis.words import tables  # scipy: loaded by the sweep already
    from kg_service.analysis.words import wording  # scipy: loaded by the sweep already

    config, compared, registered = outcome.config, outcome.compared, outcome.registered
    summary = compared.summary
    uri = absolute_uri(outcome.tracking_uri)
    echo("")
    echo(tables.format_table(summary))
    echo("")
    if compared.claims:
        from kg_service.analysis.words import claim_wording  # scipy: loaded by the sweep already

        echo("Claims (declared in the config; Holm over them):")
        for line in claim_wording.claim_lines(compared.claims):
            echo(f"  {line}")
        echo("")
    if compared.looks is not None:
        for line in sequential_report.sequential_lines(compared.looks):
            echo(line)
        echo("")
    if compared.failed:
        echo("Failed members (diverged: counted per activation and compared with the "
             "baseline's, left out of the metric's statistics):")
        for member in compared.failed:
            echo(f"  {member.activation}, seed {member.seed}: {member.failure}")
        echo("")
    if registered.models:
        selected = wording.shown(summary.select_by.name)  # "val acc", "val loss"
        echo(f"Registered models (alias @{config.registry.alias}):")
        for model in registered.models:
            line = (
                f"  models:/{model.name}/{model.version}  {model.activation}, "
                f"seed {model.member.seed}, {selected.header} "
                f"{getattr(model.member, summary.select_by.name):.4f}"
            )
            if model.export_path is not None:
                line += f"  SavedModel: {model.export_path}"
            echo(line)
        echo("")
    echo(f"Report:     {outcome.out_dir / 'report.md'}")
    # The venv's bin first: `mlflow models serve` needs its uvicorn on PATH.
    bin_dir = os.path.dirname(sys.executable)
    # Telemetry as in this process (off unless the user turned it on): the
    # printed commands run in the user's shell, not under kg_service.
    telemetry = os.environ.get("MLFLOW_DISABLE_TELEMETRY", "true")
    bars = os.environ.get("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # issue 30 §20
    env = (
        f'PATH="{bin_dir}:$PATH" MLFLOW_TRACKING_URI={uri} '
        f"MLFLOW_DISABLE_TELEMETRY={telemetry} MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR={bars}"
    )
    echo(f"MLflow UI:  {env} mlflow ui --backend-store-uri {uri}")
    if registered.models:
        (shown,) = [
            m for m in registered.models if m.activation == summary.winner.activation
        ] or registered.models[:1]
        name, export_path = shown.name, shown.export_path
        model_uri = f"models:/{name}@{config.registry.alias}"
        # kg serve answers a bad request (a CSV row too long, a header
        # only) with a 4xx and a JSON message; plain `mlflow models serve`
        # answers with a stack trace in the body (issue 15).
        echo(f"Serve:      {kg_command()} serve {model_uri} --tracking-uri {uri}")
        echo(
            f"  or MLflow's own: {env} mlflow models serve "
            f"-m {model_uri} --env-manager local -p 5001"
        )
        if export_path is not None:
            base = export_path.parent.resolve()
            echo(
                f"TF Serving: docker run -p 8501:8501 -v {base}:/models/{name} "
                f"-e MODEL_NAME={name} tensorflow/serving"
            )
    echo(f"Done in {outcome.seconds:.0f} s.")
