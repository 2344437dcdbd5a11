"""issue 34: report.html beside report.md, from one report model; the figures
a reader looks at first (forest plot, small multiples, one-value tuning)."""

import html.parser
import math
import re

import numpy as np
import pytest

from kg_service.analysis.numbers import comparisons
from kg_service.analysis.reports import forest
from kg_service.analysis.reports import learning
from kg_service.analysis.reports import page
from kg_service.analysis.reports import report
from kg_service.analysis.reports import tuning
from kg_service.analysis.reports.figures import activation_colors
from kg_service.results import MemberResult

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def members(names, seeds=3, epochs=4):
    rng = np.random.default_rng(3)
    out = []
    for i, name in enumerate(names):
        for s in range(seeds):
            va = list(np.linspace(0.6, 0.9 + 0.005 * i, epochs) + rng.normal(0, 0.005, epochs))
            vl = list(np.linspace(0.7, 0.3 - 0.005 * i, epochs))
            history = {"loss": vl, "accuracy": va, "val_loss": vl, "val_accuracy": va}
            acc = round((0.9 + 0.004 * i + rng.normal(0, 0.004)) * 400) / 400
            out.append(MemberResult(name, s, history, 0.3, acc, None))
    return out


class _Tags(html.parser.HTMLParser):
    """Every start tag and its attributes, and the text, of an HTML page."""

    def __init__(self):
        super().__init__()
        self.tags, self.text = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def parsed(text):
    p = _Tags()
    p.feed(text)
    return p


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    # An activation name and a title with markup in them: text, never tags.
    results = members(["relu", "gelu<script>alert(1)</script>"])
    summary = comparisons.summarize(results, "relu")
    out = tmp_path_factory.mktemp("page")
    report.write_report(summary, results, out, title="x<b>y</b>: relu vs gelu",
                        figures=("learning_curves", "per_seed"))
    return out


def test_report_html_is_written_beside_report_md_with_the_verdicts_first(written):
    text = (written / "report.html").read_text()
    md = (written / "report.md").read_text()
    body = " ".join(parsed(text).text)
    verdicts = body.index("Verdicts")
    assert verdicts < body.index("Setup") < body.index("Per seed")
    # report.md keeps its order: the setup, the results, then the verdicts.
    assert md.index("## Setup") < md.index("## Verdicts")


def test_report_html_escapes_names_and_titles_so_they_cannot_inject_markup(written):
    text = (written / "report.html").read_text()
    tags = [t for t, _ in parsed(text).tags]
    assert "script" not in tags and "b" not in tags
    assert "gelu&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "x&lt;b&gt;y&lt;/b&gt;" in text


def test_report_html_is_one_self_contained_file(written):
    text = (written / "report.html").read_text()
    tags = parsed(text).tags
    images = [a["src"] for t, a in tags if t == "img"]
    assert len(images) == 3  # the forest plot, the learning curves, the per-seed plot
    assert all(src.startswith("data:image/png;base64,") for src in images)
    assert all(a.get("alt") for t, a in tags if t == "img")
    # Nothing fetched, nothing run: no script, no link, no external URL.
    assert not [t for t, a in tags if t in ("script", "link", "iframe", "object")]
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", text)


def test_markdown_and_html_render_the_same_blocks():
    doc = page.Page("T", (
        page.Section("Verdicts", (page.Bullets(("a is `better`", "b **chosen**")),), lead=True),
        page.Paragraph("p < q & r"),
        page.table(["name", "n"], [["x|y", 1]]),
        page.Details("more", (page.Code("k: v", "yaml"),)),
    ))
    assert page.markdown(doc) == (
        "# T\n\n## Verdicts\n\n- a is `better`\n- b **chosen**\n\np < q & r\n\n"
        "| name | n |\n|---|---:|\n| x\\|y | 1 |\n\n<details><summary>more</summary>\n\n"
        "```yaml\nk: v\n```\n\n</details>\n")
    text = page.html(doc, ".")
    assert "<li>a is <code>better</code></li>" in text and "<strong>chosen</strong>" in text
    assert "<p>p &lt; q &amp; r</p>" in text and "<td>x|y</td>" in text


def test_the_forest_plot_takes_plain_rows_and_draws_the_margin_band(tmp_path):
    rows = [forest.Row("claim A", 0.8, 0.2, 1.4, 0.5, "better (95% CI)"),
            forest.Row("claim B", 0.1, -0.3, 0.4, 0.5, "equivalent (90% CI)"),
            forest.Row("constant", 0.25, math.nan, math.nan, math.nan, "better (no interval)")]
    fig = forest.forest_plot(rows, title="claims", x_label="Δ (pp)")
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.get_yticklabels()] == ["constant", "claim B", "claim A"]
    assert [t.get_text() for t in ax.texts] == [r.verdict for r in reversed(rows)]
    assert ax.get_xlabel() == "Δ (pp)" and fig.get_suptitle() == "claims"
    assert len(ax.collections) == 2  # a margin band per row with a margin
    lo, hi = ax.get_xlim()
    assert lo == -hi and hi >= 1.4  # zero centred, every interval inside
    assert forest.forest_plot([], title="t", x_label="x") is None


def test_sweep_rows_are_each_comparisons_deciding_interval_in_shown_units():
    results = members(["relu", "gelu", "elu"], seeds=4)
    summary = comparisons.summarize(results, "relu")
    rows = forest.sweep_rows(summary)
    assert [r.label for r in rows] == ["gelu vs relu", "elu vs relu"]
    for r, c in zip(rows, summary.comparisons):
        assert r.estimate == pytest.approx(100 * c.paired.mean_diff)
        assert (r.low, r.high) == pytest.approx(tuple(100 * x for x in c.verdict.interval))


def test_more_than_four_activations_get_one_panel_each_on_shared_axes():
    names = ["relu", "gelu", "elu", "silu", "mish"]
    results = members(names)
    summary = comparisons.summarize(results, "relu")
    fig = learning.learning_curves(summary, results, activation_colors(summary))
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert len(visible) == 2 * len(names)  # two metrics x one panel per activation
    assert not any(ax.get_legend() for ax in visible)
    assert {ax.get_title() for ax in visible} == {f"{n} (3 seeds)" for n in names}
    first = visible[: len(names)]
    assert len({ax.get_ylim() for ax in first}) == 1  # shared axes
    few = comparisons.summarize(members(names[:4]), "relu")
    assert len(learning.learning_curves(few, members(names[:4]),
                                        activation_colors(few)).axes) == 2


def test_a_tuning_of_one_value_says_so_instead_of_a_degenerate_axis(tmp_path):
    t = tuning.Tuning(
        parameter="training.learning_rate", select_by="val_loss", higher_is_better=False,
        seeds=1, activations=tuple(
            tuning.ActivationTuning(name, (tuning.Candidate(0.0003, (score,)),), 0.0003)
            for name, score in (("relu", 0.4), ("gelu", 0.3))))
    path = tmp_path / tuning.FIGURE
    fig = tuning.draw_curves(t, path)
    assert path.read_bytes().startswith(PNG_MAGIC)
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.get_xticklabels()] == ["one value: 0.0003"]
    assert ax.get_xlabel() == "training.learning_rate (one value tried)"
    section, figure = tuning.tuning_section(t, tmp_path)
    assert figure == path and section.heading == "Tuning"
    assert page.Figure(tuning.FIGURE, tuning.FIGURE_ALT) in section.blocks
