"""A new sqlite store made from a copy of an empty, migrated one.

MLflow creates a new sqlite store by running its alembic migrations
(~70 of them): 1.3 CPU s of every kg-train on a new store (measured with
MLflow 3.17, issue 17), and the suite starts dozens. The result of those
migrations is the same file every time for one MLflow version, so it is
made once, kept in a cache (`template`), and copied into place.

The copy is used only where MLflow itself would accept it: its
`alembic_version` must be the head of MLflow's own migration scripts
(what `mlflow.store.db.utils._verify_schema` checks on every open). A
template that is missing, stale or unreadable is (re)made; one that
cannot be made or copied leaves the new store to MLflow, as before.
`tests/service/tracking/test_empty_store.py` compares a copied store with
one MLflow migrated, table by table.
"""

import logging
import os
import pathlib
import shutil
import sqlite3
import uuid

log = logging.getLogger("kg-train")

CACHE_ENV = "KG_CACHE_DIR"  # where the template is kept; else $XDG_CACHE_HOME/kg-service


def cache_dir():
    """`$KG_CACHE_DIR`, else `$XDG_CACHE_HOME/kg-service`, else
    `~/.cache/kg-service`."""
    if os.environ.get(CACHE_ENV):
        return pathlib.Path(os.environ[CACHE_ENV])
    root = os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache"
    return pathlib.Path(root) / "kg-service"


def template_path():
    """The template's path for the installed MLflow version."""
    import mlflow  # MLflow at its point of use (see client.import_mlflow)

    return cache_dir() / f"mlflow-{mlflow.__version__}-empty-store.db"


def head_revision():
    """The head of MLflow's migration scripts: what a store's
    `alembic_version` must hold for MLflow to open it."""
    from mlflow.store.db.utils import _get_latest_schema_revision  # MLflow: seconds, only when a store is made

    return _get_latest_schema_revision()


def revision(path):
    """The `alembic_version` of the sqlite file `path`; None if it has none
    or cannot be read."""
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as connection:
            rows = connection.execute("SELECT version_num FROM alembic_version").fetchall()
    except sqlite3.Error:
        return None
    return rows[0][0] if len(rows) == 1 else None


def migrate(path):
    """Creates MLflow's empty schema in the new sqlite file `path` by
    MLflow's own migrations: what a store opened on a new file runs, less
    the Default experiment that the store adds on open (its artifact
    folder is the opener's)."""
    from mlflow.store.db import utils  # MLflow: seconds, only when a store is made

    engine = utils.create_sqlalchemy_engine(f"sqlite:///{path}")
    try:
        utils._initialize_tables(engine)
    finally:
        engine.dispose()


def template():
    """The path of a template at MLflow's head revision, made now if there
    is none (written to a temporary name and renamed: a reader never sees
    half a file, and two makers at once each rename a whole one)."""
    path = template_path()
    head = head_revision()
    if path.exists() and revision(path) == head:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}")
    try:
        migrate(scratch)
        if revision(scratch) != head:
            raise RuntimeError(f"the migrated file is at {revision(scratch)}, not {head}")
        os.replace(scratch, path)
    finally:
        scratch.unlink(missing_ok=True)
    return path


def place(database):
    """Puts a copy of the template at `database` if no file is there.

    Returns True if it did; False if the file exists or the template
    could not be made or copied (MLflow then migrates the new file
    itself). The copy is written beside `database` and hard-linked into
    place, which fails rather than replaces should another process have
    created the file meanwhile.
    """
    database = pathlib.Path(database)
    if database.exists() or not database.parent.is_dir():
        return False
    scratch = database.with_name(f".{database.name}.{uuid.uuid4().hex[:8]}")
    try:
        shutil.copyfile(template(), scratch)
        os.link(scratch, database)
    except Exception as error:  # a read-only cache, a full disk, a race lost
        log.debug(f"new sqlite store {database} left to MLflow's migrations: {error}")
        return False
    finally:
        scratch.unlink(missing_ok=True)
    return True
