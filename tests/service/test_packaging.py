"""The wheel installs two import packages of its own, `keras_gelu` and
`kg_service`, and no generic top-level name (issue 7 §5: a `service`
package would collide with any other project's `service`)."""

import pathlib
import subprocess
import sys
import zipfile

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_wheel_top_level_packages_are_distinctive(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "-w", str(tmp_path), str(REPO)],
        capture_output=True, text=True, timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    (wheel,) = tmp_path.glob("keras_gelu-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith((".dist-info", ".data"))}
    assert top == {"keras_gelu", "kg_service"}, top
    for module in ("cli/train.py", "tasks/classification/pyfunc.py", "tasks/language/lm_layers.py"):
        assert f"kg_service/{module}" in names, module
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    scripts = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "kg-train = kg_service.cli.train:main" in scripts
    assert "kg = kg_service.cli.main:main" in scripts
