"""The report model: a page as a list of blocks, and its two renderers.

A sweep's and a study's report are built once, as a `Page` of blocks
(`Section`, `Paragraph`, `Bullets`, `Table`, `Figure`, `Code`; a
folded section, `Details`); `markdown` renders report.md from it (diffable, rendered by
GitHub) and `html` renders report.html (issue 34 §1): one self-contained
file, the figures inline as PNG data URIs, the styles in the page, no
script and nothing fetched, so it shows inside MLflow's sandboxed
artifact viewer and offline. Every piece of text is escaped
(`html.escape`): a config name with `<` in it is text, never markup.

Sections marked `lead=True` (the verdicts) come first in the HTML page,
right under the title: a reader there wants the answer before the setup.
report.md keeps the model's order.
"""

import base64
import dataclasses
import html as html_lib
import pathlib
import re

from kg_service.analysis.words import tables

HTML = "report.html"


@dataclasses.dataclass(frozen=True)
class Paragraph:
    """A paragraph of text (inline `code` and **strong** allowed)."""

    text: str


@dataclasses.dataclass(frozen=True)
class Bullets:
    """A bulleted list, one sentence an item."""

    items: tuple


@dataclasses.dataclass(frozen=True)
class Table:
    """A table: its header, its rows of cells (any value, shown with str)."""

    header: tuple
    rows: tuple
    # Markdown's alignment row: the first column left, the others right,
    # unless `left` (every column left-aligned).
    left: bool = False


@dataclasses.dataclass(frozen=True)
class Figure:
    """A picture: its file in the report's folder, and the alt text that says what it shows."""

    src: str  # the file's name in the report's folder
    alt: str


@dataclasses.dataclass(frozen=True)
class Code:
    """A block of code or configuration, shown as it is."""

    text: str
    language: str = ""


@dataclasses.dataclass(frozen=True)
class Section:
    """A heading and its blocks. `lead`: first in the HTML page (the
    verdicts); `folded`: the blocks folded under the heading as a one-line
    summary (HTML's <details>), inside the section around it."""

    heading: str
    blocks: tuple
    lead: bool = False
    folded: bool = False


def Details(summary, blocks):  # noqa: N802 (a block's name, as the classes')
    """Blocks folded under a one-line summary."""
    return Section(summary, tuple(blocks), folded=True)


@dataclasses.dataclass(frozen=True)
class Page:
    """The whole report: its title and its blocks, in report.md's order."""

    title: str
    blocks: tuple


def bullets(items):
    """A `Bullets` of `items`, or nothing (a list to add) when empty."""
    items = tuple(items)
    return [Bullets(items)] if items else []


def table(header, rows, left=False):
    return Table(tuple(header), tuple(tuple(r) for r in rows), left)


# --- Markdown. -------------------------------------------------------------------


def markdown(page):
    """report.md's text."""
    return f"# {page.title}\n\n" + markdown_blocks(page.blocks) + "\n"


def markdown_blocks(blocks, level=2):
    """Markdown of `blocks`, their sections' headings at `level` (a page
    that holds them under a heading of its own: 3)."""
    return "\n\n".join(_md(b, level) for b in blocks).rstrip()


def _md(block, level=2):
    if isinstance(block, Section) and block.folded:
        inner = "\n\n".join(_md(b, level) for b in block.blocks)
        return f"<details><summary>{block.heading}</summary>\n\n{inner}\n\n</details>"
    if isinstance(block, Section):
        return "\n\n".join(["#" * level + f" {block.heading}"]
                             + [_md(b, level) for b in block.blocks])
    if isinstance(block, Paragraph):
        return block.text
    if isinstance(block, Bullets):
        return "\n".join(f"- {item}" for item in block.items)
    if isinstance(block, Table):
        if block.left:
            return "\n".join(["| " + " | ".join(map(str, block.header)) + " |",
                              "|" + "|".join("---" for _ in block.header) + "|"]
                             + ["| " + " | ".join(map(str, r)) + " |" for r in block.rows])
        return "\n".join(tables.markdown_table(block.header, block.rows))
    if isinstance(block, Figure):
        return f"![{block.alt}]({block.src})"
    if isinstance(block, Code):
        return f"```{block.language}\n{block.text}\n```"
    raise TypeError(f"not a report block: {block!r}")


# --- HTML. -----------------------------------------------------------------------


_STYLE = """
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1b1f24;
  margin: 0 auto; padding: 1rem 1.5rem; max-width: 62rem; overflow-wrap: break-word; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.2rem; border-bottom: 1px solid #d0d7de;
  padding-bottom: .2rem; margin-top: 2rem; }
.lead { background: #f6f8fa; border-left: 4px solid #0969da; padding: .2rem 1rem; }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; font-size: 13px; margin: .5rem 0; }
th, td { border: 1px solid #d0d7de; padding: .2rem .45rem; text-align: right;
  white-space: nowrap; }
th:first-child, td:first-child, table.left th, table.left td { text-align: left; }
th { background: #f6f8fa; }
figure { margin: 1rem 0; } figure img { max-width: 100%; height: auto; }
figcaption { font-size: 13px; color: #57606a; }
pre { background: #f6f8fa; padding: .6rem; overflow-x: auto; font-size: 12px; }
code { font-size: 90%; }
@media print { body { max-width: none; font-size: 11px; padding: 0; } .scroll { overflow: visible; }
  table { font-size: 7.5px; width: 100%; } th, td { white-space: normal; padding: 1px 2px;
  } figure, tr { break-inside: avoid; } }
"""


def html(page, folder):
    """report.html's text; each `Figure`'s file is read from `folder` and
    inlined (a figure whose file is missing is a `FileNotFoundError`: a
    page with a broken picture is not written)."""
    folder = pathlib.Path(folder)
    lead = [b for b in page.blocks if isinstance(b, Section) and b.lead]
    rest = [b for b in page.blocks if not (isinstance(b, Section) and b.lead)]
    body = [f"<h1>{_inline(page.title)}</h1>"]
    body += [f'<div class="lead">{_html(b, folder)}</div>' for b in lead]
    body += [_html(b, folder) for b in rest]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{html_lib.escape(page.title)}</title><style>{_STYLE}</style></head>\n"
            "<body>\n" + "\n".join(body) + "\n</body></html>\n")


def _html(block, folder):
    if isinstance(block, Section) and block.folded:
        inner = "\n".join(_html(b, folder) for b in block.blocks)
        return f"<details><summary>{_inline(block.heading)}</summary>\n{inner}\n</details>"
    if isinstance(block, Section):
        return "\n".join([f"<h2>{_inline(block.heading)}</h2>"]
                         + [_html(b, folder) for b in block.blocks])
    if isinstance(block, Paragraph):
        return f"<p>{_inline(block.text)}</p>"
    if isinstance(block, Bullets):
        return "<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in block.items) + "</ul>"
    if isinstance(block, Table):
        head = "".join(f"<th>{_inline(h)}</th>" for h in block.header)
        rows = "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in r) + "</tr>"
                       for r in block.rows)
        kind = ' class="left"' if block.left else ""
        return (f'<div class="scroll"><table{kind}><thead><tr>{head}</tr></thead>'
                f"<tbody>{rows}</tbody></table></div>")
    if isinstance(block, Figure):
        data = base64.b64encode((folder / block.src).read_bytes()).decode("ascii")
        alt = html_lib.escape(block.alt)
        return (f'<figure><img src="data:image/png;base64,{data}" alt="{alt}">'
                f"<figcaption>{alt}</figcaption></figure>")
    if isinstance(block, Code):
        return f"<pre><code>{html_lib.escape(block.text)}</code></pre>"
    raise TypeError(f"not a report block: {block!r}")


_CODE = re.compile(r"`([^`]+)`")
_STRONG = re.compile(r"\*\*([^*]+)\*\*")


def _inline(text):
    """Escaped text, with Markdown's `code` and **strong** spans (the only
    inline Markdown the report's sentences use) as their HTML elements."""
    text = html_lib.escape(str(text))
    text = _CODE.sub(r"<code>\1</code>", text)
    return _STRONG.sub(r"<strong>\1</strong>", text)


def write(page, folder, markdown_name="report.md"):
    """Writes report.md and report.html of `page` into `folder`; returns
    both paths, report.md first."""
    folder = pathlib.Path(folder)
    md_path, html_path = folder / markdown_name, folder / HTML
    md_path.write_text(markdown(page))
    html_path.write_text(html(page, folder))
    return [md_path, html_path]
