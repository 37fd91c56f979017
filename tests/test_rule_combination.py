"""The one combination table (AllOf and every rule that judges several intervals at once): mixed is not
partly reproduced, and what holds by construction is shown but never counted."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest

from anatomy_kit import stats
from anatomy_kit.verdicts import claims as C
from anatomy_kit.verdicts.decision import combine_verdicts
from anatomy_kit.validate import AnatomyKitError

REF = {"value": 100.0, "unit": "%"}
R, P, M, N, E, B, X = ("reproduced", "partly reproduced", "mixed", "not reproduced", "not established",
                       "holds by construction", "not comparable")

# Every unordered pair of part verdicts (both orders are tested), written out by hand from the rule:
# B parts are left out (all B: B); all R: R; an M part, or R/P beside N: M; R/P otherwise: P;
# then N, else E, else X.
TABLE = {
    (R, R): R, (R, P): P, (R, M): M, (R, N): M, (R, E): P, (R, B): R, (R, X): P,
    (P, P): P, (P, M): M, (P, N): M, (P, E): P, (P, B): P, (P, X): P,
    (M, M): M, (M, N): M, (M, E): M, (M, B): M, (M, X): M,
    (N, N): N, (N, E): N, (N, B): N, (N, X): N,
    (E, E): E, (E, B): E, (E, X): E,
    (B, B): B, (B, X): X,
    (X, X): X,
}


@dataclass(frozen=True)
class Fixed:
    """A stand-in rule that returns one verdict (tests only: the table, not a rule, is under test)."""
    verdict: str

    def describe(self, reference):
        return f"always {self.verdict}."

    def decide(self, ours, reference):
        return C.Decision(self.verdict, f"fixed {self.verdict}", summary=f"fixed {self.verdict}")


def test_the_table_covers_every_pair_of_verdicts():
    pairs = {tuple(sorted(p, key=C.VERDICTS.index)) for p in itertools.product(C.VERDICTS, repeat=2)}
    assert set(TABLE) == pairs and len(TABLE) == 28


@pytest.mark.parametrize("a, b", sorted(TABLE))
def test_all_of_combines_every_pair_in_both_orders(a, b):
    for first, second in ((a, b), (b, a)):
        rule = C.AllOf({"x": Fixed(first), "y": Fixed(second)})
        d = rule.decide({"x": None, "y": None}, REF)
        assert d.verdict == TABLE[a, b], (first, second)
        assert f"x: {first} (fixed {first})" in d.reason and f"y: {second}" in d.reason
        assert combine_verdicts([first, second]) == TABLE[a, b]


@pytest.mark.parametrize("v", C.VERDICTS)
def test_all_same_parts_give_that_verdict(v):
    for n in (1, 3):
        assert C.AllOf({f"p{i}": Fixed(v) for i in range(n)}).decide({f"p{i}": 0 for i in range(n)}, REF).verdict == v


def test_three_parts_mixed_needs_a_contradiction_and_a_success():
    assert combine_verdicts([R, E, E]) == P
    assert combine_verdicts([R, E, N]) == M
    assert combine_verdicts([P, X, N, B]) == M
    assert combine_verdicts([E, N, X]) == N
    assert combine_verdicts([B, B, R]) == R
    with pytest.raises(AnatomyKitError):
        combine_verdicts([])
    with pytest.raises(AnatomyKitError, match="part verdict"):
        combine_verdicts(["proven"])


def test_by_construction_is_shown_never_counted():
    part = C.ByConstruction("the trainable-layer-step saving is fixed by the schedule's shape")
    d = part.decide(25.0, REF)
    assert d.verdict == B and d.reason.startswith("the trainable-layer-step saving")
    assert "never counts towards reproduced" in part.describe(REF)
    rule = C.AllOf({"layer steps": part, "FLOPs": C.DifferenceSign("negative")})
    flops = stats.Interval(-0.2, -0.3, -0.1, 3, 0.05, 2)
    d = rule.decide({"layer steps": 25.0, "FLOPs": flops}, REF)
    assert d.verdict == R and "1 of 1 counted parts reproduced; 1 holds by construction (not counted)" in d.reason
    assert "layer steps: holds by construction (the trainable-layer-step saving" in d.reason
    unsure = rule.decide({"layer steps": 25.0, "FLOPs": stats.Interval(0, -0.1, 0.1, 3, 0.05, 2)}, REF)
    assert unsure.verdict == E                      # the construction cannot lift it
    alone = C.AllOf({"a": part, "b": C.ByConstruction("zero-padded directions get zero gradient")})
    assert alone.decide({"a": 1, "b": 2}, REF).verdict == B
    with pytest.raises(AnatomyKitError, match="why"):
        C.ByConstruction("  ")
    claim = C.Claim("p1.growth_cost_reduction", {"layer steps": 25.0}, C.AllOf({"layer steps": part}))
    assert claim.verdict == B and claim.summary == "1 part: 1 holds by construction"


def test_all_of_summary_counts_parts_and_rejects_non_rules():
    d = C.AllOf({"a": Fixed(R), "b": Fixed(N), "c": Fixed(B)}).decide({"a": 0, "b": 0, "c": 0}, REF)
    assert d.verdict == M and d.summary == "3 parts: 1 reproduced, 1 not reproduced, 1 holds by construction"
    with pytest.raises(AnatomyKitError, match="not rules"):
        C.AllOf({"a": "reproduced"})


def iv(low, high, n=3, confidence=0.95):
    return stats.Interval((low + high) / 2, low, high, n, 0.1, n - 1, confidence, "t")


def test_interval_rules_over_a_mapping_say_mixed():
    below, above, wide = iv(-0.3, -0.1), iv(0.1, 0.3), iv(-0.3, 0.3)
    rule = C.IntervalBelow(0.0)
    assert rule.decide({"L14": below, "L17": above}, REF).verdict == M
    assert rule.decide({"L14": below, "L17": wide}, REF).verdict == P
    assert rule.decide({"L14": wide, "L17": above}, REF).verdict == N      # none below, one contradicted
    assert rule.decide({"L14": wide, "L17": wide}, REF).verdict == E
    d = rule.decide({"L14": below, "L17": above, "L3": wide}, REF)
    assert d.verdict == M and d.reason.startswith("1 of 3 entirely below 0")
    assert d.summary == ("lies entirely below 0: L14; does not lie below 0: L17; reaches both sides of 0, so it "
                         "cannot tell: L3")
    assert C.IntervalAbove(0.0).decide({"a": above, "b": below}, REF).verdict == M
    assert C.IntervalContains().decide({"a": wide, "b": above}, REF).verdict == M
    assert C.IntervalContains().decide({"a": below, "b": above}, REF).verdict == N
    eq = C.Equivalent(margin=0.5, basis="test", confidence=0.95)
    assert eq.decide({"a": iv(-0.1, 0.1), "b": iv(0.6, 0.9)}, REF).verdict == M
    assert eq.decide({"a": iv(-0.1, 0.1), "b": iv(0.2, 0.9)}, REF).verdict == P
