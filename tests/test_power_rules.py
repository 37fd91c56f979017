"""What the power tables read of a claim's rule (anatomy_kit.book.power_rules), worked by hand: each rule's
boundaries, the paper value it is measured against, whether it decides at the smoke estimate, how far an interval
may reach before its verdict changes, and the size of a primary's Holm family."""

from __future__ import annotations

import math

import pytest

from anatomy_kit.book.power_rules import (_boundaries, _decides_at, _deciding_distance, _family_size, _paper,
                                          _reference)


def _spec(rule, **params):
    return {"rule": rule, "params": params}


def test_the_paper_value_is_read_by_key_when_the_rule_names_one():
    assert _paper({"paper": {"a": 2.0, "b": 3.0}}, "b") == 3.0
    assert _paper({"paper": 5.0}, None) == 5.0 and _paper({"paper": 5.0}, "b") == 5.0     # a plain value: no key
    assert _paper({"paper": {"a": 2.0}}, None) is None and _paper({"paper": {"a": 2.0}}, "c") is None
    assert _paper({}, None) is None and _paper({"paper": "text"}, None) is None


def test_the_reference_a_rule_reads():
    assert _reference({"paper": {"value": 3, "unit": "%"}, "unit": "x"}) == {"value": 3, "unit": "%"}
    assert _reference({"paper": 3, "unit": "nats"}) == {"value": 3, "unit": "nats"}
    assert _reference({"paper": {"title": "t"}, "unit": "u"}) == {"value": {"title": "t"}, "unit": "u"}


def test_boundaries_of_the_rules_that_decide_by_an_interval_side():
    assert _boundaries(_spec("IntervalBelow", threshold=0.5), {}) == ([0.5], "interval vs 0.5", "t")
    assert _boundaries(_spec("IntervalAbove", threshold=-1, method="sign-flip"), {}) == (
        [-1.0], "interval vs -1", "sign-flip")
    assert _boundaries(_spec("DifferenceSign", method="bogus"), {}) == ([0.0], "sign of the paired difference", "t")
    assert _boundaries(_spec("Equivalent", value=1.0, margin=0.25), {}) == (
        [0.75, 1.25], "equivalence within ±0.25", "t")
    assert _boundaries(_spec("Equivalent", margin=0.5), {}) == ([-0.5, 0.5], "equivalence within ±0.5", "t")
    assert _boundaries(_spec("IntervalContains", value=2.0), {}) == ([2.0], "interval contains 2", "t")
    assert _boundaries(_spec("IntervalContains"), {}) == ([0.0], "interval contains 0", "t")


def test_boundaries_measured_against_the_paper():
    claim = {"paper": {"v": 8.0, "w": 2.0}}
    assert _boundaries(_spec("Magnitude", within_factor=2.0, partly_factor=10.0, key="v"), claim) == (
        [4.0, 16.0, 0.8, 80.0], "within a factor 2 of the paper's 8", "t")
    assert _boundaries(_spec("Close", abs_tol=0.5, key="w"), claim) == ([1.5, 2.5], "close to the paper's 2", "t")
    assert _boundaries(_spec("Close", rel_tol=0.25, key="v"), claim)[0] == [6.0, 10.0]
    assert _boundaries(_spec("Close", partly_factor=4.0, key="v"), claim)[0] == [2.0, 32.0]
    assert _boundaries(_spec("Close", abs_tol=1.0, rel_tol=0.5, partly_factor=2.0, key="v"), claim)[0] == [
        7.0, 9.0, 4.0, 12.0, 4.0, 16.0]
    # without a paper value, with one of 0, or a Close rule without a band: nothing to measure against
    assert _boundaries(_spec("Close", abs_tol=0.5, key="x"), claim) is None
    assert _boundaries(_spec("Magnitude", within_factor=2.0, partly_factor=10.0), {"paper": 0.0}) is None
    assert _boundaries(_spec("Close", key="v"), claim) is None
    assert _boundaries(_spec("SetOverlap", full=3), claim) is None


def test_a_rule_decides_at_the_smoke_estimate_only_where_crossing_a_boundary_decides_it():
    below = _spec("IntervalBelow", threshold=0.0)
    assert _decides_at(below, {"paper": "negative"}, {"mean": -0.3}, 0.95) is True
    assert _decides_at(below, {"paper": "negative"}, {"mean": 0.3}, 0.95) is True     # not reproduced: decided
    assert _decides_at(below, {"paper": "negative"}, {"mean": None}, 0.95) is True    # no estimate: the units decide
    # a magnitude between its bands (within ×10 of the paper but not ×2) is "partly": decided
    mag = _spec("Magnitude", within_factor=2.0, partly_factor=10.0)
    assert _decides_at(mag, {"paper": 8.0}, {"mean": 30.0}, 0.95) is True


def test_how_far_an_interval_may_reach_before_its_verdict_changes():
    # IntervalBelow(0) centred on −0.3 (identity scale): the verdict changes once the upper end reaches 0
    spec, claim = _spec("IntervalBelow", threshold=0.0), {"paper": "negative"}
    scale = (-0.3, lambda x: x, lambda y: y)
    assert _deciding_distance(spec, claim, scale, 0.95, "t", nearest=99.0) == pytest.approx(0.3, rel=1e-6)
    # on the log scale centred on log 0.5 below 1: the distance is log 2
    logs = (math.log(0.5), math.log, math.exp)
    assert _deciding_distance(_spec("IntervalBelow", threshold=1.0), claim, logs, 0.95, "t",
                              nearest=99.0) == pytest.approx(math.log(2), rel=1e-6)


def test_a_primary_family_size_counts_every_tested_part_of_its_primaries():
    # tlm: two primaries of one part each; p3: three parts; the book: 3 + 3 + 4 parts
    assert _family_size("tlm.cosine_taper") == 2 and _family_size("p3.ligo_last") == 3
    assert _family_size("book.edges_everywhere") == 10
    assert _family_size("zz.unknown") is None
