"""IntervalContains (a claim that a difference is not established) on both sides of its threshold."""

from __future__ import annotations

import pytest

from anatomy_kit import stats
from anatomy_kit.verdicts.claims import Claim
from anatomy_kit.verdicts.rules import IntervalContains
from anatomy_kit.validate import AnatomyKitError

REF = {"value": "qualitative", "unit": None}


def iv(low, high, n=3, method="t"):
    return stats.Interval((low + high) / 2, low, high, n, 0.1, n - 1, 0.95, method)


@pytest.mark.parametrize("low, high, expected", [
    (-0.1, 0.1, "reproduced"), (0.0, 0.1, "reproduced"), (-0.1, 0.0, "reproduced"),
    (1e-9, 0.1, "not reproduced"), (-0.1, -1e-9, "not reproduced")])
def test_one_interval_either_side_of_zero(low, high, expected):
    assert IntervalContains().decide(iv(low, high), REF).verdict == expected


def test_some_all_none_and_another_value():
    rule = IntervalContains()
    assert rule.decide({"a": iv(-1, 1), "b": iv(-1, 1)}, REF).verdict == "reproduced"
    d = rule.decide({"a": iv(-1, 1), "b": iv(0.5, 1)}, REF)
    assert d.verdict == "mixed" and d.reason.startswith("1 of 2 contain 0")
    assert "b: 95 % t interval [0.5, 1]" in d.reason and "excludes 0" in d.reason
    assert rule.decide({"a": iv(0.2, 1), "b": iv(0.5, 1)}, REF).verdict == "not reproduced"
    assert IntervalContains(value=0.6).decide(iv(0.5, 1), REF).verdict == "reproduced"
    assert IntervalContains(value=0.4).decide(iv(0.5, 1), REF).verdict == "not reproduced"


def test_paired_seeds_decide_through_the_t_interval():
    wide = stats.paired_difference([1.0, 2.0, 3.0], [1.5, 1.9, 3.2])      # differences −0.5, 0.1, −0.2
    tight = stats.paired_difference([1.0, 2.0, 3.0], [1.5, 2.52, 3.49])   # −0.5, −0.52, −0.49
    assert IntervalContains().decide(wide, REF).verdict == "reproduced"
    d = IntervalContains().decide(tight, REF)
    assert d.verdict == "not reproduced" and "n = 3" in d.reason and "sign-flip p = 0.25" in d.reason
    # the exact sign-flip interval of 3 seeds is unbounded, so it would always contain 0: its best p,
    # 2/2³ = 0.25, cannot reach 0.05, and the design cannot speak
    assert IntervalContains(method="sign-flip").decide(tight, REF).verdict == "not comparable"


def test_points_are_refused_and_text_follows_the_fields():
    with pytest.raises(AnatomyKitError, match="point estimate"):
        IntervalContains().decide(0.3, REF)
    assert IntervalContains(method=None).decide(0.0, REF).verdict == "reproduced"
    assert "contains 0.5" in IntervalContains(value=0.5).describe(REF)
    assert "90 % t interval" in IntervalContains(confidence=0.9).describe(REF)
    with pytest.raises(AnatomyKitError, match="method"):
        IntervalContains(method="bootstrap")


def test_a_claim_takes_it():
    c = Claim("p2.small_scale_overlap", {"x": iv(-1, 1)}, IntervalContains())
    assert c.verdict == "reproduced" and c.interval.startswith("x: 95 % t interval")
