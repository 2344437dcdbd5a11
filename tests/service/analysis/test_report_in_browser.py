"""issue 34 §3: a sweep's report as a person sees it, in a real browser.

The shared smoke sweep (`tiny_smoke_sweep`: configs/tiny.yaml --smoke,
relu against gelu, trained once per pytest run for several modules) is
served by one real `mlflow server` (on a copy of its sqlite store: a
reader never writes into the shared one), and headless Chromium
(tests/service/browser.py) opens the address the sweep printed
("In MLflow:"), the sweep run's report.html in MLflow's artifact view.
MLflow shows an HTML artifact in a sandboxed iframe of a blob: URL (the
file fetched from get-artifact): the assertions read that iframe's DOM,
what the person sees. The same file is then opened from disk (file://).

Screenshots for the docs: `KG_SCREENSHOTS=docs/img` writes the three
pictures docs/report-page.md shows (the command is there).
"""

import os
import pathlib
import re
import shutil

import pytest

from tests.service import browser
from tests.service import servers

# MLflow 3.17's UI asks for the signed-in user (an endpoint of its auth app,
# absent from a plain `mlflow server`) and logs the 404: the UI's own request,
# not the report's. Every other console error fails the test.
MLFLOW_UI_OWN = ("/ajax-api/2.0/mlflow/users/current",)

# What a person sees, measured in the page: the text, the tables' cells,
# every image's natural width, how wide the text is against the viewport.
LOOK = """(() => ({
  title: document.querySelector('h1') && document.querySelector('h1').innerText,
  headings: [...document.querySelectorAll('h2')].map(h => h.innerText),
  text: document.body.innerText,
  tables: [...document.querySelectorAll('table')].map(t => [...t.rows].map(
      r => [...r.cells].map(c => c.innerText))),
  images: [...document.images].map(i => ({alt: i.alt, complete: i.complete,
      width: i.naturalWidth, shown: i.getBoundingClientRect().width})),
  scrollWidth: document.documentElement.scrollWidth,
  viewport: window.innerWidth,
}))()"""


@pytest.fixture(scope="module")
def swept(tiny_smoke_sweep):
    """The smoke sweep's report folder and the MLflow address it printed."""
    (page,) = (tiny_smoke_sweep.cwd / "sweep").rglob("report.html")
    (url,) = re.findall(r"In MLflow:\s+(\S+)", tiny_smoke_sweep.stdout)
    return page.parent, url


@pytest.fixture(scope="module")
def seen(swept, tiny_smoke_sweep, tmp_path_factory):
    """What Chromium shows: MLflow's run page (and its report iframe), then
    report.html from disk; screenshots of both."""
    folder, url = swept
    root = tmp_path_factory.mktemp("browser")
    shutil.copy(tiny_smoke_sweep.db, root / "mlflow.db")
    shots = pathlib.Path(os.environ.get("KG_SCREENSHOTS") or root)
    with servers.mlflow_server(f"sqlite:///{root / 'mlflow.db'}", str(root)) as uri, \
            browser.chromium() as page:
        # The printed address names `mlflow ui`'s default; this server's port instead.
        page.open(url.replace("http://127.0.0.1:5000", uri))
        page.wait_until("!!document.querySelector('iframe.mlflow-html-iframe')")
        frame = page.frame_context("blob:")
        page.wait_until("document.readyState === 'complete' && "
                        "[...document.images].every(i => i.complete)", frame)
        in_mlflow = page.evaluate(LOOK, frame)
        run_page = page.evaluate(LOOK)
        page.screenshot(shots / "mlflow-run-report.png")
        mlflow_errors = page.errors()
        page.events.clear()
        page.open((folder / "report.html").resolve().as_uri())
        from_disk = page.evaluate(LOOK)
        page.screenshot(shots / "report-page.png")
        page.evaluate("document.querySelector('figure').scrollIntoView()")  # the forest plot
        page.screenshot(shots / "report-figures.png")
        disk_errors = page.errors()
    return {"mlflow": in_mlflow, "run_page": run_page, "disk": from_disk,
            "mlflow_errors": mlflow_errors, "disk_errors": disk_errors, "folder": folder}


def first_verdict(folder):
    """report.md's first verdict sentence, as the sweep wrote it."""
    md = (folder / "report.md").read_text()
    return md.split("## Verdicts\n\n- ", 1)[1].split("\n", 1)[0]


@pytest.mark.parametrize("where", ["mlflow", "disk"])
def test_the_verdict_comes_first_and_the_results_table_is_there(seen, where):
    look = seen[where]
    assert look["title"] == "kg-smoke: relu, gelu"
    assert look["headings"][0] == "Verdicts"
    verdict = first_verdict(seen["folder"])
    assert verdict.startswith("gelu vs relu: ")
    assert verdict in look["text"]
    results = look["tables"][0]
    assert results[0][0] == "activation"
    assert [row[0] for row in results[1:]] == ["relu", "gelu"]


@pytest.mark.parametrize("where", ["mlflow", "disk"])
def test_every_figure_loads_with_its_alt_text(seen, where):
    images = seen[where]["images"]
    pngs = sorted(p.name for p in seen["folder"].glob("*.png"))
    assert len(images) == len(pngs) >= 4  # the forest plot, curves, per seed, boundaries...
    for image in images:
        assert image["complete"] and image["width"] > 0, image
        assert image["alt"] and 0 < image["shown"] <= seen[where]["viewport"], image


@pytest.mark.parametrize("where", ["mlflow", "disk", "run_page"])
def test_the_text_fits_the_viewport(seen, where):
    look = seen[where]
    assert look["scrollWidth"] <= look["viewport"], look["scrollWidth"]


def test_no_console_errors(seen):
    assert seen["disk_errors"] == []
    theirs = [e for e in seen["mlflow_errors"] if not any(u in e for u in MLFLOW_UI_OWN)]
    assert theirs == []
