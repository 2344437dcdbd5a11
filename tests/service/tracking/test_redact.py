"""A tracking URI with `user:password@` (issue 30 §12): it works as
MLflow's own client takes it (basic auth), and no line kg prints or logs,
and nothing it logs to the store, shows the password. The sweep against a
real server with such a URI is test_shared_server.py's."""

import logging

from kg_service import redact
from kg_service.cli import options
from tests.service import in_process
from tests.service import servers
from tests.service.sweep.test_faults import TINY

SECRET = "s3cr3t-pw"


def test_every_uri_in_a_text_has_its_password_hidden():
    assert redact.uri(f"http://kg:{SECRET}@mlflow:5000/") == "http://kg:***@mlflow:5000/"
    line = f"store 'postgresql://kg:{SECRET}@db/mlflow' and https://a:{SECRET}@h:1/x down"
    assert redact.text(line) == "store 'postgresql://kg:***@db/mlflow' and https://a:***@h:1/x down"
    for plain in ("http://127.0.0.1:5000", "http://user@host", "sqlite:////tmp/a:b@c.db", None):
        assert redact.uri(plain) == plain


def test_log_lines_hide_passwords(capsys):
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        options.configure_logging(quiet=True, verbose=False)
        logging.getLogger("kg-train").warning("tracking store %s unreachable", f"http://kg:{SECRET}@h:1")
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    err = capsys.readouterr().err
    assert "http://kg:***@h:1" in err and SECRET not in err


def test_a_server_that_is_down_is_named_without_its_password(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    uri = f"http://kg:{SECRET}@127.0.0.1:{servers.free_port()}"
    result = in_process.kg_train("--config", TINY, "--tracking-uri", uri)
    assert result.exit_code == 2, result.stderr[-3000:]
    assert SECRET not in result.stderr + result.stdout
    assert "kg:***@127.0.0.1" in result.stderr
    assert "Connection refused" in result.stderr, result.stderr  # not "Name or service not known"
