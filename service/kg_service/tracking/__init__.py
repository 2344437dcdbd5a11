"""Everything said to MLflow and the pre-flight checks of where a run writes.

Modules:
    client: opening MLflow, its chatter quieted.
    destinations: pre-flight checks of folders and the tracking store.
    empty_store: a new sqlite store from a copy of an empty, migrated one.
    lease: one writer per sweep: a lease on its parent run.
    member_runs: a member's MLflow run: its files, and reading it back.
    mlflow_store: `Tracker`, the MLflow `TrackingStore`.
    model_logging: a trained model logged as an MLflow pyfunc model.
    registry: registered models, their versions and aliases.
    retry: one retry policy for every store operation.
    spool: members trained but not yet in the store, kept on local disk.
    store: `TrackingStore`: the interface, and its bookkeeping.
    studies: a study's sweeps, read back from the store.
    versions: the library versions a sweep ran with.
"""
