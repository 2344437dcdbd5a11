"""The task plug-in: `Task`, `Metric` and the registry.

A task is one named entry that knows how to load its data (offline), how
to build its model for an activation, how to train the members of one
activation, which final metric the statistics compare and which one picks
the champion (and in which direction), its report figures, how its model
is served and whether it trains data-parallel. Each built-in task is a
folder of `kg_service.tasks` registered by one line in its
`__init__.py`; a config names one with `data.dataset`.

Adding a task is one `register(...)` call, there or in the caller's own
code (a test defines a toy task and runs a sweep of it):

>>> from kg_service.tasks import base as tasks
>>> sorted(tasks.names())
['circles', 'digits', 'moons', 'python_code']

`register` also puts the task's facts (name, description, sizes) in
`kg_service.config.catalog`, where config validation reads them without
importing a task. Importing this module imports neither Keras nor
scikit-learn.
"""

import dataclasses
from typing import Callable
from typing import NamedTuple
from typing import Optional

from kg_service.config import catalog
from kg_service.errors import ServiceError


@dataclasses.dataclass(frozen=True)
class Metric:
    """A final per-member metric and the direction that is better.

    `name` is a key of `MemberResult.final` (e.g. `"test_accuracy"`).
    """

    name: str
    higher_is_better: bool
    label: str


class Serving(NamedTuple):
    """What a task's registered model is (`kg_service.tracking.model_logging.log_pyfunc`).

    Attributes:
        python_model: The pyfunc model file ("models from code").
        signature: `(mlflow, keras model) -> mlflow ModelSignature`.
        code_paths: Files beside keras_gelu its model needs to load.
        saved_model: Optional `() -> file`: the pyfunc model file ("models
            from code") that serves a bare SavedModel folder of its kind
            (`kg serve DIR`, `saved_model_code`).
    """

    python_model: str
    signature: Callable
    code_paths: tuple = ()
    saved_model: Optional[Callable] = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Task(catalog.TaskFacts):
    """One kind of problem a sweep can train.

    Its facts for config validation and the plan are `catalog.TaskFacts`'
    (its name, description, sizes, its own config keys and their check,
    its memory estimate and smoke sizes), which it is: `register` hands
    the task itself to the catalog. Its other fields, keyword-only:

    Attributes:
        load: `DataConfig -> Dataset`, offline and deterministic.
        build_model: `(ModelConfig, activation, Dataset, dtype=None,
            name=None) -> keras.Model`, the plain model users get.
        train: `(task, Dataset, Config, activation, seeds, report) ->
            [MemberResult]`, every seed of one activation.
        compared: The final metric the statistics compare across
            activations (paired over seeds).
        selects: The final metric that picks each activation's champion.
        figures: The report's figures this task draws: names of
            `kg_service.analysis.reports.figures.FIGURES`, and its own figures,
            functions `FigureContext -> (file name, alt text, matplotlib
            Figure or None)`.
        serving: How the registered model is served: a `Serving` (its
            pyfunc file, signature and code paths; a classifier's is
            `kg_service.tasks.classification.serving.SERVING`).
        data_parallel: Whether its training runs under
            `device.distribution` (`kg_service.training.parallel`).
        train_members: Optional `(task, Dataset, Config, ((activation,
            seed), ...), report) -> [MemberResult]`: members of several
            activations trained together (one stacked model), for
            activations of one `stack_key`.
        stack_key: Optional `(Config, activation) -> hashable or None`:
            activations with one non-None key train together through
            `train_members` (their models differ only in a stateless
            activation); None, or no `stack_key`: each activation alone,
            through `train`.
        layers: Optional `() -> None` that registers with Keras the layers
            its saved models name beyond keras_gelu's (`load_layers`).
        data_parts: Optional `(DataConfig or None, Dataset or None) ->
            [str]`: what the report's data line says of it (sizes, splits).
        describes_data: Whether `data_parts` names the data itself (a
            corpus' description), instead of following the task's name.
        model_line: Optional `ModelConfig -> str`: the report's model line
            where the common one (block, widths) does not describe it.
        tables: Optional `(summary, results) -> (caption, header, rows)
            or None`: a table of its own in the report.
        unused_keys: Optional `config dict -> (key path, ...)`: the common
            keys it does not read, left out of the report's configuration.
        member_split: Optional `(Dataset, Config, seed) -> Dataset`: the
            split member `seed` trained and was tested on (its own with
            `vary: split`), for the report's per-member figures.
    """

    load: Callable
    build_model: Callable
    train: Callable
    compared: Metric
    selects: Metric
    figures: tuple
    serving: Optional[Serving] = None
    data_parallel: bool = True
    train_members: Optional[Callable] = None
    stack_key: Optional[Callable] = None
    layers: Optional[Callable] = None
    data_parts: Optional[Callable] = None
    describes_data: bool = False
    model_line: Optional[Callable] = None
    tables: Optional[Callable] = None
    unused_keys: Optional[Callable] = None
    member_split: Optional[Callable] = None


_TASKS = {}


def register(task):
    """Adds `task` to the table (replacing one of the same name), and its
    facts to the config catalog; returns it."""
    _TASKS[task.name] = task
    catalog.add_task(task)
    return task


def unregister(name):
    """Removes a task added with `register` (tests that define their own)."""
    _TASKS.pop(name, None)
    catalog.remove_task(name)


def names():
    """The registered task names, in registration order."""
    return tuple(_TASKS)


def get(name):
    """The task called `name`.

    Raises:
        ServiceError: for an unknown name, listing the valid ones.
    """
    task = _TASKS.get(name)
    if task is None:
        raise ServiceError(
            f"data.dataset: unknown dataset {name!r}; expected one of "
            f"{', '.join(names())}."
        )
    return task


def load_layers():
    """Registers every task's own Keras layers (`Task.layers`): what a saved
    member may name beyond keras_gelu's."""
    for task in _TASKS.values():
        if task.layers is not None:
            task.layers()


def saved_model_code():
    """The pyfunc model file that serves a bare SavedModel folder (`kg
    serve DIR`): the first registered task's that declares one
    (`Serving.saved_model`).

    Raises:
        ServiceError: if no registered task serves a SavedModel folder.
    """
    for task in _TASKS.values():
        if task.serving is not None and task.serving.saved_model is not None:
            return task.serving.saved_model()
    raise ServiceError(
        "no registered task serves a bare SavedModel folder; serve its "
        "registered model (models:/NAME@ALIAS) instead."
    )


def load_dataset(data_cfg):
    """`get(data_cfg.dataset).load(data_cfg)`: the configured dataset."""
    return get(data_cfg.dataset).load(data_cfg)
