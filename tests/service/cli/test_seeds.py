"""`kg plan`'s options: bad values exit 2 with one paragraph, no traceback.
(The command on a real stored sweep: tests/service/analysis/test_report.py.)"""

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
