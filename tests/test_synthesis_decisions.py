"""Chapter 7's decision checks: chapter 3's schedule and chapter 5's widths from other layer signals.

The signals here are synthetic per-layer *numbers* (the functions are pure arithmetic on them).
"""

from __future__ import annotations

import ast
import json

import numpy as np
import pytest

from chapter_defaults import paper_fraction

from anatomy_kit.book.runner import to_notebook
from anatomy_kit.card.errors import WidthBudgetInfeasible
from anatomy_kit.card.widths import suggest_widths, width_multiple
from anatomy_kit.phased_training import phases, sources
from anatomy_kit.hour import hour_preset
from anatomy_kit.synthesis import decisions
from anatomy_kit.validate import AnatomyKitError

from conftest import ROOT

L = 30                                   # SmolLM2's depth
TODAY = [1536] * L                       # SmolLM2's FFN widths
SMOKE = decisions.CH03_DEFAULTS["smoke"]


def signal(seed: int = 0, n: int = L) -> np.ndarray:
    """Distinct positive per-layer values spanning four orders of magnitude (like ΔPPL %)."""
    return 10.0 ** np.random.default_rng(seed).uniform(-1, 3, n)


def schedules(sig: dict) -> dict:
    return decisions.schedules_from_signals(sig, SMOKE.n_layers, SMOKE.steps, **SMOKE.knobs())


def layer_sets(schedule) -> list:
    return [set(ph.layers) for ph in schedule.phases] + [set(schedule.anti_layers)]


# ---------------------------------------------------------------------------------------------
# Schedules
# ---------------------------------------------------------------------------------------------

def test_identical_signals_give_identical_schedules_and_overlap_one():
    v = signal()
    s = schedules({"a": v, "b": v.copy()})
    assert layer_sets(s["a"]) == layer_sets(s["b"])
    # counts of the same cells divided: exactly 1
    assert decisions.phase_overlap(s["a"], s["b"]) == 1.0
    assert decisions.phase_overlap(s["a"], s["a"]) == 1.0


def test_schedules_follow_chapter_3s_path_for_source_b():
    """The same computation as chapter 3's growth (b), in the same order: the same schedule exactly."""
    v = signal(1)
    v[[5, 17, 26]] = [-2.0, -900.0, -40.0]                   # three anti-layers at SmolLM2's depth
    knobs = dict(lr=1e-3, max_anti=2, clone_noise=0.1, anti_scale=0.5)   # none of them a default
    ours = decisions.schedules_from_signals({"ΔPPL": v}, 12, 200, **knobs)["ΔPPL"].to_dict()
    ch03 = phases.schedule_from_importance(sources.transferred_importance(v, 12), 200, label="growth (b)",
                                           **knobs).to_dict()
    assert ours.pop("label") == "ΔPPL" and ch03.pop("label") == "growth (b)"
    assert ours == ch03 and len(ours["anti_layers"]) == 2


def test_overlap_is_the_jaccard_index_of_training_cells():
    """Against uniform training (every cell trains) the overlap is the schedule's share of the cells."""
    s = schedules({"a": signal()})["a"]
    uniform = phases.uniform_schedule(SMOKE.n_layers, SMOKE.steps, SMOKE.lr)
    # the same integers divided in both: exact
    assert decisions.phase_overlap(s, uniform) == s.layer_steps() / (SMOKE.n_layers * SMOKE.steps)
    assert decisions.phase_overlap(s, uniform) == decisions.phase_overlap(uniform, s)


def test_a_reversed_signal_moves_the_schedule():
    v = np.sort(signal())                                     # importance grows with depth
    s = schedules({"v": v, "reversed": v[::-1]})
    assert decisions.phase_overlap(s["v"], s["reversed"]) < 1.0
    n = SMOKE.n_layers                                        # 10 layers, no anti-layer: a core of 2
    assert s["v"].phases[0].layers == (n - 2, n - 1)          # the core: the most important layers
    assert s["reversed"].phases[0].layers == (0, 1)


def test_negative_values_become_anti_layers_as_in_chapter_3():
    v = signal(2, SMOKE.n_layers)
    v[[3, 6]] = [-5.0, -50.0]                                 # two layers whose removal helped
    s = decisions.schedules_from_signals({"v": v}, SMOKE.n_layers, SMOKE.steps, **SMOKE.knobs())["v"]
    assert s.anti_layers == (6,)                              # max_anti = 1 at smoke: the most negative
    assert not decisions.training_cells(s)[6].any()


def test_a_nan_layer_takes_the_median_and_is_reported():
    v = signal(3)
    gap = v.copy()
    gap[[0, L - 1]] = np.nan                                  # the edge layers are not measured
    filled = v.copy()
    filled[[0, L - 1]] = np.median(v[1:-1])
    s = schedules({"gap": gap, "filled": filled})
    assert layer_sets(s["gap"]) == layer_sets(s["filled"])
    d = decisions.schedule_decision({"gap": gap, "v": v}, "v", SMOKE)
    assert d.filled == {"gap": [0, L - 1], "v": []}
    json.dumps(d.to_dict())


def test_schedule_decision_compares_with_the_reference():
    v = signal(4)
    d = decisions.schedule_decision({"ΔPPL": v, "flipped": v[::-1], "same": v}, "ΔPPL", SMOKE)
    assert d.overlap["ΔPPL"] == 1.0 and d.overlap["same"] == 1.0 and d.overlap["flipped"] < 1.0
    assert d.core["ΔPPL"] == list(d.schedules["ΔPPL"].phases[0].layers)
    assert json.loads(json.dumps(d.to_dict()))["settings"]["lr"] == SMOKE.lr


# ---------------------------------------------------------------------------------------------
# Chapter 3's settings
# ---------------------------------------------------------------------------------------------

def test_defaults_agree_with_chapter_3s_defaults_cell():
    nb = to_notebook(ROOT / "notebooks" / "ch03_growth_training.md")
    cell = next(c.source for c in nb.cells if c.cell_type == "code" and "DEFAULTS = {" in c.source)
    node = next(n for n in ast.parse(cell).body if isinstance(n, ast.Assign) and n.targets[0].id == "DEFAULTS")
    chapter = eval(compile(ast.Expression(node.value), "DEFAULTS", "eval"), {"dict": dict, "hour_preset": hour_preset,
                                                                            "PAPER_FRACTION": paper_fraction()})
    for scale, ours in decisions.CH03_DEFAULTS.items():
        d = ours.to_dict()
        assert {k: chapter[scale][k] for k in d if k != "source"} == {k: v for k, v in d.items() if k != "source"}


def test_settings_come_from_chapter_3s_metrics_file(tmp_path):
    assert decisions.ch03_settings(tmp_path) == SMOKE                    # no file: the defaults
    assert decisions.ch03_settings(tmp_path, "full") == decisions.CH03_DEFAULTS["full"]
    path = tmp_path / "metrics" / "ch03_growth_training.json"
    path.parent.mkdir()
    sizes = dict(n_layers=8, steps=120, lr=1e-3, max_anti=2, clone_noise=0.1, anti_scale=0.5, n_seeds=6)
    path.write_text(json.dumps({"run": {"scale": "smoke", "sizes": sizes}, "metrics": {}}))
    got = decisions.ch03_settings(tmp_path)
    assert (got.n_layers, got.steps) == (8, 120) and got.knobs() == dict(lr=1e-3, max_anti=2, clone_noise=0.1,
                                                                          anti_scale=0.5)
    assert "ch03_growth_training.json" in got.source
    path.write_text(json.dumps({"run": {"sizes": {"steps": 120}}}))
    with pytest.raises(AnatomyKitError, match="run.sizes"):
        decisions.ch03_settings(tmp_path)
    with pytest.raises(AnatomyKitError, match="scale='medium'"):
        decisions.ch03_settings(tmp_path, "medium")


# ---------------------------------------------------------------------------------------------
# Widths
# ---------------------------------------------------------------------------------------------

def test_identical_signals_give_identical_widths_and_distance_zero():
    v = signal()
    w = decisions.widths_from_signals({"a": v, "b": v.copy()}, TODAY, budget_fraction=0.75)
    np.testing.assert_array_equal(w["a"], w["b"])
    assert decisions.width_distance(w["a"], w["b"]) == 0.0


def test_a_work_profile_gives_the_report_cards_widths():
    """A non-negative signal passes unchanged into the card's call: the same computation, equal exactly."""
    work = signal(5) / 1000
    ours = decisions.widths_from_signals({"work_gw": work}, TODAY, budget_fraction=0.75)["work_gw"]
    assert ours.tolist() == suggest_widths(work, TODAY, TODAY, 0.75).suggested


def test_a_reversed_signal_moves_the_widths():
    v = np.sort(signal())
    for transform in decisions.TRANSFORMS:
        w = decisions.widths_from_signals({"v": v, "reversed": v[::-1]}, TODAY, budget_fraction=0.75,
                                          transform=transform)
        assert w["v"][0] < w["v"][-1] and w["reversed"][0] > w["reversed"][-1]
        assert decisions.width_distance(w["v"], w["reversed"]) > 0


@pytest.mark.parametrize("transform", decisions.TRANSFORMS)
def test_every_signal_holds_the_budget(transform):
    """The card rounds the budget to a whole number of multiples m: within m/2 of the asked fraction."""
    neg = signal(6) - 50                                          # negative in some layers
    gap = signal(7)
    gap[[0, L - 1]] = np.nan
    sigs = {"v": signal(), "neg": neg, "gap": gap, "flat": np.ones(L)}
    m = width_multiple(TODAY)
    for fraction in (0.5, 0.75, 1.3):
        w = decisions.widths_from_signals(sigs, TODAY, budget_fraction=fraction, transform=transform)
        for name, widths in w.items():
            assert abs(int(widths.sum()) - fraction * sum(TODAY)) <= m / 2, (name, fraction)
            assert all(x % m == 0 and m <= x <= 2 * t for x, t in zip(widths, TODAY))


def test_a_parameter_budget_is_held():
    """FFN parameters proportional to width (3·d per unit, a gated MLP): within half a multiple of units."""
    per_unit = 3 * 576
    params = [per_unit * t for t in TODAY]
    budget = int(0.6 * sum(params)) + 17                          # not a whole number of multiples
    d = decisions.width_decision({"v": signal(), "u": signal(8)}, "v", TODAY, budget_params=budget,
                                 ffn_params_today=params)
    for name, s in d.suggestions.items():
        assert abs(s.params_suggested - budget) <= d.multiple / 2 * per_unit, name


def test_clip_gives_a_negative_layer_no_work_and_rank_keeps_only_the_order():
    v = signal(9)
    v[4] = -3.0
    m = width_multiple(TODAY)
    clip = decisions.widths_from_signals({"v": v}, TODAY, budget_fraction=0.75)["v"]
    assert clip[4] == m                                           # zero work: the lower bound
    rank = decisions.widths_from_signals({"v": v, "cubed": v ** 3, "shifted": v + 100}, TODAY,
                                         budget_fraction=0.75, transform="rank")
    np.testing.assert_array_equal(rank["v"], rank["cubed"])
    np.testing.assert_array_equal(rank["v"], rank["shifted"])


def test_width_distance_is_l1_over_the_total_width():
    a, b = [128, 64, 64], [64, 128, 64]
    assert decisions.width_distance(a, b) == pytest.approx(128 / 256, rel=1e-15)   # two sums of exact integers
    assert decisions.width_distance([1, 0], [0, 1]) == 2.0


def test_width_decision_compares_with_the_reference():
    v = signal(10)
    d = decisions.width_decision({"gw": v, "other": signal(11), "same": v}, "gw", TODAY, budget_fraction=0.75)
    assert d.distance["gw"] == 0.0 and d.distance["same"] == 0.0 and d.distance["other"] > 0
    assert d.multiple == width_multiple(TODAY) and d.transform == "clip"
    doc = json.loads(json.dumps(d.to_dict()))
    assert doc["widths"]["gw"] == d.widths["gw"].tolist()


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("sig, match", [
    ({}, "non-empty dict"),
    ([1.0, 2.0], "non-empty dict"),
    ({"a": signal(), "b": signal(n=L - 1)}, "has 29 layers"),
    ({"a": np.full(L, np.nan)}, "NaN in every layer"),
    ({"a": np.r_[np.inf, signal(n=L - 1)]}, r"infinite at layer\(s\) \[0\]"),
    ({"a": [[1.0, 2.0]]}, "1-D"),
    ({"": signal()}, "non-empty string"),
])
def test_bad_signals_are_named(sig, match):
    with pytest.raises(AnatomyKitError, match=match):
        decisions.prepare_signals(sig)
    with pytest.raises(AnatomyKitError, match=match):
        decisions.widths_from_signals(sig, TODAY, budget_fraction=0.75)


def test_bad_schedule_requests_are_named():
    sig = {"a": signal()}
    with pytest.raises(AnatomyKitError, match="lr"):
        decisions.schedules_from_signals(sig, 10, 180)
    with pytest.raises(AnatomyKitError, match="label"):
        decisions.schedules_from_signals(sig, 10, 180, lr=1e-3, label="x")
    with pytest.raises(AnatomyKitError, match="n_layers=4"):
        decisions.schedules_from_signals(sig, 4, 180, lr=1e-3)
    with pytest.raises(AnatomyKitError, match="reference='b'"):
        decisions.schedule_decision(sig, "b", SMOKE)
    with pytest.raises(AnatomyKitError, match="ScheduleSettings"):
        decisions.schedule_decision(sig, "a", SMOKE.to_dict())
    s10 = schedules(sig)["a"]
    s12 = decisions.schedules_from_signals(sig, 12, 180, lr=1e-3)["a"]
    with pytest.raises(AnatomyKitError, match=r"\(10, 180\) and \(12, 180\)"):
        decisions.phase_overlap(s10, s12)
    with pytest.raises(AnatomyKitError, match="GrowthSchedule"):
        decisions.phase_overlap(s10, "uniform")


def test_bad_width_requests_are_named():
    sig = {"a": signal()}
    with pytest.raises(AnatomyKitError, match="exactly one of budget_fraction and budget_params"):
        decisions.widths_from_signals(sig, TODAY)
    with pytest.raises(AnatomyKitError, match="exactly one of budget_fraction and budget_params"):
        decisions.widths_from_signals(sig, TODAY, budget_fraction=0.5, budget_params=1000)
    with pytest.raises(WidthBudgetInfeasible, match="ffn_budget=3"):
        decisions.widths_from_signals(sig, TODAY, budget_fraction=3.0)
    with pytest.raises(AnatomyKitError, match="transform='log'"):
        decisions.widths_from_signals(sig, TODAY, budget_fraction=0.5, transform="log")
    with pytest.raises(AnatomyKitError, match="30 layers but ffn_widths_today has 29"):
        decisions.widths_from_signals(sig, TODAY[1:], budget_fraction=0.5)
    with pytest.raises(AnatomyKitError, match="whole widths"):
        decisions.widths_from_signals(sig, [1536.5] * L, budget_fraction=0.5)
    with pytest.raises(AnatomyKitError, match="<= 0 in every layer"):
        decisions.widths_from_signals({"a": -signal()}, TODAY, budget_fraction=0.5)
    with pytest.raises(AnatomyKitError, match="has 2 entries"):
        decisions.width_distance([1, 2, 3], [1, 2])
    with pytest.raises(AnatomyKitError, match="zero in every layer"):
        decisions.width_distance([0, 0], [0, 0])
    with pytest.raises(AnatomyKitError, match="reference='b'"):
        decisions.width_decision(sig, "b", TODAY, budget_fraction=0.5)
