"""`kg results`: docs/results.md, regenerated from an MLflow store.

A thin shell over `kg_service.papers.runner`: it reads every finished
sweep of the page's studies (`papers.page.STUDIES`, found by their
`study:` tag through `tracking.studies`), analyses each study as
`kg report --study` does and writes the page `papers.page.render` makes
of them, stamped with this command, the git commit and the time. `--run`
first fills the store (`runner.fill`: docs/make_results.sh of the source
checkout, which trains each study's config into it).

Exit codes: 0 done; 2 a usage error (no store, none of the page's studies
in it, a page path that cannot be written), one paragraph without a
traceback; 130 interrupted.
"""

import os
import pathlib
import shlex

import click

from kg_service.cli import options
from kg_service.errors import ServiceError
from kg_service.tracking import client as mlflow_client

DEFAULT_STORE = "results-store"


@click.command("results", context_settings=options.CONTEXT)
@click.argument("path", default="docs/results.md", metavar="[PATH]")
@click.option(
    "--store",
    metavar="DIR",
    default=DEFAULT_STORE,
    show_default=True,
    help="The results folder whose mlflow.db holds the studies (ignored with "
    "--tracking-uri).",
)
@options.tracking_uri("MLflow tracking URI (default: sqlite:///DIR/mlflow.db of --store).")
@click.option(
    "--run",
    "fill",
    is_flag=True,
    help="First train every study into the store (docs/make_results.sh; 22 min "
    "of wall time, 34 min of CPU, on the shared 2-core CPU at load 7-17), then "
    "write the page.",
)
@click.option("--command", "shown_command", metavar="TEXT", hidden=True,
              help="The command the page says made it (docs/make_results.sh sets it).")
@click.pass_context
def results(ctx, path, store, tracking_uri, fill, shown_command):
    """Write docs/results.md (or PATH) from the MLflow runs of its studies:
    every table, rank, test and verdict computed, the papers' numbers from
    kg_service/papers/published.py.

    \b
    Examples:
      kg results                       # from results-store/mlflow.db
      kg results --run                 # train every study first (docs/make_results.sh)
      kg results /tmp/page.md --tracking-uri sqlite:///other.db
    """
    from kg_service.papers import runner  # scipy, matplotlib, MLflow: not for `kg --help`

    with options.command_errors(ctx, "kg results"):
        tracking_uri = options.checked_tracking_uri(tracking_uri)
        if fill and tracking_uri:
            raise ServiceError("--run fills a --store folder (an sqlite store the script "
                               "creates); give --store DIR instead of --tracking-uri.")
        page = _page_path(path)
        if fill:
            runner.fill(store)
        uri = tracking_uri or f"sqlite:///{pathlib.Path(store).resolve() / 'mlflow.db'}"
        _check_exists(uri, store)
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        mlflow_client.quiet_downloads()
        command = shown_command or _this_command(ctx, path, store, tracking_uri, fill)
        text = runner.build_page(uri, command=command)
        page.write_text(text)
        options.echo(f"Wrote {page} ({len(text.splitlines())} lines) from {uri}.")


def _this_command(ctx, path, store, tracking_uri, fill):
    """The command line that made the page, as the user would type it."""
    words = ["kg", ctx.info_name or "results", path]
    if tracking_uri:
        words += ["--tracking-uri", tracking_uri]
    elif store != DEFAULT_STORE:
        words += ["--store", store]
    return shlex.join(words + (["--run"] if fill else []))


def _page_path(path):
    page = pathlib.Path(path)
    if page.is_dir() or not page.parent.is_dir():
        raise ServiceError(
            f"PATH {path!r}: expected a Markdown file in an existing folder (e.g. "
            f"docs/results.md); {'it is a folder' if page.is_dir() else 'its folder does not exist'}."
        )
    return page


def _check_exists(uri, store):
    """A sqlite store must be there already: reading must not create one."""
    if uri.startswith("sqlite:///"):
        database = pathlib.Path(uri[len("sqlite:///"):])
        if not database.is_file():
            raise ServiceError(
                f"--store {store!r}: no MLflow store at {database}; expected the mlflow.db "
                "that `kg results --run` (or `bash docs/make_results.sh DIR`) fills, or "
                "--tracking-uri naming a store that holds the page's studies."
            )


if __name__ == "__main__":
    results()
