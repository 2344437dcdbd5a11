"""`kg report`: a sweep's report from the tracking store alone.

A thin shell over `kg_service.sweep.pipeline.report_sweep`, like kg-train's over
`pipeline.run`: it imports the pipeline (TensorFlow, MLflow) only for a
real run. `report` is a click command for the `kg` group
(`group.add_command(report)`); `python -m kg_service.cli.report` runs it
alone.

Exit codes: 0 done; 2 a usage error (`ServiceError`: no such experiment
or sweep, members missing, registered already; or click's own), one
paragraph without a traceback; 130 interrupted.
"""

import os

import click

from kg_service.config import derived
from kg_service.config import schema
from kg_service.sweep import shards
from kg_service.cli.train import _configure_logging
from kg_service.cli.train import _native_stderr_to_file
from kg_service.cli.train import _sigterm_as_interrupt
from kg_service.errors import ServiceError

EXIT_INTERRUPTED = 130


@click.command(
    "report",
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option("--experiment", required=True, metavar="NAME", help="The MLflow experiment.")
@click.option(
    "--sweep-id",
    metavar="ID",
    help="A sharded sweep's id, or any sweep's parent run id (default: the "
    "experiment's newest sweep).",
)
@click.option(
    "--register",
    is_flag=True,
    help="Also export and register the champions, as the last shard does; "
    "refused if the sweep is registered already.",
)
@click.option("--output-dir", metavar="DIR", help="Where the report goes (default: the sweep config's).")
@click.option(
    "--tracking-uri",
    metavar="URI",
    help="MLflow tracking URI (default: MLFLOW_TRACKING_URI, else sqlite:///mlflow.db).",
)
@click.option("-q", "--quiet", is_flag=True, help="Log lines instead of the progress display.")
@click.pass_context
def report(ctx, experiment, sweep_id, register, output_dir, tracking_uri, quiet):
    """Rebuild a sweep's report (statistics, tables, figures) from the tracking
    store: the members' metrics and models from their runs, the config from the
    sweep's run. With --register, also export and register it (once).

    \b
    Examples:
      kg report --experiment kg-smoke
      kg report --experiment moons --sweep-id 3f9c2a1b7d004e55 --register
    """
    try:
        if sweep_id is not None:
            shards.check_sweep_id(sweep_id)
        if tracking_uri is not None and not tracking_uri.strip():
            raise ServiceError(
                "--tracking-uri: got an empty string; expected an MLflow "
                "tracking URI, e.g. sqlite:///mlflow.db."
            )
        uri = tracking_uri or derived.resolve_tracking_uri(schema.Config())
        # TensorFlow's C++ start-up chatter would bury the report.
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        with _native_stderr_to_file(enabled=True), _sigterm_as_interrupt():
            _configure_logging(quiet=quiet, verbose=False)
            from kg_service.sweep import pipeline  # TensorFlow, MLflow: only for a real run

            code = pipeline.report_sweep(
                experiment,
                uri.strip(),
                sweep_id=sweep_id,
                register=register,
                output_dir=output_dir,
                quiet=quiet,
                echo=click.echo,
            )
    except ServiceError as error:
        click.echo(f"kg report: error: {error}", err=True)
        ctx.exit(getattr(error, "exit_code", 2))
    except KeyboardInterrupt:
        click.echo("\nkg report: interrupted.", err=True)
        ctx.exit(EXIT_INTERRUPTED)
    ctx.exit(code or 0)


if __name__ == "__main__":
    report(prog_name="kg report")
