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
    assert "evidence_view(run, claims" in code   # the folded Evidence section: the compact claims table
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


@pytest.mark.parametrize("page", PAGES)
def test_every_rule_comes_from_the_registry_and_the_phase_is_a_parameter(page):
    nb = to_notebook(ROOT / "notebooks" / page)
    params = next(c.source for c in nb.cells
                  if c.cell_type == "code" and "parameters" in c.metadata.get("tags", []))
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "phase = None" in params and "phase=phase" in code
    # no rule class is imported, so none can be built inline: every claim takes its design's rule
    assert "anatomy_kit.verdicts.rules" not in code and "anatomy_kit.verdicts.combine" not in code
    assert "d.rule, design=d" in code


def _registered(chapter):
    from anatomy_kit.verdicts.registry import rule_registry

    return {cid: e for cid, e in rule_registry().entries.items() if e.chapter == chapter}


@pytest.mark.parametrize("scale", ["smoke", "hour", "full"])
def test_the_units_of_chapter_1_and_2_designs_are_the_chapters_own_counts(scale):
    """A design's units are what its test's smallest p comes from: blocks (n_eval) for a t test over blocks, noise
    draws for the sign-flip test, recovery layers for Spearman; a changed default without them fails here."""
    from chapter_defaults import scale_defaults

    ch1, ch2 = scale_defaults("ch01_ablation_map", scale), scale_defaults("ch02_anatomy_weights", scale)
    designs = {cid: e.forms[scale].design for ch in ("ch01_ablation_map", "ch02_anatomy_weights")
               for cid, e in _registered(ch).items()}
    assert len(designs) == 19
    assert designs["p1.anti_layers"]["units"] == ch1["n_eval"]
    assert designs["p1.manipulation_others"]["units"] == ch2["n_eval"]
    assert designs["p1.predicted_many_layers_ppl"]["units"] == ch2["n_eval"]
    assert designs["p1.recovery_critical_unrecoverable"]["units"] == ch2["n_trained_draws"]
    assert designs["p1.recovery_anti_steps"]["units"] == ch2["n_noise_draws"]
    layers = len(ch2["recovery_layers"])
    spearman = designs["p1.recovery_importance_correlation"]
    exact = ("spearman-exact", layers) if layers <= 9 else ("monte-carlo", 20_000)    # stats.spearman's n_perm
    assert (spearman["test"], spearman["units"]) == exact
    orders = ch2["n_random_orders"] + 2
    assert designs["p1.predicted_many_layers_ppl"]["parts"] == orders * sum(k >= 9 for k in ch2["substitution_counts"])
    # the primaries of chapter 1 and their tested parts
    roles = {cid: e.role for ch in ("ch01_ablation_map", "ch02_anatomy_weights") for cid, e in _registered(ch).items()}
    assert sorted(c for c, r in roles.items() if r == "primary") == ["p1.anti_layers", "p1.l11_rank"]
    assert designs["p1.anti_layers"]["parts"] == 2 and designs["p1.l11_rank"].get("parts", 1) == 1
