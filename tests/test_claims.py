"""Every verdict rule on both sides of every threshold; Claim reads the paper from references.yaml."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from anatomy_kit import stats
from anatomy_kit.verdicts import claims as C
from anatomy_kit.manifest import references
from anatomy_kit.validate import AnatomyKitError

REF = {"value": 100.0, "unit": "%"}
SIGNED = {"value": "negative", "unit": None}


def iv(low, high, n=3, confidence=0.95, method="t"):
    """An interval as paired_t_interval would return it (only low/high/n/confidence matter here)."""
    return stats.Interval((low + high) / 2, low, high, n, 0.1, n - 1, confidence, method)


def verdict(rule, ours, ref=REF):
    return rule.decide(ours, ref).verdict


# ------------------------------------------------------------------ DifferenceSign

@pytest.mark.parametrize("low, high, expected", [
    (-0.3, -0.1, "reproduced"), (-0.3, 0.1, "not established"), (0.1, 0.3, "not reproduced"),
    (-0.3, 0.0, "not established"), (-0.3, -1e-9, "reproduced")])
def test_difference_sign_negative(low, high, expected):
    assert verdict(C.DifferenceSign("negative"), iv(low, high)) == expected


def test_difference_sign_positive_mirrors():
    rule = C.DifferenceSign("positive")
    assert [verdict(rule, iv(*b)) for b in ((0.1, 0.3), (-0.1, 0.3), (-0.3, -0.1))] == [
        "reproduced", "not established", "not reproduced"]


def test_difference_sign_reason_names_seeds_interval_and_sign_flip():
    pc = stats.paired_difference({0: 1.0, 1: 1.1, 2: 0.9}, {0: 1.2, 1: 1.25, 2: 1.12})
    d = C.DifferenceSign("negative").decide(pc, SIGNED)
    assert d.verdict == "reproduced"
    assert "n = 3 seeds" in d.reason and "95 % t interval [" in d.reason and "sign-flip p = 0.25" in d.reason
    # the exact sign-flip test cannot reach 0.05 with 3 seeds (best p 2/2³): the design cannot speak
    assert verdict(C.DifferenceSign("negative", method="sign-flip"), pc, SIGNED) == "not comparable"


def test_difference_sign_one_seed_and_points():
    one = stats.paired_difference({0: 1.0}, {0: 2.0})
    assert verdict(C.DifferenceSign("negative"), one) == "not established"
    with pytest.raises(AnatomyKitError, match="point estimate"):
        C.DifferenceSign("negative").decide(-0.5, REF)
    with pytest.raises(AnatomyKitError, match="90 %"):
        C.DifferenceSign("negative", confidence=0.9).decide(iv(-0.3, -0.1), REF)


def test_difference_sign_reads_the_paper_direction_from_references():
    ref = references()["p2.val_loss_440m"]
    better = C.DifferenceSign(paper_keys=("gromov-spherical", "uniform"))    # paper: 3.433 − 3.449 < 0
    worse = C.DifferenceSign(paper_keys=("anti-topological-raw", "uniform"))  # paper: 3.515 − 3.449 > 0
    assert verdict(better, iv(-0.03, -0.01), ref) == "reproduced"
    assert verdict(worse, iv(-0.03, -0.01), ref) == "not reproduced"
    assert "below 0" in better.describe(ref) and "above 0" in worse.describe(ref)
    assert "−0.016" in better.describe(ref)


# ------------------------------------------------------------------ Magnitude and Close

@pytest.mark.parametrize("factor, expected", [(9.9, "reproduced"), (10.1, "partly reproduced"),
                                              (99, "partly reproduced"), (101, "not reproduced")])
def test_magnitude_thresholds_both_directions(factor, expected):
    assert verdict(C.Magnitude(), 100.0 * factor) == expected
    assert verdict(C.Magnitude(), 100.0 / factor) == expected


def test_magnitude_sign_and_bad_rules():
    assert verdict(C.Magnitude(), -100.0) == "not reproduced"
    assert verdict(C.Magnitude(), 0.0) == "not reproduced"
    with pytest.raises(AnatomyKitError):
        C.Magnitude(within_factor=20, partly_factor=10)


@pytest.mark.parametrize("ours, expected", [(100.99, "reproduced"), (101.01, "partly reproduced"),
                                            (97.01, "partly reproduced"), (96.99, "not reproduced")])
def test_close_points(ours, expected):
    assert verdict(C.Close(abs_tol=1.0, partly_factor=3), ours) == expected


def test_close_intervals_and_rel_tol():
    rule = C.Close(rel_tol=0.05)                                # ±5 around 100
    assert verdict(rule, iv(96.0, 104.0)) == "reproduced"
    assert verdict(rule, iv(96.0, 106.0)) == "not established"
    assert verdict(rule, iv(106.0, 110.0)) == "not reproduced"
    assert verdict(rule, (94.0, 95.5)) == "not established"
    both = C.Close(abs_tol=1.0, rel_tol=0.05)                   # the wider of the two tolerances: ±5
    assert verdict(both, 104.9) == "reproduced" and verdict(both, 105.1) == "not reproduced"
    with pytest.raises(AnatomyKitError):
        C.Close()


# ------------------------------------------------------------------ IntervalBelow / IntervalAbove

def test_interval_below_all_some_none():
    rule = C.IntervalBelow(0.0)
    assert verdict(rule, {"L14": iv(-0.3, -0.1), "L17": iv(-0.2, -0.05)}) == "reproduced"
    assert verdict(rule, {"L14": iv(-0.3, -0.1), "L17": iv(-0.2, 0.05)}) == "partly reproduced"
    assert verdict(rule, {"L14": iv(-0.3, 0.1), "L17": iv(-0.2, 0.2)}) == "not established"
    assert verdict(rule, {"L14": iv(-0.3, 0.1), "L17": iv(0.1, 0.2)}) == "not reproduced"   # one contradicted
    assert verdict(rule, {"L14": iv(-0.3, -0.1), "L17": iv(0.1, 0.2)}) == "mixed"
    assert verdict(rule, {"L14": iv(0.05, 0.1), "L17": iv(0.1, 0.2)}) == "not reproduced"
    assert verdict(rule, [-0.4, -0.3, -0.35]) == "reproduced"     # a list of numbers = paired differences
    assert verdict(rule, 0.0) == "not reproduced"                  # a point on the threshold is not below it


def test_interval_above_threshold_sides():
    rule = C.IntervalAbove(100.0)
    assert verdict(rule, 100.1) == "reproduced" and verdict(rule, 99.9) == "not reproduced"
    assert verdict(rule, (99.0, 101.0)) == "not established"
    assert "a point, no interval" in rule.decide(150.0, REF).reason
    with pytest.raises(AnatomyKitError, match="point estimate"):
        C.IntervalAbove(100.0, method="t").decide(150.0, REF)


# ------------------------------------------------------------------ SetOverlap

@pytest.mark.parametrize("ours, expected", [([8, 9, 10, 12], "reproduced"), ([8, 9, 2, 3], "partly reproduced"),
                                            ([0, 1, 2, 3], "not reproduced"), ([8, 2, 3, 4], "partly reproduced")])
def test_set_overlap_counts(ours, expected):
    ref = references()["p1.critical_core"]
    assert verdict(C.SetOverlap(full=3, partly=1), ours, ref) == expected


def test_set_overlap_chance_and_bad_rules():
    assert verdict(C.SetOverlap(full=3, partly=2), [8, 2, 3, 4], references()["p1.critical_core"]) == "not reproduced"
    d = C.SetOverlap(n_layers=30).decide([8, 9, 10, 12], references()["p1.critical_core"])
    assert "random 4 of 30 layers share as many with p = 0.0038" in d.reason   # (C(4,3)·26 + 1) / C(30,4)
    assert d.verdict == "reproduced"


@pytest.mark.parametrize("ours, n_layers, expected", [
    ([8, 9, 2, 3], 30, "not established"),     # 2 shared: p = 0.075 by chance
    ([8, 9, 2, 3], 200, "partly reproduced"),  # the same 2 of 200: p = 0.0018
    ([8, 2, 3, 4], 30, "not established"),     # 1 shared: p = 0.46
    ([0, 1, 2, 3], 30, "not reproduced"),      # none shared
])
def test_set_overlap_must_beat_chance(ours, n_layers, expected):
    rule = C.SetOverlap(full=3, partly=1, n_layers=n_layers)
    d = rule.decide(ours, references()["p1.critical_core"])
    assert d.verdict == expected
    assert ("no better than chance" in d.reason) == (expected == "not established")
    assert "probability ≤ 0.05" in rule.describe(references()["p1.critical_core"])
    with pytest.raises(AnatomyKitError):
        C.SetOverlap(full=1, partly=2)
    with pytest.raises(AnatomyKitError, match="exceeds"):
        C.SetOverlap(full=5).decide([1], references()["p1.critical_core"])


# ------------------------------------------------------------------ RankCorrelation

def test_rank_correlation_thresholds():
    rule = C.RankCorrelation("positive")
    assert verdict(rule, (range(5), range(5))) == "not established"             # n = 5 < 6
    assert verdict(rule, (range(8), [1, 3, 2, 5, 4, 7, 6, 8])) == "reproduced"   # exact p ≈ 0.002
    assert verdict(rule, (range(8), [8, 6, 7, 4, 5, 2, 3, 1])) == "not reproduced"
    assert verdict(rule, (range(8), [3, 1, 4, 8, 5, 2, 7, 6])) == "not established"
    assert verdict(C.RankCorrelation("positive", min_n=5), (range(5), range(5))) == "reproduced"  # p = 2/120
    assert "p-value" in rule.decide((range(5), range(5)), REF).reason


def test_rank_correlation_alpha_edge_and_reference_sign():
    r = stats.spearman(range(6), [1, 2, 3, 4, 6, 5])                        # exact two-sided p
    assert verdict(C.RankCorrelation("positive", alpha=r.p), r) == "reproduced"
    assert verdict(C.RankCorrelation("positive", alpha=r.p * 0.99), r) == "not established"
    ref = references()["p1.recovery_importance_correlation"]                 # value: positive
    assert "positive" in C.RankCorrelation().describe(ref)


# ------------------------------------------------------------------ BeyondNull

def test_beyond_null_permutation_inside_outside_and_equal():
    front = stats.permutation_null(lambda v: v[:2].sum() / v.sum(), [9.0, 8.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    flat = stats.permutation_null(lambda v: v[:2].sum() / v.sum(), [1.0, 3.0, 2.0, 5.0, 4.0, 1.0, 2.0])
    equal = stats.permutation_null(lambda v: v[:2].sum() / v.sum(), [2.0] * 6)
    assert front.p <= 0.05 and verdict(C.BeyondNull("greater"), front) == "reproduced"
    assert verdict(C.BeyondNull("less"), front) == "not reproduced"
    assert verdict(C.BeyondNull("greater"), flat) == "not established"
    d = C.BeyondNull("greater").decide(equal, REF)
    assert d.verdict == "not established" and "equals the null model's value" in d.reason


def test_beyond_null_points_bands_and_intervals():
    rule = C.BeyondNull("greater")
    d = rule.decide((0.5, 0.5), REF)
    assert d.verdict == "not established" and "equals the null model's value" in d.reason
    assert "nothing is decided" in rule.decide((0.6, 0.5), REF).reason
    assert verdict(rule, (0.71, (0.3, 0.7))) == "reproduced"
    assert verdict(rule, (0.69, (0.3, 0.7))) == "not established"
    assert verdict(rule, (0.29, (0.3, 0.7))) == "not reproduced"
    assert verdict(rule, (iv(0.51, 0.6), 0.5)) == "reproduced"
    assert verdict(rule, (iv(0.49, 0.6), 0.5)) == "not established"
    assert verdict(C.BeyondNull("less"), (iv(0.4, 0.49), 0.5)) == "reproduced"


# ------------------------------------------------------------------ AllOf and NotComparable

def _part(v):
    return {"reproduced": iv(-0.3, -0.1), "not established": iv(-0.3, 0.1), "not reproduced": iv(0.1, 0.3)}[v]


@pytest.mark.parametrize("a, b, expected", [
    ("reproduced", "reproduced", "reproduced"), ("reproduced", "not reproduced", "mixed"),
    ("reproduced", "not established", "partly reproduced"), ("not established", "not reproduced", "not reproduced"),
    ("not established", "not established", "not established")])
def test_all_of_combinations(a, b, expected):
    rule = C.AllOf({"a": C.DifferenceSign("negative"), "b": C.DifferenceSign("negative")})
    d = rule.decide({"a": _part(a), "b": _part(b)}, REF)
    assert d.verdict == expected and f"a: {a}" in d.reason and f"b: {b}" in d.reason


def test_all_of_with_not_comparable_and_errors():
    rule = C.AllOf({"x": C.NotComparable("the paper's model is 440M"), "y": C.DifferenceSign("negative")})
    assert verdict(rule, {"x": None, "y": _part("reproduced")}) == "partly reproduced"
    assert verdict(rule, {"x": None, "y": _part("not established")}) == "not established"
    both = C.AllOf({"x": C.NotComparable("one"), "y": C.NotComparable("two")})
    assert verdict(both, {"x": None, "y": None}) == "not comparable"
    with pytest.raises(AnatomyKitError, match="exactly the parts"):
        rule.decide({"x": None}, REF)
    with pytest.raises(AnatomyKitError):
        C.NotComparable(" ")


# ------------------------------------------------------------------ EveryOf: a claim about every member

def _blocks(kind):
    """Per-block differences whose 95 % t interval (n = 4) lies above 0, straddles it, or lies below it."""
    return {"above": [1.0, 1.2, 0.9, 1.1], "straddles": [1.0, -1.0, 0.5, -0.4], "below": [-1.0, -1.2, -0.9, -1.1]}[kind]


def _t_p(values):
    """Two-sided one-sample t test p of mean 0, by formula (scipy's t distribution only)."""
    from scipy import stats as sps

    x = np.asarray(values, dtype=float)
    t = x.mean() / (x.std(ddof=1) / np.sqrt(x.size))
    return float(2 * sps.t.sf(abs(t), x.size - 1))


@pytest.mark.parametrize("a, b, expected", [
    (("above", "above"), ("above",), "reproduced"),
    (("above", "below"), ("above",), "not reproduced"),           # a member mixed within: refuted
    (("above", "straddles"), ("above",), "not established"),      # a member partly: undecided, never "partly"
    (("above", "above"), ("straddles",), "not established"),
    (("above", "above"), ("below",), "not reproduced"),
    (("straddles", "straddles"), ("below",), "not reproduced")])
def test_every_of_needs_every_member(a, b, expected):
    rule = C.EveryOf({"m1": C.IntervalAbove(0.0, method="t"), "m2": C.IntervalAbove(0.0, method="t")})
    ours = {"m1": {f"c{i}": _blocks(k) for i, k in enumerate(a)}, "m2": {f"c{i}": _blocks(k) for i, k in enumerate(b)}}
    d = rule.decide(ours, REF)
    assert d.verdict == expected
    # one tested part per member, whatever its rule judged inside: its p the largest of its intervals' p
    assert [name for name, _, _ in d.parts] == ["m1", "m2"]
    for (name, _, p), kinds in zip(d.parts, (a, b)):
        assert p == pytest.approx(max(_t_p(_blocks(k)) for k in kinds), rel=1e-9)
    assert d.p == pytest.approx(max(p for *_, p in d.parts), rel=1e-12)
    assert "every part must hold" in d.reason
    # a member is held, refuted or undecided: never "partly" or "mixed"
    assert {v for _, v, _ in d.parts} <= {"reproduced", "not reproduced", "not established"}


def test_every_of_member_verdicts_and_not_comparable():
    unmet = C.Precondition(C.IntervalAbove(0.0, method="t"), C.Condition("paired blocks", "saved"))
    rule = C.EveryOf({"m1": unmet, "m2": C.IntervalAbove(0.0, method="t")})
    missing = {"conditions": {"paired blocks": (False, "none saved")}, "value": None}
    d = rule.decide({"m1": missing, "m2": {"c": _blocks("above")}}, REF)
    # a member that cannot be judged leaves the claim undecided (AllOf would say "partly reproduced")
    assert d.verdict == "not established" and d.p is None
    assert d.parts[0][:2] == ("m1", "not comparable") and d.parts[1][1] == "reproduced"
    assert C.AllOf(dict(rule.parts)).decide({"m1": missing, "m2": {"c": _blocks("above")}}, REF).verdict == \
        "partly reproduced"
    everyone = C.EveryOf({"m1": unmet, "m2": unmet})
    assert verdict(everyone, {"m1": missing, "m2": missing}) == "not comparable"
    met = {"conditions": {"paired blocks": (True, "4 blocks")}, "value": {"c": _blocks("below")}}
    assert verdict(rule, {"m1": met, "m2": {"c": _blocks("above")}}) == "not reproduced"
    with pytest.raises(AnatomyKitError, match="exactly the parts"):
        rule.decide({"m1": missing}, REF)
    assert "Every one of 2 parts" in rule.describe(REF) and "intersection-union" in rule.describe(REF)
    assert C.EveryOf({"a": C.IntervalAbove(0.0)}) != C.AllOf({"a": C.IntervalAbove(0.0)})


# ------------------------------------------------------------------ rule text follows the rule

def test_rule_text_changes_with_thresholds():
    crit = references()["p1.critical_core"]
    assert C.Magnitude(within_factor=10).describe(REF) != C.Magnitude(within_factor=5).describe(REF)
    assert "factor 5" in C.Magnitude(within_factor=5).describe(REF)
    assert "90 %" in C.DifferenceSign("negative", confidence=0.9).describe(REF)
    assert "95 %" not in C.DifferenceSign("negative", confidence=0.9).describe(REF)
    assert "99 % interval" in C.IntervalBelow(confidence=0.99).describe(REF)
    assert "at least 2" in C.SetOverlap(full=2, partly=1).describe(crit)
    assert "±2" in C.Close(abs_tol=2.0).describe(REF) and "±1" in C.Close(abs_tol=1.0).describe(REF)
    assert "p ≤ 0.01" in C.RankCorrelation("positive", alpha=0.01).describe(REF)
    assert "fewer than 8" in C.RankCorrelation("positive", min_n=8).describe(REF)
    assert "below 0.5" in C.IntervalBelow(0.5).describe(REF) and "above 3" in C.IntervalAbove(3).describe(REF)
    # and the same field decides: factor 7 is reproduced at 10, partly at 5
    assert verdict(C.Magnitude(within_factor=10), 700.0) == "reproduced"
    assert verdict(C.Magnitude(within_factor=5), 700.0) == "partly reproduced"


# ------------------------------------------------------------------ Claim

def test_claim_reads_paper_values_from_references():
    c = C.Claim("p1.l11_ablation", 63419 / 9.9, C.Magnitude())
    assert c.paper == 63419 and c.verdict == "reproduced" and "63,419" in c.rule_text and c.unit == "% PPL change"
    assert C.Claim("p1.l11_ablation", 63419 / 10.1, C.Magnitude()).verdict == "partly reproduced"
    core = C.Claim("p1.critical_core", [8, 9, 10, 11], C.SetOverlap(full=4))
    assert core.paper == [8, 9, 10, 11] and core.verdict == "reproduced"
    loss = C.Claim("p2.val_loss_440m", 3.45, C.Close(abs_tol=0.01, key="uniform"))
    assert loss.paper["uniform"] == 3.449 and loss.verdict == "reproduced"
    with pytest.raises(AnatomyKitError, match="keys"):
        C.Claim("p2.val_loss_440m", 3.45, C.Close(abs_tol=0.01, key="nope"))


def test_claim_unknown_id_names_it_and_how_to_add():
    with pytest.raises(AnatomyKitError, match=r"'p9.nope'.*references.yaml.*add an entry"):
        C.Claim("p9.nope", 1.0, C.Magnitude())
    with pytest.raises(AnatomyKitError, match="not a rule"):
        C.Claim("p1.l11_ablation", 1.0, "reproduced")


def test_claim_verdict_cannot_be_written_by_hand():
    c = C.Claim("p1.l11_ablation", 60000.0, C.Magnitude())
    with pytest.raises(TypeError):
        C.Claim("p1.l11_ablation", 1.0, C.Magnitude(), verdict="reproduced")
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.verdict = "not reproduced"
    with pytest.raises(ValueError):
        dataclasses.replace(c, verdict="not reproduced")
    with pytest.raises(AnatomyKitError):
        C.Decision("proven", "because")


def test_claim_to_dict_is_strict_json_and_table_rows():
    one_seed = stats.paired_difference({0: 1.0}, {0: 1.5}, unit="nats")
    claims = [C.Claim("p1.l11_ablation", np.float64(61000.0), C.Magnitude(), evidence={"metric": np.int64(11)}),
              C.Claim("p2.val_loss_440m", one_seed, C.DifferenceSign(paper_keys=("gromov-spherical", "uniform"))),
              C.Claim("p2.small_scale_overlap", None, C.NotComparable("we train no 128M model"),
                      note="our preset has 0.4M parameters")]
    docs = [json.loads(json.dumps(c.to_dict(), allow_nan=False)) for c in claims]
    assert docs[0]["ours"] == 61000.0 and docs[0]["evidence"] == {"metric": 11} and docs[0]["verdict"] == "reproduced"
    assert docs[1]["verdict"] == "not established" and docs[1]["ours_data"]["low"] is None
    assert docs[1]["ours"] == "Δ = −0.500 nats" and "one value" in docs[1]["interval"]
    assert docs[2]["verdict"] == "not comparable" and docs[2]["reason"] == "we train no 128M model"
    rows = C.claims_table(claims)
    assert [r["verdict"] for r in rows] == [c.verdict for c in claims]
    assert set(rows[0]) == {"claim", "paper", "unit", "ours", "interval / null", "verdict", "why", "rule"}
    assert rows[2]["why"] == "we train no 128M model Note: our preset has 0.4M parameters."
    assert rows[0]["why"] == claims[0].reason
    shown = C.Claim("p1.anti_layers", {"L14": stats.Interval(18.46512696205301, 14.7, 22.3, 5, 3.0, 4)},
                    C.IntervalBelow(0.0)).to_dict()
    assert shown["ours"] == {"L14": 18.47} and shown["ours_data"]["L14"]["mean"] == 18.46512696205301
    assert rows[0]["interval / null"] == "—" and rows[1]["rule"] == claims[1].rule_text


def test_verdict_meanings_cover_every_verdict():
    assert tuple(C.VERDICT_MEANINGS) == C.VERDICTS
    assert all(s.endswith(".") and s.count(". ") == 0 for s in C.VERDICT_MEANINGS.values())


# ------------------------------------------------------------------ Precondition (named conditions)

def gated(rule, minimum=0.5, name="held-out R²"):
    return C.Precondition(rule, C.Condition(name, "a prediction with skill", minimum))


@pytest.mark.parametrize("skill, expected", [(0.49, "not comparable"), (0.5, "reproduced"), (0.9, "reproduced")])
def test_precondition_gates_on_both_sides_of_the_minimum(skill, expected):
    d = gated(C.Magnitude()).decide({"conditions": {"held-out R²": skill}, "value": 120.0}, REF)
    assert d.verdict == expected
    assert ("ours 0.49, the claim needs a prediction with skill (≥ 0.5)" in d.reason) == (expected == "not comparable")


def test_precondition_passes_the_inner_verdict_interval_and_text_through():
    rule = gated(C.IntervalBelow(0.0), minimum=200, name="our step cap")
    cap = {"our step cap": 300}
    assert verdict(rule, {"conditions": cap, "value": iv(0.1, 0.3)}) == "not reproduced"
    assert verdict(rule, {"conditions": cap, "value": iv(-0.3, 0.3)}) == "not established"
    d = rule.decide({"conditions": cap, "value": iv(-0.3, -0.1)}, REF)
    assert d.verdict == "reproduced" and "conditions met (our step cap 300)" in d.reason
    assert d.interval.startswith("95 %")
    assert verdict(rule, {"conditions": {"our step cap": 199}, "value": iv(-0.3, -0.1)}) == "not comparable"
    text = rule.describe(REF)
    assert "our step cap: a prediction with skill (≥ 200)" in text and C.IntervalBelow(0.0).describe(REF) in text


def test_precondition_yes_no_conditions_name_every_unmet_one():
    rule = C.Precondition(C.Magnitude(), C.Condition("model size", "at least 128M parameters", 128e6),
                          C.Condition("corpus", "OpenWebText"), C.Condition("anti-layers", "p1.anti_layers held"))
    met = {"model size": 440e6, "corpus": True, "anti-layers": (True, "reproduced")}
    assert verdict(rule, {"conditions": met, "value": 120.0}) == "reproduced"
    for name, unmet in (("model size", 0.39e6), ("corpus", (False, "TinyStories")), ("anti-layers", False)):
        d = rule.decide({"conditions": {**met, name: unmet}, "value": None}, REF)
        assert d.verdict == "not comparable" and d.reason.count("the claim needs") == 1 and name in d.reason
    d = rule.decide({"conditions": {"model size": 0.39e6, "corpus": (False, "TinyStories"), "anti-layers": False},
                     "value": None}, REF)
    assert d.reason.count("the claim needs") == 3 and "corpus: ours TinyStories, the claim needs OpenWebText" in d.reason


def test_precondition_bad_inputs():
    with pytest.raises(AnatomyKitError, match="rule to apply"):
        C.Precondition("reproduced", C.Condition("x", "y"))
    with pytest.raises(AnatomyKitError, match="at least one Condition"):
        C.Precondition(C.Magnitude())
    with pytest.raises(AnatomyKitError, match="needs"):
        C.Condition("x", " ")
    with pytest.raises(AnatomyKitError, match="must differ"):
        C.Precondition(C.Magnitude(), C.Condition("x", "y"), C.Condition("x", "z"))
    with pytest.raises(AnatomyKitError, match="conditions"):
        gated(C.Magnitude()).decide(3.0, REF)
    with pytest.raises(AnatomyKitError, match="exactly"):
        gated(C.Magnitude()).decide({"conditions": {"other": 1.0}, "value": 1.0}, REF)
    with pytest.raises(AnatomyKitError, match="finite"):
        gated(C.Magnitude()).decide({"conditions": {"held-out R²": float("nan")}, "value": 1.0}, REF)
    with pytest.raises(AnatomyKitError, match="yes/no"):
        C.Precondition(C.Magnitude(), C.Condition("corpus", "the paper's")).decide(
            {"conditions": {"corpus": "no"}, "value": 1.0}, REF)
    inside = C.AllOf({"gated": gated(C.Magnitude()), "plain": C.Magnitude()})
    assert verdict(inside, {"gated": {"conditions": {"held-out R²": 0.0}, "value": 100.0},
                            "plain": 100.0}) == "partly reproduced"


# ------------------------------------------------------------------ a statistic the run could not measure
def test_an_unmeasured_statistic_is_not_comparable_under_any_rule_with_its_why():
    from anatomy_kit.verdicts.claims import Unmeasured

    for rule in (C.IntervalAbove(1e6), C.Magnitude(), C.DifferenceSign("negative", method="sign-flip")):
        c = C.Claim("p1.importance_range", Unmeasured("the text resolves no second effect"), rule, registry=None)
        assert c.verdict == "not comparable"
        assert "could not measure the statistic: the text resolves no second effect" in c.reason
        assert c.to_dict()["ours_data"] == {"unmeasured": "the text resolves no second effect"}
    with pytest.raises(AnatomyKitError):                   # a stand-in value is still an error, not a verdict
        C.IntervalAbove(1e6).decide(None, {"value": 1e6})
