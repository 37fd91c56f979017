"""The browser checks' own rules, without a browser: what counts as a progress line, a stray repr, a
figure shown too small (tests/test_book.py applies them to every built page)."""

import pytest

from test_book import (MIN_FIGURE_SCALE, PROGRESS_LINE, STRAY_REPR, _figure_problems, _figure_text_problems,
                       raw_table_markup, reading_cost, reading_cost_problems, rendered_text_pt, smallest_font_pt)


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


def test_smallest_font_reads_the_cells_sizes_and_the_default():
    assert smallest_font_pt("ax.plot(x, y)") == 10.0
    assert smallest_font_pt("ax.legend(fontsize=8)\nax.set_title(t, fontsize=12)") == 8.0
    assert smallest_font_pt('ax.tick_params(labelsize="small")') == 8.33
    assert smallest_font_pt("ax.text(0, 0, s, size=6.5)") == 6.5
    # sizes that are not fonts
    assert smallest_font_pt("plt.subplots(figsize=(3, 2)); data.token_blocks(t, block_size=4); ms=2") == 10.0


def test_rendered_text_size_by_hand():
    # 10 pt at 100 dpi is 13.9 PNG px; a 1,000-px figure shown 750 px wide makes it 10.4 CSS px = 7.8 pt
    assert abs(rendered_text_pt(10, 100, 1000, 750) - 10 * 100 / 72 * 0.75 * 0.75) < 1e-12
    assert abs(rendered_text_pt(9, 72, 500, 500) - 6.75) < 1e-12
    # the 9-pt boundary: 12 CSS px is 9 pt
    assert not _figure_text_problems([(9.0, 96.0, 800)], [(800.0, 800)])
    assert _figure_text_problems([(9.0, 96.0, 800)], [(799.0, 800)])
    assert _figure_text_problems([(6.5, 100.0, 920)], [(748.0, 920)])[0].startswith("figure 1: its 6.5-pt text")
    # images that do not match the notebook's figures one for one are not measured
    assert not _figure_text_problems([(6.5, 100.0, 920)], [(748.0, 900)])


def test_reading_cost_is_screens_of_the_window_and_words():
    # by hand: 16,000 px at an 800-px window are 20 screens; 12,345 px are 15.43
    assert reading_cost(1_234, 16_000) == {"words": 1_234, "screens": 20.0}
    assert abs(reading_cost(10, 12_345)["screens"] - 15.43125) < 1e-12
    assert reading_cost(10, 12_345, window_height=1_000)["screens"] == 12.345
    with pytest.raises(ValueError, match="window_height"):
        reading_cost(10, 100, window_height=0)


@pytest.mark.parametrize(("words", "height", "kinds"), [
    (2_500, 16_000, []),                              # both at the limit: passes
    (2_499, 15_999, []),                              # just below
    (2_501, 16_000, ["words"]),                       # one word over
    (2_500, 16_001, ["screens"]),                     # one pixel over 20 screens
    (3_000, 24_000, ["words", "screens"]),
])
def test_a_chapter_fails_above_twenty_screens_or_2500_unfolded_words(words, height, kinds):
    problems = reading_cost_problems("ch04", words, height)
    assert [("words" if "words" in p else "screens") for p in problems] == kinds
    assert all(p.startswith("ch04: ") for p in problems)
