"""The command line: kg and kg-train, a thin shell over the service.

The library installs alone (`pip install keras-gelu`), but its wheel also
installs the `kg` and `kg-train` scripts, whose modules import click,
PyYAML and pydantic at their top. Both scripts' modules live in this
package, so this file runs first: without the service extra, one line
saying what to install and exit 2 (issue 30 §23), not a ModuleNotFoundError
traceback.

Modules:
    main: `kg`, one group of every command.
    messages: the sentences for the core's typed errors.
    options: what every command shares: exit codes, options, logging.
    plan: what a run of a config would do: the `--dry-run` lines.
    progress: a sweep's progress: a live bar, or log lines.
    report: `kg report`.
    results: `kg results`: docs/results.md, regenerated from a store.
    seeds: `kg plan`: how many seeds would decide each comparison.
    serve: `kg serve`, `kg predict`, `kg models`.
    sharding: `--shard` and `--sweep-id`: which job of a sharded sweep.
    summary: what kg-train and kg report print when a sweep ends.
    train: `kg-train`.
"""

import importlib.util
import sys

# The import names of the `service` extra (pyproject.toml) the commands
# need: the shell's own (click, yaml, pydantic) and what every sweep and
# report reaches (mlflow, scipy, sklearn, rich, matplotlib).
_SERVICE_MODULES = ("click", "yaml", "pydantic", "mlflow", "scipy", "sklearn", "rich", "matplotlib")


def _missing_service_modules():
    missing = []
    for name in _SERVICE_MODULES:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(name)
    return missing


_MISSING = _missing_service_modules()
if _MISSING:
    _script = sys.argv[0].rsplit("/", 1)[-1] if sys.argv and sys.argv[0] else "kg"
    print(
        f"{_script}: the training service's dependencies are not installed (no module "
        f"{', '.join(repr(m) for m in _MISSING)}); install them with "
        "pip install 'keras-gelu[service]' (from a clone: pip install -e '.[service]').",
        file=sys.stderr,
    )
    raise SystemExit(2)
