"""The book's one statistics rule: its numbers come from the kit's constants, and a changed constant changes it."""

from __future__ import annotations

from anatomy_kit.verdicts import statistics_rule as SR


def test_the_rule_states_each_kind_of_evidence_once_with_the_kits_numbers():
    text = SR.statistics_rule_markdown(SR.STATISTICS_RULE_TITLE)
    assert text.startswith(f"**{SR.STATISTICS_RULE_TITLE}**")
    kinds = [k for k, _ in SR.statistics_rule_items()]
    assert len(kinds) == len(set(kinds)) == text.count("\n- **")
    # by hand: 2/2⁵ = 0.0625 > 0.05 ≥ 2/2⁶ = 0.03125, so six seeds are the fewest that can decide
    assert "fewer than 6 seeds can never reach α = 0.05" in text
    assert "95 % sign-flip interval" in text and "paired 95 % t interval" in text
    assert "at most 3 primary claims" in text and "it never decides" in text


def test_a_changed_constant_changes_the_rule(monkeypatch):
    monkeypatch.setattr(SR, "HOLM_ALPHA", 0.01)
    monkeypatch.setattr(SR, "MAX_PRIMARIES", 2)
    text = SR.statistics_rule_markdown()
    # 2/2⁷ = 0.0156 > 0.01 ≥ 2/2⁸ = 0.0078: eight seeds
    assert "fewer than 8 seeds can never reach α = 0.01" in text and "at most 2 primary claims" in text
