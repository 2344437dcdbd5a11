"""Opening MLflow: the module with its chatter quieted, the environment its
HTTP client reads, the lock around a new sqlite store, and what a store's
failure means in words.

The one place kg_service imports `mlflow` for tracking and serving (the
pyfunc model files it logs import it themselves).
"""

import contextlib
import difflib
import fcntl
import logging
import os
import pathlib
import re
import urllib.parse

from kg_service import redact
from kg_service.errors import sentence
from kg_service.tracking import destinations
from kg_service.tracking import empty_store


def import_mlflow():
    """The `mlflow` module, its INFO logging and per-try tracebacks off.

    Imported here, on first use, not at module level: `import mlflow`
    takes seconds, and `kg --help` or a config error must not wait for it.
    """
    import mlflow  # MLflow: seconds, see the docstring

    # MLflow's INFO chatter ("View run at...", "Created version") would
    # break the progress display; warnings and errors still show.
    for name in ("mlflow", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)
    # It logs a traceback for every database error before raising it as an
    # MlflowException; a locked sqlite file retried here would print one
    # per try. The exception itself still carries the message.
    logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)
    return mlflow


def quiet_downloads():
    """MLflow's progress bar per artifact download off, for this process.

    Reading a model or a summary back draws a bar on stderr per download:
    noise beside kg's own progress display, tables and printed
    predictions. A user who set MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR keeps
    their value.
    """
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")


@contextlib.contextmanager
def environ_defaults(**values):
    """Sets environment variables the user has not set, for a block."""
    added = {k: v for k, v in values.items() if k not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)


@contextlib.contextmanager
def sqlite_setup_lock(tracking_uri):
    """Serializes opening a sqlite store among kg-train processes.

    Two sweeps started at once on a new sqlite file both ran MLflow's
    schema migration, and the second failed ("duplicate column name",
    measured); two creating the same experiment race the same way. The
    lock (an flock on `<db>.lock`) covers only store setup and
    get-or-create of the experiment; later writes are sqlite's own
    transactions. A new file starts as a copy of an empty migrated store
    (`empty_store.place`), made under the lock like MLflow's migration.
    """
    prefix = "sqlite:///"
    if not tracking_uri.startswith(prefix):
        yield
        return
    db = pathlib.Path(tracking_uri[len(prefix):])
    # Its folder first: pre-flight found it can be made (`destinations.check_store`),
    # and nothing else makes it (the lock's open failed on it).
    db.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{db}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            database = destinations.sqlite_file(tracking_uri)  # None: in memory
            if database is not None:
                empty_store.place(database)
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def store_problem(uri, error):
    """Why the store at `uri` could not be used (`error`), in words a user
    can act on."""
    # MLflow on first use (see import_mlflow): serving imports this module.
    from mlflow.tracking.registry import UnsupportedModelRegistryStoreURIException

    uri = redact.uri(uri)
    if isinstance(error, UnsupportedModelRegistryStoreURIException):
        scheme = urllib.parse.urlsplit(uri).scheme
        known = ", ".join(f"{s}:" for s in error.supported_uri_schemes if s)
        return (
            f"cannot use the MLflow tracking store {uri!r}: MLflow does not know "
            f"its scheme {scheme + ':'!r} (it knows {known} and plain folder "
            f"paths). {destinations.URI_HELP}"
        )
    refused = re.search(r"error code (401|403)\b", str(error))
    if refused:
        return (
            f"the MLflow tracking server {uri} refused the request (HTTP "
            f"{refused.group(1)}, {'not signed in' if refused.group(1) == '401' else 'no permission'}): "
            f"set MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD to an account "
            f"of its basic-auth app{'' if refused.group(1) == '401' else ' that may do this'}."
        )
    return (
        f"cannot use the MLflow tracking store {uri!r}: "
        f"{sentence(redact.text(without_sql(error)))} {destinations.URI_HELP}"
    )


def without_sql(error):
    """`Type: message` of a store error, without the SQL statement, its
    parameters and the background link SQLAlchemy appends (issue 30 §16:
    a corrupt store's message printed `[SQL: SELECT name FROM ...]`). A
    driver error (SQLAlchemy's `DBAPIError`) is said in the driver's words."""
    original = getattr(error, "orig", None)
    if isinstance(original, BaseException):
        error = original
    text = re.sub(r"\s*\[(SQL|parameters): .*?\](?=\s|$)", "", str(error), flags=re.DOTALL)
    text = re.sub(r"\s*\(Background on this error at: [^)]*\)", "", text)
    return f"{type(error).__name__}: {text.strip()}"


def did_you_mean(name, known):
    """' Did you mean 'x'?' for the closest of `known` to `name`, or ''."""
    close = difflib.get_close_matches(name, known, n=1)
    return f" Did you mean {close[0]!r}?" if close else ""
