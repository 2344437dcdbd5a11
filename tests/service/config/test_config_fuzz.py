"""Config fuzzing (issue 10 §6): random, mostly malformed configs and
`--set` values through the real CLI. Whatever comes in, kg-train answers
with exit 0 (a valid config's plan) or exit 2 and a one-paragraph message,
never a traceback, and never writes a file."""

import os
import pathlib
import string
import tempfile

import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from kg_service.cli import train as cli

KEYS = {
    "": ["experiment", "activations", "baseline", "seeds", "output_dir", "data",
         "model", "training", "tracking", "registry", "export", "device", "analysis"],
    "data": ["dataset", "n_samples", "noise", "test_fraction", "validation_fraction",
             "seed", "standardize"],
    "model": ["hidden_units", "dropout", "block", "d_model", "match_params"],
    "training": ["optimizer", "learning_rate", "epochs", "batch_size",
                 "convergence_threshold"],
    "registry": ["enabled", "model_name", "alias"],
    "export": ["enabled", "dir", "tolerance"],
    "device": ["type", "mixed_precision", "xla"],
    "tracking": ["uri"],
    "analysis": ["margin", "alpha", "power", "contrasts"],
}
PATHS = [f"{s}.{k}" if s else k for s, ks in KEYS.items() for k in ks]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["relu", "gelu", "geglu", "moons", "digits", "adam", "gpu",
                     "{activation}", "{nope}", "", " ", "-1", "1e400", "[", "]"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(sum(KEYS.values(), []) + ["typo", "x"]), inner, max_size=4),
    ),
    max_leaves=8,
)
documents = st.dictionaries(
    st.sampled_from(KEYS[""] + ["activation", "seed", "dataset", "extra"]),
    values,
    max_size=6,
)
overrides = st.lists(
    st.tuples(st.sampled_from(PATHS + ["nope.key", "data", "", "=", "a.b.c"]), st.text(max_size=10)),
    max_size=3,
)

FUZZ = settings(
    max_examples=int(os.environ.get("KG_FUZZ_EXAMPLES", "120")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def _run(text, sets):
    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(tmp)
        (folder / "c.yaml").write_text(text)
        args = ["--config", str(folder / "c.yaml"), "--dry-run"]
        for key, value in sets:
            args += ["--set", f"{key}={value}"]
        cwd = os.getcwd()
        os.chdir(folder)
        try:
            result = CliRunner().invoke(cli.main, args, prog_name="kg-train")
        finally:
            os.chdir(cwd)
        written = sorted(p.name for p in folder.iterdir())
    return result, written


def _check(result, written):
    assert result.exit_code in (0, 2), (result.exit_code, result.output)
    # No traceback: click turns a clean exit into SystemExit; anything else
    # escaping is a bug.
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        repr(result.exception)
    )
    assert "Traceback" not in result.output
    if result.exit_code == 2:
        assert "error" in result.output.lower()
    assert written == ["c.yaml"]


@FUZZ
@given(documents, overrides)
def test_random_configs_and_overrides_exit_0_or_2_and_write_nothing(doc, sets):
    try:
        text = yaml.safe_dump(doc, allow_unicode=True)
    except Exception:  # noqa: BLE001 - a value YAML itself cannot write
        text = repr(doc)
    _check(*_run(text, sets))


@FUZZ
@given(st.text(alphabet=string.printable, max_size=200))
def test_random_text_as_config_exits_2_or_0_never_a_traceback(text):
    _check(*_run(text, []))


# Issue 30 §13: structures nested thousands deep (RecursionError) and
# integers past Python's int-string limit (ValueError), in the file and
# through --set; random depths and lengths on both sides of each limit.
_OPENERS = {"list": ("[", "]"), "flow map": ("{a: ", "}"), "block map": None}


def _nested(kind, depth, leaf):
    if _OPENERS[kind] is None:  # block mappings, one indent per level
        return "".join(f"{'  ' * i}k{i}:\n" for i in range(depth)) + "  " * depth + leaf
    opener, closer = _OPENERS[kind]
    return opener * depth + leaf + closer * depth


huge = st.one_of(
    st.builds(lambda n: "9" * n, st.integers(4000, 6000)),
    st.builds(lambda n: "-0x" + "f" * n, st.integers(3500, 5000)),
    st.builds(lambda n: "1_" * n + "1", st.integers(2000, 5000)),
)
deep = st.builds(
    _nested, st.sampled_from(sorted(_OPENERS)), st.integers(1, 3000), st.sampled_from(["1", "x"])
)
EDGES = settings(FUZZ, max_examples=int(os.environ.get("KG_FUZZ_EXAMPLES", "20")))


@EDGES
@given(st.one_of(huge, deep), st.sampled_from(["seeds", "model.hidden_units", "training.epochs"]),
       st.booleans())  # fmt: skip
def test_deep_nesting_and_huge_integers_exit_2_never_a_traceback(value, key, in_file):
    base = "experiment: x\nactivations: [relu, gelu]\ndata: {dataset: moons}\n"
    if in_file:
        section, _, name = key.rpartition(".")
        body = value if "\n" not in value else "\n" + value
        text = base + (f"{section}:\n  {name}: {body}\n" if section else f"{key}: {body}\n")
        text = text if "\n" not in value else base + f"{key.split('.')[0]}: {body}\n"
        result, written = _run(text, [])
    else:
        result, written = _run(base, [(key, value)])
    _check(result, written)
    assert len(result.output) < 2000, result.output[:300]


def test_the_reported_cases_name_what_is_wrong():
    base = "experiment: x\nactivations: [relu, gelu]\ndata: {dataset: moons}\n"
    result, _ = _run(base + "seeds: " + "9" * 5000 + "\n", [])
    assert result.exit_code == 2 and "an integer of 5,000 characters" in result.output
    result, _ = _run(base, [("seeds", "9" * 5000)])
    assert result.exit_code == 2 and "an integer of 5,000 characters" in result.output
    result, _ = _run(base + "model: {hidden_units: " + "[" * 5000 + "]" * 5000 + "}\n", [])
    assert result.exit_code == 2 and "nested more than" in result.output
