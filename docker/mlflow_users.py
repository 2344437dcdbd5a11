"""The stack's read-only MLflow account, made through MLflow's auth REST API.

compose.yaml's one-shot `mlflow-users` service runs this as the admin
(MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD) once the tracking
server is healthy. The model server signs in as MLFLOW_READER_USERNAME:
an ordinary user, who reads every experiment and model by mlflow-auth.ini's
`default_permission = READ` and may change none of them (no EDIT or MANAGE
is granted; like any MLflow user it could create ones of its own). Run again,
it sets the password from docker/.env and clears an admin flag, so a changed
.env takes effect on the next `compose up`.

    python docker/mlflow_users.py     # exit 0, or 2 with one paragraph
"""

import os
import sys


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
    # MLflow's import is most of this script's time (~4 CPU s): after the
    # check above, so a refused .env is refused at once.
    from mlflow.exceptions import MlflowException
    from mlflow.server import get_app_client

    client = get_app_client("basic-auth", tracking_uri=uri)
    try:
        client.create_user(name, password)
        verb = "created"
    except MlflowException as error:
        if error.error_code != "RESOURCE_ALREADY_EXISTS":
            raise
        client.update_user_password(name, password)
        client.update_user_admin(name, False)
        verb = "updated"
    user = client.get_user(name)
    assert not user.is_admin, user
    print(f"mlflow-users: read-only user {name!r} {verb} on {uri}")


if __name__ == "__main__":
    main()
