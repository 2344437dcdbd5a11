"""A sequential sweep's looks in its report: a section of report.md, an
entry of summary.json. The numbers are `sequential.looks_summary`'s, the
lines `wording.sequential_lines`'."""

import json

from kg_service.analysis import sequential
from kg_service.analysis import wording

HEADING = "## Sequential seeds"


def add_looks(report_path, summary_path, looks):
    """Appends the looks to report.md and to summary.json ("sequential")."""
    lines = wording.sequential_lines(looks)
    text = report_path.read_text().rstrip("\n")
    report_path.write_text(
        text + f"\n\n{HEADING}\n\n" + "\n".join(f"- {line}" for line in lines) + "\n"
    )
    data = json.loads(summary_path.read_text())
    data["sequential"] = sequential.looks_summary(looks)
    summary_path.write_text(json.dumps(data, indent=2, allow_nan=False) + "\n")


def looks_tags(looks):
    """Each comparison's sequential decision, as tags on the sweep's run."""
    return {
        f"sequential.{activation}": wording.DECISIONS[test.decision]
        for activation, test in looks.comparisons
    }
