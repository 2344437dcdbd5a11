"""`kg serve`: MLflow's scoring server, in a process of its own.

`start` resolves the MODEL to a local MLflow pyfunc model folder
(`serving.model_folder.local_model`), checks the port, and runs the
scoring app (`kg_service.serving.scoring_app`, under uvicorn) in a child
process that dies with its parent; `Server` waits for it to answer
/ping and stops it.

MLflow, pandas and TensorFlow are imported where they are used: the CLI
imports this module for `kg serve`, and `kg --help` must not wait
seconds for them.
"""

import contextlib
import ctypes
import ipaddress
import dataclasses
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request


from kg_service.errors import ServiceError
from kg_service.serving.model_folder import local_model

STOP_GRACE_SECONDS = 10  # after SIGTERM, before SIGKILL


# --- kg serve. ----------------------------------------------------------------


def _loopback(host):
    """Where to ask /ping: a wildcard address's loopback."""
    return {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)


def _bracketed(host):
    return f"[{host}]" if ":" in host else host


def is_loopback(host):
    """True for an address only this machine reaches (127.0.0.0/8, ::1,
    localhost); a wildcard or any other address (or a name) is reachable
    from elsewhere."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_port(host, port):
    """Refuses a port the server could not listen on, before the model
    loads (a busy port cost 20 s of loading, then exit 3: issue 30 §19).
    SO_REUSEADDR, as uvicorn binds: a port in TIME_WAIT is free to it."""
    if port == 0:
        return
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
    except OSError as error:
        why = error.strerror or str(error)
        raise ServiceError(
            f"--host {host} --port {port}: cannot listen there ({why}); another "
            f"server may hold the port: stop it, or pick another (--port 0 picks "
            f"a free one)."
        ) from None


def _free_port(host):
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _own_group_dying_with_parent():
    """In the server process, before uvicorn starts: a process group of its
    own (`stop` signals the whole group, workers included), and SIGTERM
    when kg dies, even by SIGKILL (Linux).

    A group, not a session (`start_new_session`): Linux's autogroup
    scheduler (on by default, /proc/sys/kernel/sched_autogroup_enabled)
    gives each session its own share of the CPU, and a server in a session
    of its own waited for the CPU on each wakeup while other sessions ran:
    the floor's p50 was 22.8 ms against 6.4 ms now, at about the same CPU
    a request (`benchmarks/bench_serving.py`, docs/benchmarks.md, 2 busy
    cores). `mlflow models serve` runs uvicorn in its caller's session too. Ctrl-C at a
    terminal still reaches kg alone (the foreground group), which stops
    the server.
    """
    os.setpgid(0, 0)
    try:
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


@dataclasses.dataclass
class Server:
    """A running scoring server: uvicorn in a process group of its own."""

    process: subprocess.Popen
    host: str
    port: int
    model_uri: str
    cleanup: contextlib.ExitStack

    @property
    def url(self):
        return f"http://{_bracketed(self.host)}:{self.port}"

    def wait(self, echo):
        """Waits for /ping, prints the URL, serves until Ctrl-C or SIGTERM,
        then stops the server's whole process group. Returns the exit code."""

        def interrupt(signum, frame):
            raise KeyboardInterrupt

        previous = signal.signal(signal.SIGTERM, interrupt)
        try:
            if not self._ready():
                return self._exited(echo)
            echo(
                f"kg serve: {self.model_uri} at {self.url} "
                f"(POST {self.url}/invocations; Ctrl-C stops)"
            )
            sys.stdout.flush()
            code = self.process.wait()
            return self._exited(echo) if code else 0
        except KeyboardInterrupt:
            echo("kg serve: stopping the server.", err=True)
            self.stop()
            return 0
        finally:
            signal.signal(signal.SIGTERM, previous)
            self.cleanup.close()

    def _ready(self):
        while self.process.poll() is None:
            try:
                probe = f"http://{_bracketed(_loopback(self.host))}:{self.port}/ping"
                with urllib.request.urlopen(probe, timeout=2) as answer:
                    if answer.status == 200:
                        return True
            except OSError:
                time.sleep(0.2)
        return False

    def _exited(self, echo):
        code = self.process.wait()
        echo(
            f"kg serve: error: the server exited with code {code} (its log is above).",
            err=True,
        )
        return code if code > 0 else 1

    def stop(self):
        """SIGTERM to the process group; SIGKILL after the grace period."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            pass
        # Workers left behind (a wedged supervisor) go too.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


def start(
    model_uri,
    *,
    tracking_uri,
    host,
    port,
    workers,
    max_request_bytes,
    timeout,
    client_timeout=10.0,
    token_file=None,
    expose_docs=False,
):
    """Starts uvicorn on `kg_service.serving.scoring_app` for MODEL; returns a `Server`.

    Port 0 picks a free one. The model is resolved (downloaded, or a
    SavedModel wrapped) here, so a wrong MODEL (or token file) fails before
    any server starts. With `token_file`, every route but /ping and /health
    needs `Authorization: Bearer <its first line>`.
    """
    from kg_service.serving import scoring_app as app  # uvicorn, MLflow: start-up

    if token_file is not None:
        try:
            app.read_token(token_file)
        except ValueError as error:
            raise ServiceError(
                f"--token-file {token_file}: {error}; write the token (e.g. "
                f"`openssl rand -hex 32`) on its first line."
            ) from None
    check_port(host, port)
    cleanup = contextlib.ExitStack()
    try:
        path = cleanup.enter_context(local_model(model_uri, tracking_uri))
        if port == 0:
            port = _free_port(host)
        command = [
            sys.executable, "-m", "uvicorn", "kg_service.serving.scoring_app:app",
            "--host", host, "--port", str(port), "--workers", str(workers),
            "--timeout-graceful-shutdown", str(STOP_GRACE_SECONDS - 2),
            # uvicorn's h11 protocol with a deadline for request headers.
            "--http", "kg_service.serving.scoring_app:ClientTimeouts",
        ]  # fmt: skip
        env = {
            **os.environ,
            app.MODEL_PATH_ENV: path,
            app.MAX_BYTES_ENV: str(max_request_bytes),
            app.CLIENT_TIMEOUT_ENV: str(client_timeout),
            app.EXPOSE_DOCS_ENV: "1" if expose_docs else "0",
            "MLFLOW_SCORING_SERVER_REQUEST_TIMEOUT": str(timeout),
        }
        env.pop(app.TOKEN_FILE_ENV, None)
        if token_file is not None:
            env[app.TOKEN_FILE_ENV] = str(pathlib.Path(token_file).resolve())
        process = subprocess.Popen(
            command, env=env, preexec_fn=_own_group_dying_with_parent
        )
    except BaseException:
        cleanup.close()
        raise
    return Server(process, host, port, model_uri, cleanup)
