"""Chapters 1 and 2 as pages: code that fits the book's width, claims decided by rules, no hand verdicts."""

from __future__ import annotations

import pytest

from anatomy_kit.book.runner import to_notebook

from conftest import ROOT

PAGES = ["ch01_ablation_map.md", "ch02_anatomy_weights.md"]


@pytest.mark.parametrize("page", PAGES)
def test_code_cells_fit_the_page_width(page):
    nb = to_notebook(ROOT / "notebooks" / page)
    long = [(i, line) for i, c in enumerate(nb.cells) if c.cell_type == "code"
            for line in c.source.splitlines() if len(line) > 88]
    assert not long, f"{page}: code lines over 88 columns: {long[:3]}"


@pytest.mark.parametrize("page", PAGES)
def test_claims_come_from_rules_not_by_hand(page):
    nb = to_notebook(ROOT / "notebooks" / page)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "LegacyClaim" not in code and "from anatomy_kit.verdicts.claims import Claim" in code
    assert "claims_view(claims" in code          # the compact table of the verdicts the rules decided
    for word in ('"reproduced"', '"partly reproduced"', '"not reproduced"', '"not comparable"',
                 '"not established"'):
        assert word not in code, f"{page} writes the verdict {word} by hand"


@pytest.mark.parametrize("page", PAGES)
def test_every_figure_has_a_what_to_see_sentence(page):
    nb = to_notebook(ROOT / "notebooks" / page)
    for i, c in enumerate(nb.cells):
        if c.cell_type == "code" and "savefig(" in c.source:
            after = next(x for x in nb.cells[i + 1:] if x.cell_type == "markdown")
            assert after.source.startswith("What to see:"), f"{page}: the figure in cell {i} has no 'What to see:'"
