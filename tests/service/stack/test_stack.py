"""The team stack of docker/compose.yaml, run for real (issue 21).

One test, in the order a team meets the stack: the stores and the tracking
server come up from compose's own lines, the trainer runs a smoke sweep as
`docker compose run --rm trainer --config /app/configs/tiny.yaml --smoke`
would, the tracking server is stopped under it and comes back, the model
server serves what it registered to callers with the token, and comes back
from a restart serving the same alias. Every client reaches the services by
their compose names through the harness's proxy (Host: mlflow:5000), so
MLflow's host check sees what it sees in the stack.
"""

import base64
import json
import urllib.error
import urllib.request

import boto3
import botocore.config
import pytest

from tests.service.stack import harness

# configs/tiny.yaml's experiment and `tiny-{activation}` models, as --smoke names them.
EXPERIMENT = "kg-smoke"
MODEL = "tiny-gelu-smoke"
API = "/api/2.0/mlflow"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    folder = tmp_path_factory.mktemp("stack")
    # One tracking-server worker (compose's default is two): each worker is
    # a process that loads the whole server, ~4 CPU s a start, and nothing
    # here needs a second (MLflow makes the auth database and the admin in
    # the parent before it spawns workers). Issue 17.
    variables = harness.generate_dot_env(MODEL_NAME=MODEL, MLFLOW_WORKERS="1")
    with harness.Stack(folder, variables) as stack:
        yield stack
        # Where the time goes (pytest -s shows it).
        print("".join(f"\n  {what}: {seconds:.1f} s" for what, seconds in stack.timings))


def _call(stack, method, url, headers=None, body=None):
    """(status, body) of a request through the stack's network."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with stack.opener().open(request, timeout=120) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def _basic(user, password):
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def _client(stack, *args):
    """`kg ARGS` as the model server's read-only account, inside the stack;
    its Popen (output piped)."""
    cwd = stack.folder / "reader"
    cwd.mkdir(exist_ok=True)
    return stack.client("model-server", ["kg", *args], cwd)


def _bucket(stack):
    """Every key in the artifact bucket, listed with MinIO's root keys."""
    variables = stack.variables
    s3 = boto3.client(
        "s3", endpoint_url=stack.url("minio"), region_name="us-east-1",
        aws_access_key_id=variables["MINIO_ROOT_USER"],
        aws_secret_access_key=variables["MINIO_ROOT_PASSWORD"],
        config=botocore.config.Config(proxies={"http": stack.proxy.url}),
    )  # fmt: skip
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket="mlflow")
    return [item["Key"] for page in pages for item in page.get("Contents", [])]


def _predict(stack, token=None):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return _call(stack, "POST", stack.url("model-server") + "/invocations", headers,
                 {"inputs": [[0.5, -0.2], [-1.0, 0.8]]})  # fmt: skip


def test_the_stack_trains_registers_serves_and_comes_back_from_restarts(stack):
    variables = stack.variables
    admin = _basic(variables["MLFLOW_TRACKING_USERNAME"], variables["MLFLOW_TRACKING_PASSWORD"])
    reader = _basic(variables["MLFLOW_READER_USERNAME"], variables["MLFLOW_READER_PASSWORD"])
    # As `docker compose --profile serve up` would: postgres, minio, the
    # minio-bucket job, mlflow, the mlflow-users job.
    stack.up("mlflow-users")

    # MLflow's host check is live: a name outside --allowed-hosts is refused.
    stack.proxy.routes["mlflow.example.org:5000"] = stack.local_port("mlflow")
    probe = f"{API}/experiments/search?max_results=1"
    assert _call(stack, "GET", "http://mlflow.example.org:5000" + probe, admin)[0] == 403
    assert _call(stack, "GET", stack.url("mlflow") + probe, admin)[0] == 200

    # The trainer. The tracking server is stopped once its first member
    # finished (that runs/update held at the proxy meanwhile), then started
    # again: kg-train retries through the outage.
    gate = stack.proxy.hold(
        lambda host, method, path, body: host == "mlflow:5000"
        and path.endswith("/runs/update") and b"FINISHED" in body
    )  # fmt: skip
    trainer = stack.job("trainer", ["--config", "/app/configs/tiny.yaml", "--smoke"])
    reached = gate.reached.wait(timeout=400)
    if not reached:
        trainer.kill()
    assert reached, trainer.communicate()[1][-3000:]
    stack.stop("mlflow")
    gate.release()
    stack.start("mlflow")
    _, stderr = trainer.communicate(timeout=600)
    assert trainer.returncode == 0, stderr[-3000:]
    retries = [line for line in stderr.splitlines() if "unreachable while" in line]
    assert retries and "502" in retries[0], stderr[-3000:]
    assert "tracking store http://mlflow:5000 is back after" in stderr

    # Artifacts in the bucket, through the tracking server: none on its disk.
    keys = _bucket(stack)
    assert any(k.startswith("artifacts/") and k.endswith("/MLmodel") for k in keys), keys
    assert not list(stack.folder.rglob("mlartifacts")), "artifacts written to a local folder"
    # The exports volume, as tf-serving (not run here) would mount it:
    # /models/$MODEL_NAME/<version>/saved_model.pb.
    models_volume = stack.mounts("tf-serving")["/models"]
    assert list(models_volume.glob(f"{MODEL}/*/saved_model.pb")), sorted(models_volume.rglob("*"))[:20]

    # The registry and the report, read as the model server's read-only
    # account. One at a time, and not beside the model server's start:
    # kg's first calls to a store wait 5 s for an answer (SERVER_TIMEOUT),
    # which a tracking server starved of CPU has missed here.
    models = _client(stack, "models", MODEL, "--format", "json")
    stdout, stderr = models.communicate(timeout=600)
    assert models.returncode == 0, stderr[-3000:]
    (version,) = json.loads(stdout)
    assert "champion" in version["aliases"], version
    report = _client(stack, "report", "--experiment", EXPERIMENT, "--quiet")
    stdout, stderr = report.communicate(timeout=600)
    assert report.returncode == 0, stderr[-3000:]
    assert "gelu" in stdout and "relu" in stdout, stdout[-3000:]
    # ... an account that may not register a version or move the alias,
    # which the admin (kg-train's account) may: the same alias, set again.
    source = f"models:/{MODEL}/{version['version']}"
    alias = {"name": MODEL, "alias": "champion", "version": str(version["version"])}
    for path, body in [("model-versions/create", {"name": MODEL, "source": source}),
                       ("registered-models/alias", alias)]:  # fmt: skip
        status, answer = _call(stack, "POST", stack.url("mlflow") + f"{API}/{path}", reader, body)
        assert status == 403, (path, status, answer)
    assert _call(stack, "POST", stack.url("mlflow") + f"{API}/registered-models/alias", admin, alias)[0] == 200

    # The model server answers callers with the token; restarted, it
    # serves the same alias.
    stack.up("model-server")
    assert _predict(stack)[0] == 401
    status, first = _predict(stack, variables["KG_SERVE_TOKEN"])
    assert status == 200, first
    assert len(json.loads(first)["predictions"]) == 2
    stack.restart("model-server")
    assert _predict(stack, variables["KG_SERVE_TOKEN"]) == (200, first)
    assert _predict(stack)[0] == 401

    # Every service of compose.yaml, from its own line.
    started = {line.service for line in stack.started}
    assert started == set(stack.services) - set(harness.NOT_RUNNABLE), started
    for line in stack.started:
        service = stack.services[line.service]
        if line.service != "trainer" and "entrypoint" in service:
            written = [*service["entrypoint"], *service.get("command", [])]
            assert list(line.compose_argv) == [harness.interpolate(p, variables) for p in written]
    (tracking,) = {line.argv for line in stack.started if line.service == "mlflow"}
    assert "--workers=1" in tracking, tracking
    (served,) = {line.argv for line in stack.started if line.service == "model-server"}
    assert f"models:/{MODEL}@champion" in served and "--host=127.0.0.1" in served
