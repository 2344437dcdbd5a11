"""docker/mlflow_users.py's HTTP client on its own (issue 17 took MLflow's
import out of it): the real server's created and updated paths are
test_docker.py's test_users_job_* (a basic-auth `mlflow server`) and the
stack test's `mlflow-users` job; here, in-process against a stdlib HTTP
server that answers as MLflow's auth app does, the paths that server does
not take: a transient 503 is retried, a refusal is one message and exit 1.
"""

import http.server
import importlib.util
import json
import threading

import pytest

from tests.service.stack import harness


@pytest.fixture
def users_job(monkeypatch):
    spec = importlib.util.spec_from_file_location("mlflow_users", harness.DOCKER / "mlflow_users.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "RETRY_WAITS", (0, 0))
    for key, value in {
        "MLFLOW_TRACKING_USERNAME": "admin", "MLFLOW_TRACKING_PASSWORD": "secret",
        "MLFLOW_READER_USERNAME": "reader", "MLFLOW_READER_PASSWORD": "pw",
    }.items():  # fmt: skip
        monkeypatch.setenv(key, value)
    for key in ("HTTP_PROXY", "http_proxy"):
        monkeypatch.delenv(key, raising=False)
    return module


@pytest.fixture
def auth_server(monkeypatch):
    """Answers each request with the next of `answers` (status, JSON body);
    records (method, path, body, Authorization)."""
    answers, seen = [], []

    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            seen.append((self.command, self.path, body, self.headers.get("Authorization")))
            status, answer = answers.pop(0)
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = _answer

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{server.server_port}")
    yield answers, seen
    server.shutdown()
    server.server_close()


USER = {"user": {"id": 2, "username": "reader", "is_admin": False}}
EXISTS = {"error_code": "RESOURCE_ALREADY_EXISTS", "message": "User 'reader' already exists."}


def test_a_503_is_retried_and_an_existing_user_is_updated_and_demoted(users_job, auth_server, capsys):
    answers, seen = auth_server
    answers += [(503, {}), (400, EXISTS), (200, {}), (200, {}), (200, USER)]
    users_job.main()
    assert "read-only user 'reader' updated" in capsys.readouterr().out
    api = "/api/2.0/mlflow/users"
    assert [(method, path, body) for method, path, body, _ in seen] == [
        ("POST", f"{api}/create", {"username": "reader", "password": "pw"}),
        ("POST", f"{api}/create", {"username": "reader", "password": "pw"}),
        ("PATCH", f"{api}/update-password", {"username": "reader", "password": "pw"}),
        ("PATCH", f"{api}/update-admin", {"username": "reader", "is_admin": False}),
        ("GET", f"{api}/get?username=reader", None),
    ]
    assert {auth for *_, auth in seen} == {"Basic YWRtaW46c2VjcmV0"}  # admin:secret


def test_a_refusal_is_one_message_and_exit_1(users_job, auth_server, capsys):
    answers, _ = auth_server
    answers += [(403, {"error_code": "PERMISSION_DENIED", "message": "Permission denied"})]
    with pytest.raises(SystemExit) as exited:
        users_job.main()
    assert exited.value.code == 1
    message = capsys.readouterr().err.strip()
    assert "\n" not in message and "Traceback" not in message, message
    assert "refused the read-only account 'reader': HTTP 403 PERMISSION_DENIED: Permission denied" in message
