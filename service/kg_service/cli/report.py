"""`kg report`: a sweep's report from the tracking store alone.

A thin shell over `kg_service.sweep.rebuild.report_sweep`, like kg-train's over
`pipeline.run`: it imports the pipeline (TensorFlow, MLflow) only for a
real run, and prints what it returns with `kg_service.cli.summary`. `report` is a click command for the `kg` group
(`group.add_command(report)`); `python -m kg_service.cli.report` runs it
alone. `--study NAME` hands off to `kg_service.sweep.studies.report_study`
instead (docs/studies.md).

Exit codes: 0 done; 2 a usage error (`ServiceError`: no such experiment
or sweep, members missing, registered already; or click's own), one
paragraph without a traceback; 130 interrupted.
"""

import os

import click

from kg_service.cli import options
from kg_service.cli import sharding
from kg_service.config import derived
from kg_service.config import schema as config_lib


@click.command(
    "report",
    context_settings=options.CONTEXT,
)
@click.option("--experiment", metavar="NAME", help="The MLflow experiment.")
@click.option(
    "--study",
    metavar="NAME",
    help="Instead of one sweep: every finished sweep tagged with this study "
    "(config key `study:`), analysed as one family (docs/studies.md).",
)
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
    "--open",
    "open_page",
    is_flag=True,
    help="Open the report's page in a browser: the sweep run's report.html in "
    "MLflow's UI where a tracking server serves it, else report.html from disk.",
)
@options.tracking_uri(
    "MLflow tracking URI (default: MLFLOW_TRACKING_URI, else sqlite:///mlflow.db)."
)
@options.QUIET
@click.pass_context
def report(ctx, experiment, study, sweep_id, register, output_dir, open_page, tracking_uri,
           quiet):
    """Rebuild a sweep's report (statistics, tables, figures) from the tracking
    store: the members' metrics and models from their runs, the config from the
    sweep's run. With --register, also export and register it (once). With
    --study instead, every finished sweep of the study, as one family. Prints
    the report's page (report.html) and its address in MLflow's UI; --open
    opens it.

    \b
    Examples:
      kg report --experiment kg-smoke
      kg report --experiment moons-relu-vs-gelu --sweep-id 3f9c2a1b7d004e55 --register
      kg report --study revival
      kg report --experiment kg-smoke --open
    """
    if experiment is None and study is None:
        raise click.UsageError("give --experiment NAME (one sweep) or --study NAME (every "
                               "sweep of a study).")
    if experiment is not None and study is not None:
        raise click.UsageError("--experiment and --study: give one of them, not both.")
    if study is not None and (sweep_id is not None or register):
        raise click.UsageError("--sweep-id and --register are for one sweep "
                               "(--experiment), not for --study.")
    with options.command_errors(ctx, "kg report"):
        if sweep_id is not None:
            sharding.check_sweep_id(sweep_id)
        tracking_uri = options.checked_tracking_uri(tracking_uri)
        uri = tracking_uri or derived.resolve_tracking_uri(config_lib.Config())
        # TensorFlow's C++ start-up chatter would bury the report.
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        with options.native_stderr_to_file(enabled=True), options.sigterm_as_interrupt():
            options.configure_logging(quiet=quiet, verbose=False)
            code = report_study(study, uri.strip(), output_dir, open_page=open_page) \
                if study else report_sweep(
                    experiment,
                    uri.strip(),
                    sweep_id=sweep_id,
                    register=register,
                    output_dir=output_dir,
                    quiet=quiet,
                    echo=options.echo,
                    open_page=open_page,
                )
    ctx.exit(code or 0)


def report_sweep(
    experiment, tracking_uri, sweep_id=None, register=False, output_dir=None,
    quiet=False, echo=options.echo, store=None, open_page=False,
):  # fmt: skip
    """Rebuilds a sweep's report (`kg_service.sweep.rebuild.report_sweep`)
    with a progress display, prints its summary; returns the exit code (0)."""
    # TensorFlow, MLflow, rich: only for a real run.
    from kg_service.cli import summary
    from kg_service.cli.progress import SweepProgress  # rich: a real run only
    from kg_service.sweep import rebuild  # TensorFlow, MLflow: a real run only

    outcome = rebuild.report_sweep(
        experiment,
        tracking_uri,
        claimant="kg report",
        sweep_id=sweep_id,
        register=register,
        output_dir=output_dir,
        progress=SweepProgress(quiet=quiet),
        store=store,
    )
    summary.show(echo, outcome)
    if open_page:
        open_in_browser(echo, summary.page_target(outcome))
    return 0


def open_in_browser(echo, target):
    """Opens `target` (a URL) in the user's browser, and says so; where no
    browser can be started (a server, a container) the printed line is it."""
    echo(f"Opening:    {target}")
    if click.launch(target) != 0:
        echo("  (no browser could be started here: open the address above yourself)")


def report_study(name, tracking_uri, output_dir=None, echo=options.echo, open_page=False):
    """`kg_service.sweep.studies.report_study`, its tables printed, and its
    page (report.html, logged on each of the study's sweeps' runs under
    study/<name>/: a study has no run of its own); returns 0."""
    from kg_service.analysis.reports import page as report_page  # scipy: a real run only
    from kg_service.analysis.reports import study_report  # scipy, matplotlib: a real run only
    from kg_service.cli import summary  # the pipeline's outcomes: a real run only
    from kg_service.sweep import studies  # MLflow: a real run only

    outcome = studies.report_study(name, tracking_uri, output_dir)
    for line in study_report.terminal_lines(outcome.study, outcome.aggregate, outcome.mixed):
        echo(line)
    if outcome.claims:
        from kg_service.analysis.words import claim_wording  # scipy: loaded by the study

        echo("\nClaims (declared in the study's config; Holm over them):")
        for line in claim_wording.claim_lines(outcome.claims):
            echo(f"  {line}")
    echo(f"\nStudy report: {outcome.out_dir}")
    page = outcome.out_dir / report_page.HTML
    served = tracking_uri.startswith(("http://", "https://"))
    summary.show_page(echo, page, outcome.page_url, local=not served)
    if open_page:
        open_in_browser(echo, outcome.page_url if served else page.resolve().as_uri())
    return 0


if __name__ == "__main__":
    report(prog_name="kg report")
