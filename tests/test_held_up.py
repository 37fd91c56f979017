"""Every chapter's "What held up" box: generated from the report's claims, the papers' counted apart from the
book's own, a primary that fails Holm never listed as held, what a run that cannot decide saw, provenance."""

from __future__ import annotations

from anatomy_kit.book.held_up import held_up_groups, held_up_markdown
from anatomy_kit.manifest import provenance, references


def _c(cid, verdict, role="secondary", survives=None, saw=None, phase="confirmatory", summary="why"):
    return {"id": cid, "verdict": verdict, "role": role, "holm": {"survives": survives}, "saw": saw,
            "phase": phase, "summary": summary}


def test_each_claim_lands_in_one_group_by_its_verdict_and_holm():
    claims = [_c("p1.l11_rank", "reproduced", "primary", True), _c("p1.anti_layers", "reproduced", "primary", False),
              _c("p1.r2_gate", "not reproduced", summary="0.0001 vs 0.91"), _c("p1.growth_speedup", "mixed"),
              _c("p1.baseline_ppl", "not comparable", saw="not reproduced: 24.4 vs 22.6"),
              _c("p1.critical_core", "not established"), _c("p1.growth_cost_reduction", "holds by construction"),
              _c("p1.l11_ablation", "partly reproduced", summary="8.8-85 times below, within 100 not 10")]
    groups = held_up_groups(claims)
    ids = {k: [c["id"] for c, _ in v] for k, v in groups.items()}
    assert ids == {"held": ["p1.l11_rank"], "partly held": ["p1.l11_ablation"], "held, not claimed": ["p1.anti_layers"],
                   "did not hold": ["p1.r2_gate"], "mixed": ["p1.growth_speedup"],
                   "cannot decide": ["p1.baseline_ppl", "p1.critical_core", "p1.growth_cost_reduction"]}
    words = dict((c["id"], w) for c, w in groups["cannot decide"])
    assert words["p1.baseline_ppl"].endswith("our run saw: not reproduced: 24.4 vs 22.6")
    # a partly reproduced claim is never listed as held: it says how far it fell short
    assert dict((c["id"], w) for c, w in groups["partly held"])["p1.l11_ablation"] == (
        "8.8-85 times below, within 100 not 10, a secondary claim")
    assert dict((c["id"], w) for c, w in groups["held"])["p1.l11_rank"] == "reproduced"


def test_the_box_counts_the_papers_claims_apart_from_the_books_own_and_says_where_the_numbers_come_from():
    doc = {"claims": [_c("p1.l11_rank", "reproduced", "primary", True), _c("p1.r2_gate", "not reproduced"),
                      _c("book.cheap_agree_causal", "reproduced", "primary", True)]}
    text = held_up_markdown(doc)
    assert text.startswith("::::{admonition} What held up at this scale")
    assert "Of the papers' 2 claims tested here, 1 held on confirmatory data" in text
    partly = held_up_markdown({"claims": [_c("p1.l11_rank", "reproduced", "primary", True),
                                          _c("p1.l11_ablation", "partly reproduced")]})
    assert "Of the papers' 2 claims tested here, 1 held and 1 held in part on confirmatory data" in partly
    assert "- **Held in part**: *" in partly
    # the unfolded lines name the claims; why each landed where it did is folded below them
    head, folded = partly.split(":::{dropdown} Why, claim by claim, and where the papers' numbers come from")
    assert "why" not in head.split("Held in part")[1].split("\n")[0] and "(held in part): why" in folded
    assert "The book's own 1 question (no paper states them)" in text
    assert references()["p1.l11_rank"]["title"] in text
    assert provenance()["p1"].split(",")[0] in text and provenance()["book"].split(";")[0] in text
    exploratory = {"claims": [_c("p1.r2_gate", "not reproduced", phase="exploratory")]}
    assert "exploratory data (the rules were written after these data" in held_up_markdown(exploratory)


def test_a_chapter_without_claims_or_not_run():
    assert held_up_markdown({"claims": []}) == ""
    assert "did not run the chapter" in held_up_markdown(None)
