"""The stack's read-only MLflow account, made through MLflow's auth REST API.

compose.yaml's one-shot `mlflow-users` service runs this as the admin
(MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD) once the tracking
server is healthy. The model server signs in as MLFLOW_READER_USERNAME:
an ordinary user, who reads every experiment and model by mlflow-auth.ini's
`default_permission = READ` and may change none of them (no EDIT or MANAGE
is granted; like any MLflow user it could create ones of its own). Run again,
it sets the password from docker/.env and clears an admin flag, so a changed
.env takes effect on the next `compose up`.

It speaks that REST API with the standard library, as MLflow's own
AuthServiceClient does (the same endpoints, basic auth from the same
variables, HTTP_PROXY/NO_PROXY honoured): MLflow's import was ~4 CPU s of
this one-shot job's ~4.5 on every `compose up` (issue 17). A transient
failure (refused connection, 5xx) is retried for ~30 s, as MLflow's client
retries; any other refusal exits 1 naming the call and the server's answer.

    python docker/mlflow_users.py     # exit 0, or 2/1 with one paragraph
"""

import base64
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

USERS = "/api/2.0/mlflow/users"  # mlflow.server.auth.routes' CREATE_USER, GET_USER, ...
RETRY_WAITS = (1, 2, 4, 8, 16)  # seconds; MLflow's client backs off likewise


class Refused(Exception):
    def __init__(self, status, error_code, message):
        super().__init__(f"HTTP {status} {error_code or ''}: {message}".strip())
        self.status, self.error_code = status, error_code


def _call(uri, method, path, body=None, query=None):
    """The JSON answer of one auth REST call as the admin; Refused on a 4xx."""
    url = uri.rstrip("/") + USERS + path
    if query:
        url += "?" + urllib.parse.urlencode(query)
    data = json.dumps(body).encode() if body is not None else None
    account = f"{os.environ['MLFLOW_TRACKING_USERNAME']}:{os.environ['MLFLOW_TRACKING_PASSWORD']}"
    headers = {"Authorization": "Basic " + base64.b64encode(account.encode()).decode()}
    if data is not None:
        headers["Content-Type"] = "application/json"
    for wait in (*RETRY_WAITS, None):
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                text = response.read()
            return json.loads(text) if text else {}
        except urllib.error.HTTPError as error:
            text = error.read().decode(errors="replace")
            if error.code < 500 or wait is None:
                try:
                    answer = json.loads(text)
                except ValueError:
                    answer = {"message": text.strip()}
                raise Refused(error.code, answer.get("error_code"), answer.get("message", text)) from None
        except OSError:  # refused, reset, timed out: the server (re)starting
            if wait is None:
                raise
        time.sleep(wait)


def main():
    uri = os.environ["MLFLOW_TRACKING_URI"]
    name = os.environ["MLFLOW_READER_USERNAME"]
    password = os.environ["MLFLOW_READER_PASSWORD"]
    if name == os.environ.get("MLFLOW_TRACKING_USERNAME"):
        print(
            "mlflow-users: MLFLOW_READER_USERNAME is the admin's name; give the "
            "model server an account of its own in docker/.env.",
            file=sys.stderr,
        )
        sys.exit(2)
    try:
        try:
            _call(uri, "POST", "/create", {"username": name, "password": password})
            verb = "created"
        except Refused as error:
            if error.error_code != "RESOURCE_ALREADY_EXISTS":
                raise
            _call(uri, "PATCH", "/update-password", {"username": name, "password": password})
            _call(uri, "PATCH", "/update-admin", {"username": name, "is_admin": False})
            verb = "updated"
        user = _call(uri, "GET", "/get", query={"username": name})["user"]
    except (Refused, OSError) as error:
        print(f"mlflow-users: {uri} refused the read-only account {name!r}: {error}", file=sys.stderr)
        sys.exit(1)
    assert not user["is_admin"], user
    print(f"mlflow-users: read-only user {name!r} {verb} on {uri}")


if __name__ == "__main__":
    main()
