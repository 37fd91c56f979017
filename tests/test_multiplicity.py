"""Holm's correction within a paper's family, and the p-value each rule that is a test reports."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from anatomy_kit import stats
from anatomy_kit.validate import AnatomyKitError
from anatomy_kit.verdicts.combine import AllOf, ByConstruction
from anatomy_kit.verdicts.equivalence import Equivalent
from anatomy_kit.verdicts.magnitude import Magnitude
from anatomy_kit.verdicts.multiplicity import NO_TEST, holm_adjusted, holm_by_family
from anatomy_kit.verdicts.rules import Close, DifferenceSign, IntervalBelow, IntervalContains, RankCorrelation, SetOverlap

REF = {"value": "negative"}


def test_holm_by_hand_all_survive():
    # sorted 0.01·3 = 0.03, 0.02·2 = 0.04, 0.04·1 = 0.04: all ≤ 0.05
    assert holm_adjusted([0.04, 0.01, 0.02]) == pytest.approx([0.04, 0.03, 0.04], abs=1e-15)


def test_holm_step_down_stops_and_stays_monotone():
    # sorted 0.01·3 = 0.03 ✓; 0.03·2 = 0.06 ✗ stops; 0.04·1 = 0.04 but the adjusted p cannot fall: 0.06
    assert holm_adjusted([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06], abs=1e-15)
    assert holm_adjusted([0.5, 0.6]) == pytest.approx([1.0, 1.0])            # capped at 1
    with pytest.raises(AnatomyKitError, match="probability"):
        holm_adjusted([0.1, 1.5])


def test_holm_by_family_counts_tests_per_paper_and_marks_positive_verdicts():
    claims = [{"id": "p1.a", "verdict": "reproduced", "p": 0.01}, {"id": "p1.b", "verdict": "reproduced", "p": 0.03},
              {"id": "p1.c", "verdict": "not established", "p": 0.2}, {"id": "p1.d", "verdict": "reproduced", "p": None},
              {"id": "p2.a", "verdict": "reproduced", "p": 0.03}, {"id": "p2.b", "verdict": "not comparable", "p": None}]
    h = holm_by_family(claims)
    # p1: m = 3 tests; 0.01·3 = 0.03 ✓, 0.03·2 = 0.06 ✗, 0.2·1 → 0.2
    assert (h["p1.a"].adjusted, h["p1.a"].survives, h["p1.a"].m) == (pytest.approx(0.03), True, 3)
    assert (h["p1.b"].adjusted, h["p1.b"].survives) == (pytest.approx(0.06), False)
    assert h["p1.c"].survives is None                                      # not positive: nothing to survive
    assert (h["p1.d"].p, h["p1.d"].survives, h["p1.d"].why) == (None, None, NO_TEST)
    # p2 is its own family: one test, 0.03 ≤ 0.05
    assert (h["p2.a"].adjusted, h["p2.a"].survives, h["p2.a"].m) == (pytest.approx(0.03), True, 1)
    assert h["p2.b"].why == "not comparable: no test, nothing to correct"


def test_interval_rules_give_the_t_test_p_of_their_own_data():
    d = [-0.3, -0.1, -0.25, -0.2, 0.05]
    expected = sps.ttest_1samp(d, 0.0).pvalue
    assert IntervalBelow(0.0, method="t").decide(d, REF).p == pytest.approx(expected, rel=1e-9)
    # against a threshold: the data shifted
    expected = sps.ttest_1samp(np.array(d) + 0.1, 0.0).pvalue
    assert IntervalBelow(-0.1, method="t").decide(d, REF).p == pytest.approx(expected, rel=1e-9)
    # a point or a bare interval is no test
    assert IntervalBelow(0.0).decide(-0.5, REF).p is None
    assert IntervalBelow(0.0).decide((-2.0, -1.0), REF).p is None
    # an interval that excludes 0 at 95 % ⇔ p < 0.05
    assert (IntervalBelow(0.0, method="t").decide(d, REF).verdict == "reproduced") == (expected < 0.05)


def test_sign_flip_rules_give_the_exact_sign_flip_p():
    d = [-0.3, -0.1, -0.25, -0.2, -0.05, -0.15]
    # every difference negative: 2 of the 2⁶ = 64 sign patterns are as extreme (all −, all +): p = 2/64
    assert DifferenceSign("negative", method="sign-flip").decide(d, REF).p == pytest.approx(2 / 64, abs=1e-15)


def test_equivalence_gives_the_larger_one_sided_p():
    d = [0.01, -0.02, 0.005, 0.0, 0.015]
    m, se, df = np.mean(d), np.std(d, ddof=1) / math.sqrt(5), 4
    p_lower, p_upper = sps.t.sf((m + 0.05) / se, df), sps.t.cdf((m - 0.05) / se, df)
    got = Equivalent(margin=0.05, basis="declared first").decide(d, REF).p
    assert got == pytest.approx(max(p_lower, p_upper), rel=1e-9)


def test_rules_that_are_no_test_give_no_p():
    assert Close(abs_tol=1.0).decide(3.0, {"value": 3.5}).p is None
    assert Magnitude().decide(60.0, {"value": 100.0}).p is None
    assert IntervalContains().decide([0.1, -0.2, 0.05], REF).p is None
    assert ByConstruction("built so").decide(1, REF).p is None


def test_set_overlap_with_both_nulls_reports_and_decides_by_the_larger_p():
    profile = {l: float(v) for l, v in zip(range(1, 11), [9, 8, 3, 2, 5, 6, 1, 4, 7, 10])}
    ours = {"set": [5, 6, 9], "profile": profile}
    ref = {"value": [5, 6, 7]}
    edge = SetOverlap(full=2, partly=1, null="edge", draws=2000).decide(ours, ref).p
    exch = SetOverlap(full=2, partly=1, n_layers=10).decide(ours, ref).p
    # exchangeable by hand: P(≥ 2 shared) for 3 of 10 vs 3 = [C(3,2)C(7,1) + C(3,3)] / C(10,3) = 22/120
    assert exch == pytest.approx(22 / 120, abs=1e-12)
    both = SetOverlap(full=2, partly=1, null="both", draws=2000).decide(ours, ref)
    assert both.p == pytest.approx(max(edge, exch), abs=1e-15)
    assert both.verdict == ("reproduced" if max(edge, exch) <= 0.05 else "not established")


def test_all_of_gives_the_largest_part_p_and_none_if_a_part_is_no_test():
    x, y = stats.spearman([1, 2, 3, 4, 5, 6, 7], [1, 3, 2, 4, 6, 5, 7]), [-0.3, -0.1, -0.25, -0.2, 0.05]
    ref = {"value": "positive"}
    rule = AllOf({"rho": RankCorrelation("positive"), "delta": IntervalBelow(0.0, method="t")})
    got = rule.decide({"rho": x, "delta": y}, ref).p
    assert got == pytest.approx(max(x.p, sps.ttest_1samp(y, 0.0).pvalue), rel=1e-9)
    mixed = AllOf({"rho": RankCorrelation("positive"), "band": Close(abs_tol=1.0)})
    assert mixed.decide({"rho": x, "band": 0.5}, {"value": 0.0}).p is None
