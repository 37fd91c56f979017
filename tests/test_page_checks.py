"""The browser checks' own rules, without a browser: what counts as a progress line, a stray repr, a
figure shown too small (tests/test_book.py applies them to every built page)."""

import pytest

from test_book import MIN_FIGURE_SCALE, PROGRESS_LINE, STRAY_REPR, _figure_problems, raw_table_markup


@pytest.mark.parametrize("line", [
    "[3/15] phased seed 1: eval loss 4.2111, 12.3 s of optimiser steps",
    "[ 7/46] srio-so seed 0",
    " 40%|████      | 4/10 [00:07<00:10,  1.75s/it]",
    "ablation map (skip): 12 it/s",
    "step 40/240: loss 5.1",
    "Step 3 / 10",
    "eval loss 3.912 at step 120",
])
def test_progress_lines_are_recognised(line):
    assert PROGRESS_LINE.search(line)


@pytest.mark.parametrize("line", [
    "baseline perplexity: 23.41 over 635 scored tokens",
    "ΔPPL 12 % (95 % t interval [3, 21] %), n = 5 blocks",
    "the bit/s rate of the link",
    "layers [8, 9, 10, 11] of 30",
    "final eval: 3.91 nats/token",
])
def test_ordinary_lines_are_not_progress(line):
    assert not PROGRESS_LINE.search(line)


def test_stray_reprs_are_recognised():
    assert STRAY_REPR.search("CheckResult(name='check_step_flops', message='✓ …')")
    assert STRAY_REPR.search("Interval(mean=0.1, low=-0.2, high=0.4, n=3)")
    assert not STRAY_REPR.search("Figure size 950x440 with 1 Axes")
    assert not STRAY_REPR.search("Spearman ρ = −0.62 (n = 12, permutation p = 0.031)")


def test_figure_scale_is_rendered_over_natural_width():
    assert MIN_FIGURE_SCALE == 0.70
    assert not _figure_problems([("a.png", 748.0, 950), ("b.png", 400.0, 400)])
    small = _figure_problems([("wide.png", 748.0, 1810)])
    assert len(small) == 1 and "41 %" in small[0]


@pytest.mark.parametrize("block", [
    # chapter 7's verdict tables as CommonMark showed them: one paragraph, `---` smart-quoted to em dashes
    "| claim | ch. | verdict | why |\n|—|—|—|—|\n| Scaling alpha | 1 | **reproduced** | below 38 |",
    "| signal | what it is |\n|---|---|",
    "|:---|---:|",
    "| skip | ΔPPL % when the layer is skipped |",
])
def test_raw_table_markup_is_recognised(block):
    assert raw_table_markup([block])


@pytest.mark.parametrize("block", [
    "the residual |h| grows with depth",
    "|ours − kit| = 3e-07, rounding bound 1e-06",
    "a choice: gate | up | down",
    "p = 0.0059 — not established",
])
def test_prose_with_a_pipe_is_not_a_table(block):
    assert not raw_table_markup([block])
