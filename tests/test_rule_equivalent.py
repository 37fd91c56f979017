"""Equivalent: "equal" only when the whole interval lies inside a margin declared before the data."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from anatomy_kit import stats
from anatomy_kit.verdicts.claims import Claim
from anatomy_kit.verdicts.equivalence import resolvable_difference
from anatomy_kit.verdicts.rules import Equivalent, IntervalContains
from anatomy_kit.validate import AnatomyKitError

REF = {"value": "qualitative", "unit": None}
RULE = Equivalent(margin=0.1, basis="a tenth of the paper's gain")


def iv(low, high, n=6, confidence=0.90, method="t"):
    return stats.Interval((low + high) / 2, low, high, n, 0.1, n - 1, confidence, method)


@pytest.mark.parametrize("low, high, expected", [
    (-0.0999, 0.0999, "reproduced"),          # just inside both margins
    (-0.1, 0.05, "not established"),          # touching the lower margin
    (-0.05, 0.1, "not established"),          # touching the upper margin
    (-0.1001, 0.05, "not established"),       # just outside on one side
    (-0.2, 0.2, "not established"),           # wider than the band
    (0.0999, 0.3, "not established"),         # crosses the upper margin
    (0.1, 0.3, "not reproduced"),             # wholly outside, touching it from outside
    (0.1001, 0.3, "not reproduced"),
    (-0.3, -0.1001, "not reproduced"),
])
def test_the_margin_boundary(low, high, expected):
    assert RULE.decide(iv(low, high), REF).verdict == expected


def test_equivalence_is_not_an_interval_that_contains_zero():
    wide = iv(-0.2, 0.2)
    assert IntervalContains(confidence=0.90).decide(wide, REF).verdict == "reproduced"   # no difference shown
    d = RULE.decide(wide, REF)
    assert d.verdict == "not established" and "cannot resolve" in d.reason
    assert RULE.decide(iv(-0.12, 0.05), REF).verdict == "not established"
    assert "cannot resolve" not in RULE.decide(iv(-0.12, 0.05), REF).reason


@pytest.mark.parametrize("deltas", [
    [0.01, -0.02, 0.015, 0.0, -0.01, 0.02], [0.05, 0.08, 0.06, 0.09, 0.07, 0.04], [0.2, 0.25, 0.22, 0.18],
    [-0.05, 0.1, -0.12, 0.08, 0.0], [0.03, -0.04, 0.02, 0.05, -0.01, 0.0, 0.01]])
def test_the_90_percent_interval_inside_is_two_one_sided_t_tests_at_5_percent(deltas):
    d = np.asarray(deltas)
    se = d.std(ddof=1) / np.sqrt(d.size)
    p_low = sps.t.sf((d.mean() + 0.1) / se, d.size - 1)        # H0: Δ ≤ −0.1
    p_high = sps.t.cdf((d.mean() - 0.1) / se, d.size - 1)      # H0: Δ ≥ +0.1
    tost = max(p_low, p_high) < 0.05
    assert (RULE.decide(stats.paired_difference(deltas, [0.0] * d.size), REF).verdict == "reproduced") == tost


def test_other_value_sign_flip_and_a_mapping():
    assert Equivalent(margin=0.1, basis="b", value=1.0).decide(iv(0.95, 1.05), REF).verdict == "reproduced"
    assert Equivalent(margin=0.1, basis="b", value=1.0).decide(iv(-0.05, 0.05), REF).verdict == "not reproduced"
    three = stats.paired_difference([0.0, 0.001, -0.001], [0.0, 0.0, 0.0])
    assert RULE.decide(three, REF).verdict == "reproduced"
    # the exact sign-flip interval of 3 seeds is unbounded: equality can never be shown with it
    assert Equivalent(margin=0.1, basis="b", method="sign-flip").decide(three, REF).verdict == "not comparable"
    d = RULE.decide({"ε = 0 − full": iv(-0.05, 0.05), "other": iv(-0.3, 0.3)}, REF)
    assert d.verdict == "partly reproduced" and d.reason.startswith("1 of 2 inside ±0.1")


def test_text_points_errors_and_claims():
    text = RULE.describe(REF)
    assert "±0.1" in text and "a tenth of the paper's gain" in text and "two one-sided tests at 5 % each" in text
    assert "90 % t interval" in text and "absence of evidence" in text
    assert "at 2.5 % each" in Equivalent(margin=0.2, basis="b", confidence=0.95).describe(REF)
    assert "±0.2 around 1" in Equivalent(margin=0.2, basis="b", value=1.0).describe(REF)
    with pytest.raises(AnatomyKitError, match="point estimate"):
        RULE.decide(0.0, REF)
    with pytest.raises(AnatomyKitError, match="90 %"):
        RULE.decide(iv(-0.05, 0.05, confidence=0.95), REF)
    with pytest.raises(AnatomyKitError, match="margin"):
        Equivalent(margin=0.0, basis="b")
    with pytest.raises(AnatomyKitError, match="basis"):
        Equivalent(margin=0.1, basis=" ")
    with pytest.raises(TypeError):
        Equivalent(0.1, "b")                       # keyword-only: the margin is named where it is declared
    c = Claim("p2.small_scale_overlap", iv(-0.05, 0.05), RULE)
    assert c.verdict == "reproduced" and c.summary.endswith("inside ±0.1: equal within the margin (90 % t)")


def test_near_the_margin_is_marked():
    assert RULE.decide(iv(-0.0999, 0.05), REF).near_threshold
    assert RULE.decide(iv(-0.1001, 0.05), REF).near_threshold
    assert not RULE.decide(iv(-0.05, 0.05), REF).near_threshold
    assert not RULE.decide(iv(0.5, 0.6), REF).near_threshold


@pytest.mark.parametrize("n", [3, 6])
def test_a_margin_from_resolvable_difference_is_met_as_often_as_designed(n):
    """With identical conditions (true Δ = 0) a margin at the expected half-width is met less than half
    the time; the margin for power 0.8 about 80 % of the time (1,000 seeded simulated designs)."""
    rng = np.random.default_rng(1)
    samples = [list(rng.normal(0.0, 1.0, n)) for _ in range(1000)]
    rate = {}
    for power in (None, 0.8):
        rule = Equivalent(margin=resolvable_difference(1.0, n, power=power), basis="design")
        rate[power] = np.mean([rule.decide(s, REF).verdict == "reproduced" for s in samples])
    assert rate[None] < 0.5 and 0.74 < rate[0.8] < 0.9


# ------------------------------------------------------------------ resolvable_difference (an equivalence margin)

def test_resolvable_difference_is_the_expected_half_width():
    # t(0.95, 5) = 2.015048 and t(0.975, 2) = 4.302653 (printed t tables)
    assert resolvable_difference(1.0, 6) == pytest.approx(2.015048 / np.sqrt(6), rel=1e-6)
    assert resolvable_difference(0.5, 3, 0.95) == pytest.approx(4.302653 * 0.5 / np.sqrt(3), rel=1e-6)
    # power adds t(0.9, 5) = 1.475884 standard errors
    assert resolvable_difference(1.0, 6, power=0.8) == pytest.approx((2.015048 + 1.475884) / np.sqrt(6),
                                                                            rel=1e-6)
    assert resolvable_difference(1.0, 12) < resolvable_difference(1.0, 6)


@pytest.mark.parametrize("kwargs, match", [({"sd": 0.0, "n": 6}, "sd"), ({"sd": float("nan"), "n": 6}, "sd"),
                                           ({"sd": 1.0, "n": 1}, "n"), ({"sd": 1.0, "n": 6, "confidence": 1.0},
                                                                        "confidence"),
                                           ({"sd": 1.0, "n": 6, "power": 0.0}, "power")])
def test_resolvable_difference_rejects_bad_designs(kwargs, match):
    with pytest.raises(AnatomyKitError, match=match):
        resolvable_difference(**kwargs)
