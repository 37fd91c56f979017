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
from anatomy_kit.verdicts.multiplicity import design_can_survive, holm_adjusted, holm_by_family
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


def _c(cid, verdict, p, role="primary", parts=()):
    return {"id": cid, "verdict": verdict, "p": p, "role": role, "parts": [list(x) for x in parts]}


def test_holm_runs_over_the_primaries_only_and_leaves_secondaries_unadjusted():
    claims = [_c("p1.a", "reproduced", 0.01), _c("p1.b", "reproduced", 0.03), _c("p1.c", "not established", 0.2),
              _c("p1.s", "reproduced", 0.001, role="secondary"),
              _c("p2.a", "reproduced", 0.03), _c("p2.s", "not comparable", None, role="secondary")]
    h = holm_by_family(claims)
    # p1's primaries: m = 3 tested parts; by hand 0.01·3 = 0.03 ✓, 0.03·2 = 0.06 ✗, 0.2·1 → 0.2 (monotone: 0.2)
    assert (h["p1.a"].adjusted, h["p1.a"].survives, h["p1.a"].m) == (pytest.approx(0.03), True, 3)
    assert (h["p1.b"].adjusted, h["p1.b"].survives) == (pytest.approx(0.06), False)
    assert (h["p1.c"].adjusted, h["p1.c"].survives) == (pytest.approx(0.2), None)   # not positive
    # a secondary keeps its own p, is never adjusted and never enlarges the family
    assert (h["p1.s"].role, h["p1.s"].p, h["p1.s"].adjusted, h["p1.s"].survives) == ("secondary", 0.001, None, None)
    assert "secondary" in h["p1.s"].why and "unadjusted" in h["p1.s"].why
    # p2 is its own family: one primary test, 0.03 ≤ 0.05
    assert (h["p2.a"].adjusted, h["p2.a"].survives, h["p2.a"].m) == (pytest.approx(0.03), True, 1)
    assert h["p2.s"].p is None and "not comparable" in h["p2.s"].why


def test_every_tested_part_of_a_primary_is_a_hypothesis_and_a_not_comparable_part_stays_reported():
    # p1.g: two tested parts and one not comparable part; p1.h one test. m = 3 tested parts.
    claims = [_c("p1.g", "partly reproduced", 0.02, parts=[("sign", "reproduced", 0.01), ("ratio", "not comparable", None),
                                                           ("late", "not established", 0.02)]),
              _c("p1.h", "reproduced", 0.012)]
    h = holm_by_family(claims)
    assert h["p1.g"].m == 3 and h["p1.h"].m == 3
    # by hand: sorted 0.01·3 = 0.03, 0.012·2 = 0.024 → max(0.03, 0.024) = 0.03, 0.02·1 → 0.03
    parts = {name: (v, p, adj) for name, v, p, adj in h["p1.g"].parts}
    assert parts["sign"][2] == pytest.approx(0.03) and parts["late"][2] == pytest.approx(0.03)
    assert parts["ratio"] == ("not comparable", None, None)
    assert "not tested: ratio" in h["p1.g"].why
    # the claim survives on its supporting part (sign) alone; its adjusted p is that part's
    assert (h["p1.g"].survives, h["p1.g"].adjusted) == (True, pytest.approx(0.03))
    assert h["p1.h"].adjusted == pytest.approx(0.03)


def test_a_positive_primary_survives_only_if_every_supporting_part_does():
    claims = [_c("p3.x", "reproduced", 0.04, parts=[("a", "reproduced", 0.001), ("b", "reproduced", 0.04)])]
    h = holm_by_family(claims)["p3.x"]
    # m = 2: 0.001·2 = 0.002 ✓, 0.04·1 → 0.04 ✓: both survive
    assert (h.survives, h.adjusted) == (True, pytest.approx(0.04))
    claims = [_c("p3.x", "reproduced", 0.04, parts=[("a", "reproduced", 0.001), ("b", "reproduced", None)])]
    h = holm_by_family(claims)["p3.x"]
    assert h.survives is False                  # a supporting part without a p cannot survive a correction


@pytest.mark.parametrize("p, survives", [(0.025, True), (0.0250001, False), (0.0249999, True)])
def test_survival_at_just_below_and_just_above_alpha(p, survives):
    # two primaries: the larger p is adjusted by 1 (step 2), the smaller by 2: 2·p against α = 0.05
    claims = [_c("tlm.a", "reproduced", p), _c("tlm.b", "reproduced", 0.5)]
    h = holm_by_family(claims)["tlm.a"]
    assert h.adjusted == pytest.approx(2 * p, abs=1e-15) and h.survives is survives


def test_more_than_three_primaries_in_a_family_is_an_error():
    claims = [_c(f"p2.{k}", "reproduced", 0.01) for k in "abcd"]
    with pytest.raises(AnatomyKitError, match="at most 3"):
        holm_by_family(claims)


@pytest.mark.parametrize("floor, m, ok", [(2 / 2 ** 8, 3, True), (2 / 2 ** 6, 2, False), (2 / 2 ** 7, 3, True),
                                          (2 / 2 ** 6, 1, True), (0.05 / 4, 4, True), (0.05 / 4 + 1e-12, 4, False)])
def test_a_design_survives_only_if_its_floor_times_the_family_size_reaches_alpha(floor, m, ok):
    # by hand: 8 seeds under the exact sign-flip test, 2/256 · 3 = 0.0234 ≤ 0.05; six seeds in a family of two,
    # 2/64 · 2 = 0.0625 > 0.05; seven seeds in a family of three, 2/128 · 3 = 0.0469 ≤ 0.05; at α exactly: survives
    assert design_can_survive(floor, m) is ok


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


def test_a_part_that_contradicts_the_claim_enters_holm_with_p_one():
    # B's tiny p measures an effect against the paper: it rejects nothing the paper claims. By hand with B at 1:
    # sorted 0.01·3 = 0.03 (a), 0.02·2 = 0.04 (c), 1·1 (b). Counting B's 1e-10 as a rejection would give a and c
    # the multipliers 2 and 1 (0.02 and 0.02)
    claims = [_c("p1.a", "reproduced", 0.01), _c("p1.b", "not reproduced", 1e-10), _c("p1.c", "reproduced", 0.02)]
    out = holm_by_family(claims)
    assert out["p1.a"].adjusted == pytest.approx(0.03) and out["p1.c"].adjusted == pytest.approx(0.04)
    assert out["p1.a"].survives and out["p1.c"].survives
    assert out["p1.b"].adjusted == pytest.approx(1.0) and out["p1.b"].survives is None
    # a part of a claim that contradicts enters at 1 as well; its other, supporting part keeps its own p
    mixed = [_c("p1.a", "reproduced", 0.01),
             _c("p1.d", "partly reproduced", 0.02, parts=[("x", "reproduced", 0.02), ("y", "not reproduced", 1e-9)])]
    got = holm_by_family(mixed)
    assert got["p1.a"].adjusted == pytest.approx(0.03) and got["p1.d"].adjusted == pytest.approx(0.04)


# --- every field holm_by_family returns, worked by hand (a secondary listed first, claims as objects too) ---

def test_every_field_of_a_family_worked_by_hand():
    from types import SimpleNamespace

    from anatomy_kit.verdicts.multiplicity import NO_TEST, HolmResult

    family = [
        {"id": "p1.s", "role": "secondary", "verdict": "holds by construction", "p": None},
        SimpleNamespace(id="p1.s2", role="secondary", verdict="not established", p=None, parts=None),
        {"id": "p1.s3", "role": "secondary", "verdict": "reproduced", "p": 0.004},
        SimpleNamespace(id="p1.a", role="primary", verdict="reproduced", p=0.01,
                        parts=[("x", "reproduced", 0.01), ("y", "not comparable", None)]),
        {"id": "p1.b", "role": "primary", "verdict": "not comparable", "p": None},
        {"id": "p1.c", "role": "primary", "verdict": "not reproduced", "p": 0.02},
        {"id": "p2.a", "role": "primary", "verdict": "reproduced", "p": 0.2},
    ]
    h = holm_by_family(family)
    # the family's tested parts: p1.a's x (0.01) and p1.c (contradicts: enters at 1); m = 2
    # sorted: 2 · 0.01 = 0.02, then max(0.02, min(1, 1 · 1)) = 1
    assert h["p1.s"] == HolmResult("secondary", None, None, None, None, "secondary; holds by construction: no test")
    assert h["p1.s2"] == HolmResult("secondary", None, None, None, None, f"secondary; {NO_TEST}")
    assert h["p1.s3"] == HolmResult("secondary", 0.004, None, None, None,
                                    "secondary: unadjusted p, not corrected and not a finding of the family")
    a = h["p1.a"]
    assert (a.role, a.p, a.m, a.survives) == ("primary", 0.01, 2, True) and a.adjusted == pytest.approx(0.02)
    assert a.parts == (("x", "reproduced", 0.01, pytest.approx(0.02)), ("y", "not comparable", None, None))
    assert a.why == "Holm over the 2 tested parts of family p1's primaries: adjusted p = 0.02; not tested: y"
    assert h["p1.b"] == HolmResult("primary", None, None, 2, None,
                                   "no tested part (family p1: 2 tested parts); not tested: p1.b",
                                   (("", "not comparable", None, None),))
    assert h["p1.c"] == HolmResult("primary", 0.02, 1.0, 2, None,
                                   "Holm over the 2 tested parts of family p1's primaries: adjusted p = 1",
                                   (("", "not reproduced", 0.02, 1.0),))
    assert h["p2.a"] == HolmResult("primary", 0.2, 0.2, 1, False,
                                   "Holm over the 1 tested parts of family p2's primaries: adjusted p = 0.2; "
                                   "fails Holm at α = 0.05", (("", "reproduced", 0.2, 0.2),))
    assert h["p2.a"].to_dict() == {"role": "primary", "p": 0.2, "adjusted": 0.2, "m": 1, "survives": False,
                                   "why": h["p2.a"].why, "parts": [["", "reproduced", 0.2, 0.2]]}
    # the level given is the one judged and named
    loose = holm_by_family(family, alpha=0.25)["p2.a"]
    assert loose.survives is True and "fails Holm" not in loose.why
    assert holm_by_family(family, alpha=0.1)["p2.a"].why.endswith("fails Holm at α = 0.1")


def test_holm_adjusted_caps_at_one_and_accepts_the_ends_of_zero_to_one():
    assert holm_adjusted([0.7, 0.7]) == [1.0, 1.0]            # 2 · 0.7 = 1.4, capped; then max(1, 0.7)
    assert holm_adjusted([0.0, 0.5]) == [0.0, 0.5]            # 2 · 0 = 0; max(0, 1 · 0.5)
    assert holm_adjusted([1.0]) == [1.0] and holm_adjusted([]) == []
    for bad in (True, -1e-12, 1 + 1e-12, float("nan"), "0.1", None):
        with pytest.raises(AnatomyKitError, match=r"p=.* must be a probability in \[0, 1\]"):
            holm_adjusted([0.1, bad])


def test_design_can_survive_rejects_what_is_not_a_floor_or_a_count():
    assert design_can_survive(1.0, 1, alpha=1 - 1e-9) is False and design_can_survive(0.05, 1) is True
    for floor, m in ((0.0, 1), (-0.1, 1), (1.5, 1), (0.01, 0), (0.01, -1), (0.01, True), (0.01, 1.0)):
        with pytest.raises(AnatomyKitError, match=rf"smallest_p={floor!r} must lie in \(0, 1\] and "
                                                  rf"tested_parts={m!r} be ≥ 1"):
            design_can_survive(floor, m)


@pytest.mark.parametrize("alpha", [0, 1, -0.1, 1.5])
def test_alpha_must_lie_strictly_between_zero_and_one(alpha):
    with pytest.raises(AnatomyKitError, match=rf"alpha={alpha!r} must lie strictly between 0 and 1"):
        holm_by_family([], alpha=alpha)


def test_a_family_with_four_primaries_is_named_with_them():
    four = [{"id": f"p1.{x}", "role": "primary", "verdict": "not established", "p": 0.5} for x in "abcd"]
    with pytest.raises(AnatomyKitError, match=r"^family p1 names 4 primary claims \(p1.a, p1.b, p1.c, p1.d\); "
                                              r"at most 3$"):
        holm_by_family(four)
    assert len(holm_by_family(four[:3])) == 3


def test_a_family_is_the_id_before_its_first_dot_and_every_untested_part_is_named():
    from anatomy_kit.verdicts.multiplicity import family

    assert family("p1.a.b") == "p1" and family("book.x") == "book" and family("tlm") == "tlm"
    two = {"id": "p3.a", "role": "primary", "verdict": "not comparable", "p": None,
           "parts": [("u", "not comparable", None), ("v", "not established", None)]}
    assert holm_by_family([two])["p3.a"].why == "no tested part (family p3: 0 tested parts); not tested: u, v"


def test_fails_correction_reads_a_holm_result_or_its_dict():
    from anatomy_kit.verdicts.multiplicity import HolmResult, fails_correction

    assert fails_correction(HolmResult("primary", 0.04, 0.2, 8, False)) is True
    assert fails_correction(HolmResult("primary", 0.01, 0.02, 2, True)) is False
    assert fails_correction(HolmResult("primary", 0.5, 1.0, 2, None)) is False          # not positive
    assert fails_correction({"survives": False}) is True and fails_correction({"survives": True}) is False
    assert fails_correction({"survives": None}) is False and fails_correction({}) is False
    assert fails_correction(None) is False
