"""`kg plan`'s options: bad values exit 2 with one paragraph, no traceback.
(The command on a real stored sweep: tests/service/analysis/test_report.py.)"""

import click
import pytest
from click.testing import CliRunner

from kg_service.cli.main import main


@pytest.mark.parametrize("args, says", [
    (["--power", "1.5"], "Invalid value for '--power': 1.5 is not in the range 0<x<1."),
    (["--alpha", "0.7"], "Invalid value for '--alpha': 0.7 is not in the range 0<x<0.5."),
    (["--margin", "-0.1"], "Invalid value for '--margin': -0.1 is not in the range x>0."),
    (["--tracking-uri", " "], "--tracking-uri: got an empty string"),
])
def test_bad_options_exit_2_with_one_paragraph(args, says):
    result = CliRunner().invoke(main, ["plan", "--experiment", "x", *args])
    assert result.exit_code == 2
    assert says in result.output and "Traceback" not in result.output


def test_plan_is_a_kg_command():
    result = CliRunner().invoke(main, ["--help"])
    assert "plan" in result.output


def _numeric_options():
    """Every (command, option) of kg and kg-train whose value is a number."""
    from kg_service.cli.train import main as kg_train

    commands = [(f"kg {name}", command) for name, command in main.commands.items()]
    commands.append(("kg-train", kg_train))
    for name, command in commands:
        for param in command.params:
            if isinstance(param, click.Option) and isinstance(
                param.type, (click.types.FloatParamType, click.types.IntParamType)
            ):
                yield name, command, param


def _required_args(command, skip):
    args = []
    for param in command.params:
        if param is skip or not param.required:
            continue
        args += [param.opts[0], "x"] if isinstance(param, click.Option) else ["x"]
    return args


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e999", "NaN"])
def test_every_numeric_option_refuses_a_non_finite_value(value):
    """Issue 30 §16: `kg plan --margin nan` (or inf) was accepted: click's
    FloatRange lets NaN through every bound, and infinity through an open
    one. Every numeric option of every command, at once."""
    found = list(_numeric_options())
    assert any(p.name == "margin" for _, _, p in found)
    for name, command, param in found:
        args = [*_required_args(command, param), param.opts[0], value]
        result = CliRunner().invoke(command, args, prog_name=name)
        assert result.exit_code == 2, (name, param.opts, result.output)
        assert param.opts[-1] in result.output, result.output
        if isinstance(param.type, click.types.FloatParamType):
            assert "finite" in result.output, result.output
        assert "Traceback" not in result.output
