"""Pre-flight checks of where a run writes: folders and the tracking store.

A report or export folder that is a file, runs through a file or cannot be
written; a sqlite store whose folder is such a path; a tracking server
that does not answer: each is found here, in a second, before TensorFlow
is imported, before training and before anything is written. (Before,
the `mkdir` after training found them, or urllib3 retried for minutes.)
Standard library only (plus SQLAlchemy's URL parser for sqlite URIs).
"""

import base64
import difflib
import http.client
import os
import pathlib
import socket
import ssl
import tempfile
import urllib.error
import urllib.parse
import urllib.request

from kg_service import redact
from kg_service.errors import ServiceError

# Seconds to wait for a tracking server's first answer (the pre-flight and
# the first calls, which MLflow does not retry here). A refused connection
# fails at once whatever this is; 5 s failed against compose's stack run for
# real, with a model server starting beside a busy tracking server
# (tests/service/stack, issue 21).
SERVER_TIMEOUT = 30
# Cheap, read-only, and behind every check MLflow's server makes.
PROBE_PATH = "/api/2.0/mlflow/experiments/search?max_results=1"
# The start of MLflow's answer to a Host header outside --allowed-hosts
# (mlflow/server/security_utils.py INVALID_HOST_MSG).
HOST_CHECK_REFUSAL = "Invalid Host header"
URI_HELP = (
    "Check --tracking-uri, MLFLOW_TRACKING_URI or tracking.uri in the config "
    "(e.g. sqlite:///mlflow.db for a local file, or http://127.0.0.1:5000 for "
    "an MLflow server); nothing was written."
)


def writable_dir_problem(path):
    """Why `path` cannot be used (or created) as a writable folder, or None.

    Walks from `path` up to its first existing ancestor: every missing
    level can then be created if that ancestor is a writable folder.

    Example:
        >>> writable_dir_problem("/etc/hostname/reports")
        '/etc/hostname is a file, not a folder'
    """
    path = pathlib.Path(os.path.abspath(os.path.expanduser(str(path))))
    for candidate in (path, *path.parents):
        if candidate.exists():  # follows symbolic links
            if not candidate.is_dir():
                return f"{candidate} is a file, not a folder"
            if not os.access(candidate, os.W_OK | os.X_OK):
                return f"{candidate} is not writable by this user"
            return _takes_a_folder(candidate)
        if candidate.is_symlink():
            return f"{candidate} is a symbolic link to nothing ({os.readlink(candidate)})"
    return None


def _takes_a_folder(folder):
    """None if a folder can be made in `folder` (one is made and removed),
    else why not. os.access says yes to root for anything, /proc and /sys
    included: there an export died after every member had trained."""
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".kg-check-", dir=folder))
    except OSError as error:
        return f"{folder} takes no new folder ({error.strerror})"
    return None


def check_writable_dir(path, setting):
    """Raises `ServiceError` naming `setting` if `path` cannot be a folder.

    Args:
        path: The folder, existing or to be created.
        setting: What the user set it with, e.g. "output_dir (--output-dir)".
    """
    problem = writable_dir_problem(path)
    if problem:
        raise ServiceError(
            f"{setting} {str(path)!r} cannot be used as a folder: {problem}. "
            f"Choose another folder, or move what is in the way; nothing was "
            f"written."
        )


def check_run(output_dir, tracking_uri, export_dir=None, exported=()):
    """Checks every folder a run writes to, then its store.

    The report goes under `output_dir`; with registry and export on, the
    SavedModels of each model named in `exported` go under
    `<export_dir>/<model name>/`; the store is checked by `check_store`.

    Raises:
        ServiceError: naming the setting, the path and what is in the way.
    """
    check_writable_dir(output_dir, "output_dir (or --output-dir)")
    for name in exported:
        check_writable_dir(
            pathlib.Path(export_dir) / name,
            f"export.dir's folder for {name!r}",
        )
    check_store(tracking_uri)


def check_store(tracking_uri, must_exist=False):
    """Pre-flight of a tracking URI, before MLflow writes or retries anything.

    A local store (sqlite file, file-store folder) must be writable where
    it is or would be created, and with `must_exist` (a command that only
    reads: MLflow would create an empty store and answer "nothing here")
    it must be there already; an http(s) server must answer within
    `SERVER_TIMEOUT` seconds on a REST endpoint (any HTTP status counts:
    whether it lets us in is for its first real call to say), except the
    403 of MLflow's host check, which no credentials can pass. Unknown schemes are MLflow's
    to reject, in `Tracker`.

    Raises:
        ServiceError: naming the URI and what is wrong with it.
    """
    scheme = urllib.parse.urlsplit(tracking_uri).scheme.lower()
    if scheme == "sqlite":
        database = sqlite_file(tracking_uri)
        if database is not None:
            if must_exist:
                _check_exists(pathlib.Path(os.path.abspath(os.path.expanduser(database))), tracking_uri)
            _check_database_file(database, tracking_uri)
    elif scheme in ("http", "https"):
        _check_server(tracking_uri)
    elif scheme.split("+")[0] in DATABASE_SERVERS:
        _check_database_server(tracking_uri)
    else:
        folder = local_store_path(tracking_uri)
        if folder is not None:
            if must_exist:
                _check_exists(pathlib.Path(folder).absolute(), tracking_uri)
            check_writable_dir(folder, "the tracking store (an MLflow file store)")


# Database servers MLflow's SQLAlchemy store takes (mlflow.store.db.db_types).
DATABASE_SERVERS = ("postgresql", "mysql", "mssql")


def _check_database_server(uri):
    """One connection, within `SERVER_TIMEOUT`: a closed port, an unknown
    host or a refused login took ~105 s of MLflow's and the store's retries
    before its error; a missing driver was a ModuleNotFoundError."""
    import sqlalchemy  # SQLAlchemy: only for a database server's URI
    from sqlalchemy.pool import NullPool  # as above

    shown = redact.uri(uri)
    try:
        engine = sqlalchemy.create_engine(
            uri, poolclass=NullPool, connect_args={"connect_timeout": SERVER_TIMEOUT}
        )
        with engine.connect():
            pass
        engine.dispose()
    except (ModuleNotFoundError, sqlalchemy.exc.NoSuchModuleError) as error:
        raise ServiceError(
            f"cannot use the MLflow tracking store {shown!r}: its database driver is not "
            f"installed ({error}). PostgreSQL's is in the service's extras: pip install "
            f"-e '.[service]'; for another database, its SQLAlchemy driver."
        ) from None
    except sqlalchemy.exc.SQLAlchemyError as error:
        reason = str(getattr(error, "orig", None) or error).strip().splitlines()[0]
        raise ServiceError(
            f"cannot reach the MLflow tracking store {shown!r}: {redact.text(reason)}. "
            f"{URI_HELP}"
        ) from None


def _check_exists(path, uri):
    """Raises a ServiceError naming `path` (and a close name beside it) if
    the local store is not there."""
    if path.exists():
        return
    near = []
    if path.parent.is_dir():
        names = [p.name for p in path.parent.iterdir() if p.suffix == path.suffix]
        near = difflib.get_close_matches(path.name, names, n=1)
    raise ServiceError(
        f"no MLflow tracking store at {redact.uri(uri)!r}: {path} does not exist"
        + (f" (did you mean {path.parent / near[0]}?)" if near else "")
        + ". kg-train creates a store with its first sweep; pass --tracking-uri the "
        "store a sweep logged to. Nothing was created."
    )


def sqlite_file(uri):
    """The database file of a sqlite URI; None for an in-memory database."""
    # Start-up: these checks run before the heavy imports, and only a
    # sqlite URI needs SQLAlchemy.
    from sqlalchemy.engine import make_url

    try:
        database = make_url(uri).database
    except Exception:
        return None  # malformed: MLflow's own message says more
    return None if not database or database == ":memory:" else database


def _check_database_file(database, uri):
    path = pathlib.Path(os.path.abspath(os.path.expanduser(database)))
    if path.exists():
        if not path.is_file():
            problem = f"{path} is a folder, not a database file"
        elif not os.access(path, os.R_OK | os.W_OK):
            problem = f"{path} is not readable and writable by this user"
        else:
            problem = sqlite_file_problem(path)
            if problem is None:
                return
    else:
        problem = writable_dir_problem(path.parent)
        if problem is None:
            return
    raise ServiceError(
        f"cannot use the MLflow tracking store {uri!r}: {problem}. {URI_HELP}"
    )


SQLITE_HEADER = b"SQLite format 3\x00"


def sqlite_file_problem(path):
    """Why the existing file `path` is no usable SQLite database, or None.

    Read from its 100-byte header (sqlite.org/fileformat.html), before
    SQLAlchemy meets it and says so with its SQL statement (issue 30 §16):
    not an SQLite file at all, or one cut short of the pages its header
    counts. An empty file is a new database to SQLite, and fine.
    """
    size = path.stat().st_size
    if size == 0:
        return None
    with open(path, "rb") as handle:
        header = handle.read(100)
    if not header.startswith(SQLITE_HEADER):
        return (
            f"{path} is not a database (not an SQLite file: it does not start "
            "with SQLite's header)"
        )
    if len(header) < 100:
        return f"{path} is truncated: {size} bytes, shorter than SQLite's 100-byte header"
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    # The page count is valid only when its "version-valid-for" number
    # matches the change counter (older writers did not keep it).
    pages = int.from_bytes(header[28:32], "big") if header[24:28] == header[92:96] else 0
    if page_size < 512 or size % page_size or size < pages * page_size:
        return (
            f"{path} is truncated or damaged: {size:,} bytes, where its header says "
            f"{pages:,} pages of {page_size:,} bytes"
        )
    return None


def _check_server(uri):
    # A REST endpoint, not /health: MLflow's host check (--allowed-hosts)
    # exempts /health and /version, so a server that refuses every client's
    # Host header still looks healthy there.
    url, headers = _without_userinfo(uri.rstrip("/") + PROBE_PATH)
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, headers=headers), timeout=SERVER_TIMEOUT
        ):
            return
    except urllib.error.HTTPError as error:
        if error.code == 403 and HOST_CHECK_REFUSAL in _body(error):
            raise ServiceError(_host_refused(uri)) from None
        return  # something answers; whether it lets us in is for MLflow to say
    except (OSError, ValueError, http.client.HTTPException) as error:
        reason = getattr(error, "reason", error)
        if isinstance(reason, ssl.SSLError):
            return  # MLflow has TLS settings of its own (MLFLOW_TRACKING_INSECURE_TLS...)
        if isinstance(reason, (socket.timeout, TimeoutError)):
            reason = f"no answer within {SERVER_TIMEOUT} s"
        raise ServiceError(
            f"cannot reach the MLflow tracking server {redact.uri(uri)!r}: GET {url} failed "
            f"({reason}). Start the server (e.g. `mlflow server --host 127.0.0.1 "
            f"--port 5000`) or point kg-train at another store. {URI_HELP}"
        ) from None


def _without_userinfo(url):
    """`(url, headers)`: `http://user:pw@host/...` as the URL without its
    user info and a basic-auth header, as MLflow's client sends it
    (`requests` takes a URL's user info as basic auth, issue 30 §12);
    urllib would take `user:pw@host` for the host name."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url, {}
    userinfo, _, host = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    token = base64.b64encode(
        f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}".encode("latin-1", "replace")
    ).decode("ascii")
    return parts._replace(netloc=host).geturl(), {"Authorization": f"Basic {token}"}


def _body(error):
    try:
        return error.read(2048).decode("utf-8", "replace")
    except (OSError, http.client.HTTPException):
        return ""


def _host_refused(uri):
    host = urllib.parse.urlsplit(uri).netloc.rpartition("@")[2]
    return (
        f"the MLflow tracking server {redact.uri(uri)!r} refuses the Host header {host!r} "
        f'(HTTP 403 "{HOST_CHECK_REFUSAL}..."): an MLflow server answers only '
        f"the Host names it was told to trust, by default localhost and "
        f"private IP addresses, though its /health passes any. Start "
        f"it with `--allowed-hosts {host}` (comma-separated, `*` wildcards; "
        f"docker/compose.yaml takes MLFLOW_ALLOWED_HOSTS from docker/.env) or "
        f"set MLFLOW_SERVER_ALLOWED_HOSTS in its environment; or use an "
        f"address it trusts. Nothing was written."
    )


def on_this_machine(uri):
    """Whether the store `uri` is a file on this machine's disk (a sqlite
    file, a file store), which no other machine reaches."""
    return urllib.parse.urlsplit(uri).scheme.lower() == "sqlite" or local_store_path(uri) is not None


def local_store_path(uri):
    """The folder of a local file store (`file:` URI or plain path), else None."""
    parts = urllib.parse.urlsplit(uri)
    if parts.scheme == "file":
        return urllib.parse.unquote(parts.path)
    if parts.scheme == "" and uri:
        return uri
    return None
