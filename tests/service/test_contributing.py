"""CONTRIBUTING.md's recipes, each made once for real.

Each test makes one recipe's change the way CONTRIBUTING.md says, through
the files and names it cites (a toy activation in the name table, a toy
task registered, a toy statistic and its wording, a toy command in the
kg group), and checks that the rest of the house follows with no other
change. The changes are made for the test only (monkeypatch) and undone
after it. The first test reads CONTRIBUTING.md itself: every file a step
cites exists and holds the names the step cites.
"""

import math
import pathlib
import re

import click
import keras
import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats as st

import keras_gelu
from keras_gelu import activations
import keras_gelu_names as name_table
from keras_gelu.serialization import register
from kg_service.analysis.numbers import comparisons
from kg_service.analysis.numbers import plain
from kg_service.analysis.numbers import stats
from kg_service.analysis.words import tables
from kg_service.analysis.words import wording
from kg_service.cli import options
from kg_service.cli import train as kg_train
from kg_service.cli.main import main as kg
from kg_service.config import catalog
from kg_service.config import loading
from kg_service.errors import ServiceError
from kg_service.tasks import base as tasks
from kg_service.tracking import store as store_lib
from tests.service.analysis.members import sweep
from tests.service.memory_store import MemoryStore
from tests.service.tasks import blobs

ROOT = pathlib.Path(__file__).resolve().parents[2]
CONTRIBUTING = ROOT / "CONTRIBUTING.md"


# --- The recipes cite files and names that exist. ---------------------------


def recipe_steps(text):
    """Each numbered step of the recipes, as one line of text."""
    recipes = text.split("## Recipes", 1)[1].split("\n## ", 1)[0]
    return [
        " ".join(step.split())
        for step in re.split(r"\n(?=\d+\. )|\n\n", recipes)
        if re.match(r"\d+\. ", step)
    ]


def cited(step):
    """`(paths, names)` a step cites in backticks: paths hold a `/`; names
    are identifiers, the last part of a dotted one or of a call
    (`TABLE`, `@register`, `keras.ops` -> ops, `main.add_command(...)`
    -> add_command)."""
    quoted = re.findall(r"`([^`]+)`", step)
    paths = [q for q in quoted if "/" in q and " " not in q]
    names = []
    for q in quoted:
        name = re.fullmatch(r"@?([A-Za-z_][\w.]*)(\(.*\))?", q)
        if name and "/" not in q and not q.endswith((".py", ".md")):
            names.append(name.group(1).split(".")[-1])
    return paths, names


def source_text(path):
    files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return "\n".join(f.read_text() for f in files)


def test_every_recipe_step_cites_files_that_exist_and_names_they_hold():
    steps = recipe_steps(CONTRIBUTING.read_text())
    assert len(steps) >= 18  # five recipes
    for step in steps:
        paths, names = cited(step)
        assert paths, f"a step that names no file: {step}"
        missing = [p for p in paths if not (ROOT / p).exists()]
        assert not missing, f"{missing} do not exist; cited by: {step}"
        text = "\n".join(source_text(ROOT / p) for p in paths)
        absent = [n for n in names if not re.search(rf"\b{n}\b", text)]
        assert not absent, f"{absent} are not in {paths}; cited by: {step}"


# --- A new activation: one table line, one function. ------------------------


@register  # keras_gelu.serialization's, as every function in activations.py
def bent_identity(x):
    """Bent identity, (sqrt(x^2 + 1) - 1) / 2 + x: the toy activation."""
    x = keras.ops.convert_to_tensor(x)
    return (keras.ops.sqrt(x * x + 1.0) - 1.0) / 2.0 + x


def bent_identity_reference(x):
    x = np.asarray(x, dtype=np.float64)
    return (np.sqrt(x * x + 1.0) - 1.0) / 2.0 + x


@pytest.fixture
def toy_activation(monkeypatch):
    """The recipe's steps 1 and 3, for the test's lifetime."""
    # Step 1: one line in the name table, which config validation imports too.
    monkeypatch.setitem(name_table.TABLE, "bent_identity", ("elementwise", "bent_identity"))
    # Step 3: the binding `_FUNCTIONS` makes for a function of activations.py.
    monkeypatch.setitem(
        activations.ACTIVATIONS, "bent_identity", ("elementwise", bent_identity)
    )
    return "bent_identity"


def test_a_new_activation_resolves_by_name_and_builds_layers_that_compute_it(
    toy_activation, tmp_path
):
    assert "bent_identity" in keras_gelu.names("elementwise")
    assert keras_gelu.get(" Bent-Identity") is bent_identity
    assert "bent_identity" in catalog.activation_names()

    (dense,) = keras_gelu.projection_layers(3, toy_activation, name="proj")
    model = keras.Sequential(
        [keras.Input((4,)), dense, keras_gelu.FeedForward(8, activation=toy_activation)]
    )
    x = np.random.default_rng(0).normal(size=(5, 4)).astype("float32")
    kernel, bias = (np.asarray(w, np.float64) for w in dense.get_weights())
    np.testing.assert_allclose(
        np.asarray(dense(x)), bent_identity_reference(x @ kernel + bias), rtol=1e-5
    )
    # Registered: a saved model that uses it loads back and computes the same.
    model.save(tmp_path / "toy.keras")
    loaded = keras.saving.load_model(tmp_path / "toy.keras")
    np.testing.assert_allclose(np.asarray(loaded(x)), np.asarray(model(x)), rtol=1e-6)


# --- A new task and a new store: one sweep of the toy task, in memory. ------

TOY_SWEEP = """\
experiment: contributing
activations: [relu, bent_identity]
seeds: 2
data: {dataset: blobs, n_samples: 200, centers: 3}
model: {hidden_units: [4]}
training: {epochs: 2, batch_size: 32}
registry: {model_name: "blobs-{activation}"}
export: {enabled: false}
"""


@pytest.fixture
def toy_task():
    """The recipe's one registration line (`base.register`), undone after."""
    task = tasks.register(blobs.task())
    yield task
    tasks.unregister(blobs.NAME)


def test_a_new_store_is_a_tracking_store_with_every_method_implemented():
    assert issubclass(MemoryStore, store_lib.TrackingStore)
    assert not MemoryStore.__abstractmethods__
    # The bookkeeping is the base class's, not copied.
    for name in ("sweep_run", "join_sweep", "find_sweeps", "member_keys", "next_version"):
        assert name not in vars(MemoryStore)


def test_a_new_task_trains_a_new_activation_into_a_new_store(
    toy_task, toy_activation, tmp_path, monkeypatch
):
    """The task is validated (its name, and the new activation's, come
    from the registries; its own key from its folder), trained, compared,
    reported (its own figure) and registered (its own signature); the
    store gets every run; nothing else in the service changed."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "toy.yaml"
    path.write_text(TOY_SWEEP)
    config = loading.load_config(str(path))
    assert (config.data.dataset, config.activations) == ("blobs", ("relu", "bent_identity"))
    assert config.data.centers == 3
    store = MemoryStore()
    assert kg_train.run(config, quiet=True, echo=lambda line: None, store=store) == 0

    parent = store.runs[store.parent_run_id]
    assert parent["status"] == store_lib.FINISHED
    members = [r for r in store.runs.values() if r["parent"] == store.parent_run_id]
    assert sorted((r["tags"]["activation"], r["tags"]["seed"]) for r in members) == [
        ("bent_identity", 0), ("bent_identity", 1), ("relu", 0), ("relu", 1)
    ]
    assert all(r["status"] == store_lib.FINISHED for r in members)
    assert all(len(r["metrics"]["val_accuracy"]) == 2 for r in members)
    for activation in ("relu", "bent_identity"):
        version = store.aliases[(f"blobs-{activation}", "champion")]
        registered = store.models[f"blobs-{activation}"][version]
        assert registered["tags"]["dataset"] == "blobs"
        assert registered["serving"].signature is blobs.signature
    assert (store.parent_run_id, f"report/{blobs.BLOB_SIZES}") in store.artifacts
    assert not (tmp_path / "mlflow.db").exists()


def test_a_new_tasks_config_key_is_as_strict_as_every_key(toy_task, tmp_path):
    """Its key is refused out of range or misspelt, with its line and the
    closest key, as a built-in key is; its served signature names its
    features."""
    import mlflow

    path = tmp_path / "toy.yaml"
    path.write_text(TOY_SWEEP.replace("centers: 3", "centers: 1"))
    with pytest.raises(ServiceError, match=r"data\.centers \(line 4\): got 1 .*>= 2"):
        loading.load_config(str(path))
    path.write_text(TOY_SWEEP.replace("centers: 3", "centres: 3"))
    with pytest.raises(ServiceError, match='data.centres \\(line 4\\): unknown key. Did you mean "centers"'):
        loading.load_config(str(path))
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(3, activation="softmax")])
    signed = toy_task.serving.signature(mlflow, model)
    assert signed.inputs.input_names() == list(blobs.FEATURES)


# --- A new statistic: one function, one wording entry. ----------------------


def sign_test_p(d):
    """Two-sided sign test of paired differences (zeros dropped)."""
    d = np.asarray(d, dtype=float)
    d = d[d != 0]
    n, k = len(d), int(np.sum(d > 0))
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(k, n - k) + 1)) / 2**n
    return min(1.0, 2.0 * tail)


@pytest.fixture
def toy_statistic(monkeypatch):
    monkeypatch.setitem(stats.PAIRED_STATISTICS, "p_sign", sign_test_p)
    monkeypatch.setitem(
        wording.STATISTICS,
        "p_sign",
        wording.Column("sign p", wording.format_p, "two-sided sign test", terminal=True),
    )
    return "p_sign"


def test_a_new_statistic_is_computed_against_scipy_and_worded_everywhere(toy_statistic):
    diffs = [0.01, 0.02, -0.005, 0.03, 0.01, 0.0, 0.02, 0.015]  # 6 up, 1 down, 1 tie
    assert stats.paired_test(diffs).statistics["p_sign"] == pytest.approx(
        st.binomtest(6, 7).pvalue
    )

    relu = [0.90, 0.91, 0.92, 0.90, 0.93]
    gelu = [0.92, 0.93, 0.91, 0.94, 0.95]
    summary = comparisons.summarize(sweep({"relu": relu, "gelu": gelu}), "relu")
    value = summary.comparisons[0].paired.statistics["p_sign"]
    assert value == pytest.approx(st.binomtest(4, 5).pvalue)
    header, rows = tables.comparison_rows(summary)
    assert rows[0][header.index("sign p")] == wording.format_p(value)
    assert "sign p" in tables.format_table(summary)  # terminal=True
    assert plain.flat_metrics(summary)[
        f"gelu.vs_baseline.{summary.metric.short}_p_sign"
    ] == pytest.approx(value)


# --- A new CLI command: one file, one registration line. --------------------


@click.command(context_settings=options.CONTEXT)
@options.tracking_uri("The store the toy command names.")
@options.QUIET
def hello(tracking_uri, quiet):
    """Names the tracking store it would read: the toy command."""
    try:
        uri = options.checked_tracking_uri(tracking_uri)
    except ServiceError as error:
        options.fail("kg hello", error)
    click.echo(f"hello {uri}{' (quiet)' if quiet else ''}")


@pytest.fixture
def toy_command():
    kg.add_command(hello, name="hello")  # cli/main.py's one line
    yield "hello"
    kg.commands.pop("hello")


def test_a_new_command_joins_the_kg_group_with_the_shared_options(toy_command):
    runner = CliRunner()
    assert "hello" in runner.invoke(kg, ["--help"]).output
    ran = runner.invoke(kg, ["hello", "--tracking-uri", "sqlite:///x.db", "-q"])
    assert ran.exit_code == 0 and ran.output == "hello sqlite:///x.db (quiet)\n"
    refused = runner.invoke(kg, ["hello", "--tracking-uri", " "])
    assert refused.exit_code == options.EXIT_USAGE
    assert "kg hello: error: --tracking-uri: got an empty string" in refused.output
