"""docker/: the compose stack and the Dockerfiles, read as Docker would
(no Docker engine runs here), and the tracking server's command (MLflow's
basic-auth app with docker/mlflow-auth.ini) run for real.

The whole stack, every service from its own line as a local process, runs
in tests/service/stack/ (its harness reads compose.yaml; this module reuses
its reading of it); the linters' verdicts are in stack/test_lint.py.
"""

import base64
import contextlib
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import urllib.parse

import pytest

from tests.service import servers
from tests.service.stack import harness
from tests.service.stack.harness import interpolate

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCKER = os.path.join(ROOT, "docker")
LONG_RUNNING = {"postgres", "minio", "mlflow", "model-server", "tf-serving"}
ONE_SHOT = {"minio-bucket", "mlflow-users", "trainer"}
SECRET = re.compile(r"PASSWORD|SECRET|_KEY|USERNAME|ROOT_USER", re.IGNORECASE)
REQUIRED_VARIABLE = re.compile(r"\$\{(\w+):\?[^}]*\}")


@pytest.fixture(scope="module")
def compose():
    return harness.load_compose()


def dockerfile(name):
    """`[(instruction, arguments)]`, continuation lines joined."""
    return harness.dockerfile(os.path.join(DOCKER, name))


def test_compose_has_every_service_of_the_stack(compose):
    assert set(compose["services"]) == LONG_RUNNING | ONE_SHOT


def test_every_image_is_pinned_to_a_version(compose):
    for name, service in compose["services"].items():
        image = service["image"]
        repository, _, tag = image.rpartition(":")
        assert repository and tag and tag != "latest", (name, image)
        assert re.search(r"\d", tag), (name, image)
    for name in ("Dockerfile.train", "Dockerfile.serve"):
        (base,) = [args for op, args in dockerfile(name) if op == "FROM"]
        assert re.fullmatch(r"[\w./-]+:\d[\w.-]*", base), (name, base)


def test_every_long_running_service_has_a_health_check(compose):
    for name in LONG_RUNNING:
        check = compose["services"][name].get("healthcheck", {})
        assert check.get("test") and check["test"][0] in ("CMD", "CMD-SHELL"), name
        assert check.get("interval") and check.get("retries"), name


def test_services_wait_for_the_health_of_what_they_need(compose):
    services = compose["services"]
    assert services["mlflow"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert services["mlflow"]["depends_on"]["minio-bucket"]["condition"] == (
        "service_completed_successfully"
    )
    for name in ("trainer", "model-server"):
        assert services[name]["depends_on"]["mlflow"]["condition"] == "service_healthy"


def test_trainer_reserves_the_gpu(compose):
    (device,) = compose["services"]["trainer"]["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and "gpu" in device["capabilities"]
    assert device.get("count") == "all" or device.get("device_ids")


def test_volumes_are_declared_and_exports_shared_by_trainer_and_tf_serving(compose):
    declared = set(compose["volumes"])
    for name, service in compose["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("./"):  # a tracked file beside compose.yaml, read-only
                assert os.path.isfile(os.path.join(DOCKER, source)) and volume.endswith(":ro")
                continue
            assert source in declared, (name, volume)
    assert "exports:/work/exports" in compose["services"]["trainer"]["volumes"]
    assert "exports:/models:ro" in compose["services"]["tf-serving"]["volumes"]
    assert "pgdata:/var/lib/postgresql/data" in compose["services"]["postgres"]["volumes"]


def test_published_ports_bind_loopback_unless_configured(compose):
    published = {}
    for name, service in compose["services"].items():
        for port in service.get("ports", []):
            assert port.startswith("${BIND_ADDRESS:-127.0.0.1}:"), (name, port)
            published[name] = port.rsplit(":", 2)[-2:]
    assert published == {
        "mlflow": ["5000", "5000"],
        "model-server": ["5001", "5001"],
        "tf-serving": ["8501", "8501"],
    }


def test_tracking_server_runs_mlflow_basic_auth_on_postgres_and_minio(compose):
    mlflow = compose["services"]["mlflow"]
    assert mlflow["entrypoint"] == ["mlflow", "server"]
    assert "--app-name=basic-auth" in mlflow["command"]
    assert "--artifacts-destination=s3://mlflow/artifacts" in mlflow["command"]
    env = mlflow["environment"]
    assert env["MLFLOW_BACKEND_STORE_URI"].startswith("postgresql://mlflow:${POSTGRES_PASSWORD:?")
    assert env["MLFLOW_S3_ENDPOINT_URL"] == "http://minio:9000"
    assert env["MLFLOW_AUTH_CONFIG_PATH"] == "/app/docker/mlflow-auth.ini"


def test_clients_sign_in_with_mlflows_own_variables(compose):
    for name in ("trainer", "model-server"):
        env = compose["services"][name]["environment"]
        assert env["MLFLOW_TRACKING_URI"] == "http://mlflow:5000"
        assert {"MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"} <= set(env)


def _environment_values(compose):
    for name, service in compose["services"].items():
        for key, value in (service.get("environment") or {}).items():
            yield name, key, str(value)


def test_every_secret_comes_from_a_required_variable_never_a_literal(compose):
    secrets = 0
    for name, key, value in _environment_values(compose):
        if SECRET.search(key):
            secrets += 1
            assert REQUIRED_VARIABLE.fullmatch(value), (name, key, value)
        # A URI's password too: postgresql://user:${VAR:?...}@host.
        for password in re.findall(r"://[^:/@]+:([^@]+)@", value):
            assert REQUIRED_VARIABLE.fullmatch(password), (name, key, value)
    assert secrets >= 8


def _tracked(folder):
    """The files git tracks under `folder` (not the user's own .env, not a
    __pycache__ a run left there); every plain file but those two where
    the tree is not a git checkout."""
    listed = subprocess.run(["git", "ls-files", "-z", "."], cwd=folder, capture_output=True, text=True)
    if listed.returncode == 0 and listed.stdout:
        return [name for name in listed.stdout.split("\0") if name]
    return [os.path.relpath(os.path.join(top, name), folder)
            for top, dirs, files in os.walk(folder) if "__pycache__" not in top.split(os.sep)
            for name in files if name != ".env"]


def test_no_tracked_file_in_docker_holds_a_secret_value():
    # [ \t]: a value on the same line (an empty one is not followed to the next).
    assignment = re.compile(r"^[ \t]*(\w*(?:PASSWORD|SECRET|KEY)\w*)[ \t]*[=:][ \t]*(\S+)", re.MULTILINE)
    for name in _tracked(DOCKER):
        with open(os.path.join(DOCKER, name)) as f:
            text = f.read()
        for key, value in assignment.findall(text):
            assert value.startswith("${") or value.startswith("#"), (name, key, value)
    example = open(os.path.join(DOCKER, ".env.example")).read()
    values = dict(
        line.split("=", 1) for line in example.splitlines() if "=" in line and not line.startswith("#")
    )
    assert values and all(v == "" for v in values.values()), values


def test_docker_env_is_ignored_by_git():
    out = subprocess.run(
        ["git", "check-ignore", "docker/.env"], cwd=ROOT, capture_output=True, text=True
    )
    assert out.returncode == 0, out


def test_compose_variables_are_all_in_env_example(compose):
    text = open(os.path.join(DOCKER, "compose.yaml")).read()
    required = set(re.findall(r"\$\{(\w+):\?", text))
    example = open(os.path.join(DOCKER, ".env.example")).read()
    assert required <= set(re.findall(r"^#?\s*(\w+)=", example, re.MULTILINE)), required


@pytest.mark.parametrize("name", ["Dockerfile.train", "Dockerfile.serve"])
def test_dockerfile_runs_as_a_non_root_user_after_installing(name):
    steps = dockerfile(name)
    ops = [op for op, _ in steps]
    users = [args for op, args in steps if op == "USER"]
    assert users and users[-1] not in ("root", "0"), users
    last_user = len(ops) - 1 - ops[::-1].index("USER")
    assert max(i for i, op in enumerate(ops) if op == "RUN") < last_user
    assert ops.index("ENTRYPOINT") > last_user


def test_train_image_is_tensorflows_cuda_image_of_the_tested_version():
    # The installed distribution's version, which is tf.__version__
    # (cli/test_startup.py) without TensorFlow's import (~7 CPU s).
    from importlib.metadata import version

    (base,) = [args for op, args in dockerfile("Dockerfile.train") if op == "FROM"]
    assert base == f"tensorflow/tensorflow:{version('tensorflow')}-gpu"


@pytest.mark.parametrize(
    "name, entrypoint, extra",
    [("Dockerfile.train", ["kg-train"], "service"), ("Dockerfile.serve", ["kg", "serve"], "service")],
)
def test_dockerfile_installs_the_service_and_enters_a_command_ci_runs(name, entrypoint, extra):
    import tomllib

    steps = dockerfile(name)
    installs = [args for op, args in steps if op == "RUN" and "pip install" in args]
    assert any(f"[{extra}," in args or f"[{extra}]" in args for args in installs), installs
    (entry,) = [json.loads(args) for op, args in steps if op == "ENTRYPOINT"]
    assert entry == entrypoint
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        scripts = tomllib.load(f)["project"]["scripts"]
    assert entry[0] in scripts


def test_serve_image_health_check_asks_ping_on_the_served_port():
    (check,) = [args for op, args in dockerfile("Dockerfile.serve") if op == "HEALTHCHECK"]
    assert "/ping" in check and "5001" in check


def test_model_server_command_is_a_valid_kg_serve_command_line(compose):
    from kg_service.cli import main as kg

    service = compose["services"]["model-server"]
    command = [re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", part) for part in service["command"]]
    # Parsed and type-checked by kg serve's own options, without serving.
    context = kg.serve.make_context("serve", command)
    assert context.params["model_uri"] == "models:/moons-gelu@champion"
    assert (context.params["host"], context.params["port"]) == ("0.0.0.0", 5001)


# --- The tracking server's command, for real. ------------------------------------
#
# Run as compose.yaml writes it: its entrypoint, command and environment,
# ${VAR:?} and ${VAR:-default} filled from a generated docker/.env. Swapped,
# because a local process has no PostgreSQL, MinIO or /app: the backend
# store (sqlite), the artifact root (a local folder), the auth config's path
# (the repository's copy, which the image copies to /app/docker), the working
# folder, and the address (127.0.0.1 on a free port instead of 0.0.0.0:5000).
# Clients send `Host: mlflow:5000` as the stack's containers do.

STACK_HOST = "mlflow:5000"
PROBE = "/api/2.0/mlflow/experiments/search?max_results=1"


@pytest.fixture(scope="module")
def dot_env():
    """A docker/.env as a user fills it: every value .env.example asks for."""
    return harness.generate_dot_env()


def tracking_server_command(compose, dot_env, folder, port, *, without=(), workers=None):
    """(argv, env, cwd) of compose's `mlflow` service, swapped for a local
    process as the section comment says; `without`: flags to leave out;
    `workers`: another --workers than compose's."""
    service = compose["services"]["mlflow"]
    entrypoint = [interpolate(part, dot_env) for part in service["entrypoint"]]
    assert entrypoint == ["mlflow", "server"]
    swaps = {
        "--host": "127.0.0.1",
        "--port": str(port),
        "--artifacts-destination": str(folder / "artifacts"),
    }
    if workers is not None:
        swaps["--workers"] = str(workers)
    argv = [os.path.join(servers.VENV_BIN, "mlflow"), "server"]
    for part in service["command"]:
        flag, _, value = interpolate(part, dot_env).partition("=")
        if flag in without:
            continue
        argv.append(f"{flag}={swaps.get(flag, value)}")
    env = {k: interpolate(v, dot_env) for k, v in service["environment"].items()}
    assert env["MLFLOW_BACKEND_STORE_URI"].startswith("postgresql://")
    env["MLFLOW_BACKEND_STORE_URI"] = f"sqlite:///{folder / 'mlflow.db'}"
    assert env["MLFLOW_AUTH_CONFIG_PATH"] == "/app/docker/mlflow-auth.ini"
    env["MLFLOW_AUTH_CONFIG_PATH"] = os.path.join(DOCKER, "mlflow-auth.ini")
    cwd = folder / service["working_dir"].strip("/")
    cwd.mkdir(parents=True, exist_ok=True)
    return argv, servers.server_env(**env), cwd


@contextlib.contextmanager
def tracking_server(compose, dot_env, folder, *, without=(), workers=None):
    """Compose's tracking server on 127.0.0.1; yields its http URI."""
    port = servers.free_port()
    argv, env, cwd = tracking_server_command(compose, dot_env, folder, port, without=without,
                                             workers=workers)
    log_path = folder / "mlflow-server.log"
    with open(log_path, "w") as log:
        # Its own process group: `mlflow server` runs uvicorn as a child.
        process = subprocess.Popen(
            argv, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    try:
        servers.wait_for_http(f"http://127.0.0.1:{port}/health", process, 300, log_path)
        yield f"http://127.0.0.1:{port}"
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, sig)
            try:
                process.wait(timeout=15)
                break
            except subprocess.TimeoutExpired:
                continue


@pytest.fixture(scope="module")
def stack_server(compose, dot_env, tmp_path_factory):
    folder = tmp_path_factory.mktemp("stack-mlflow")
    with tracking_server(compose, dot_env, folder) as uri:
        yield uri, folder


def call(uri, method, path, host, credentials=None, body=None):
    """(status, body) of `method path`, sent with the Host header `host`."""
    parts = urllib.parse.urlsplit(uri)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    headers = {"Host": host, "Content-Type": "application/json"}
    if credentials:
        token = base64.b64encode(":".join(credentials).encode()).decode()
        headers["Authorization"] = f"Basic {token}"
    try:
        connection.request(method, path, body=json.dumps(body) if body else None, headers=headers)
        response = connection.getresponse()
        return response.status, response.read().decode("utf-8", "replace")
    finally:
        connection.close()


def get(uri, path, host, credentials=None):
    return call(uri, "GET", path, host, credentials)


def admin(dot_env):
    return dot_env["MLFLOW_TRACKING_USERNAME"], dot_env["MLFLOW_TRACKING_PASSWORD"]


def test_tracking_server_from_composes_command_answers_the_stacks_host_name(
    stack_server, dot_env
):
    uri, folder = stack_server
    status, body = get(uri, PROBE, STACK_HOST, admin(dot_env))
    assert status == 200, body
    assert "experiments" in json.loads(body)
    # The basic-auth app is on: the same call unsigned is 401, not 403.
    assert get(uri, PROBE, STACK_HOST)[0] == 401
    assert (folder / "auth" / "basic_auth.db").exists()  # mlflow-auth.ini's relative store


def test_tracking_servers_health_check_passes_as_compose_runs_it(compose, stack_server):
    uri, _ = stack_server
    assert healthcheck(compose, uri).returncode == 0


def healthcheck(compose, uri):
    """compose's `mlflow` health check, its port swapped for the test's."""
    test = compose["services"]["mlflow"]["healthcheck"]["test"]
    assert test[:2] == ["CMD", "python"]
    argv = [sys.executable] + [a.replace("127.0.0.1:5000", uri.split("//")[1]) for a in test[2:]]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def test_basic_auth_tracking_server_of_compose_admits_only_signed_in_clients(
    stack_server, dot_env
):
    from click.testing import CliRunner

    from kg_service.cli import main as kg

    uri, _ = stack_server
    username, password = admin(dot_env)
    signed_in = CliRunner().invoke(
        kg.main, ["models", "--tracking-uri", uri],
        env={"MLFLOW_TRACKING_USERNAME": username, "MLFLOW_TRACKING_PASSWORD": password},
    )  # fmt: skip
    assert signed_in.exit_code == 0, signed_in.output
    assert "No registered models" in signed_in.stdout
    anonymous = CliRunner().invoke(
        kg.main, ["models", "--tracking-uri", uri],
        env={"MLFLOW_TRACKING_USERNAME": None, "MLFLOW_TRACKING_PASSWORD": None},
    )  # fmt: skip
    assert anonymous.exit_code == 2, anonymous.output
    assert "refused the request (HTTP 401, not signed in)" in anonymous.stderr
    assert "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD" in anonymous.stderr


def test_tracking_server_caches_a_checked_password_and_still_refuses_a_wrong_one(
    stack_server, dot_env, monkeypatch
):
    """mlflow-auth.ini turns on MLflow's credential cache (each check is a
    scrypt hash, ~0.1 CPU s; the stack's server spent most of its CPU
    there): read by MLflow's own parser, and a wrong password is still
    refused right after the right one was accepted."""
    from mlflow.server.auth.config import read_auth_config

    monkeypatch.setenv("MLFLOW_AUTH_CONFIG_PATH", os.path.join(DOCKER, "mlflow-auth.ini"))
    config = read_auth_config()
    assert 0 < config.auth_cache_ttl_seconds <= 60, config
    assert config.authorization_function == "mlflow.server.auth:authenticate_request_basic_auth"
    uri, _ = stack_server
    username, password = admin(dot_env)
    assert get(uri, PROBE, STACK_HOST, (username, password))[0] == 200
    assert get(uri, PROBE, STACK_HOST, (username, password + "x"))[0] == 401
    assert get(uri, PROBE, STACK_HOST, (username, password))[0] == 200


def test_without_allowed_hosts_the_preflight_names_the_host_check_and_exits_2(
    compose, dot_env, tmp_path
):
    from mlflow.server.security_utils import INVALID_HOST_MSG

    # One worker: the host check is each worker's own, and compose's
    # --workers=2 runs in `stack_server` (issue 17: a worker less is an
    # MLflow server start-up less).
    with tracking_server(compose, dot_env, tmp_path, without={"--allowed-hosts"},
                         workers=1) as uri:
        # The server's own verdict on the stack's Host name, and the reason
        # /health alone hid it.
        assert get(uri, PROBE, STACK_HOST) == (403, INVALID_HOST_MSG)
        assert get(uri, "/health", STACK_HOST)[0] == 200
        assert healthcheck(compose, uri).returncode != 0
        # 127.1 reaches 127.0.0.1 but is no name MLflow trusts by default,
        # as mlflow:5000 is none: kg-train sends that Host header.
        port = uri.rsplit(":", 1)[1]
        cwd = tmp_path / "cwd"
        cwd.mkdir()
        result = subprocess.run(
            [sys.executable, "-m", "kg_service.cli.train", "--config",
             os.path.join(ROOT, "configs", "tiny.yaml"), "--tracking-uri", f"http://127.1:{port}"],
            cwd=cwd, env=servers.server_env(PYTHONPATH=ROOT, MLFLOW_TRACKING_USERNAME=admin(dot_env)[0],
                                            MLFLOW_TRACKING_PASSWORD=admin(dot_env)[1]),
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    message = result.stderr.strip()
    assert "Traceback" not in message and "\n" not in message, message
    assert f"refuses the Host header '127.1:{port}'" in message
    assert "Invalid Host header" in message and f"--allowed-hosts 127.1:{port}" in message
    assert list(cwd.iterdir()) == []


# --- Least privilege. -------------------------------------------------------------


def users_job_env(compose, dot_env, uri):
    """The environment of compose's `mlflow-users` job, the server's URI
    swapped for the local server's."""
    service = compose["services"]["mlflow-users"]
    assert service["entrypoint"] == ["python", "/app/docker/mlflow_users.py"]
    assert service["depends_on"]["mlflow"]["condition"] == "service_healthy"
    env = {k: interpolate(v, dot_env) for k, v in service["environment"].items()}
    assert env["MLFLOW_TRACKING_URI"] == "http://mlflow:5000"
    env["MLFLOW_TRACKING_URI"] = uri
    return env


def run_users_job(compose, dot_env, uri):
    """compose's `mlflow-users` job, its script and the server's URI swapped
    for the repository's copy and the local server."""
    return subprocess.run(
        [sys.executable, os.path.join(DOCKER, "mlflow_users.py")],
        env=servers.server_env(**users_job_env(compose, dot_env, uri)), capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip


def run_users_job_here(compose, dot_env, uri, monkeypatch, capsys):
    """The same job's script run in this process (its `__main__`): what it
    prints. For a second run, whose process start-up (MLflow's import, ~4
    CPU s) the first run's process shows already (issue 17)."""
    import runpy

    with monkeypatch.context() as patch:
        for key, value in users_job_env(compose, dot_env, uri).items():
            patch.setenv(key, value)
        capsys.readouterr()
        runpy.run_path(os.path.join(DOCKER, "mlflow_users.py"), run_name="__main__")
        return capsys.readouterr().out


def test_users_job_makes_an_account_that_reads_what_the_admin_wrote_and_cannot_change_it(
    compose, dot_env, stack_server, monkeypatch, capsys
):
    uri, _ = stack_server
    reader = dot_env["MLFLOW_READER_USERNAME"], dot_env["MLFLOW_READER_PASSWORD"]
    first = run_users_job(compose, dot_env, uri)
    assert first.returncode == 0, first.stderr[-2000:]
    assert f"read-only user {reader[0]!r} created" in first.stdout
    # Every `compose up` runs it again.
    again = run_users_job_here(compose, dot_env, uri, monkeypatch, capsys)
    assert f"read-only user {reader[0]!r} updated" in again
    # What the admin (kg-train) writes, the reader may read and not change.
    api = "/api/2.0/mlflow"
    status, body = call(uri, "POST", f"{api}/experiments/create", STACK_HOST, admin(dot_env),
                        {"name": "least-privilege"})  # fmt: skip
    assert status == 200, body
    experiment_id = json.loads(body)["experiment_id"]
    status, body = call(uri, "POST", f"{api}/registered-models/create", STACK_HOST, admin(dot_env),
                        {"name": "lp-gelu"})  # fmt: skip
    assert status == 200, body
    assert get(uri, f"{api}/experiments/get?experiment_id={experiment_id}", STACK_HOST, reader)[0] == 200
    assert get(uri, f"{api}/registered-models/get?name=lp-gelu", STACK_HOST, reader)[0] == 200
    # MLflow lets any signed-in user create an experiment or model of its
    # own; what others wrote stays theirs.
    for path, body in [
        ("runs/create", {"experiment_id": experiment_id}),
        ("experiments/delete", {"experiment_id": experiment_id}),
        ("registered-models/update", {"name": "lp-gelu", "description": "x"}),
        ("registered-models/delete", {"name": "lp-gelu"}),
        ("users/create", {"username": "x", "password": "x" * 16}),
    ]:
        status, answer = call(uri, "POST", f"{api}/{path}", STACK_HOST, reader, body)
        assert status == 403, (path, status, answer)


def test_users_job_refuses_to_demote_the_admin_with_exit_2(compose, dot_env, stack_server):
    uri, _ = stack_server
    same = dict(dot_env, MLFLOW_READER_USERNAME=dot_env["MLFLOW_TRACKING_USERNAME"])
    result = run_users_job(compose, same, uri)
    assert result.returncode == 2, result.stderr
    assert "MLFLOW_READER_USERNAME is the admin's name" in result.stderr
    assert "Traceback" not in result.stderr


def test_model_server_signs_in_read_only_and_takes_its_token_from_a_secret(compose):
    service = compose["services"]["model-server"]
    env = service["environment"]
    assert env["MLFLOW_TRACKING_USERNAME"].startswith("${MLFLOW_READER_USERNAME:?")
    assert env["MLFLOW_TRACKING_PASSWORD"].startswith("${MLFLOW_READER_PASSWORD:?")
    assert service["depends_on"]["mlflow-users"]["condition"] == "service_completed_successfully"
    # The token: a docker secret from docker/.env, mounted where
    # KG_SERVE_TOKEN_FILE points; never a value in the environment.
    assert service["secrets"] == ["kg-serve-token"]
    assert env["KG_SERVE_TOKEN_FILE"] == "/run/secrets/kg-serve-token"
    assert compose["secrets"]["kg-serve-token"] == {"environment": "KG_SERVE_TOKEN"}
    assert not any("TOKEN" in k for k in env if k != "KG_SERVE_TOKEN_FILE")
    example = open(os.path.join(DOCKER, ".env.example")).read()
    assert re.search(r"^KG_SERVE_TOKEN=$", example, re.MULTILINE)
    # Its health check asks /ping, which the token leaves open.
    assert "/ping" in " ".join(service["healthcheck"]["test"])


def test_mlflow_reaches_minio_as_its_own_user_limited_to_the_artifact_bucket(compose):
    services = compose["services"]
    mlflow_env = services["mlflow"]["environment"]
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        assert "MINIO_ROOT" not in mlflow_env[key], (key, mlflow_env[key])
    assert mlflow_env["AWS_ACCESS_KEY_ID"].startswith("${MLFLOW_S3_ACCESS_KEY:?")
    assert mlflow_env["AWS_SECRET_ACCESS_KEY"].startswith("${MLFLOW_S3_SECRET_KEY:?")
    # The bucket job makes that user and attaches a policy for one bucket.
    job = services["minio-bucket"]
    (script,) = job["command"]
    steps = [l.strip() for l in script.replace("\\\n", " ").splitlines() if l.strip()]
    steps = [l for l in steps if not l.startswith("#")]
    assert 'mc admin user add stack "$$MLFLOW_S3_ACCESS_KEY" "$$MLFLOW_S3_SECRET_KEY"' in steps
    assert "mc admin policy create stack mlflow-artifacts /policy/mlflow-artifacts.json" in steps
    assert any("mc admin policy attach stack mlflow-artifacts --user" in l for l in steps)
    assert "./minio-mlflow-policy.json:/policy/mlflow-artifacts.json:ro" in job["volumes"]
    bucket = next(
        a.split("=", 1)[1] for a in services["mlflow"]["command"]
        if a.startswith("--artifacts-destination=")
    ).split("/")[2]  # fmt: skip
    with open(os.path.join(DOCKER, "minio-mlflow-policy.json")) as f:
        policy = json.load(f)
    resources = {r for s in policy["Statement"] for r in s["Resource"]}
    assert resources == {f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"}
    actions = {a for s in policy["Statement"] for a in s["Action"]}
    assert not any(a.startswith("admin:") or a == "s3:*" for a in actions), actions


def test_third_party_images_are_pinned_by_digest_or_say_why_not():
    text = open(os.path.join(DOCKER, "compose.yaml")).read()
    ours = ("kg-serve:", "kg-train:")
    for line in re.findall(r"^\s*image:.*$", text, re.MULTILINE):
        if any(o in line for o in ours):
            continue
        assert "@sha256:" in line or "# digest:" in line, line
    assert "no image\n# registry could be reached" in text
    for name in ("Dockerfile.train", "Dockerfile.serve"):
        lines = open(os.path.join(DOCKER, name)).read().splitlines()
        index = next(i for i, l in enumerate(lines) if l.startswith("FROM "))
        assert "@sha256:" in lines[index] or "not digest" in lines[index - 1], name


def test_mlflow_telemetry_is_off_in_every_container_unless_the_user_says(compose):
    for name in ("mlflow", "mlflow-users", "trainer", "model-server"):
        env = compose["services"][name]["environment"]
        assert interpolate(env["MLFLOW_DISABLE_TELEMETRY"], {}) == "true", name
        assert interpolate(env["DO_NOT_TRACK"], {}) == "1", name
        assert interpolate(env["MLFLOW_DISABLE_TELEMETRY"], {"MLFLOW_DISABLE_TELEMETRY": "false"}) == "false"
