"""issue 34 §4: where the report's page is, as the sweep's last lines and
`kg report --open` give it."""

import pathlib
import types

from kg_service.cli import summary
from kg_service.tracking import mlflow_store


def test_the_ui_address_is_the_servers_own_or_mlflow_uis_default():
    assert mlflow_store.ui_url("http://kg:s3cret@mlflow:5000/", "3", "abc", "report/report.html") \
        == "http://kg:***@mlflow:5000/#/experiments/3/runs/abc/artifactPath/report/report.html"
    assert mlflow_store.ui_url("sqlite:////tmp/m.db", "1", "abc", "report/report.html") \
        == "http://127.0.0.1:5000/#/experiments/1/runs/abc/artifactPath/report/report.html"


def test_the_last_lines_give_the_file_and_the_mlflow_page(tmp_path):
    lines = []
    summary.show_page(lines.append, tmp_path / "report.html", "http://127.0.0.1:5000/#/x",
                      local=True)
    assert lines == [f"Page:       {(tmp_path / 'report.html').as_uri()}",
                     "In MLflow:  http://127.0.0.1:5000/#/x  (once the `mlflow ui` below runs)"]


def test_open_goes_to_the_servers_page_else_to_the_file(tmp_path):
    outcome = types.SimpleNamespace(out_dir=pathlib.Path(tmp_path), page_url="http://h:5000/#/p",
                                    tracking_uri="http://h:5000")
    assert summary.page_target(outcome) == "http://h:5000/#/p"
    local = types.SimpleNamespace(out_dir=pathlib.Path(tmp_path), page_url="http://127.0.0.1:5000/#/p",
                                  tracking_uri="sqlite:///mlflow.db")
    assert summary.page_target(local) == (tmp_path / "report.html").resolve().as_uri()
