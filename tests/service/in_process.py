"""A click command of the service run in the test's own process (click's
CliRunner: its exit code, its stdout and stderr apart), for the tests
whose checks are about what the command prints and leaves in the store,
not about the process (issue 17: each kg-train or kg report process
pays TensorFlow's and MLflow's start-up, ~7 CPU seconds measured)."""

import logging
import os


def invoke(command, *args, prog_name, input=None):
    """`prog_name ARGS` in this process, `input` (text) its stdin; the root logger the command
    configures and the environment variables it sets are put back
    afterwards, so that later tests of this worker meet neither."""
    from click.testing import CliRunner

    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    environ = dict(os.environ)
    try:
        return CliRunner().invoke(command, [str(a) for a in args], prog_name=prog_name, input=input)
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        os.environ.clear()
        os.environ.update(environ)


def kg_train(*args):
    """`kg-train ARGS --quiet` in this process."""
    from kg_service.cli import train

    return invoke(train.main, *args, "--quiet", prog_name="kg-train")


def kg_report(*args):
    """`kg report ARGS` in this process."""
    from kg_service.cli import report

    return invoke(report.report, *args, prog_name="kg report")
