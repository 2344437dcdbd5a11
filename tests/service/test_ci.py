""".ci/run's editable install of the project is quiet: setuptools' notice
about folders named like the package (emitted for every install through
its meta-path finder, which `kg_service = service/` needs) is filtered in
.ci/run, and only that notice."""

import pathlib
import re
import shlex
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]
NOTICE = "Editable installation"


def ci_install_environment():
    """The VAR=value words before .ci/run's `pip install -e`."""
    text = (REPO / ".ci" / "run").read_text()
    (line,) = [l for l in text.splitlines() if "pip install" in l and " -e " in l]
    words = shlex.split(line)
    env = {}
    for word in words:
        if not re.fullmatch(r"\w+=.*", word):
            break
        name, value = word.split("=", 1)
        env[name] = value
    return env


def test_ci_editable_install_shows_no_setuptools_editable_notice(tmp_path):
    import os

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    # As .ci/run does first: the pip that shows a build backend's warnings.
    subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--quiet", "--upgrade", "pip", "setuptools>=77"],
        check=True, capture_output=True, timeout=600,
    )  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    env.update(ci_install_environment())
    # The project alone (--no-deps): the notice comes from building it.
    result = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--no-deps", "-e", str(REPO)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert NOTICE not in output, output[-3000:]
    # The filter is that notice's, not every warning's.
    assert env.get("PYTHONWARNINGS", "").startswith(f"ignore:{NOTICE}")
    imported = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import kg_service.tracking.destinations, keras_gelu"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert "No module named 'kg_service'" not in imported.stderr
