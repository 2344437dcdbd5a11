"""kg_service.cli.progress: a live bar on a terminal, plain log lines elsewhere."""

import io
import logging

from kg_service.cli.progress import SweepProgress


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def _events(epochs=4):
    for activation, done in (("relu", 0), ("gelu", 2)):
        for epoch in range(1, epochs + 1):
            yield {
                "activation": activation,
                "epoch": epoch,
                "epochs": epochs,
                "members_done": done,
                "group_size": 2,
                "members_total": 4,
                "val_accuracy": 0.5,
            }


def _run(progress):
    for event in _events(epochs=8):
        progress(event)
    progress.stage("logging 4 runs")
    progress.close()


def test_not_a_terminal_gets_log_lines_at_quarter_steps_and_no_escape_codes(caplog):
    stream = io.StringIO()
    with caplog.at_level(logging.INFO, logger="kg-train"):
        _run(SweepProgress(stream=stream))
    assert stream.getvalue() == ""
    lines = [r.getMessage() for r in caplog.records]
    assert [line.split("  elapsed")[0] for line in lines[:-1]] == [
        f"training {a:<20} epoch {e:>3}/8   members {d}/4  val_acc 0.500"
        for a, d in (("relu", 0), ("gelu", 2))
        for e in (1, 2, 4, 6, 8)
    ]
    assert lines[-1] == "logging 4 runs"
    assert not any("\x1b" in line or "\r" in line for line in lines)


def test_quiet_on_a_terminal_logs_instead_of_drawing(caplog):
    stream = _Terminal()
    with caplog.at_level(logging.INFO, logger="kg-train"):
        _run(SweepProgress(quiet=True, stream=stream))
    assert stream.getvalue() == ""
    assert len(caplog.records) == 11


def test_terminal_gets_a_live_bar_and_no_training_log_lines(caplog):
    stream = _Terminal()
    with caplog.at_level(logging.INFO, logger="kg-train"):
        _run(SweepProgress(stream=stream))
    assert "gelu epoch 8/8" in stream.getvalue()
    assert [r.getMessage() for r in caplog.records] == ["logging 4 runs"]


def test_a_stacked_group_gets_one_line_naming_each_activation_and_counts_all_its_members(caplog):
    # A classification or language sweep trains activations of one
    # architecture as one stacked model (issue 20): one event per epoch
    # for the group, named "relu+gelu", then the next group.
    progress = SweepProgress(stream=io.StringIO())
    groups = (("relu+gelu", 0, 4), ("learnable_leaky_relu", 4, 2))
    with caplog.at_level(logging.INFO, logger="kg-train"):
        for activation, done, size in groups:
            for epoch in range(1, 5):
                progress({"activation": activation, "epoch": epoch, "epochs": 4,
                          "members_done": done, "group_size": size, "members_total": 6,
                          "val_accuracy": 0.75})
                if (activation, epoch) == ("relu+gelu", 2):
                    # Member-epochs: the group's 4 members, 2 epochs each.
                    assert progress._bar.tasks[0].completed == 8
    lines = [r.getMessage().split("  elapsed")[0] for r in caplog.records]
    assert lines == [
        f"training {a:<20} epoch {e:>3}/4   members {d}/6  val_acc 0.750"
        for a, d, _ in groups
        for e in (1, 2, 3, 4)
    ]
    # Each activation of the group is named, as a log reader greps it.
    assert lines[0].split()[1].split("+") == ["relu", "gelu"]
    assert progress._bar.tasks[0].completed == progress._bar.tasks[0].total == 24
