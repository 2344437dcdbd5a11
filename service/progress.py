"""Progress for a sweep: a live line on a terminal, log lines otherwise."""

import logging
import sys
import time

log = logging.getLogger("kg-train")


def _clock(seconds):
    seconds = int(max(0, seconds))
    return f"{seconds // 60}:{seconds % 60:02d}"


class SweepProgress:
    """Renders the training events of `service.train.train_sweep`.

    Events are dicts with "activation", "epoch", "epochs", "members_done",
    "members_total" and optionally "val_accuracy". The ETA extrapolates the
    share of member-epochs done.

    Args:
        quiet: Log a line per activation group (at 25% steps) instead of
            redrawing a live line.
        stream: Where the live line goes (default stderr).
    """

    def __init__(self, quiet=False, stream=None):
        self.stream = stream or sys.stderr
        self.live = not quiet and self.stream.isatty()
        self.quiet = quiet
        self.start = None  # set by the first event: start-up is not training
        self._last_logged = {}

    def __call__(self, event):
        total = event["members_total"] * event["epochs"]
        group = event.get("group_size", 1)
        done = event["members_done"] * event["epochs"] + event["epoch"] * group
        now = time.monotonic()
        if self.start is None:
            self.start = now
            self._first_done = done
        elapsed = now - self.start
        rate_done = done - self._first_done
        eta = elapsed / rate_done * (total - done) if rate_done else None
        accuracy = event.get("val_accuracy")
        text = (
            f"training {event['activation']:<20} epoch {event['epoch']:>3}/"
            f"{event['epochs']:<3} members {event['members_done']}/"
            f"{event['members_total']}"
            + (f"  val_acc {accuracy:.3f}" if accuracy is not None else "")
            + f"  elapsed {_clock(elapsed)}"
            + (f"  ETA {_clock(eta)}" if eta is not None else "")
        )
        if self.live:
            self.stream.write("\r" + text[:119].ljust(119))
            self.stream.flush()
        else:
            quarter = (4 * event["epoch"]) // event["epochs"]
            key = event["activation"]
            if self._last_logged.get(key) != quarter:
                self._last_logged[key] = quarter
                log.info(text)

    def stage(self, message):
        """Reports a new stage (tracking, export, registry...)."""
        self.close()
        log.info(message)

    def close(self):
        if self.live:
            self.stream.write("\r" + " " * 119 + "\r")
            self.stream.flush()
