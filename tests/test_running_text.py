"""The running page states the kit's constants through generated paragraphs, never typed ones."""

from __future__ import annotations

import re

from conftest import ROOT

from anatomy_kit.book import running_text as rt


def test_the_fewest_seeds_is_the_first_n_whose_sign_flip_floor_reaches_alpha():
    # by hand: the exact two-sided floor is 2/2ⁿ; 2/32 = 0.0625 > 0.05 ≥ 2/64 = 0.03125
    assert rt.fewest_seeds(0.05) == 6
    assert rt.fewest_seeds(0.0625) == 5          # touching the level counts (2/2⁵ = 0.0625)
    assert rt.fewest_seeds(0.01) == 8            # 2/128 = 0.0156 > 0.01 ≥ 2/256


def test_each_paragraph_reads_its_numbers_from_the_kit(monkeypatch):
    text = rt.hour_scope_markdown() + rt.estimate_assumptions_markdown()
    assert "at most 60 minutes and under 80 GB" in text and "40 % of its 989 TFLOP/s peak" in text
    assert "16 bytes per trained parameter" in text and "2 more for autocast" in text
    monkeypatch.setattr(rt, "HOUR_MINUTES", 45.0)
    monkeypatch.setattr(rt, "ASSUMED_SHARE", {"train-bf16": 0.3, "eval-fp32": 0.6, "train-fp32": 0.6})
    monkeypatch.setattr(rt, "ADAMW_STATE_BYTES", 12)
    changed = rt.hour_scope_markdown() + rt.estimate_assumptions_markdown()
    assert "at most 45 minutes" in changed and "30 % MFU" in changed and "60 % of its 67 TFLOP/s" in changed
    assert "12 bytes per trained parameter" in changed
    assert "80 % power" in rt.scale_rule_markdown() and "at least 6 are needed at the 5 % level" in rt.scale_rule_markdown()
    monkeypatch.setattr(rt, "POWER", 0.9)
    monkeypatch.setattr(rt, "NEAR_FRACTION", 0.1)
    assert "90 % power" in rt.scale_rule_markdown() and "within 10 % of the interval's width" in rt.near_threshold_markdown()


def test_the_running_page_includes_every_generated_paragraph_and_pages_writes_them(tmp_path):
    from anatomy_kit.book.pages import write_generated

    page = (ROOT / "book" / "running.md").read_text()
    included = set(re.findall(r"```\{include\} _generated/(\S+)", page))
    assert set(rt.RUNNING_PARTS) <= included
    written = {p.name for p in write_generated(tmp_path, tmp_path / "no-build")}
    assert set(rt.RUNNING_PARTS) <= written
    assert (tmp_path / "_generated" / "hour_scope.md").read_text() == rt.hour_scope_markdown()
