"""A tiny real sqlite MLflow store filled in-process: a config template is
written beside the store and run by `kg_service.cli.train.run` (what
`kg train` runs), quiet. The readers of a toy study use it:
sweep/test_studies.py (`kg report --study`) and cli/test_results.py
(`kg results`)."""

from kg_service.cli import train as kg_train
from kg_service.config import loading


def uri(folder):
    """The store's tracking URI: `folder`/mlflow.db."""
    return f"sqlite:///{folder / 'mlflow.db'}"


def train(folder, name, template, **fields):
    """Writes `template`, its `{out}` and `{uri}` filled with `folder`/out
    and `uri(folder)` (and `fields`), to `folder`/`name`.yaml and runs the
    sweep; it must exit 0."""
    path = folder / f"{name}.yaml"
    path.write_text(template.format(out=folder / "out", uri=uri(folder), **fields))
    assert kg_train.run(loading.load_config(path), quiet=True, echo=lambda _: None) == 0
