"""Serving a model: `kg serve` (a scoring server process) and `kg predict`.

A MODEL is a `models:/` or `runs:/` URI, a local MLflow model folder, or
a SavedModel folder (TF Serving's `<export dir>/<name>/<version>`). Either
way it becomes a local MLflow pyfunc model folder (`local_model`), which
MLflow's scoring server (`kg_service.serving.scoring_app`, under uvicorn) or
`mlflow.pyfunc.load_model` loads.

MLflow, pandas and TensorFlow are imported where they are used: the CLI
imports this module for `kg serve` and `kg predict`, and `kg --help` must
not wait seconds for them.
"""

import contextlib
import ctypes
import ipaddress
import dataclasses
import difflib
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
import warnings

import numpy as np

from kg_service.config import derived as config_lib
from kg_service.errors import ServiceError
from kg_service.errors import sentence
from kg_service.serving import saved_model_proto
from kg_service.tracking import client as mlflow_client

STOP_GRACE_SECONDS = 10  # after SIGTERM, before SIGKILL
MODEL_URI_HELP = (
    "Expected models:/NAME@ALIAS, models:/NAME/VERSION, runs:/RUN_ID/model, an "
    "MLflow model folder (with an MLmodel file) or a SavedModel folder (with "
    "saved_model.pb), as a path or a file:// URI; `kg models` lists the "
    "registered ones."
)


def import_mlflow():
    mlflow_client.quiet_downloads()
    return mlflow_client.import_mlflow()


# What MODEL may name: a registered model or a run's, or a local folder
# (`file://`). Not http(s):// or other remote stores: a URL is not a model
# (issue 30 §15; MLflow would fetch and copy whatever it points at).
STORE_SCHEMES = ("models", "runs")


@contextlib.contextmanager
def local_model(model_uri, tracking_uri=None):
    """Yields the path of a local MLflow pyfunc model folder for MODEL.

    A SavedModel folder is wrapped (for this block) in a pyfunc model that
    calls its `serving_default` signature. A local folder (or `file://`
    URI) is checked before anything is copied: a model's files, no
    dangling link.

    Raises:
        ServiceError: if MODEL names nothing loadable.
    """
    scheme, local_path = _source(model_uri)
    if local_path is not None:
        yield from _local_folder(model_uri, local_path)
        return
    uri = config_lib.tracking_uri_for(tracking_uri)
    mlflow = import_mlflow()
    # models:/ URIs resolve through MLflow's process-wide registry URI
    # (its ModelsArtifactRepository drops the registry_uri argument), so
    # --tracking-uri must set it, not only pass it.
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    with tempfile.TemporaryDirectory(prefix="kg-model-") as tmp:
        try:
            local = mlflow.artifacts.download_artifacts(
                artifact_uri=model_uri, dst_path=tmp, tracking_uri=uri, registry_uri=uri
            )
        except mlflow.exceptions.MlflowException as error:
            raise ServiceError(
                f"model {model_uri}: not found in the tracking store {uri}: "
                f"{sentence(first_line(error.message))}"
                f"{_closest_model(mlflow, uri, model_uri)} {MODEL_URI_HELP}"
            ) from None
        if not (pathlib.Path(local) / "MLmodel").is_file():
            raise ServiceError(
                f"model {model_uri}: holds no MLmodel file; point at the model's "
                f"folder (e.g. runs:/RUN_ID/model). {MODEL_URI_HELP}"
            )
        yield local


def _source(model_uri):
    """`(scheme, local path or None)`; a URI of another scheme refused."""
    match = re.match(r"([A-Za-z][A-Za-z0-9+.-]*):/", model_uri)
    scheme = match.group(1).lower() if match and len(match.group(1)) > 1 else None
    if scheme is None:  # a path (or a Windows drive letter)
        return None, pathlib.Path(model_uri)
    if scheme == "file":
        parsed = urllib.parse.urlsplit(model_uri)
        if parsed.netloc not in ("", "localhost"):
            raise ServiceError(
                f"model {model_uri}: a file:// URI names a local folder "
                f"(file:///path); this one names host {parsed.netloc!r}. {MODEL_URI_HELP}"
            )
        return scheme, pathlib.Path(urllib.parse.unquote(parsed.path))
    if scheme in STORE_SCHEMES:
        return scheme, None
    close = difflib.get_close_matches(scheme, (*STORE_SCHEMES, "file"), n=1)
    hint = f" Did you mean {close[0]}:/?" if close else ""
    raise ServiceError(
        f"model {model_uri}: a {scheme}: URI is not a model source kg serves; download "
        f"the model folder first, or register it.{hint} {MODEL_URI_HELP}"
    )


def _local_folder(model_uri, path):
    """Yields a local folder's pyfunc model folder, after its checks."""
    if (path / "MLmodel").is_file():
        _no_dangling_links(model_uri, path)
        yield str(path.resolve())
    elif (path / "saved_model.pb").is_file():
        _no_dangling_links(model_uri, path)
        with tempfile.TemporaryDirectory(prefix="kg-savedmodel-") as tmp:
            yield _wrap_saved_model(path.resolve(), pathlib.Path(tmp) / "model")
    elif path.exists():
        raise ServiceError(
            f"model {model_uri}: is neither an MLflow model folder (no MLmodel "
            f"file) nor a SavedModel folder (no saved_model.pb). {MODEL_URI_HELP}"
        )
    else:
        raise ServiceError(f"model {model_uri}: no such file or folder. {MODEL_URI_HELP}")


def _no_dangling_links(model_uri, path):
    """Refuses a model folder holding a link to nothing (its load, or the
    SavedModel's copy, would fail half-way with a traceback)."""
    for root, folders, files in os.walk(path):
        for name in folders + files:
            entry = pathlib.Path(root, name)
            if entry.is_symlink() and not entry.exists():
                raise ServiceError(
                    f"model {model_uri}: {entry} is a link to nothing "
                    f"({os.readlink(entry)}); the model folder is incomplete."
                )


def _closest_model(mlflow, uri, model_uri):
    """' Did you mean models:/NAME@...?' for a models:/ URI whose name is
    not registered but close to one that is (difflib, as config errors)."""
    match = re.match(r"models:/([^/@]+)(.*)", model_uri)
    if not match:
        return ""
    try:
        client = mlflow.MlflowClient(uri, registry_uri=uri)
        names = [m.name for m in client.search_registered_models(max_results=1000)]
    except mlflow.exceptions.MlflowException:
        return ""
    name, rest = match.groups()
    close = difflib.get_close_matches(name, names, n=1) if name not in names else []
    return f" Did you mean models:/{close[0]}{rest}?" if close else ""


def reason(message):
    """MLflow's prediction error as one line: its innermost "Error: ..."
    (the outer ones repeat the whole input)."""
    return " ".join(str(message).rsplit("Error: ", 1)[-1].split())


def first_line(text):
    return str(text).strip().splitlines()[0] if str(text).strip() else ""


def _wrap_saved_model(saved_model, target):
    """Saves a pyfunc model at `target` that serves `saved_model`."""
    # First: importing it sets TensorFlow's C++ log level (no "failed call
    # to cuInit" ERROR line on a machine without a GPU) before TF loads.
    from kg_service.tasks.classification import pyfunc as mlflow_model  # noqa: F401
    from kg_service.tracking import mlflow_store  # MLflow: after the model's pyfunc above

    mlflow = import_mlflow()
    # The signature from saved_model.pb, not tf.saved_model.load: TensorFlow's
    # import and the model's load cost this process ~7 CPU s, and the
    # server's workers load the model anyway (issue 17).
    try:
        signatures = saved_model_proto.signatures(saved_model)
    except (OSError, ValueError) as error:
        raise ServiceError(
            f"model {saved_model}: saved_model.pb cannot be read: {error}. {MODEL_URI_HELP}"
        ) from None
    if "serving_default" not in signatures:
        raise ServiceError(
            f"model {saved_model}: the SavedModel has no serving_default signature "
            f"(it has {sorted(signatures) or 'none'}); export it with "
            f"kg-train or keras' model.export()."
        )
    spec, output = _matrix_signature(saved_model, signatures["serving_default"])
    signature = mlflow.models.ModelSignature(
        inputs=mlflow.types.Schema(
            [mlflow.types.TensorSpec(np.dtype("float32"), (-1, int(spec[-1])))]
        ),
        outputs=mlflow.types.Schema(
            [mlflow.types.TensorSpec(np.dtype("float32"), (-1, int(output[-1])))]
        ),
    )
    tensorflow = mlflow_store.installed_version("tensorflow")
    with warnings.catch_warnings():
        # No input example, deliberately (as for the registered models).
        warnings.filterwarnings("ignore", message=".*input example was not provided")
        # Models from code, as kg-train registers: a pickled PythonModel
        # object makes MLflow warn that unpickling may run arbitrary code.
        code = pathlib.Path(target).parent / "saved_model_code.py"
        code.write_text(SAVED_MODEL_CODE)
        mlflow.pyfunc.save_model(
            str(target),
            python_model=str(code),
            artifacts={"saved_model": str(saved_model)},
            signature=signature,
            # Explicit, as for the registered models: left to MLflow, it
            # infers them by loading the model in a subprocess of its own
            # (~7 CPU s, measured in the suite's `kg predict` tests). A
            # SavedModel needs TensorFlow and NumPy to be served, not Keras.
            pip_requirements=[f"tensorflow=={tensorflow}", f"numpy=={np.__version__}"],
        )
    return str(target)


def _matrix_signature(saved_model, signature):
    """`(input shape, output shape)` of a serving_default signature that is
    one float32 `[batch, features]` tensor in and one `[batch, outputs]`
    out, as kg-train exports; else a ServiceError saying what it is
    (issue 30 §15: two inputs were an unpacking traceback)."""
    inputs, outputs = signature
    try:
        kinds = saved_model_proto.dtypes(saved_model)["serving_default"]
    except (OSError, ValueError, KeyError):
        kinds = ({}, {})
    problems = []
    for role, tensors, types in (("input", inputs, kinds[0]), ("output", outputs, kinds[1])):
        if len(tensors) != 1:
            problems.append(f"{len(tensors)} {role}s ({', '.join(sorted(tensors)) or 'none'})")
            continue
        ((name, shape),) = tensors.items()
        dtype = types.get(name, "float32")
        if dtype != "float32" or shape is None or len(shape) != 2 or not shape[-1]:
            shown = "unknown rank" if shape is None else [-1 if d is None else d for d in shape]
            problems.append(f"{role} {name!r} is {dtype} of shape {shown}")
    if problems:
        raise ServiceError(
            f"model {saved_model}: its serving_default signature has "
            f"{'; '.join(problems)}; kg serves one float32 [batch, features] input "
            f"and one [batch, outputs] output (as kg-train and keras' model.export() "
            f"write for a classifier)."
        )
    return next(iter(inputs.values())), next(iter(outputs.values()))


SAVED_MODEL_CODE = """\
import mlflow

from kg_service.tasks.classification.pyfunc import SavedModelModel

mlflow.models.set_model(SavedModelModel())
"""


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
