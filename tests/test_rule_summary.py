"""Every rule writes a one-line summary (≤ 120 characters) and marks verdicts near their threshold; a
claim's verdict depends on its primary statistic only (secondary readings are shown, never judged)."""

from __future__ import annotations

import inspect
import json

import numpy as np
import pytest

from anatomy_kit import stats
from anatomy_kit.verdicts import claims as C
from anatomy_kit.verdicts import rules as R
from anatomy_kit.verdicts.decision import SUMMARY_MAX, Decision, near_threshold, shorten
from anatomy_kit.validate import AnatomyKitError

REF = {"value": 100.0, "unit": "%"}
SET_REF = {"value": [8, 9, 10, 11]}
LONG = "a very long part name that a chapter might use, " * 3


def iv(low, high, n=3, confidence=0.95):
    return stats.Interval((low + high) / 2, low, high, n, 0.1, n - 1, confidence, "t")


def battery():
    """``(rule, ours, reference)`` for every rule class, on every side of its thresholds, with long names."""
    pc = stats.paired_difference([1.0, 1.1, 0.9, 1.05], [1.3, 1.25, 1.12, 1.2], unit="nats")
    many = {f"{LONG}{i}": iv(-0.3 + 0.2 * i, -0.1 + 0.2 * i) for i in range(6)}
    profile = {i: float(abs(i - 15)) for i in range(30)}
    null = stats.permutation_null(lambda v: v[:2].sum() / v.sum(), [9.0, 8.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    cases = [(R.Magnitude(), x, REF) for x in (150.0, 5000.0, 1e6, -3.0, iv(50, 900), iv(2000, 3000), (1e5, 1e6))]
    cases += [(R.Close(abs_tol=1.0, partly_factor=3), x, REF) for x in (100.5, 102.0, 110.0, iv(98, 103))]
    cases += [(R.DifferenceSign("negative"), x, REF) for x in (pc, iv(-0.3, 0.1), iv(0.1, 0.3))]
    cases += [(rule(0.0), x, REF) for rule in (R.IntervalBelow, R.IntervalAbove) for x in (many, iv(-1, -0.5), 0.0)]
    cases += [(R.IntervalContains(), x, REF) for x in (many, pc, iv(-1, 1))]
    cases += [(R.Equivalent(margin=0.2, basis="design"), x, REF)
              for x in (iv(-0.1, 0.1, confidence=0.9), iv(-1, 1, confidence=0.9), pc)]
    cases += [(R.SetOverlap(full=3, n_layers=30), x, SET_REF) for x in ([8, 9, 10, 12], [0, 1, 2, 3], [8, 1, 2, 3])]
    cases += [(R.SetOverlap(full=3, null="edge", draws=500), {"set": [14, 15, 16, 8], "profile": profile}, SET_REF)]
    cases += [(R.RankAtMost(2, item=15), profile, REF), (R.RankAtMost(1, of=30), 4, REF),
              (R.RankAtMost(1, item=15, null="edge", draws=500), profile, REF)]
    cases += [(R.RankCorrelation("positive"), x, REF) for x in ((range(8), range(8)), (range(4), range(4)),
                                                                  (range(8), [3, 1, 4, 8, 5, 2, 7, 6]))]
    cases += [(R.BeyondNull("greater"), x, REF) for x in (null, (0.5, 0.5), (0.6, 0.5), (iv(0.6, 0.7), (0.3, 0.5)))]
    cases += [(R.NotComparable(LONG), None, REF), (R.ByConstruction(LONG), None, REF),
              (R.Precondition(R.Magnitude(), R.Condition(LONG, LONG, 0.5)),
               {"conditions": {LONG: 0.1}, "value": 1.0}, REF),
              (R.Precondition(R.Magnitude(), R.Condition("R²", "skill", 0.5)),
               {"conditions": {"R²": 0.9}, "value": 100.0}, REF),
              (R.Requires(R.Magnitude(), 0.5, LONG), {"precondition": 0.1, "value": 1.0}, REF),
              (R.Requires(R.Magnitude(), 0.5, "R²"), {"precondition": 0.9, "value": 100.0}, REF),
              (R.AllOf({f"{LONG}{i}": R.IntervalBelow(0.0) for i in range(6)}), many, REF),
              (R.EveryOf({f"{LONG}{i}": R.IntervalBelow(0.0) for i in range(6)}), many, REF),
              (R.OnePartPerSignal(R.AllOf({f"{LONG}{i}": R.IntervalBelow(0.0) for i in range(6)}), LONG, 0.95),
               {"groups": [[f"{LONG}{i}" for i in range(3)], [f"{LONG}{i}" for i in range(3, 6)]],
                "value": many}, REF)]
    return cases


def test_every_rule_writes_a_one_line_summary_within_the_bound():
    cases = battery()
    rule_classes = {obj for name in R.__all__ if inspect.isclass(obj := getattr(R, name)) and hasattr(obj, "decide")}
    assert {type(rule) for rule, _, _ in cases} == rule_classes           # no rule left untested
    verdicts = set()
    for rule, ours, ref in cases:
        d = rule.decide(ours, ref)
        assert d.summary and len(d.summary) <= SUMMARY_MAX and "\n" not in d.summary, (rule, d.summary)
        verdicts.add(d.verdict)
    assert verdicts == set(C.VERDICTS)                                   # and every verdict appears


def test_a_summary_counts_the_paired_values_on_each_side_of_the_threshold():
    # by hand: 1 − 1.3 < 0, 1.1 − 1.0 > 0, 0.9 − 1.12 < 0: two of three below 0, whatever the interval says
    pc = stats.paired_difference([1.0, 1.1, 0.9], [1.3, 1.0, 1.12], unit="nats")
    assert R.DifferenceSign("negative").decide(pc, REF).summary.endswith("; 2 of 3 values below 0")
    # against a threshold other than 0: the values minus nothing, compared with the threshold itself
    assert R.IntervalAbove(0.15).decide([0.1, 0.2, 0.3, 0.4], REF).summary.endswith("; 3 of 4 values above 0.15")
    # a point or a bare interval has no values to count
    assert "values" not in R.IntervalBelow(0.0).decide((-2.0, -1.0), REF).summary


def test_summaries_say_it_at_a_glance():
    pc = stats.paired_difference([1.0, 1.1, 0.9], [1.3, 1.25, 1.12], unit="nats")
    assert R.DifferenceSign("negative").decide(pc, REF).summary == \
        "our Δ = −0.2233 nats (interval −0.4098 to −0.03689) lies entirely below 0 (95 % t); 3 of 3 values below 0"
    assert R.SetOverlap(full=3, n_layers=30).decide([8, 9, 2, 3], SET_REF).summary == \
        "shares 2 of the paper's 4 layers [8, 9]; chance p = 0.075 (layers exchangeable)"


def test_decision_refuses_a_long_summary_and_shorten_bounds_it():
    with pytest.raises(AnatomyKitError, match="120"):
        Decision("reproduced", "r", summary="x" * 121)
    with pytest.raises(AnatomyKitError, match="one line"):
        Decision("reproduced", "r", summary="two\nlines")
    short = shorten("word " * 100)
    assert len(short) <= SUMMARY_MAX and short.endswith("…") and "\n" not in short
    assert shorten("  a  b\nc ") == "a b c"
    assert len(shorten("x" * 500)) == SUMMARY_MAX


# ------------------------------------------------------------------ near the threshold

@pytest.mark.parametrize("low, high, near", [
    (-1.0, -0.04, True),             # 0.04 from 0, 5 % of the width 0.96 is 0.048
    (-1.0, -0.06, False),
    (0.04, 1.0, True), (-0.5, 0.5, False), (-0.02, 1.0, True),
    (0.0, 0.0, True),                 # a point on the threshold
    (-float("inf"), float("inf"), False),    # one seed: nothing is near
])
def test_interval_ends_near_the_threshold(low, high, near):
    assert near_threshold(low, high, [0.0]) == near
    assert R.IntervalBelow(0.0).decide(iv(low, high) if low != high else low, REF).near_threshold == near


def test_a_half_open_interval_is_judged_at_its_finite_end():
    """[35.8, ∞) against 10⁶ (chapter 1's importance range) is far; its infinite width says nothing."""
    assert not near_threshold(35.8, float("inf"), [1e6])
    assert near_threshold(1.02e6, float("inf"), [1e6]) and not near_threshold(-float("inf"), 0.9e6, [1e6])


def test_points_near_and_every_interval_rule_marks_it():
    assert near_threshold(104.0, 104.0, [100.0]) and not near_threshold(106.0, 106.0, [100.0])
    assert R.Close(abs_tol=1.0).decide(iv(99.05, 100.5), REF).near_threshold          # 99.05 vs 99
    assert not R.Close(abs_tol=1.0).decide(iv(99.5, 100.5), REF).near_threshold
    assert R.IntervalContains().decide(iv(0.01, 1.0), REF).near_threshold
    assert R.BeyondNull("greater").decide((iv(0.51, 0.9), (0.3, 0.5)), REF).near_threshold
    assert not R.BeyondNull("greater").decide((iv(0.7, 0.9), (0.3, 0.5)), REF).near_threshold
    r = stats.spearman(range(6), [1, 2, 3, 4, 6, 5])
    assert R.RankCorrelation("positive", alpha=r.p).decide(r, REF).near_threshold
    assert not R.RankCorrelation("positive", alpha=r.p * 3).decide(r, REF).near_threshold
    gate = R.Precondition(R.Magnitude(), R.Condition("R²", "skill", 0.5))
    assert gate.decide({"conditions": {"R²": 0.49}, "value": 100.0}, REF).near_threshold
    assert not gate.decide({"conditions": {"R²": 0.9}, "value": 100.0}, REF).near_threshold


def test_all_of_is_near_when_a_counted_part_is():
    near_part, far_part = iv(-1.0, -0.01), iv(-1.0, -0.5)
    rule = R.AllOf({"a": R.IntervalBelow(0.0), "b": R.IntervalBelow(0.0)})
    assert rule.decide({"a": near_part, "b": far_part}, REF).near_threshold
    assert not rule.decide({"a": far_part, "b": far_part}, REF).near_threshold


# ------------------------------------------------------------------ one primary statistic

class Spy:
    """A rule that records what it is given (tests only)."""

    def __init__(self):
        self.seen = []

    def describe(self, reference):
        return "spy."

    def decide(self, ours, reference):
        self.seen.append(ours)
        return R.DifferenceSign("negative").decide(ours, reference)


def test_a_claims_verdict_depends_on_ours_only():
    primary = iv(-0.3, 0.1)                                      # not established
    strong = {"residual norms (best of seven)": iv(-0.9, -0.8), "another module": 0.85}
    spy = Spy()
    with_secondary = C.Claim("p1.r2_gate", primary, spy, secondary=strong)
    without = C.Claim("p1.r2_gate", primary, R.DifferenceSign("negative"))
    assert spy.seen == [primary]                                 # the rule never saw the secondary readings
    assert with_secondary.verdict == without.verdict == "not established"
    assert with_secondary.reason == without.reason
    with pytest.raises(AnatomyKitError, match="secondary"):
        C.Claim("p1.r2_gate", primary, R.DifferenceSign("negative"), secondary=[0.85])


def test_to_dict_and_tables_carry_summary_near_and_secondary():
    c = C.Claim("p1.r2_gate", iv(-1.0, -0.01), R.DifferenceSign("negative"),
                secondary={"residual norms": stats.Interval(0.85, 0.8, 0.9, 3, 0.02, 2), "best module": "down",
                           "count": np.int64(7)}, note="gate_proj elements decide")
    doc = json.loads(json.dumps(c.to_dict(), allow_nan=False))
    assert doc["verdict"] == "reproduced" and doc["near_threshold"] is True and doc["summary"] == c.summary
    assert doc["secondary"]["residual norms"] == "0.85 (95 % t interval [0.8, 0.9], n = 3)"
    assert doc["secondary"]["count"] == 7 and doc["secondary_data"]["residual norms"]["low"] == 0.8
    why = C.claims_table([c])[0]["why"]
    assert "Note: gate_proj elements decide." in why and "Secondary, not judged: residual norms = 0.85" in why
    assert why.endswith("Near its threshold: another machine may flip this verdict.")
    plain = C.Claim("p1.l11_ablation", 6000.0, R.Magnitude()).to_dict()
    assert plain["secondary"] == {} and plain["secondary_data"] is None and plain["near_threshold"] is False


def test_claim_summary_falls_back_to_the_shortened_reason():
    class NoSummary:
        def describe(self, reference):
            return "no summary."

        def decide(self, ours, reference):
            return Decision("not established", "because " * 40)

    c = C.Claim("p1.l11_ablation", 1.0, NoSummary())
    assert c.summary.startswith("because because") and c.summary.endswith("…") and len(c.summary) <= SUMMARY_MAX
