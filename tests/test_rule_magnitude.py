"""Magnitude judged with the interval (a band the interval does not exclude decides nothing), and rank
judged apart (RankAtMost)."""

from __future__ import annotations

import pytest

from anatomy_kit import stats
from anatomy_kit.verdicts.claims import Claim
from anatomy_kit.verdicts.rules import Magnitude, RankAtMost
from anatomy_kit.validate import AnatomyKitError

L11 = {"value": 63419.0, "unit": "% PPL change"}


def iv(low, high, n=5, confidence=0.95):
    return stats.Interval((low + high) / 2, low, high, n, 1.0, n - 1, confidence, "t")


def test_chapter_1s_l11_is_partly_reproduced_by_its_whole_interval():
    ours = stats.Interval(2381.0, 743.0, 7201.0, 5, 1.0, 4)
    d = Magnitude().decide(ours, L11)
    # 743 … 7,201 lies wholly within a factor 100 of 63,419 (634.19 … 6,341,900), not wholly within 10
    assert d.verdict == "partly reproduced"
    assert "a factor 8.81–85.4 below the paper's 63,419" in d.reason
    assert "wholly within a factor 100, not wholly within 10" in d.reason
    assert Magnitude().decide(2381.0, L11).verdict == "partly reproduced"   # the point alone says the same


@pytest.mark.parametrize("low, high, expected", [
    (7000.0, 100000.0, "reproduced"),              # wholly within a factor 10
    (6341.9, 634190.0, "reproduced"),              # ends exactly at the factor-10 bounds
    (6341.8, 60000.0, "partly reproduced"),        # just below the lower factor-10 bound, within 100
    (6341.9, 634191.0, "partly reproduced"),       # just above the upper factor-10 bound
    (1000.0, 5000.0, "partly reproduced"),         # surely beyond 10, surely within 100
    (634.19, 6341900.0, "partly reproduced"),      # ends exactly at the factor-100 bounds
    (634.20, 6000.0, "partly reproduced"),         # just inside the lower factor-100 bound
    (634.18, 6000.0, "not established"),           # just across it: reaches beyond a factor 100
    (7000.0, 6341901.0, "not established"),        # just across the upper factor-100 bound
    (100.0, 634.0, "not reproduced"),              # wholly beyond a factor 100
    (100.0, 634.18, "not reproduced"),             # just below the factor-100 bound
    (100.0, 635.0, "not established"),
    (7e6, 9e6, "not reproduced"),                  # beyond a factor 100 above
    (6341901.0, 9e6, "not reproduced"),            # just above it
    (-500.0, -100.0, "not reproduced"),            # wrong sign
    (-100.0, 500.0, "not reproduced"),             # reaches 0 but surely below a hundredth
    (-100.0, 5000.0, "not established"),
])
def test_interval_bands(low, high, expected):
    assert Magnitude().decide(iv(low, high), L11).verdict == expected
    assert Magnitude().decide((low, high), L11).verdict == expected


def test_the_bands_follow_the_factors():
    # the same interval (a factor 2–20 below) is partly reproduced under 10/100, reproduced under 30/300 and
    # not established under 5/10 (it reaches across a factor 10)
    ours = iv(63419 / 20, 63419 / 2)
    assert Magnitude().decide(ours, L11).verdict == "partly reproduced"
    assert Magnitude(30.0, 300.0).decide(ours, L11).verdict == "reproduced"
    assert Magnitude(5.0, 10.0).decide(ours, L11).verdict == "not established"
    assert Magnitude(2.0, 3.0).decide(iv(63419 / 20, 63419 / 4), L11).verdict == "not reproduced"


def test_negative_paper_values_mirror_and_paired_data_are_accepted():
    neg = {"value": -50.0, "unit": None}
    assert Magnitude().decide(iv(-400.0, -10.0), neg).verdict == "reproduced"
    assert Magnitude().decide(iv(10.0, 40.0), neg).verdict == "not reproduced"
    pc = stats.paired_difference([100.0, 120.0, 110.0], [0.0, 0.0, 0.0])
    assert Magnitude().decide(pc, {"value": 100.0}).verdict == "reproduced"
    with pytest.raises(AnatomyKitError, match="90 %"):
        Magnitude(confidence=0.9).decide(iv(7000.0, 9000.0), L11)


def test_points_keep_their_bands_and_say_so():
    d = Magnitude().decide(63419 / 9.9, L11)
    assert d.verdict == "reproduced" and "a point, no interval" in d.reason
    assert Magnitude().decide(63419 * 50, L11).verdict == "partly reproduced"
    assert Magnitude().decide(-1.0, L11).verdict == "not reproduced"
    text = Magnitude(within_factor=5).describe(L11)
    assert "whole 95 % interval lies within a factor 5" in text and "otherwise (it reaches" in text
    assert "partly reproduced if it lies wholly within a factor 100 but not wholly within 5" in text


def test_magnitude_near_threshold():
    assert Magnitude().decide(iv(6400.0, 70000.0), L11).near_threshold          # 6,400 ≈ 63,419 / 10
    assert not Magnitude().decide(iv(20000.0, 90000.0), L11).near_threshold
    assert Magnitude().decide(63419 / 9.9, L11).near_threshold                  # a point 1 % inside
    assert not Magnitude().decide(63419 / 3, L11).near_threshold


# ------------------------------------------------------------------ RankAtMost

def ranked(item_iv, others):
    return {11: iv(*item_iv)} | {i: iv(*o) for i, o in enumerate(others, start=12)}


def test_rank_from_intervals():
    clear = ranked((700.0, 7200.0), [(8000.0, 9000.0)] + [(0.0, 100.0)] * 26)     # our #2 of 28, surely
    sure = RankAtMost(2, item=11, alpha=0.1).decide(clear, L11)
    assert sure.verdict == "reproduced" and not sure.near_threshold                # chance 2/28 = 0.071
    # the item's lower end within 5 % of its width of another layer's upper end: the rank may flip
    assert RankAtMost(2, item=11, alpha=0.1).decide(ranked((700.0, 7200.0), [(8000.0, 9000.0)] + [(0.0, 500.0)]
                                                           * 26), L11).near_threshold
    # chance 2/28 = 0.071 is fixed by k and n before any data: above 0.05 no rank can count
    d = RankAtMost(2, item=11).decide(clear, L11)
    assert d.verdict == "not comparable" and "smallest attainable p is 0.0714 > α = 0.05" in d.reason
    assert RankAtMost(1, item=11).decide(clear, L11).verdict == "not reproduced"
    overlapping = ranked((700.0, 7200.0), [(5000.0, 9000.0)] + [(0.0, 100.0)] * 26)   # rank 1–2
    r1 = RankAtMost(1, item=11).decide(overlapping, L11)
    assert r1.verdict == "not established" and "rank 1–2 of 28" in r1.reason
    assert RankAtMost(2, item=11, alpha=0.1).decide(overlapping, L11).verdict == "reproduced"
    assert "layer 11: our rank 1–2 of 28, top 1 claimed" in r1.summary
    # the one-line why says what keeps a small chance p from deciding: the straddle of k
    assert "the intervals allow ranks past 1" in r1.summary and "p = 0.036" in r1.summary    # 1/28
    assert "allow ranks past" not in sure.summary and "chance p = 0.071" in sure.summary      # 2/28


def test_rank_from_points_and_a_plain_rank():
    points = {11: 50.0, 3: 80.0} | {i: float(i) for i in range(20, 40)}
    d = RankAtMost(2, item=11, alpha=0.1).decide(points, L11)
    assert d.verdict == "reproduced" and "points, no intervals" in d.reason       # chance 2 / 22 = 0.091
    assert RankAtMost(1, of=30).decide(1, L11).verdict == "reproduced"            # chance 1/30 = 0.033
    assert RankAtMost(1, of=30).decide(2, L11).verdict == "not reproduced"
    assert "a plain rank, no interval" in RankAtMost(1, of=30).decide(1, L11).reason


def test_rank_with_the_edge_null():
    n = 24
    dist = [min(i, n - 1 - i) for i in range(n)]
    edges = {i: 1000.0 / (1 + d) ** 2 for i, d in enumerate(dist)}             # falls fast from the edges
    edges[11] = 5000.0                                                           # a middle layer on top
    plain = RankAtMost(1, item=11).decide(edges, L11)
    edge = RankAtMost(1, item=11, null="edge").decide(edges, L11)
    assert plain.verdict == edge.verdict == "reproduced"
    assert "layers exchangeable" in plain.reason and "edge-structured null" in edge.reason
    assert "edge-structured null" in RankAtMost(1, item=11, null="edge").describe(L11)


def test_rank_errors():
    with pytest.raises(AnatomyKitError, match="item"):
        RankAtMost(2).decide({1: 1.0, 2: 2.0}, L11)
    with pytest.raises(AnatomyKitError, match="of=5"):
        RankAtMost(2, item=1, of=5).decide({1: 1.0, 2: 2.0}, L11)
    with pytest.raises(AnatomyKitError, match="plain rank needs"):
        RankAtMost(2).decide(3, L11)
    with pytest.raises(AnatomyKitError, match="k ≤ of"):
        RankAtMost(5, of=3)
    with pytest.raises(AnatomyKitError, match="rank"):
        RankAtMost(2, of=10).decide(11, L11)


def test_a_claim_takes_both():
    ci = stats.Interval(2381.0, 743.0, 7201.0, 5, 1.0, 4)
    c = Claim("p1.l11_ablation", ci, Magnitude())
    assert c.verdict == "partly reproduced" and c.interval.startswith("95 % t interval [743, 7201]")
    assert len(c.summary) <= 120
