"""What every kg command shares: exit codes, options, logging, signals.

Like MLflow's `cli_args`: a command takes `@options.QUIET` instead of
spelling `-q/--quiet` again, and every command exits with the codes
defined here, once.

Exit codes: 0 done; 2 a usage or config error (`ServiceError`, or
click's own usage errors), one paragraph on stderr without a traceback;
75 (sysexits.h's EX_TEMPFAIL) the tracking store failed mid-sweep and
stayed down past its retries; 130 interrupted (SIGINT, SIGTERM).
"""

import contextlib
import logging
import math
import os
import signal
import sys
import tempfile
import threading

import click

from kg_service import redact
from kg_service.cli import messages
from kg_service.errors import ServiceError
from kg_service.errors import SweepInterrupted

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}

class FiniteRange(click.FloatRange):
    """`click.FloatRange` that also refuses NaN and infinity: NaN passes
    every bound (each comparison is False) and infinity passes an open one,
    so `--margin nan` was accepted (issue 30 §16). Every float option of
    every command takes this type."""

    def convert(self, value, param, ctx):
        number = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):
            expected = self._describe_range()
            self.fail(f"{value!r} is not a finite number; expected one in {expected}.", param, ctx)
        return super().convert(number, param, ctx)


QUIET = click.option(
    "-q", "--quiet", is_flag=True, help="Log lines instead of the progress display."
)


def echo(line="", **kwargs):
    """`click.echo` of one line for the user, any URI's password hidden
    (`kg_service.redact`): every line a kg command prints goes through it."""
    click.echo(redact.text(line), **kwargs)


class Redacted(logging.Filter):
    """Hides URI passwords in every log record (kg's and MLflow's)."""

    def filter(self, record):
        message = record.getMessage()
        hidden = redact.text(message)
        if hidden != message:
            record.msg, record.args = hidden, ()
        return True


def tracking_uri(help):
    """The `--tracking-uri URI` option; `help` says what each command uses it for."""
    return click.option("--tracking-uri", metavar="URI", help=help)


def checked_tracking_uri(value):
    """`--tracking-uri`'s value, stripped; None if not given.

    Raises:
        ServiceError: for an empty or blank value.
    """
    if value is None:
        return None
    if not value.strip():
        raise ServiceError(
            "--tracking-uri: got an empty string; expected an MLflow tracking URI, "
            "e.g. sqlite:///mlflow.db."
        )
    return value.strip()


def fail(command, error):
    """Prints a `ServiceError` as `command: error: ...` and exits with its code."""
    echo(f"{command}: error: {error}", err=True)
    sys.exit(getattr(error, "exit_code", EXIT_USAGE))


@contextlib.contextmanager
def command_errors(ctx, command):
    """How every kg command ends on a user's mistake or an interrupt.

    A `ServiceError` prints `command: error: ...` (one paragraph, no
    traceback) and exits with its code (2 unless it says otherwise); a
    sweep stopped part-way (`SweepInterrupted`) says what it kept and how
    to resume, with its own code; Ctrl-C or SIGTERM elsewhere prints
    `command: interrupted.` and exits 130.
    """
    try:
        yield
    except SweepInterrupted as error:
        echo(f"\n{command}: {messages.describe(error)}", err=True)
        ctx.exit(error.exit_code)
    except ServiceError as error:
        echo(f"{command}: error: {messages.describe(error)}", err=True)
        ctx.exit(getattr(error, "exit_code", EXIT_USAGE))
    except KeyboardInterrupt:
        click.echo(f"\n{command}: interrupted.", err=True)
        ctx.exit(EXIT_INTERRUPTED)


def configure_logging(*, quiet, verbose):
    """The root logger: INFO when quiet, DEBUG with --verbose, else WARNING."""
    level = logging.DEBUG if verbose else logging.INFO if quiet else logging.WARNING
    logging.basicConfig(
        force=True,
        level=level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    for handler in logging.getLogger().handlers:
        handler.addFilter(Redacted())


@contextlib.contextmanager
def sigterm_as_interrupt():
    """SIGTERM (a scheduler, `kill`, Kubernetes) stops a sweep like Ctrl-C:
    the pipeline marks the sweep KILLED and says how to resume.

    Both are remembered too: an interrupt that lands in a finalizer (a
    `__del__`: SQLAlchemy's, mid store call) is printed as "Exception
    ignored" and lost, and the sweep went on to register and exit 0. The
    progress display raises it again at its next event
    (`raise_if_interrupted`)."""

    def interrupt(signum, frame):
        _INTERRUPTED.set()
        raise KeyboardInterrupt

    _INTERRUPTED.clear()
    previous = {s: signal.signal(s, interrupt) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


_INTERRUPTED = threading.Event()


def raise_if_interrupted():
    """Raises KeyboardInterrupt, once, for an interrupt `sigterm_as_interrupt`
    saw (one a finalizer swallowed: an interrupt raised where it landed
    stops the sweep, and no event follows)."""
    if _INTERRUPTED.is_set():
        _INTERRUPTED.clear()
        raise KeyboardInterrupt


@contextlib.contextmanager
def native_stderr_to_file(enabled):
    """Sends C++ logs (TensorFlow, XLA, absl) written to fd 2 to a file.

    absl's "I0000 ..." lines ignore TF_CPP_MIN_LOG_LEVEL. Python's own
    stderr (progress, logging, errors) keeps going to the terminal through a
    duplicate of the original descriptor. The file is kept, and its path
    printed, only if the run fails. Off with --verbose, and wherever stderr
    is not a real file descriptor (e.g. click's test runner).
    """
    try:
        real = enabled and sys.stderr.fileno() == 2
    except (AttributeError, OSError, ValueError):
        real = False
    if not real:
        yield
        return
    sys.stderr.flush()
    native = tempfile.NamedTemporaryFile(
        prefix="kg-train-native-", suffix=".log", delete=False
    )
    saved_fd = os.dup(2)
    saved_stderr = sys.stderr
    os.dup2(native.fileno(), 2)
    sys.stderr = os.fdopen(os.dup(saved_fd), "w", buffering=1)
    succeeded = False
    try:
        yield
        succeeded = True
    except ServiceError:
        succeeded = True  # a user's mistake: its own message says it all
        raise
    finally:
        sys.stderr.flush()
        os.dup2(saved_fd, 2)
        os.close(saved_fd)
        sys.stderr.close()
        sys.stderr = saved_stderr
        native.close()
        if succeeded:
            os.unlink(native.name)
        else:
            click.echo(f"kg-train: native (C++) log: {native.name}", err=True)
