"""`kg plan`: how many seeds would decide each comparison of a stored sweep,
or (`--config`) each claim a config declares, before it runs.

A thin shell: it finds the experiment's newest finished sweep in the
tracking store (as `kg report` does: `TrackingStore.find_sweeps`, newest
first), reads the summary.json that sweep logged, and hands each
comparison's paired differences (mean, sd, pairs) to
`kg_service.analysis.numbers.planning`; `kg_service.analysis.words.tables.plan_rows`
words the table. No model is loaded and nothing is trained, so it answers
in the time MLflow takes to open the store.

With `--config FILE` it plans the config's `claims:` instead (issue 32
§1): the seeds each claim needs for the config's power at its smallest
effect, from the per-seed sd of the study's stored sweeps
(`kg_service.sweep.claims`), saying where the sd came from.

Exit codes: 0 done; 2 a usage error (bad option, no such experiment, no
finished sweep with a summary), one paragraph without a traceback.
"""


import click

from kg_service.cli import options
from kg_service.config import derived
from kg_service.config import schema as config_lib
from kg_service.errors import ServiceError
from kg_service.tracking import client as mlflow_client

SUMMARY_ARTIFACT = "report/summary.json"  # where the sweep's run keeps it (log_summary)
FINISHED = "FINISHED"


@click.command("plan", context_settings=options.CONTEXT)
@click.option("--experiment", metavar="NAME", help="The MLflow experiment.")
@click.option("--config", "config_path", metavar="FILE", type=click.Path(dir_okay=False),
              help="Instead: a sweep config; plan its declared claims before it runs.")
@click.option(
    "--margin",
    type=options.FiniteRange(min=0, min_open=True),
    metavar="M",
    help="Equivalence margin in the compared metric's units (0.003 = 0.3 pp of "
    "accuracy); default: the sweep's analysis.margin.",
)
@click.option(
    "--power",
    type=options.FiniteRange(0, 1, min_open=True, max_open=True),
    metavar="P",
    help="The power to plan for; default: the sweep's analysis.power (0.8).",
)
@click.option(
    "--alpha",
    type=options.FiniteRange(0, 0.5, min_open=True, max_open=True),
    metavar="A",
    help="Family-wise error rate; default: the sweep's analysis.alpha (0.05).",
)
@options.tracking_uri(
    "MLflow tracking URI (default: MLFLOW_TRACKING_URI, else sqlite:///mlflow.db)."
)
@click.pass_context
def plan(ctx, experiment, config_path, margin, power, alpha, tracking_uri):
    """Seeds needed to decide each comparison of the experiment's newest
    finished sweep: to show the observed difference (paired t-test at the
    observed d_z) and to show equivalence within the margin (TOST), at the
    chosen power and alpha (divided by the comparisons, Holm's strictest step).

    \b
    Examples:
      kg plan --experiment moons-relu-vs-gelu
      kg plan --experiment moons-relu-vs-gelu --margin 0.005 --power 0.9
      kg plan --config configs/digits.yaml
    """
    mlflow_client.quiet_downloads()
    with options.command_errors(ctx, "kg plan"):
        if (experiment is None) == (config_path is None):
            raise ServiceError("expected one of --experiment NAME (a stored sweep's "
                               "comparisons) or --config FILE (a config's claims).")
        tracking_uri = options.checked_tracking_uri(tracking_uri)
        if config_path is not None:
            options.echo(claims_plan(config_path, tracking_uri, power))
            return
        uri = tracking_uri or derived.resolve_tracking_uri(config_lib.Config())
        run_id, summary = newest_summary(experiment, uri.strip())
        options.echo(render(summary, run_id, margin=margin, power=power, alpha=alpha))


def claims_plan(path, tracking_uri=None, power=None):
    """`kg plan --config`'s text: the config's claims, the seeds each needs."""
    from kg_service.analysis.numbers import claim_data  # scipy: after the options are checked
    from kg_service.analysis.words import claim_wording  # scipy, as above
    from kg_service.analysis.words import tables  # scipy, as above
    from kg_service.config import loading  # pydantic: after the options are checked
    from kg_service.sweep import claims as sweep_claims  # MLflow: a real plan only

    config = loading.load_config(path)
    claims = claim_data.declared(config)
    if not claims:
        return (f"{path} declares no claims (`claims:`; docs/statistics.md, \"Claims\"): "
                "nothing to plan.")
    uri = tracking_uri or derived.tracking_uri_and_origin(config)[0]
    pilot = sweep_claims.read_pilot(config, uri.strip())
    power = power or config.analysis.power
    plans = sweep_claims.plans_from(claims, pilot, power)
    lines = [f"Claims of {path}, planned before the run: seeds for power {power:g} at each "
             f"claim's smallest effect (two-sided paired t-test at alpha / {len(claims)} "
             "claims, Holm's strictest step).", f"Per-seed sd: {pilot.source}.", ""]
    return "\n".join(lines + tables.text_table(*claim_wording.plan_rows(plans), left={0, 1, 2}))


def newest_summary(experiment, tracking_uri, store=None):
    """(run id, summary.json) of the experiment's newest finished sweep."""
    if store is None:
        from kg_service.tracking import mlflow_store  # MLflow: a real run only

        store = mlflow_store.Tracker(tracking_uri, experiment, create=False)
    for run_id in store.find_sweeps():
        if store.sweep_info(run_id)[2] != FINISHED:
            continue
        try:
            return run_id, store.load_dict(run_id, SUMMARY_ARTIFACT)
        except Exception:  # an older or interrupted sweep without its summary
            continue
    raise ServiceError(
        f"experiment {experiment!r} in {tracking_uri} holds no finished sweep with a "
        "summary; run one first (kg train --config ...), or pass another --experiment."
    )


def render(summary, run_id, *, margin=None, power=None, alpha=None):
    """The plan table for a stored summary.json, with its heading."""
    from kg_service.analysis.words import tables  # scipy: after the options are checked

    header, rows, note = tables.plan_rows(summary, margin=margin, power=power, alpha=alpha)
    lines = [f"Seed plan for sweep run {run_id} ({summary['metric']}):", ""]
    lines += tables.text_table(header, rows, left={0})
    return "\n".join(lines + ["", note])


if __name__ == "__main__":
    plan(prog_name="kg plan")
