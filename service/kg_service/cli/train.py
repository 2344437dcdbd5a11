"""kg-train: the command line, a thin shell over config and pipeline.

It reads and validates the config (kg_service.config.schema), applies the flags, and
hands the `Config` to `kg_service.sweep.pipeline.run`. It imports the pipeline (and
so TensorFlow and MLflow) only once the config is valid and the run is
real: `--help`, `--dry-run` and config errors are fast and write nothing.

Exit codes (`kg_service.cli.options`): 0 done; 2 a usage or config
error (`ServiceError`, or click's own usage errors), printed as one
paragraph without a traceback; 75 (sysexits.h's EX_TEMPFAIL) the tracking
store failed mid-sweep and stayed down past `tracking.retry_seconds`: what
trained is kept, and the message gives the `--resume` command for when the
store is back; 130 interrupted; otherwise what `run` returns. Any other
exception is a bug and keeps its traceback.

The hand-off, for a whole sweep and for one job's share of a sharded one
(--shard/--sweep-id):

    run(config, *, quiet, echo, resume) -> exit code
    run_shard(config, shard, sweep_id, *, quiet, echo) -> exit code

`config` is a validated `kg_service.config.schema.Config` (`tracking.uri` and
`output_dir` already carry `--tracking-uri`/`--output-dir`). `quiet` True
means no progress display, only log records through `logging` (the CLI
configures the root logger: INFO when quiet, DEBUG with --verbose, else
WARNING). `echo(line)` prints one line for the user on stdout. Each builds
the progress display, hands both to `kg_service.sweep.pipeline`, and
prints the outcome it returns with `kg_service.cli.summary`. The core's
typed errors become sentences in `kg_service.cli.messages`.
"""

import contextlib
import dataclasses
import os

import click
import yaml

from kg_service.cli import options
from kg_service.cli import sharding
from kg_service.cli.plan import describe_plan
from kg_service.config.derived import smoke as smoke_sizes
from kg_service.config.loading import config_to_dict
from kg_service.config.loading import load_config
from kg_service.errors import ServiceError
from kg_service.execution import cluster
from kg_service.sweep import looks
from kg_service.sweep import shards
from kg_service.sweep import tuning
from kg_service.tracking import client as mlflow_client


@click.command(context_settings=options.CONTEXT)
@click.option(
    "--config",
    "config_path",
    required=True,
    metavar="PATH",
    help="The sweep's YAML config, e.g. configs/moons.yaml.",
)
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override one config key, value read as YAML; repeatable. "
    "E.g. --set training.epochs=5 --set activations=[relu,gelu].",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Validate the config, print the plan and exit; trains and writes nothing.",
)
@options.tracking_uri("MLflow tracking URI; wins over tracking.uri and MLFLOW_TRACKING_URI.")
@click.option(
    "--output-dir",
    metavar="DIR",
    help="Where the report, plots and resolved config go (config: output_dir).",
)
@click.option(
    "--smoke",
    is_flag=True,
    help="Try the config in seconds: the same pipeline at tiny sizes (at most "
    "200 samples, widths 8, 2 epochs, 2 seeds), logged as <experiment>-smoke "
    "with <model name>-smoke registered models.",
)
@click.option(
    "--resume",
    metavar="RUN_ID",
    help="Continue an interrupted sweep of this config (or one stopped by a "
    "tracking store that went down): train only the members its parent run "
    "(id printed at start) does not hold yet, log those kept locally, then "
    "compare, export and register as usual.",
)
@click.option(
    "--shard",
    metavar="I/N",
    is_flag=False,
    flag_value="",
    default=None,
    help="Train only shard I of N (1-based) of the activation x seed grid into one "
    "sweep shared through the tracking store; the job that completes the sweep "
    "registers it. Alone (no value): I and N from a Kubernetes Indexed Job "
    "(JOB_COMPLETION_INDEX, KG_SHARD_COUNT) or a Slurm array "
    "(SLURM_ARRAY_TASK_ID, SLURM_ARRAY_TASK_COUNT). Restarting a shard resumes it.",
)
@click.option(
    "--sweep-id",
    metavar="ID",
    help="The sharded sweep to join (default: derived from the config, so jobs "
    "started with the same config share one sweep); a new ID runs the same "
    "config again as a new sweep. Alone: --shard 1/1.",
)
@click.option(
    "--wait",
    is_flag=True,
    help="With --resume or --shard: when another process writes that sweep (or "
    "shard), wait until it ends or its lease goes stale (tracking.lease_seconds "
    "after its last heartbeat) instead of exiting 2.",
)
@click.option(
    "--engine",
    type=click.Choice(["local", "ray"]),
    help="Where members train (config: execution.engine): here, or as Ray tasks on a "
    "cluster, this process keeping the tuning, looks, statistics and registry.",
)
@click.option(
    "--ray-address",
    metavar="ADDRESS",
    help="The Ray cluster (config: execution.address): auto, host:port or "
    "ray://host:10001; default: a local Ray, as ray.init() starts one.",
)
@options.QUIET
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="Debug logging; with --dry-run, also print the resolved config.",
)
@click.pass_context
def main(
    ctx,
    config_path,
    overrides,
    dry_run,
    tracking_uri,
    output_dir,
    smoke,
    resume,
    shard,
    sweep_id,
    wait,
    engine,
    ray_address,
    quiet,
    verbose,
):
    """Train every activation x seed member of a sweep, compare the activations
    with paired statistics, and track, register and export it all with MLflow.

    \b
    Examples:
      kg-train --config configs/moons.yaml --dry-run
      kg-train --config configs/moons.yaml --smoke
      kg-train --config configs/tiny.yaml --tracking-uri sqlite:///smoke.db
      kg-train --config configs/moons.yaml --set seeds=3 --set training.epochs=20
      kg-train --config configs/moons.yaml --shard 2/4 --tracking-uri http://mlflow:5000
      kg-train --config configs/moons.yaml --engine ray --ray-address head:6379
    """
    with options.command_errors(ctx, "kg-train"):
        shard = _shard(shard, sweep_id, resume)
        if wait and resume is None and shard is None:
            raise ServiceError(
                "--wait waits for another process that writes the same sweep: it goes "
                "with --resume RUN_ID or --shard (a new sweep has no other writer)."
            )
        sets = overrides + _engine_sets(engine, ray_address)
        config = load_config(config_path, sets)
        config = _apply_flags(config, tracking_uri=tracking_uri, output_dir=output_dir)
        if smoke:
            config = smoke_sizes(config)
        looks.check_supported(config, shard)
        tuning.check_supported(config)
        cluster.check_supported(config, shard)
        if dry_run:
            options.echo(describe_plan(config, uri_flag=tracking_uri is not None))
            if shard is not None:
                options.echo(_shard_plan(config, shard, sweep_id))
            if verbose:
                options.echo("\nresolved config:\n" + _config_yaml(config))
            return
        if not verbose:
            # TensorFlow's C++ start-up chatter would bury the progress display.
            os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        mlflow_client.quiet_downloads()
        with options.native_stderr_to_file(enabled=not verbose):
            options.configure_logging(quiet=quiet, verbose=verbose)
            with options.sigterm_as_interrupt(), _resumed_alike(sets, smoke):
                if shard is None:
                    code = run(config, quiet=quiet, echo=options.echo, resume=resume, wait=wait)
                else:
                    code = run_shard(
                        config, shard, sweep_id, quiet=quiet, echo=options.echo, wait=wait
                    )
    ctx.exit(code or 0)


@contextlib.contextmanager
def _resumed_alike(sets, smoke):
    """A stopped sweep's resume command repeats this command line's `--set`
    values and `--smoke` (which the config does not record): without them
    the printed command was refused, "this config differs from the sweep's"."""
    try:
        yield
    except ServiceError as error:
        hint = getattr(error, "resume", None)
        if hint is not None:
            error.resume = dataclasses.replace(hint, sets=tuple(sets), smoke=bool(smoke))
        raise


def run(config, *, quiet=False, echo=options.echo, store=None, resume=None, wait=False):
    """Runs the sweep of `config` with a progress display, prints its
    summary and returns the exit code (0)."""
    # TensorFlow, MLflow, rich: only for a real run (--help, --dry-run
    # and config errors stay fast).
    from kg_service.cli import summary
    from kg_service.cli.progress import SweepProgress  # rich: a real run only
    from kg_service.sweep import pipeline  # TensorFlow, MLflow: a real run only

    outcome = pipeline.run(
        config,
        claimant="kg-train",
        progress=SweepProgress(quiet=quiet),
        echo=echo,
        store=store,
        resume=resume,
        wait=wait,
    )
    summary.show(echo, outcome)
    return 0


def run_shard(
    config, shard, sweep_id=None, *, quiet=False, echo=options.echo, store=None, wait=False
):
    """Runs one job's share of a sharded sweep, as `run` a whole one."""
    # TensorFlow, MLflow, rich: only for a real run.
    from kg_service.cli import summary
    from kg_service.cli.progress import SweepProgress  # rich: a real run only
    from kg_service.sweep import sharded  # TensorFlow, MLflow: a real run only

    outcome = sharded.run_shard(
        config,
        shard,
        sweep_id,
        claimant=f"kg-train --shard {shard}",
        progress=SweepProgress(quiet=quiet),
        echo=echo,
        store=store,
        wait=wait,
    )
    summary.show(echo, outcome)
    return 0


def _shard(text, sweep_id, resume):
    """The `Shard` of --shard/--sweep-id (None: a whole sweep)."""
    if sweep_id is not None:
        sharding.check_sweep_id(sweep_id)
    if text is None and sweep_id is None:
        return None
    if resume is not None:
        raise ServiceError(
            "--resume takes a whole sweep's run id; --shard and --sweep-id join "
            "a sharded sweep, which resumes by itself when a shard restarts. "
            "Use one or the other."
        )
    return sharding.parse(text) if text is not None else shards.Shard(1, 1, "--sweep-id")


def _shard_plan(config, shard, sweep_id):
    mine = shards.members(config, shard)
    listed = ", ".join(f"{a}/{s}" for a, s in mine) or "none (more shards than members)"
    text = (
        f"  {'shard':<12} {shard} (from {shard.origin}) of sweep "
        f"{sweep_id or shards.sweep_id(config)}: {len(mine)} members: {listed}"
    )
    if config.tuning is not None and mine:
        tuned = [a for a in config.activations if any(k[0] == a for k in mine)]
        text += (
            f"\n  {'shard tuning':<12} {', '.join(tuned)}: the choice another job claimed "
            "in the store, else tuned here (tuning members whole in the store reused, "
            "the missing ones trained here) and claimed; never waits for another job"
        )
    return text


def _apply_flags(config, *, tracking_uri, output_dir):
    """Returns `config` with --tracking-uri and --output-dir applied."""
    tracking_uri = options.checked_tracking_uri(tracking_uri)
    if tracking_uri is not None:
        tracking = dataclasses.replace(config.tracking, uri=tracking_uri)
        config = dataclasses.replace(config, tracking=tracking)
    if output_dir is not None:
        if not output_dir.strip():
            raise ServiceError(
                "--output-dir: got an empty string; expected a directory, e.g. kg-output."
            )
        config = dataclasses.replace(config, output_dir=output_dir)
    return config


def _engine_sets(engine, ray_address):
    """--engine and --ray-address as the `--set`s they stand for, validated
    with the config (a bad address is refused as the key's would be)."""
    sets = () if engine is None else (f"execution.engine={engine}",)
    return sets + (() if ray_address is None else (f"execution.address={ray_address}",))


def _config_yaml(config):
    return yaml.safe_dump(config_to_dict(config), sort_keys=False).rstrip()


if __name__ == "__main__":
    main(prog_name="kg-train")
