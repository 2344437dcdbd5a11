"""docker/compose.yaml's stack, run as local processes on 127.0.0.1 (issue 21).

No Docker engine runs here, so the stack was only ever read; this harness
runs it. It reads compose.yaml, fills its `${VAR:?}` values from a
generated .env (every key docker/.env.example asks the user for), and
starts each service from its own line (entrypoint + command, or the
image's ENTRYPOINT/CMD read from our Dockerfiles, with compose's
`environment` and the Dockerfile's ENV) in dependency order, each waited
for with compose's own health check command. `Stack.started` records every
line it started, so a test can say which services ran.

What a container has and a local process has not is translated, in one
place each (`_translate`, `_program`, `_healthcheck`):

- addresses: `--host=0.0.0.0` -> 127.0.0.1; each service's port -> a free
  port of this machine (eight people share it), `--port=N` and the health
  checks' `127.0.0.1:N` with it.
- service names: HTTP clients keep compose's URLs (http://mlflow:5000,
  http://minio:9000): HTTP_PROXY points every process at this harness's
  forward proxy, which sends each request to the service's port with its
  Host header untouched, so MLflow's --allowed-hosts check sees
  `mlflow:5000` as in the stack (no /etc/hosts edit). A stopped service is
  a 502 from the proxy (in the stack: a name that no longer resolves; both
  are transient failures to kg-train). PostgreSQL speaks no HTTP: its
  `postgres:5432` in a URI becomes 127.0.0.1:<port>.
- paths: /app (where the images copy the repository) -> the repository;
  each volume's mount point -> a folder of the stack (a named volume keeps
  its data across restarts, as in the stack); /run/secrets/NAME -> a file
  written from the secret's variable.
- images that are not ours:
  - postgres: Debian's PostgreSQL, set up as the image's entrypoint does
    from POSTGRES_USER / POSTGRES_PASSWORD / POSTGRES_DB (password auth
    over TCP), stopped with SIGINT as the image's STOPSIGNAL says.
  - minio: moto's S3 server (`moto[server]`, the test extra) stands in for
    `minio server`; MinIO's server is on no registry reachable here.
  - minio/mc: the bucket job's script runs unchanged through /bin/sh with
    tests/service/stack/mc.py on PATH as `mc`, mapping each mc subcommand
    to the boto3 S3/IAM call that does the same (its docstring lists them);
    moto records the bucket policy and user but does not enforce them.
  - tensorflow/serving: not run (NOT_RUNNABLE says why).

Run the stack for a check: see the README ("run the stack without Docker").
"""

import contextlib
import dataclasses
import http.client
import http.server
import json
import os
import pathlib
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

import yaml

from tests.service import servers

ROOT = pathlib.Path(__file__).resolve().parents[3]
DOCKER = ROOT / "docker"
COMPOSE_FILE = DOCKER / "compose.yaml"

# Services whose program cannot run here, and why; every other service of
# compose.yaml is started by the stack test.
NOT_RUNNABLE = {
    "tf-serving": "TensorFlow Serving's tensorflow_model_server ships only in its "
    "Docker image and Google's own apt repository; no registry reachable here "
    "carries it (its health check is bash's /dev/tcp, nothing to stand in for)",
}

# The port each service listens on inside its container: published ones
# from compose's `ports`, the others their image's default (asserted
# against compose's own URLs in `Stack.__init__`).
IMAGE_PORTS = {"postgres": 5432, "minio/minio": 9000}
# Services reached over another protocol than HTTP: their name:port in a
# URI is rewritten, not proxied.
NOT_HTTP = {"postgres"}

HOP_BY_HOP = {
    "connection", "keep-alive", "proxy-connection", "proxy-authorization",
    "proxy-authenticate", "te", "trailer", "transfer-encoding", "upgrade",
}  # fmt: skip


def load_compose(path=COMPOSE_FILE):
    with open(path) as f:
        return yaml.safe_load(f)


def interpolate(value, variables):
    """Compose's interpolation: ${VAR:?err}, ${VAR:-default}, ${VAR}, $$."""

    def one(match):
        name, operator, argument = match.group(1), match.group(2), match.group(3)
        found = variables.get(name)
        if operator == ":?" and not found:
            raise AssertionError(f"compose would refuse to start: {argument}")
        if operator == ":-" and not found:
            return argument
        return found or ""

    pattern = r"\$\$|\$\{(\w+)(?:(:\?|:-)([^}]*))?\}"
    return re.sub(pattern, lambda m: "$" if m.group(0) == "$$" else one(m), str(value))


def generate_dot_env(**extra):
    """A docker/.env as a user fills it: a fresh value for every key that
    docker/.env.example leaves empty, and `extra` (optional keys)."""
    text = (DOCKER / ".env.example").read_text()
    keys = re.findall(r"^(\w+)=$", text, re.MULTILINE)
    values = {key: f"kg-test-{secrets.token_hex(8)}" for key in keys}
    values.update(extra)
    return values


def dockerfile(path):
    """`[(instruction, arguments)]` of a Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n", " ", pathlib.Path(path).read_text())
    lines = [l.strip() for l in text.splitlines() if l.strip() and not l.lstrip().startswith("#")]
    return [tuple(l.split(None, 1)) for l in lines]


@dataclasses.dataclass(frozen=True)
class Image:
    """What a service's image brings: its ENTRYPOINT, CMD, ENV and WORKDIR."""

    entrypoint: tuple = ()
    cmd: tuple = ()
    env: tuple = ()  # ((key, value), ...)
    workdir: str = "/"


def image_of_dockerfile(path):
    entrypoint, cmd, env, workdir = (), (), [], "/"
    for op, args in dockerfile(path):
        if op == "ENTRYPOINT":
            entrypoint = tuple(json.loads(args))
        elif op == "CMD":
            cmd = tuple(json.loads(args))
        elif op == "WORKDIR":
            workdir = args
        elif op == "ENV":
            env += re.findall(r"(\w+)=(\S+)", args)
    return Image(entrypoint, cmd, tuple(env), workdir)


# Third-party images: their ENTRYPOINT/CMD as the image's docs give them.
THIRD_PARTY = {
    "postgres": Image(entrypoint=("docker-entrypoint.sh",), cmd=("postgres",)),
    "minio/minio": Image(entrypoint=("minio",)),
    "minio/mc": Image(entrypoint=("mc",)),
    "tensorflow/serving": Image(entrypoint=("/usr/bin/tf_serving_entrypoint.sh",)),
}


class Gate:
    """Holds the first request through the proxy that `predicate` accepts
    until `release()`: a test stops a server at a known point of a client's
    work."""

    def __init__(self, predicate):
        self.predicate = predicate
        self.reached = threading.Event()
        self._released = threading.Event()

    def release(self):
        self._released.set()

    def hold(self):
        self.reached.set()
        self._released.wait(timeout=600)


class Proxy:
    """A forward HTTP proxy on 127.0.0.1 that routes by service name:port
    (what Docker's network does by DNS), keeping the Host header."""

    def __init__(self):
        self.routes = {}  # "mlflow:5000" -> local port
        self.gates = []
        self.lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                try:
                    proxy._forward(self)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the client gave up (its timeout)

            do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = do_GET

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def hold(self, predicate):
        """A Gate on the next request (host, method, path, body) it accepts."""
        gate = Gate(predicate)
        with self.lock:
            self.gates.append(gate)
        return gate

    def _gate_for(self, *request):
        with self.lock:
            for gate in self.gates:
                if gate.predicate(*request):
                    self.gates.remove(gate)
                    return gate
        return None

    def _forward(self, handler):
        url = urllib.parse.urlsplit(handler.path)
        host = url.netloc or handler.headers.get("Host", "")
        path = (url.path or "/") + (f"?{url.query}" if url.query else "")
        chunked = handler.headers.get("Transfer-Encoding", "").lower() == "chunked"
        body = _read_chunked(handler.rfile) if chunked else handler.rfile.read(
            int(handler.headers.get("Content-Length") or 0)
        )  # fmt: skip
        gate = self._gate_for(host, handler.command, path, body)
        if gate:
            gate.hold()
        port = self.routes.get(host)
        if port is None:
            return _reply(handler, 502, f"harness proxy: no service {host} in the stack\n".encode())
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        try:
            connection.putrequest(handler.command, path, skip_host=True, skip_accept_encoding=True)
            for key, value in handler.headers.items():
                if key.lower() not in HOP_BY_HOP and not (chunked and key.lower() == "content-length"):
                    connection.putheader(key, value)
            if chunked:
                connection.putheader("Content-Length", str(len(body)))
            connection.endheaders(body or None)
            response = connection.getresponse()
            data = response.read()
        except OSError as error:  # refused: the service is stopped
            return _reply(handler, 502, f"harness proxy: {host} does not answer: {error}\n".encode())
        finally:
            connection.close()
        headers = [(k, v) for k, v in response.getheaders() if k.lower() not in HOP_BY_HOP]
        _reply(handler, response.status, data, headers, reason=response.reason)


def _read_chunked(stream):
    body = b""
    while True:
        size = int(stream.readline().split(b";")[0].strip() or b"0", 16)
        if size == 0:
            while stream.readline() not in (b"\r\n", b"\n", b""):
                pass
            return body
        body += stream.read(size)
        stream.readline()


def _reply(handler, status, data, headers=(), reason=None):
    handler.send_response_only(status, reason)
    length_given = False
    for key, value in headers:
        length_given |= key.lower() == "content-length"
        handler.send_header(key, value)
    if not headers:
        handler.send_header("Content-Type", "text/plain")
    if not length_given:
        handler.send_header("Content-Length", str(len(data)))
    handler.send_header("Connection", "close")
    handler.end_headers()
    if handler.command != "HEAD":
        handler.wfile.write(data)
    handler.close_connection = True


@dataclasses.dataclass(frozen=True)
class Line:
    """One service's command line as the harness runs it."""

    service: str
    argv: tuple
    env: dict
    cwd: pathlib.Path
    compose_argv: tuple  # entrypoint + command as compose.yaml writes them


class Stack:
    """compose.yaml's services as local processes; `folder` holds their
    volumes, logs and secrets. Use as a context manager: leaving it stops
    every process it started."""

    def __init__(self, folder, variables, compose=None):
        self.compose = compose or load_compose()
        self.services = self.compose["services"]
        self.variables = dict(variables)
        self.folder = pathlib.Path(folder)
        self.proxy = Proxy()
        self.processes = {}  # service -> Popen of the running one
        self._completed = set()  # one-shot jobs that exited 0
        self._jobs = []  # every job and client started, ended by `down`
        self.timings = []  # (what, seconds): each start until healthy, each job
        self.started = []  # Line of every start, in order
        self.ports = {name: servers.free_port() for name in self.services}
        # /tmp, not folder: PostgreSQL runs as its own user when we are root
        # and must reach its data through every parent folder.
        self._pg_root = pathlib.Path(tempfile.mkdtemp(prefix="kg-stack-pg-", dir="/tmp"))
        os.chmod(self._pg_root, 0o755)
        (self.folder / "logs").mkdir(parents=True, exist_ok=True)
        self._write_bin()
        self._write_secrets()
        (self.folder / ".env").write_text("".join(f"{k}={v}\n" for k, v in self.variables.items()))
        for name in self.services:
            port = self.container_port(name)
            if port is not None and name not in NOT_HTTP:
                self.proxy.routes[f"{name}:{port}"] = self.ports[name]

    # --- what a service's line is -------------------------------------------

    def image(self, name):
        service = self.services[name]
        built = service.get("build") or next(
            (s["build"] for s in self.services.values() if s.get("build") and s.get("image") == service["image"]),
            None,
        )  # fmt: skip
        if built:
            return image_of_dockerfile(DOCKER / built["context"] / built["dockerfile"])  # context: from compose.yaml
        return THIRD_PARTY[service["image"].split(":")[0]]

    def container_port(self, name):
        service = self.services[name]
        for port in service.get("ports", []):
            return int(interpolate(port, self.variables).rsplit(":", 1)[1])
        return IMAGE_PORTS.get(service["image"].split(":")[0])

    def local_port(self, name):
        return self.ports[name]

    def url(self, name):
        """The service's URL as the stack's clients write it (through the proxy)."""
        return f"http://{name}:{self.container_port(name)}"

    def mounts(self, name):
        """Mount point -> local path of each of the service's volumes and secrets."""
        service = self.services[name]
        found = {"/app": ROOT}
        for volume in service.get("volumes", []):
            source, target = volume.split(":")[:2]
            if source.startswith("."):
                found[target] = (DOCKER / source).resolve()
            elif name == "postgres":  # the cluster, where its own user reaches it
                found[target] = self._pg_root / "data"
            else:
                found[target] = self.folder / "volumes" / source
        for secret in service.get("secrets", []):
            found[f"/run/secrets/{secret}"] = self.folder / "secrets" / secret
        return found

    def line(self, name, args=None):
        """The service's command line, environment and folder, translated.
        `args` replaces compose's command, as `docker compose run SERVICE ARGS`."""
        service, image = self.services[name], self.image(name)
        if "entrypoint" in service:  # compose: an entrypoint drops the image's CMD
            entrypoint, command = service["entrypoint"], service.get("command", [])
        else:
            entrypoint, command = image.entrypoint, service.get("command", image.cmd)
        if args is not None:
            command = args
        compose_argv = tuple(interpolate(p, self.variables) for p in (*entrypoint, *command))
        mounts = self.mounts(name)
        argv = self._program(name, [self._translate(p, mounts) for p in compose_argv])
        env = {
            "PATH": os.pathsep.join([str(self.folder / "bin"), servers.VENV_BIN, "/usr/local/bin", "/usr/bin", "/bin"]),
            "HOME": str(self.folder / "home" / name),
            "LANG": "C.UTF-8",
            "HTTP_PROXY": self.proxy.url, "http_proxy": self.proxy.url,
            "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
            "MC_CONFIG_DIR": str(self.folder / "mc"),
        }  # fmt: skip
        env.update(dict(image.env))
        for key, value in (service.get("environment") or {}).items():
            env[key] = self._translate(interpolate(value, self.variables), mounts)
        return Line(name, tuple(argv), env, self._filesystem(name, service, image, mounts), compose_argv)

    def _filesystem(self, name, service, image, mounts):
        """The service's folders: its own root (folder/root/NAME), each volume
        linked at its mount point there, and its working folder."""
        own = self.folder / "root" / name
        (self.folder / "home" / name).mkdir(parents=True, exist_ok=True)
        for target, local in mounts.items():
            if target == "/app" or local.is_file() or self._pg_root in local.parents:
                continue
            local.mkdir(parents=True, exist_ok=True)
            link = own / target.strip("/")
            if not link.exists():
                link.parent.mkdir(parents=True, exist_ok=True)
                link.symlink_to(local, target_is_directory=True)
        workdir = service.get("working_dir", image.workdir)
        cwd = mounts.get(workdir) or own / workdir.strip("/")
        cwd.mkdir(parents=True, exist_ok=True)
        return cwd

    def _translate(self, value, mounts):
        """A container's paths, addresses and non-HTTP service names -> here."""
        for target in sorted(mounts, key=len, reverse=True):
            value = re.sub(rf"(?<![\w.:/-]){re.escape(target)}(?=/|\s|$|[\"'])", str(mounts[target]), value)
        if value.startswith("--host="):
            value = "--host=127.0.0.1"
        for name in NOT_HTTP:
            value = value.replace(f"@{name}:{self.container_port(name)}/", f"@127.0.0.1:{self.ports[name]}/")
        return value

    def _program(self, name, argv):
        """The program a container runs -> the one that runs it here."""
        argv = [f"--port={self.ports[name]}" if a.startswith("--port=") else a for a in argv]
        program = argv[0]
        if program == "minio":  # moto stands in for `minio server /data ...`
            assert argv[1] == "server", argv
            return [os.path.join(servers.VENV_BIN, "moto_server"), "-H", "127.0.0.1", "-p", str(self.ports[name])]
        if program == "docker-entrypoint.sh":
            return [servers.postgres_bin("postgres")]  # set up in _start_postgres
        if program in ("mlflow", "kg", "kg-train", "python"):
            return [os.path.join(servers.VENV_BIN, program), *argv[1:]]
        return argv

    def healthcheck(self, name):
        """Compose's health check command of `name`, pointed at its local port."""
        check = self.services[name]["healthcheck"]
        test = check["test"]
        argv = list(test[1:]) if test[0] == "CMD" else ["/bin/sh", "-c", test[1]]
        port = self.container_port(name)
        argv = [a.replace(f"127.0.0.1:{port}", f"127.0.0.1:{self.ports[name]}") for a in argv]
        env = self.line(name).env
        if argv[0] == "pg_isready":  # in the container: its own socket
            argv = [servers.postgres_bin("pg_isready"), *argv[1:], "--host=127.0.0.1", f"--port={self.ports[name]}"]
        if argv[:2] == ["mc", "ready"]:  # in the container, mc's alias `local` is the server itself
            env[f"MC_HOST_{argv[2]}"] = f"http://127.0.0.1:{self.ports[name]}"
        if argv[0] == "python":
            argv[0] = os.path.join(servers.VENV_BIN, "python")
        return argv, env

    # --- running it ------------------------------------------------------------

    def order(self, names):
        """`names` and what they depend on, dependencies first."""
        done = []

        def visit(name):
            for needed in self.services[name].get("depends_on", {}):
                visit(needed)
            if name not in done:
                done.append(name)

        for name in names:
            visit(name)
        return done

    def up(self, *names):
        """Starts `names` and their dependencies, as `docker compose up`:
        long-running services until their health check passes, one-shot
        jobs (no health check) until they exit 0."""
        for name in self.order(names):
            if name in self.processes or name in self._completed:
                continue
            if "healthcheck" in self.services[name]:
                self.start(name)
            else:
                result = self.run(name)
                assert result.returncode == 0, f"{name} exited {result.returncode}:\n{result.stdout}{result.stderr}"

    def start(self, name):
        """Starts a long-running service and waits for its health check."""
        assert name not in self.processes, f"{name} runs already"
        line = self.line(name)
        if name == "postgres":
            self._prepare_postgres(line)
        log = open(self.folder / "logs" / f"{name}.log", "a")
        argv = list(line.argv)
        if name == "postgres":
            argv = self._as_postgres_user([*argv, "-D", str(self._pg_root / "data"), "-p", str(self.ports[name]),
                                           "-k", str(self._pg_root), "-c", "listen_addresses=127.0.0.1"])  # fmt: skip
        env = dict(line.env)
        if name == "minio":
            env["S3_IGNORE_SUBDOMAIN_BUCKETNAME"] = "true"  # minio:9000 is no bucket's host name
        cwd = self._pg_root if name == "postgres" else line.cwd  # a folder its user may enter
        with log:
            process = subprocess.Popen(
                argv, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )  # fmt: skip
        self.processes[name] = process
        self.started.append(line)
        began = time.monotonic()
        self.wait_healthy(name)
        self.timings.append((f"{name} healthy", time.monotonic() - began))
        if name == "postgres":
            self._create_database(line)

    def wait_healthy(self, name):
        """Runs compose's health check until it passes, within compose's own
        budget for it: from the moment the service's port takes connections
        (asked here, no process), then every 0.5 s growing to 2 s rather than
        its interval. Each check is a process (a Python interpreter for
        mlflow and the model server, mc.py for minio): run every 0.5 s from
        the start they were ~115 processes and 7.5 CPU s of one stack test
        under load (issue 17)."""
        check = self.services[name]["healthcheck"]
        seconds = lambda text: float(str(text).rstrip("s"))  # noqa: E731
        budget = seconds(check.get("start_period", 0)) + check["retries"] * seconds(check["interval"]) + 60
        argv, env = self.healthcheck(name)
        deadline = time.monotonic() + budget
        pause, result = 0.5, None
        while True:
            process = self.processes[name]
            if process.poll() is not None:
                raise RuntimeError(f"{name} exited {process.returncode}:\n{self.log_tail(name)}")
            if self._answers(name):
                result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
                if result.returncode == 0:
                    return
            if time.monotonic() > deadline:
                why = result.stderr[-500:] if result else "its port never took a connection"
                raise RuntimeError(f"{name} not healthy after {budget:.0f} s ({why}):\n{self.log_tail(name)}")
            time.sleep(pause if result else 0.2)
            pause = min(2.0, pause * 1.5) if result else pause

    def job(self, name, args=None):
        """Starts a one-shot service (or `docker compose run SERVICE ARGS`);
        returns its Popen, output piped."""
        line = self.line(name, args)
        self.started.append(line)
        return self._popen(list(line.argv), line.cwd, line.env)

    def client(self, name, argv, cwd):
        """`argv` with service `name`'s environment, in `cwd` (`docker compose
        run --entrypoint`): a client inside the stack. Not a start of `name`."""
        return self._popen([os.path.join(servers.VENV_BIN, argv[0]), *argv[1:]], cwd, self.line(name).env)

    def _popen(self, argv, cwd, env):
        process = subprocess.Popen(
            argv, cwd=cwd, env=env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        )  # fmt: skip
        self._jobs.append(process)
        return process

    def run(self, name, args=None, timeout=600):
        return self.finish(name, self.job(name, args), timeout=timeout)

    def finish(self, name, process, timeout=600):
        """Waits for a job `job` started; a one-shot service that exited 0
        counts as completed for `up` (compose's service_completed_successfully)."""
        began = time.monotonic()
        stdout, stderr = process.communicate(timeout=timeout)
        self.timings.append((f"{name} job (from its wait)", time.monotonic() - began))
        if process.returncode == 0 and "healthcheck" not in self.services[name]:
            self._completed.add(name)
        return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)

    def stop(self, name, signalled=False):
        """Stops a service's whole process group (its image's stop signal
        first; `signalled`: sent already); returns once its port refuses."""
        process = self.processes.pop(name)
        for sig in (self._stop_signal(name), signal.SIGKILL):
            if not signalled or sig == signal.SIGKILL:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, sig)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                continue
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and self._answers(name):
                time.sleep(0.1)  # uvicorn's workers outlive their parent briefly
            if not self._answers(name):
                return
        raise RuntimeError(f"{name} still answers on port {self.ports[name]}")

    def restart(self, name):
        self.stop(name)
        self.start(name)

    def _stop_signal(self, name):
        return signal.SIGINT if name == "postgres" else signal.SIGTERM  # postgres' STOPSIGNAL

    def down(self):
        """Stops every service: all signalled at once, then each waited for;
        a job or client still running (a failed test) is killed."""
        for process in self._jobs:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.communicate()
        for name, process in self.processes.items():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, self._stop_signal(name))
        for name in reversed(list(self.processes)):
            with contextlib.suppress(Exception):
                self.stop(name, signalled=True)
        self.proxy.close()
        shutil.rmtree(self._pg_root, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.down()

    def _answers(self, name):
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", self.ports[name])) == 0

    def log_tail(self, name, lines=40):
        path = self.folder / "logs" / f"{name}.log"
        return "".join(path.read_text(errors="replace").splitlines(True)[-lines:]) if path.exists() else ""

    def opener(self):
        """A urllib opener that reaches the services by name, as a container would."""
        return urllib.request.build_opener(urllib.request.ProxyHandler({"http": self.proxy.url}))

    # --- the images' set-up that is not a command line ----------------------------

    def _write_bin(self):
        """`mc` on the stack's PATH: the harness's mapping of it (mc.py)."""
        bin_dir = self.folder / "bin"
        bin_dir.mkdir(parents=True, exist_ok=True)
        mc = bin_dir / "mc"
        mc.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{pathlib.Path(__file__).with_name("mc.py")}" "$@"\n')
        mc.chmod(0o755)

    def _write_secrets(self):
        """Each compose secret, from its variable, as the file Docker mounts."""
        folder = self.folder / "secrets"
        folder.mkdir(parents=True, exist_ok=True)
        for name, secret in self.compose.get("secrets", {}).items():
            (folder / name).write_text(self.variables[secret["environment"]])

    def _as_postgres_user(self, argv):
        # PostgreSQL refuses to run as root; the image runs it as `postgres`.
        return [shutil.which("runuser") or "runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv

    def _prepare_postgres(self, line):
        """The postgres image's first start: initdb with POSTGRES_USER and
        POSTGRES_PASSWORD, password authentication over TCP."""
        data = self._pg_root / "data"
        if data.exists():
            return  # the volume is kept: a restart finds the cluster
        password_file = self._pg_root / "password"
        password_file.write_text(line.env["POSTGRES_PASSWORD"])
        if os.geteuid() == 0:
            shutil.chown(self._pg_root, "postgres")
            shutil.chown(password_file, "postgres")
        subprocess.run(
            self._as_postgres_user([
                servers.postgres_bin("initdb"), "-D", str(data), "-U", line.env["POSTGRES_USER"],
                f"--pwfile={password_file}", "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8",
            ]),
            check=True, capture_output=True,
        )  # fmt: skip
        password_file.unlink()

    def _create_database(self, line):
        env = dict(line.env, PGPASSWORD=line.env["POSTGRES_PASSWORD"])
        address = ["-h", "127.0.0.1", "-p", str(self.ports["postgres"]), "-U", line.env["POSTGRES_USER"]]
        exists = subprocess.run(
            [servers.postgres_bin("psql"), *address, "-d", "postgres", "-tAc",
             f"SELECT 1 FROM pg_database WHERE datname = '{line.env['POSTGRES_DB']}'"],
            env=env, capture_output=True, text=True, check=True,
        )  # fmt: skip
        if exists.stdout.strip() != "1":
            subprocess.run(
                [servers.postgres_bin("createdb"), *address, line.env["POSTGRES_DB"]],
                env=env, check=True, capture_output=True,
            )  # fmt: skip
