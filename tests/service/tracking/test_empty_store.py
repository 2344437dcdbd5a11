"""A new sqlite store made from the cached empty store (`empty_store`)
against one made by MLflow's own migrations: the same schema and the same
rows in every table once MLflow has opened each."""

import sqlite3

import mlflow

from kg_service.tracking import empty_store
from kg_service.tracking import mlflow_store

TIMES = {"creation_time", "last_update_time"}  # when each store was opened


def _definition(sql):
    """A CREATE statement as the set of its lines: MLflow's own migrations
    write a table's CHECK constraints in an order that changes with
    PYTHONHASHSEED (alembic's batch mode rebuilds `runs` from a set;
    measured: seeds 1 and 2 differ), so two migrated stores differ in it."""
    return sorted(line.strip().rstrip(",").strip() for line in (sql or "").splitlines())


def _contents(path):
    """Every object of the sqlite file's schema (each table's columns in
    order), and every table's rows (the open times blanked)."""
    with sqlite3.connect(path) as connection:
        schema = sorted(
            (kind, name, table, _definition(sql))
            for kind, name, table, sql in connection.execute(
                "SELECT type, name, tbl_name, sql FROM sqlite_master"
            )
        )
        tables = {}
        for (table,) in connection.execute("SELECT name FROM sqlite_master WHERE type='table'"):
            schema.append(list(connection.execute(f'PRAGMA table_info("{table}")')))
            cursor = connection.execute(f'SELECT * FROM "{table}"')
            columns = [d[0] for d in cursor.description]
            tables[table] = sorted(
                repr([None if c in TIMES else v for c, v in zip(columns, row)])
                for row in cursor
            )
    return schema, tables


def test_a_store_copied_from_the_template_equals_one_mlflow_migrated(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # both stores' artifact folders: ./mlruns
    monkeypatch.setenv(empty_store.CACHE_ENV, str(tmp_path / "cache"))
    # A template that is not a store at MLflow's head (a stale or broken
    # file) is made again, not copied.
    (tmp_path / "cache").mkdir()
    empty_store.template_path().write_bytes(b"not a sqlite file")

    tracker = mlflow_store.Tracker(f"sqlite:///{tmp_path / 'copied.db'}", "e")
    assert empty_store.revision(empty_store.template_path()) == empty_store.head_revision()
    migrated = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'migrated.db'}")
    assert migrated.create_experiment("e") == tracker.experiment_id

    copied_schema, copied_tables = _contents(tmp_path / "copied.db")
    schema, tables = _contents(tmp_path / "migrated.db")
    assert copied_schema == schema and len(schema) > 50
    assert copied_tables == tables
    assert tables["alembic_version"] == [repr([empty_store.head_revision()])]
    assert len(tables["experiments"]) == 2  # Default and "e", from MLflow's open


def test_an_existing_store_is_never_replaced(tmp_path, monkeypatch):
    monkeypatch.setenv(empty_store.CACHE_ENV, str(tmp_path / "cache"))
    database = tmp_path / "mlflow.db"
    database.write_bytes(b"someone's store")
    assert not empty_store.place(database)
    assert database.read_bytes() == b"someone's store"
    assert not (tmp_path / "cache").exists()  # not even a template made


def test_a_cache_that_cannot_be_written_leaves_the_new_store_to_mlflow(tmp_path, monkeypatch):
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv(empty_store.CACHE_ENV, str(tmp_path / "a-file" / "cache"))
    assert not empty_store.place(tmp_path / "mlflow.db")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]  # no scratch left
