"""Every example in every command's --help names what the shipped configs
make (issue 30 §18: `kg plan --help` said `--experiment moons`; the
shipped config makes `moons-relu-vs-gelu`), and parses as the command's
own arguments. In this process: click's parser, the configs' names; no
store, no training."""

import pathlib
import re
import shlex

import pytest

from kg_service.cli.main import main
from kg_service.cli.train import main as kg_train
from kg_service.config import derived
from kg_service.config.loading import load_config

REPO = pathlib.Path(__file__).resolve().parents[3]
CONFIGS = [load_config(p) for p in sorted((REPO / "configs").glob("*.yaml"))]
COMMANDS = {"kg-train": kg_train, **{f"kg {n}": c for n, c in main.commands.items()}}


def _names():
    """What a user of the shipped configs (and their --smoke runs) has."""
    experiments, studies, models = set(), set(), set()
    for config in CONFIGS:
        for variant in (config, derived.smoke(config)):
            experiments.add(variant.experiment)
            studies.add(variant.study)
            models.update(derived.registered_model_name(variant, a) for a in variant.activations)
    return experiments, studies - {None}, models


def _examples():
    for name, command in COMMANDS.items():
        help_text = command.help or ""
        for line in help_text.split("Examples:", 1)[-1].splitlines() if "Examples:" in help_text else []:
            line = line.split("  #", 1)[0].split("|")[-1].strip()
            if line.startswith(name + " "):
                yield name, command, shlex.split(line[len(name):])


EXAMPLES = list(_examples())


def test_every_command_with_examples_is_covered():
    assert {"kg plan", "kg report", "kg-train", "kg serve", "kg predict"} <= {n for n, _, _ in EXAMPLES}


@pytest.mark.parametrize("name, command, args", EXAMPLES, ids=[" ".join([n, *a]) for n, _, a in EXAMPLES])
def test_a_help_example_names_what_the_shipped_configs_make(name, command, args):
    experiments, studies, models = _names()
    command.make_context(name, list(args))  # its options and arguments parse
    for flag, value in zip(args, args[1:]):
        if flag == "--experiment":
            assert value in experiments, f"{name}: no shipped config makes experiment {value!r}"
        if flag == "--study":
            assert value in studies, f"{name}: no shipped config joins study {value!r}"
        if flag == "--config":
            assert (REPO / value).is_file(), value
    for value in args:
        model = re.match(r"models:/([^@/]+)", value) or re.match(r"exports/([^/]+)/", value)
        if model:
            assert model.group(1) in models, f"{name}: no shipped config registers {model.group(1)!r}"
