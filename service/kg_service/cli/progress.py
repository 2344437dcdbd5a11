"""Progress for a sweep: a live bar on a terminal, log lines otherwise.

The bar is rich's. Where the stream is not a terminal (tests, CI, a file)
or with `--quiet`, nothing is drawn: the same progress goes out as plain
log records, without escape codes.
"""

import atexit
import datetime
import logging
import sys

from rich import progress as rich_progress
from rich.console import Console

from kg_service.cli import options

log = logging.getLogger("kg-train")

_DAY = 24 * 3600.0


def _clock(seconds):
    return str(datetime.timedelta(seconds=int(seconds)))  # as rich's columns show it


class SweepProgress:
    """Renders the training events of `kg_service.training.loop.train_sweep`.

    Events are dicts with "activation", "epoch", "epochs", "members_done",
    "group_size", "members_total" and optionally "val_accuracy". One event
    per epoch per training group: activations of one architecture train as
    one stacked model (`kg_service.training.loop.activation_groups`), and
    the group's "activation" names each of them, "relu+gelu", so a log line
    reads `training relu+gelu  epoch 3/8  members 0/6 ...` (members of the
    groups before it done). Progress
    counts member-epochs; elapsed time and the ETA start at the first event
    (start-up is not training), and the ETA extrapolates the rate since.

    Args:
        quiet: Log a line per group (at 25% steps) instead of drawing
            a live bar.
        stream: Where the bar goes (default stderr); one that is not a
            terminal (or TERM=dumb) gets log lines instead.
    """

    def __init__(self, quiet=False, stream=None):
        console = Console(file=stream or sys.stderr)
        self.live = not quiet and console.file.isatty() and not console.is_dumb_terminal
        self._bar = rich_progress.Progress(
            rich_progress.TextColumn("{task.fields[activation]} epoch {task.fields[epoch]}"),
            rich_progress.BarColumn(bar_width=20),
            rich_progress.TaskProgressColumn(),
            rich_progress.TextColumn("{task.fields[score]}"),
            rich_progress.TimeElapsedColumn(),
            rich_progress.TextColumn("ETA"),
            rich_progress.TimeRemainingColumn(),
            console=console,
            transient=True,  # close() leaves the terminal as it found it
            speed_estimate_period=_DAY,  # the rate since the first event
            disable=not self.live,  # still counts, for the log lines
        )
        self._task = None
        self._logged = {}  # activation -> the last quarter logged
        if self.live:
            atexit.register(self.close)  # an error must not leave the cursor hidden

    def __call__(self, event):
        options.raise_if_interrupted()  # one a finalizer swallowed
        epochs = event["epochs"]
        done = event["members_done"] * epochs + event["epoch"] * event.get("group_size", 1)
        accuracy = event.get("val_accuracy")
        score = f"val_acc {accuracy:.3f}" if accuracy is not None else ""
        epoch = f"{event['epoch']}/{epochs}"
        fields = dict(activation=event["activation"], epoch=epoch, score=score)
        if self._task is None:
            self._task = self._bar.add_task("", total=event["members_total"] * epochs, **fields)
        # total again: a sequential sweep's next look has more members.
        total = event["members_total"] * epochs
        self._bar.update(self._task, total=total, completed=done, **fields)
        if self.live:
            self._bar.start()  # again after a stage closed it
            return
        quarter = (4 * event["epoch"]) // epochs
        if self._logged.get(event["activation"]) != quarter:
            self._logged[event["activation"]] = quarter
            task = self._bar.tasks[0]
            remaining = task.time_remaining
            log.info(
                f"training {event['activation']:<20} epoch {event['epoch']:>3}/{epochs:<3} "
                f"members {event['members_done']}/{event['members_total']}"
                + (f"  {score}" if score else "")
                + f"  elapsed {_clock(task.elapsed or 0)}"
                + (f"  ETA {_clock(remaining)}" if remaining is not None else "")
            )

    def stage(self, message):
        """Reports a new stage (tracking, export, registry...)."""
        options.raise_if_interrupted()  # one a finalizer swallowed
        self.close()
        log.info(message)

    def close(self):
        """Removes the live bar, if any; a later event draws it again."""
        if self.live:
            self._bar.stop()
