"""Real servers for the service tests: PostgreSQL, MLflow, model serving.

Each runs on 127.0.0.1 on a free port and is stopped by the fixture that
started it.
"""

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

from kg_service.tracking import destinations
from kg_service.tracking import empty_store

VENV_BIN = os.path.dirname(sys.executable)


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_http(url, process, timeout, log_path):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"server exited with {process.returncode}:\n{_tail(log_path)}"
            )
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            # A start takes 3-8 s: a 0.5 s poll lost up to 0.5 s of each.
            time.sleep(0.1)
    raise RuntimeError(f"server not ready after {timeout} s:\n{_tail(log_path)}")


def _tail(path, lines=40):
    with open(path, errors="replace") as f:
        return "".join(f.readlines()[-lines:])


def stop(process):
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def server_env(**extra):
    """Environment with the venv's bin first on PATH (uvicorn, mlflow)."""
    env = dict(os.environ)
    env["PATH"] = VENV_BIN + os.pathsep + env.get("PATH", "")
    env.update(extra)
    return env


def postgres_bin(name):
    found = shutil.which(name) or next(
        iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)),
        None,
    )
    if found is None:
        raise RuntimeError(
            f"PostgreSQL's {name} is not installed (Debian: apt-get install "
            f"postgresql); .ci/run installs it."
        )
    return found


@contextlib.contextmanager
def postgres():
    """A throwaway PostgreSQL cluster; yields its SQLAlchemy URI."""
    root = tempfile.mkdtemp(prefix="kg-pg-", dir="/tmp")
    os.chmod(root, 0o777)
    data = os.path.join(root, "data")
    as_user = []
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root.
        as_user = ["runuser", "-u", "postgres", "--"]
        shutil.chown(root, "postgres")
    port = free_port()
    log_path = os.path.join(root, "postgres.log")
    subprocess.run(
        as_user
        + [postgres_bin("initdb"), "-D", data, "-U", "kg", "--auth=trust", "-E", "UTF8"],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        as_user
        + [
            postgres_bin("pg_ctl"),
            "-D",
            data,
            "-l",
            log_path,
            "-w",
            "-o",
            f"-p {port} -k {root} -c listen_addresses=127.0.0.1",
            "start",
        ],
        check=True,
        capture_output=True,
    )
    try:
        subprocess.run(
            [postgres_bin("createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "kg", "mlflow"],
            check=True,
            capture_output=True,
        )
        yield f"postgresql://kg@127.0.0.1:{port}/mlflow"
    finally:
        subprocess.run(
            as_user + [postgres_bin("pg_ctl"), "-D", data, "-m", "fast", "stop"],
            capture_output=True,
        )
        shutil.rmtree(root, ignore_errors=True)


class MlflowServer:
    """`mlflow server` on 127.0.0.1 that a test can stop and start again,
    on the same port and store (a server that goes away mid-sweep).

    It runs in its own process group: `mlflow server` starts uvicorn as a
    child, which a signal to the parent alone would leave serving. MLflow's
    job runner (huey workers, unused here) is off: it quarters start-up.
    A new sqlite store starts as a copy of the product's cached empty store
    (`kg_service.tracking.empty_store`, what kg-train does for its own):
    MLflow then finds its schema at head instead of migrating a new file
    on the server's first start (~1.1 of its ~6 CPU s, measured).
    """

    def __init__(self, backend_store_uri, artifacts_dir):
        self.backend_store_uri = backend_store_uri
        self.artifacts_dir = artifacts_dir
        self.port = free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        self.log_path = os.path.join(artifacts_dir, "mlflow-server.log")
        self.process = None

    def start(self, timeout=180):
        if self.backend_store_uri.startswith("sqlite:///"):
            database = destinations.sqlite_file(self.backend_store_uri)
            if database:  # None: in memory
                empty_store.place(database)  # a no-op once the file exists
        with open(self.log_path, "a") as log:
            self.process = subprocess.Popen(
                [
                    os.path.join(VENV_BIN, "mlflow"),
                    "server",
                    "--backend-store-uri",
                    self.backend_store_uri,
                    "--artifacts-destination",
                    self.artifacts_dir,
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                    "--workers",
                    "1",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=server_env(MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false"),
                start_new_session=True,
            )
        wait_for_http(f"{self.uri}/health", self.process, timeout, self.log_path)

    def stop(self):
        """Stops the whole process group; returns once the port refuses."""
        if self.process is None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, sig)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and self._answers():
                time.sleep(0.1)
            if not self._answers():
                break
        self.process.wait(timeout=10)
        self.process = None

    def _answers(self):
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", self.port)) == 0


@contextlib.contextmanager
def mlflow_server(backend_store_uri, artifacts_dir):
    """`mlflow server` on 127.0.0.1; yields its http URI."""
    server = MlflowServer(backend_store_uri, artifacts_dir)
    server.start()
    try:
        yield server.uri
    finally:
        server.stop()


@contextlib.contextmanager
def model_server(model_uri, tracking_uri, cwd):
    """`mlflow models serve` in a fresh process; yields its http URI."""
    port = free_port()
    log_path = os.path.join(cwd, "model-server.log")
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [
                os.path.join(VENV_BIN, "mlflow"),
                "models",
                "serve",
                "-m",
                model_uri,
                "--env-manager",
                "local",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=server_env(MLFLOW_TRACKING_URI=tracking_uri),
        )
    try:
        wait_for_http(f"http://127.0.0.1:{port}/ping", process, 180, log_path)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(process)
