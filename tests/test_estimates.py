"""Time and memory estimates of the chapters at full scale: counted FLOPs, and the running page's table is current."""

from __future__ import annotations

import pytest

from anatomy_kit.book import estimates as E
from anatomy_kit.lm import PRESETS
from conftest import ROOT


def test_the_running_page_shows_the_current_table():
    text = (ROOT / "book" / "running.md").read_text()
    start = text.index("\n", text.index("<!-- estimates-table:")) + 1
    shown = text[start:text.index("<!-- end estimates-table -->")].strip()
    assert shown == E.markdown_table(), "run `python -m anatomy_kit.book.estimates` and paste its table"


def test_chapter_five_counts_every_run_of_the_preset():
    est = {e.chapter: e for e in E.chapter_estimates()}["ch05_width_solver"]
    P = PRESETS["440M"]
    tokens = P["steps"] * P["batch_size"] * P["grad_accum"] * P["block_size"]
    n = E._preset_shape("440M").params
    per_run = est.flops / (5 * P["n_seeds"])
    assert 6 * n * tokens < per_run < 1.3 * 6 * n * tokens     # 6·N·D plus attention
    assert est.kind == "train-bf16" and est.hours() == pytest.approx(est.flops / (0.4 * 989e12) / 3600)


def test_measured_throughput_replaces_the_assumption_and_durations_read_well():
    e = E.chapter_estimates()[0]
    assert e.hours(2 * E.ASSUMED_FLOPS[e.kind]) == pytest.approx(e.hours() / 2)
    assert "measured" in E.markdown_table(1e14)
    assert E.duration(0.2) == "12 min" and E.duration(3.42) == "3.4 h" and E.duration(24 * 19.2) == "19 days"


def test_forward_flops_and_memory_formulas():
    m = E.ModelShape(1e8, 10, 512, 1000)
    assert E.forward_flops(m, 100, 64) == (2e8 + 4 * 10 * 64 * 512) * 100
    full = E.training_memory(m, 1024, 8)
    ckpt = E.training_memory(m, 1024, 8, checkpointing=True)
    assert 16e8 < ckpt < full
    assert full == 16e8 + 10 * 34 * 1024 * 8 * 512 + 8 * 1024 * 8 * 1000


def test_chapter_six_counts_every_arm_and_seed_of_the_grid():
    from anatomy_kit.growth import recipe as R

    est = {e.chapter: e for e in E.chapter_estimates()}["ch06_width_growth"]
    r = R.paper_d256_d384()
    grown = 3 * (len(R.CONDITIONS) - 1) * 6 * R.param_count(r.config(r.d_large)) * r.steps_grown * r.tokens_per_step
    assert grown < est.flops < 3 * grown       # the grown arms dominate; small runs, cold start, chain add the rest
