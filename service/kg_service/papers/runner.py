"""`kg results`'s work: fill a store with the page's studies, read their
runs through the tracking seam (`tracking.studies`), write the page.

The store is filled by docs/make_results.sh (the one recipe of every
study's seeds and settings, kept as a script for humans to run too),
found in the source checkout that holds this package, whatever the
working directory. Each sweep's cost is the /usr/bin/time file the script
writes beside the store; it is parsed here.
"""

import datetime
import pathlib
import subprocess

from kg_service.errors import ServiceError
from kg_service.papers import page
from kg_service.sweep import studies as sweep_studies
from kg_service.tracking import studies
from kg_service.tracking.store import SWEEP_ID_TAG

SLOPE_METRICS = ("leaky_slope.block0", "leaky_slope.block1")
SCRIPT = pathlib.PurePosixPath("docs/make_results.sh")  # in the source checkout


def checkout():
    """The git checkout that holds this package (the folder `git rev-parse
    --show-toplevel` names from the package's own folder), or None where
    the package is installed from a wheel."""
    try:
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"],
                             cwd=pathlib.Path(__file__).resolve().parent,
                             capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return pathlib.Path(top)


def fill(store):
    """Train every study of the page into the store folder `store`
    (docs/make_results.sh's `train_all`).

    Raises:
        ServiceError: no source checkout, or the script failed.
    """
    top = checkout()
    script = top / SCRIPT if top else None
    if script is None or not script.is_file():
        raise ServiceError(f"--run: {SCRIPT} is missing; it needs a source checkout "
                           "(the studies' configs are its configs/ folder).")
    code = subprocess.call(["bash", str(script), str(pathlib.Path(store).resolve()), "train_all"])
    if code:
        raise ServiceError(f"--run: {script} stopped with exit code {code}; the sweeps it "
                           "finished are in the store (resume one with kg-train --resume).")


def commit():
    """The checkout's commit, said as the page stamps it."""
    top = checkout()
    if top is None:
        return "unknown (not a git checkout)"
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=top,
                         capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                           cwd=top, capture_output=True, text=True).stdout.strip()
    return rev + (" (with uncommitted changes)" if dirty else "")


def read_runs(uri, tag):
    """`page.StoredRun`s of a study's finished sweeps, and the
    `tracking.studies.StoredSweep`s they came from."""
    stored = studies.read_study(uri, tag)
    runs = []
    for s in stored:
        sweep = studies.read_sweep_runs(
            uri, s.run_id,
            histories=(SLOPE_METRICS if tag == page.SLOPE_STUDY else ())
            + (("loss",) if tag == page.DIGITS_STUDY else ()),
            test_correct=tag == page.DIGITS_STUDY,  # the curves and McNemar's test
        )
        runs.append(page.StoredRun(
            experiment=s.experiment, run_id=s.run_id, study=tag, baseline=s.baseline,
            config=s.config, members=sweep.members,
            seconds=(sweep.end_ms - sweep.start_ms) / 1000,
            histories=sweep.histories, examples=sweep.examples, failed=s.failed,
            commit=sweep.tags.get("git_commit", ""),
            started=datetime.datetime.fromtimestamp(
                sweep.start_ms / 1000, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            tuned=tuned(sweep.tags, s.config),
            cost=cost(uri, s.experiment, sharded=SWEEP_ID_TAG in sweep.tags),
        ))
    return runs, stored


def tuned(tags, config):
    """{activation: chosen value} from a tuned sweep's `tuning.<activation>.
    <parameter>` tags (sweep/tuning.py), in the config's activation order."""
    tuning = config.get("tuning")
    if not tuning:
        return {}
    chosen = {a: tags.get(f"tuning.{a}.{tuning['parameter']}")
              for a in config.get("activations", ())}
    return {a: v for a, v in chosen.items() if v is not None}


def cost(uri, experiment, sharded=False):
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
    found, analysed, known = {}, {}, set()
    for tag in [t for t, _ in page.STUDIES] + [page.SLOPE_STUDY]:
        try:
            runs, stored = read_runs(uri, tag)
        except studies.UnknownStudy as missing:
            known = set(missing.studies)
            continue
        found[tag] = runs
        analysed[tag] = sweep_studies.analyse_stored(tag, stored)
    if not any(t in found for t, _ in page.STUDIES):
        names = ", ".join(t for t, _ in page.STUDIES)
        there = ", ".join(sorted(known)) or "none"
        raise ServiceError(
            f"--tracking-uri {uri}: none of the page's studies ({names}) has a finished "
            f"sweep there (studies there: {there}). Fill the store with `kg results --run` "
            "or `bash docs/make_results.sh DIR`; a sweep joins a study by its config's "
            "`study:` key."
        )
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return page.render(found, analysed, command=command, commit=commit(), when=when,
                       slope_runs=found.get(page.SLOPE_STUDY, ()))
