"""The prose of the chapters and book pages, read from their sources in a second (the browser checks
in tests/test_book.py see the same faults on the built pages, after a build)."""

import re

import jupytext
import pytest

from chapter_source import CHAPTERS, IDS

from conftest import ROOT

BOOK_PAGES = sorted(p.stem for p in (ROOT / "book").glob("*.md"))
TABLE_LINE = re.compile(r"^\s*\|.*\|\s*$")


def table_followed_by_text(markdown: str) -> list[str]:
    """Lines written right under a Markdown table: the table takes them in as rows (a table ends
    only at a blank line), so the paragraph shows as bogus rows of the table."""
    out, fence = [], ""
    lines = markdown.splitlines()
    for above, line in zip(lines, lines[1:]):
        marker = re.match(r"^\s*(`{3,}|~{3,})", above)
        if marker and (not fence or marker.group(1).startswith(fence)):
            fence = "" if fence else marker.group(1)
        if not fence and TABLE_LINE.match(above) and line.strip() and not TABLE_LINE.match(line):
            out.append(line.strip()[:80])
    return out


def _markdown_of(path) -> str:
    if path.parent.name == "notebooks":
        return "\n\n".join(c.source for c in jupytext.read(path).cells if c.cell_type == "markdown")
    return path.read_text()


@pytest.mark.parametrize("path", [ROOT / "notebooks" / c["file"] for c in CHAPTERS]
                         + [ROOT / "book" / f"{p}.md" for p in BOOK_PAGES] + [ROOT / "README.md"],
                         ids=IDS + BOOK_PAGES + ["README"])
def test_every_markdown_table_ends_at_a_blank_line(path):
    swallowed = table_followed_by_text(_markdown_of(path))
    assert not swallowed, f"{path.name}: text right under a table becomes its rows; leave a blank line: {swallowed}"


def test_a_table_without_a_blank_line_after_it_is_caught():
    table = "| signal | what it is |\n|---|---|\n| skip | ΔPPL % |\n"
    assert table_followed_by_text(table + "Two causal signals appear twice.") == ["Two causal signals appear twice."]
    assert not table_followed_by_text(table + "\nTwo causal signals appear twice.")
    assert not table_followed_by_text("```text\n| a | b |\nnot a table\n```\n")
