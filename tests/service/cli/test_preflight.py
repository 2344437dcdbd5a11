"""Pre-flight: a bad folder or tracking store stops kg-train with exit 2 and
one paragraph, before training and before anything is written."""

import contextlib
import http.server
import os
import pathlib
import subprocess
import sys
import threading

import pytest

from kg_service.config import derived as config_module
from kg_service.tracking import destinations
from kg_service.errors import ServiceError
from tests.service import in_process, servers

REPO = pathlib.Path(__file__).resolve().parents[3]
TINY = REPO / "configs" / "tiny.yaml"


@contextlib.contextmanager
def http_server(status):
    """A server answering every request with `status`; yields (url, hits)."""
    hits = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self):
            hits.append(self.path)
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST = _answer

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", hits
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def a_file(tmp_path):
    path = tmp_path / "a-file"
    path.write_text("not a folder")
    return path


# --- Folders. ----------------------------------------------------------------


def test_a_new_or_existing_writable_folder_is_fine(tmp_path):
    assert destinations.writable_dir_problem(tmp_path) is None
    assert destinations.writable_dir_problem(tmp_path / "new" / "deeper") is None


def test_a_folder_that_is_a_file_is_named(a_file):
    assert destinations.writable_dir_problem(a_file) == f"{a_file} is a file, not a folder"


def test_a_folder_that_runs_through_a_file_names_the_file(a_file):
    problem = destinations.writable_dir_problem(a_file / "reports" / "x")
    assert problem == f"{a_file} is a file, not a folder"


def test_a_dangling_symbolic_link_is_named(tmp_path):
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "gone")
    assert "symbolic link to nothing" in destinations.writable_dir_problem(link / "out")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_a_read_only_folder_is_named(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    assert destinations.writable_dir_problem(locked / "out") == f"{locked} is not writable by this user"


@pytest.mark.parametrize("folder", ["/proc/kg-probe/out", "/sys/kg-probe"])
def test_a_folder_no_one_can_create_is_named_even_for_root(folder):
    # A skeptic's probe (as root, for whom os.access says yes to everything):
    # export.dir=/proc/x passed pre-flight, every member trained, then the
    # export died with a FileNotFoundError traceback, exit 1.
    problem = destinations.writable_dir_problem(folder)
    assert problem is not None and problem.startswith(str(pathlib.Path(folder).parents[-2]))


# --- Tracking stores. --------------------------------------------------------


def test_sqlite_store_under_a_file_is_rejected(a_file):
    with pytest.raises(ServiceError, match="is a file, not a folder"):
        destinations.check_store(f"sqlite:///{a_file}/mlflow.db")


def test_sqlite_store_that_is_a_folder_is_rejected(tmp_path):
    with pytest.raises(ServiceError, match="is a folder, not a database file"):
        destinations.check_store(f"sqlite:///{tmp_path}")


def _store_files(tmp_path):
    """A file that is no database, and a real store cut in half."""
    import sqlite3

    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database at all\n" * 300)
    whole = tmp_path / "whole.db"
    with contextlib.closing(sqlite3.connect(whole)) as db:
        db.execute("CREATE TABLE t (x TEXT)")
        db.executemany("INSERT INTO t VALUES (?)", [("x" * 500,)] * 200)
        db.commit()
    cut = tmp_path / "cut.db"
    data = whole.read_bytes()
    cut.write_bytes(data[: len(data) // 2 + 100])
    return {"not a database": garbage, "truncated": cut}


@pytest.mark.parametrize("case", ["not a database", "truncated"])
def test_a_corrupt_sqlite_store_is_named_without_sql(tmp_path, case):
    """Issue 30 §16: a corrupt store's message printed SQLAlchemy's raw SQL
    (`[SQL: SELECT name FROM sqlite_master ...]`) and its background link."""
    path = _store_files(tmp_path)[case]
    with pytest.raises(ServiceError) as caught:
        destinations.check_store(f"sqlite:///{path}")
    message = str(caught.value)
    assert str(path) in message and case in message, message
    assert "SQL" not in message.replace("SQLite", "") and "sqlalche.me" not in message


def test_a_store_error_from_sqlalchemy_is_said_without_its_sql(tmp_path):
    """The same class where MLflow meets the damage first (a store whose
    header is sound, a page inside it not): the message keeps the
    driver's words and drops the statement."""
    import sqlalchemy

    from kg_service.tracking import client

    engine = sqlalchemy.create_engine(f"sqlite:///{_store_files(tmp_path)['not a database']}")
    with pytest.raises(sqlalchemy.exc.DatabaseError) as caught:
        with engine.connect() as connection:
            connection.execute(sqlalchemy.text("SELECT name FROM sqlite_master"))
    message = client.store_problem("sqlite:///garbage.db", caught.value)
    assert "file is not a database" in message, message
    assert "SELECT" not in message and "sqlalche.me" not in message, message


def test_sqlite_in_memory_and_new_files_pass(tmp_path):
    destinations.check_store("sqlite://")
    destinations.check_store("sqlite:///:memory:")
    destinations.check_store(f"sqlite:///{tmp_path}/new/mlflow.db")
    assert list(tmp_path.iterdir()) == []


def test_file_store_under_a_file_is_rejected(a_file):
    with pytest.raises(ServiceError, match="file store"):
        destinations.check_store(f"file://{a_file}/mlruns")


def test_server_with_nothing_listening_is_rejected_naming_the_url():
    url = f"http://127.0.0.1:{servers.free_port()}"
    with pytest.raises(ServiceError) as caught:
        destinations.check_store(url)
    message = str(caught.value)
    assert f"cannot reach the MLflow tracking server {url!r}" in message
    assert f"GET {url}{destinations.PROBE_PATH} failed" in message and "refused" in message


@pytest.mark.parametrize("status", [200, 401, 403, 404, 500])
def test_a_server_that_answers_at_all_passes_the_reachability_check(status):
    # A 403 other than MLflow's host check (a proxy's, a permission) too.
    with http_server(status) as (url, hits):
        destinations.check_store(url)
    assert hits == [destinations.PROBE_PATH]


def test_tracker_on_a_failing_server_gives_up_without_retrying(monkeypatch):
    # MLflow's default is 7 retries with exponential backoff: minutes.
    from kg_service.tracking import mlflow_store as tracking

    monkeypatch.delenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", raising=False)
    with http_server(503) as (url, hits):
        with pytest.raises(ServiceError, match="cannot use the MLflow tracking store"):
            tracking.Tracker(url, "x")
    # The pre-flight's probe, then MLflow's own calls: one, never retried.
    assert hits[0] == destinations.PROBE_PATH, hits
    api_calls = [h for h in hits[1:] if h.startswith("/api/")]
    assert len(api_calls) == 1, hits
    assert "MLFLOW_HTTP_REQUEST_MAX_RETRIES" not in os.environ


def test_tracker_with_an_unknown_scheme_says_so(tmp_path, monkeypatch):
    from kg_service.tracking import mlflow_store as tracking

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ServiceError) as caught:
        tracking.Tracker("htp://nowhere:5000", "x")
    message = str(caught.value)
    assert "MLflow does not know its scheme 'htp:'" in message
    assert "sqlite:" in message and "http:" in message
    assert list(tmp_path.iterdir()) == []


# --- kg-train, as a user runs it. --------------------------------------------


def kg_train(cwd, *args):
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run(
        [sys.executable, "-m", "kg_service.cli.train", "--config", str(TINY), *map(str, args)],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


# In this process (click's runner): the one case that imports MLflow to
# tell a scheme it knows, ~6 CPU seconds of start-up as a process (issue
# 17); the other cases are processes, each exiting 2 with one paragraph.
IN_PROCESS = {"unknown scheme", "weights larger than the machine"}


@pytest.mark.parametrize(
    "case",
    ["unknown scheme", "nothing listening", "output_dir through a file",
     "export.dir is a file", "sqlite store under a file", "more memory than the machine has",
     "weights larger than the machine"],
)  # fmt: skip
def test_kg_train_exits_2_with_one_paragraph_and_writes_nothing(tmp_path, a_file, case):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    args, fragment = {
        "unknown scheme": (
            ["--tracking-uri", "htp://nowhere:5000"], "does not know its scheme 'htp:'"
        ),
        "nothing listening": (
            ["--tracking-uri", f"http://127.0.0.1:{servers.free_port()}"],
            "cannot reach the MLflow tracking server",
        ),
        "output_dir through a file": (
            ["--output-dir", a_file / "reports"], f"{a_file} is a file, not a folder"
        ),
        "export.dir is a file": (
            ["--set", f"export.dir={a_file}"], f"{a_file} is a file, not a folder"
        ),
        "sqlite store under a file": (
            ["--tracking-uri", f"sqlite:///{a_file}/mlflow.db"],
            f"{a_file} is a file, not a folder",
        ),
        # 1e8 samples x 10,000 seeds: some 300 TB. A run with 1e9 samples
        # died in numpy with _ArrayMemoryError's traceback (issue 15).
        "more memory than the machine has": (
            ["--set", "data.n_samples=100000000", "--set", "seeds=10000"],
            "GiB available. Lower data.n_samples",
        ),
        # Issue 30 §13: a trillion weights per model passed the estimate
        # (data only) and died out of memory once the data had loaded.
        "weights larger than the machine": (
            ["--set", "model.hidden_units=[1000000,1000000]"],
            "weights per model from model.hidden_units [1000000, 1000000]",
        ),
    }[case]
    before = sorted(tmp_path.rglob("*"))
    if case in IN_PROCESS:
        with pytest.MonkeyPatch.context() as patch:
            patch.chdir(cwd)
            out = in_process.kg_train("--config", TINY, *args)
        assert out.exit_code == 2, out.output[-3000:]
    else:
        out = kg_train(cwd, *args)
        assert out.returncode == 2, out.stderr[-3000:]
    assert out.stderr.startswith("kg-train: error: ")
    assert fragment in out.stderr
    assert out.stderr.count("\n") == 1  # one paragraph
    assert "Traceback" not in out.stderr and "Retrying" not in out.stderr
    assert sorted(tmp_path.rglob("*")) == before  # nothing written anywhere


def test_memory_check_names_the_need_and_what_the_machine_has():
    from kg_service.config.loading import load_config

    config = load_config(TINY, ["data.n_samples=10000000", "seeds=10"])
    need = config_module.memory_estimate(config)
    with pytest.raises(ServiceError) as info:
        config_module.check_memory(config, available=need - 1)
    assert f"about {need / 2**30:,.1f} GiB" in str(info.value)
    assert f"has {(need - 1) / 2**30:,.1f} GiB available" in str(info.value)
    config_module.check_memory(config, available=need)  # enough: no error


def test_memory_estimate_counts_each_members_weights_and_optimizer_state():
    from kg_service.config.loading import load_config

    wide = load_config(TINY, ["model.hidden_units=[1000000,1000000]"])
    # 10^12 weights of the middle layer alone, each with a gradient and
    # Adam's two moments, float32, for each of tiny's 2 seeds.
    assert config_module.memory_estimate(wide) >= 10**12 * 16 * 2
    deep = load_config(TINY, ["model.hidden_units=[4096,4096,4096]"])
    assert config_module.memory_estimate(deep) > 2 * 4096**2 * 16 * 2


def test_memory_estimate_grows_with_samples_and_seeds_and_tiny_is_small():
    from kg_service.config.loading import load_config

    tiny = config_module.memory_estimate(load_config(TINY))
    assert tiny < 2**20
    more = config_module.memory_estimate(load_config(TINY, ["data.n_samples=3000"]))
    seeds = config_module.memory_estimate(load_config(TINY, ["seeds=20"]))
    assert more > tiny and seeds > tiny


@pytest.mark.parametrize(
    "uri, says",
    [
        ("postgresql://kg:WrongS3cr3t@127.0.0.1:{port}/mlflow", "cannot reach the MLflow tracking store"),
        ("postgresql://kg:WrongS3cr3t@nonexistent.invalid/mlflow", "cannot reach the MLflow tracking store"),
        ("mysql://kg:WrongS3cr3t@127.0.0.1:{port}/mlflow", "database driver is not installed"),
    ],
    ids=["closed-port", "unknown-host", "no-driver"],
)
def test_a_database_store_that_cannot_be_reached_is_named_at_once(uri, says):
    # A skeptic's probe: each took ~105 s (MLflow's and the store's retries)
    # before exit 2, nothing printed meanwhile.
    import time

    started = time.monotonic()
    with pytest.raises(ServiceError) as info:
        destinations.check_store(uri.format(port=servers.free_port()))
    message = str(info.value)
    assert says in message, message
    assert "WrongS3cr3t" not in message and "***" in message
    assert time.monotonic() - started < 15


def test_a_new_sqlite_store_in_a_folder_not_made_yet_is_made_there(tmp_path):
    # A skeptic's probe: `--tracking-uri sqlite:///nodir/x.db` passed pre-flight
    # (the folder can be made) and then failed on "nodir/x.db.lock": nothing made it.
    from kg_service.tracking import mlflow_store

    database = tmp_path / "nodir" / "deeper" / "x.db"
    store = mlflow_store.Tracker(f"sqlite:///{database}", "made-here")
    assert database.is_file() and store.tracking_uri.endswith("x.db")
