"""configs/tiny.yaml learns moons in its seconds (issue 30 §21): its
models sat at chance (val 47.9 %), so the README's predict and serve
examples answered 0.56/0.44. Read from the session's shared tiny sweep
(tests/service/shared_sweep.py: tiny.yaml, gelu, one seed), no extra run."""

import json
import re

CHANCE = 0.5  # moons: two balanced classes
MARGIN = 0.35  # the champion at 85 % or better


def test_the_tiny_sweeps_champion_beats_chance_by_a_margin(tiny_sweep):
    (summary,) = (tiny_sweep.cwd / "sweep").rglob("summary.json")
    results = json.loads(summary.read_text())
    (line,) = [l for l in tiny_sweep.stdout.splitlines() if "models:/tiny-gelu/1" in l]
    validation = float(re.search(r"val acc ([0-9.]+)", line).group(1))
    assert validation >= CHANCE + MARGIN, line
    assert results["winner"]["mean_test_accuracy"] >= CHANCE + MARGIN, results["winner"]
    for name, stats in results["activations"].items():
        assert stats["test_accuracy"]["mean"] >= CHANCE + MARGIN, (name, stats)
