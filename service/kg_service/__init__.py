"""kg-train: seeded activation comparisons tracked in MLflow.

Modules:
    analysis: what a sweep's results say, in three rooms: numbers, words, reports.
    cli: the command line, kg and kg-train, a thin shell over the service.
    config: the sweep configuration: schema, loading and the catalog of names.
    errors: the exceptions the service raises for what a user can act on.
    named_columns: named columns matched to a model's features, for both servers.
    papers: the papers' reruns: docs/results.md from the studies in an MLflow store.
    redact: passwords never printed: a URI's `user:password@` shown masked.
    results: what a trained member hands to statistics, reports and tracking.
    serving: serving a registered model: kg serve, kg predict, SavedModel export.
    sweep: one sweep end to end: pre-flight, the stages, shards, the spool.
    tasks: what a sweep trains and how it is judged; one folder per task.
    tracking: everything said to MLflow, and the checks of where a run writes.
    training: what every task's training shares: device, optimizer, the loop.
"""

import importlib.metadata
import os

# MLflow >= 3.2 sends usage telemetry (config.mlflow-telemetry.io) unless
# told not to. Off for every entry point (kg-train, kg, kg serve's server
# process and the `mlflow models serve` line kg-train prints inherit this
# environment); a user's own value wins. MLflow reads DO_NOT_TRACK only as
# "true", so the variable set here is MLflow's own (mlflow/telemetry/utils.py).
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
# MLflow draws a tqdm bar per artifact download, and where stderr is no
# terminal each bar is a "Downloading artifacts" line: 21 of them from one
# `kg report` (issue 30 §20). Off for every entry point and the printed
# `mlflow models serve` command (MLflow's own switch,
# mlflow/environment_variables.py); a user's own value wins.
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

# One distribution ships keras_gelu and kg_service: its version is both's
# (pyproject.toml's, read from the installed metadata without importing Keras).
__version__ = importlib.metadata.version("keras-gelu")

# The built-in tasks register here (their facts go to the config catalog),
# so every entry point, and config validation, knows them.
from kg_service import tasks  # noqa: E402,F401
