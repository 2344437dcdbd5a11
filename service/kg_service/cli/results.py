"""`kg results`: docs/results.md, regenerated from an MLflow store.

Reads every finished sweep of the page's studies (`analysis.results_page.
STUDIES`, found by their `study:` tag, `tracking.studies`), analyses each
study as `kg report --study` does (`sweep.studies`, `analysis.study`) and
writes the page `analysis.results_page.render` makes of them, stamped with
this command, the git commit and the time. `--run` first fills the store:
it runs docs/make_results.sh, which trains each study's config into it.

Exit codes: 0 done; 2 a usage error (no store, none of the page's studies
in it, a page path that cannot be written), one paragraph without a
traceback; 130 interrupted.
"""

import datetime
import os
import pathlib
import shlex
import subprocess
import tempfile

import click

from kg_service.cli import options
from kg_service.errors import ServiceError
from kg_service.tracking import client as mlflow_client

DEFAULT_STORE = "results-store"
SLOPE_METRICS = ("leaky_slope.block0", "leaky_slope.block1")


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
    with options.command_errors(ctx, "kg results"):
        tracking_uri = options.checked_tracking_uri(tracking_uri)
        if fill and tracking_uri:
            raise ServiceError("--run fills a --store folder (an sqlite store the script "
                               "creates); give --store DIR instead of --tracking-uri.")
        page = _page_path(path)
        if fill:
            _fill(store)
        uri = tracking_uri or f"sqlite:///{pathlib.Path(store).resolve() / 'mlflow.db'}"
        _check_exists(uri, store)
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        mlflow_client.quiet_downloads()
        command = shown_command or _this_command(ctx, path, store, tracking_uri, fill)
        text = build_page(uri, command=command)
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


def _fill(store):
    script = pathlib.Path(__file__).resolve().parents[3] / "docs" / "make_results.sh"
    if not script.is_file():
        raise ServiceError(f"--run: {script} is missing; it needs a source checkout.")
    code = subprocess.call(["bash", str(script), store, "train_all"])
    if code:
        raise ServiceError(f"--run: {script} stopped with exit code {code}; the sweeps it "
                           "finished are in the store (resume one with kg-train --resume).")


def _commit():
    here = pathlib.Path(__file__).resolve().parent
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here,
                             capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=here, capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return rev + (" (with uncommitted changes)" if dirty else "")


def read_runs(uri, tag):
    """`results_page.StoredRun`s of a study's finished sweeps, and the
    `tracking.studies.StoredSweep`s they came from."""
    from kg_service.papers import page as results_page
    from kg_service.tracking import client as mlflow_client
    from kg_service.tracking import studies
    from kg_service.tracking.store import SWEEP_ID_TAG

    stored = studies.read_study(uri, tag)
    client = mlflow_client.import_mlflow().MlflowClient(uri, registry_uri=uri)
    runs = []
    for s in stored:
        parent = client.get_run(s.run_id)
        members = {}
        histories = {}
        examples = {}
        # The members as `kg report --study` reads them (earliest run each).
        for (activation, seed), run in studies._members(client, parent).items():
            if run.info.status == "FAILED" or "failure.reason" in run.data.tags:
                continue
            members.setdefault(activation, {})[seed] = dict(run.data.metrics)
            for key in SLOPE_METRICS:
                if key in run.data.metrics and tag == results_page.SLOPE_STUDY:
                    histories[(activation, seed, key)] = _history(client, run, key)
            if tag == results_page.DIGITS_STUDY:  # the curves and McNemar's test
                histories[(activation, seed, "loss")] = _history(client, run, "loss")
                correct = _test_correct(client, run)
                if correct is not None:
                    examples[(activation, seed)] = correct
        end = parent.info.end_time or parent.info.start_time
        runs.append(results_page.StoredRun(
            experiment=s.experiment, run_id=s.run_id, study=tag, baseline=s.baseline,
            config=s.config, members=members, seconds=(end - parent.info.start_time) / 1000,
            histories=histories, examples=examples, failed=s.failed,
            commit=parent.data.tags.get("git_commit", ""),
            started=datetime.datetime.fromtimestamp(
                parent.info.start_time / 1000, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            tuned=_tuned(parent.data.tags, s.config),
            cost=_cost(uri, s.experiment, sharded=SWEEP_ID_TAG in parent.data.tags),
        ))
    return runs, stored


def _history(client, run, key):
    """A member's per-epoch values of one metric, in step order."""
    return [m.value for m in sorted(client.get_metric_history(run.info.run_id, key),
                                    key=lambda m: m.step)]


def _test_correct(client, run):
    """A classification member's per-test-example correctness (the array
    its run keeps beside its model), or None where it kept none."""
    import numpy as np

    from kg_service.tracking import member_runs

    with tempfile.TemporaryDirectory() as tmp:
        try:
            path = client.download_artifacts(
                run.info.run_id, f"member/{member_runs.MEMBER_TEST_CORRECT}", tmp)
        except Exception:  # MLflow raises its own kinds for a missing artifact
            return None
        return np.load(path)


def _tuned(tags, config):
    """{activation: chosen value} from a tuned sweep's `tuning.<activation>.
    <parameter>` tags (sweep/tuning.py), in the config's activation order."""
    tuning = config.get("tuning")
    if not tuning:
        return {}
    chosen = {a: tags.get(f"tuning.{a}.{tuning['parameter']}")
              for a in config.get("activations", ())}
    return {a: v for a, v in chosen.items() if v is not None}


def _cost(uri, experiment, sharded=False):
    """The sweep's wall and CPU time as docs/make_results.sh recorded them
    (/usr/bin/time, in times/<experiment>.txt beside a sqlite store; a
    sharded sweep's in times/<experiment>.shard<N>.txt, one per shard
    process, added up), or "" where they are not there."""
    if not uri.startswith("sqlite:///"):
        return ""
    folder = pathlib.Path(uri[len("sqlite:///"):]).parent / "times"
    paths = (sorted(folder.glob(f"{experiment}.shard*.txt")) if sharded
             else [folder / f"{experiment}.txt"])
    timed = [t for t in (_timed(path) for path in paths) if t is not None]
    if not timed:
        return ""
    if not sharded:
        wall, cpu, load = timed[0]
        return (f"its process: {wall:.0f} s wall, {cpu:.0f} s CPU (user + sys)"
                + (f", {load}" if load else ""))
    return (f"its {len(timed)} shard processes side by side: {max(t[0] for t in timed):.0f} s "
            f"wall (the longest), {sum(t[1] for t in timed):.0f} s CPU in all (user + sys)")


def _timed(path):
    """(wall s, user + sys s, "load average at the end: ...") of one
    /usr/bin/time file that make_results.sh wrote, or None."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    timing = next((line for line in lines if " user " in line and " sys " in line), "")
    load = next((line for line in lines if line.startswith("load average")), "")
    try:
        words = timing.replace(",", "").split()
        wall = float(words[words.index("wall") + 1])
        cpu = float(words[words.index("user") + 1]) + float(words[words.index("sys") + 1])
    except (ValueError, IndexError):
        return None
    return wall, cpu, load


def build_page(uri, command):
    """The page's text from the store at `uri`.

    Raises:
        ServiceError: the store holds none of the page's studies.
    """
    from kg_service.papers import page as results_page
    from kg_service.sweep import studies as sweep_studies
    from kg_service.tracking import studies

    found, analysed, known = {}, {}, set()
    for tag in [t for t, _ in results_page.STUDIES] + [results_page.SLOPE_STUDY]:
        try:
            runs, stored = read_runs(uri, tag)
        except studies.UnknownStudy as missing:
            known = set(missing.studies)
            continue
        found[tag] = runs
        analysed[tag] = sweep_studies.analyse_stored(tag, stored)
    if not any(t in found for t, _ in results_page.STUDIES):
        page = ", ".join(t for t, _ in results_page.STUDIES)
        there = ", ".join(sorted(known)) or "none"
        raise ServiceError(
            f"--tracking-uri {uri}: none of the page's studies ({page}) has a finished "
            f"sweep there (studies there: {there}). Fill the store with `kg results --run` "
            "or `bash docs/make_results.sh DIR`; a sweep joins a study by its config's "
            "`study:` key."
        )
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return results_page.render(found, analysed, command=command, commit=_commit(), when=when,
                               slope_runs=found.get(results_page.SLOPE_STUDY, ()))


if __name__ == "__main__":
    results()
