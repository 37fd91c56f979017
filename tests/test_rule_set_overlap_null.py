"""The edge-structured chance null: an edge-heavy set is no surprise in a map with strong edges, a set
beyond that structure still is, and each verdict names the null it used."""

from __future__ import annotations

import numpy as np
import pytest

from anatomy_kit import stats
from anatomy_kit.verdicts.nulls import edge_overlap_chance, edge_rank_chance, fit_edge_trend
from anatomy_kit.verdicts.rules import SetOverlap
from anatomy_kit.validate import AnatomyKitError

N = 24
DIST = np.minimum(np.arange(N), N - 1 - np.arange(N))           # distance from the nearest edge


def edge_map(core=(), seed=0):
    """Importance falling fast with distance from the edges (plus noise); ``core`` layers lifted above all."""
    x = 100 * np.exp(-DIST / 1.5) + np.random.default_rng(seed).normal(0, 1, N)
    x[list(core)] += 200
    return {i: float(v) for i, v in enumerate(x)}


def top(profile, k):
    return sorted(sorted(profile, key=profile.get, reverse=True)[:k])


def test_an_edge_heavy_set_is_chance_under_the_edge_null_not_under_exchangeable_layers():
    profile, paper = edge_map(), {"value": [0, 1, 22, 23]}
    ours = top(profile, 4)
    assert ours == [0, 1, 22, 23]
    hyper = stats.overlap_chance(4, N, 4, 4)                      # 1 / C(24, 4)
    edge = edge_overlap_chance(profile, ours, paper["value"]).p
    assert hyper < 1e-4 and edge > 0.3 and edge > 100 * hyper
    plain = SetOverlap(full=3, n_layers=N).decide(ours, paper)
    structured = SetOverlap(full=3, null="edge").decide({"set": ours, "profile": profile}, paper)
    assert plain.verdict == "reproduced" and "hypergeometric: layers exchangeable" in plain.reason
    assert structured.verdict == "not established" and "no better than chance" in structured.reason
    assert "edge-structured null" in structured.reason and "(edge-structured null)" in structured.summary


def test_a_set_beyond_the_edge_structure_is_still_established():
    profile, paper = edge_map(core=(9, 10, 11, 12)), {"value": [9, 10, 11, 12]}
    ours = top(profile, 4)
    assert ours == [9, 10, 11, 12]
    d = SetOverlap(full=3, null="edge").decide({"set": ours, "profile": profile}, paper)
    assert d.verdict == "reproduced" and "p < 0.001" in d.reason


def test_without_an_edge_trend_the_edge_null_is_the_hypergeometric_one():
    rising = {i: float(d) for i, d in enumerate(DIST)}            # importance rises towards the middle
    assert np.ptp(fit_edge_trend(rising).trend) == 0             # no falling trend: every layer alike
    ours = top(rising, 4)                                         # 10, 11, 12, 13
    p = edge_overlap_chance(rising, ours, [11, 12, 0, 5]).p       # 2 shared
    assert p == pytest.approx(stats.overlap_chance(2, N, 4, 4), abs=0.01)   # 10,000 draws: s.e. ≈ 0.003


def test_a_bottom_set_is_drawn_at_the_bottom_ranks():
    profile = edge_map()
    least = sorted(sorted(profile, key=profile.get)[:6])         # the middle layers
    middle = [9, 10, 11, 12, 13, 14]
    p = edge_overlap_chance(profile, least, middle).p
    assert len(set(least) & set(middle)) >= 4 and p > 0.2         # the middle is where the least important sit


def test_the_trend_falls_with_distance_and_splits_the_ranks():
    trend = fit_edge_trend(edge_map(core=(9, 10)))
    order = np.argsort(trend.distance, kind="stable")
    assert np.all(np.diff(trend.trend[order]) <= 1e-12)
    ranks = (np.argsort(np.argsort(trend.values)) + 1) / N
    np.testing.assert_allclose(trend.trend + trend.residual, ranks, atol=1e-12)


def test_seeded_and_deterministic_and_rank_chance():
    profile = edge_map(core=(9, 10, 11, 12))
    a = edge_overlap_chance(profile, [9, 10, 2, 3], [9, 10, 11, 12], seed=3)
    assert a == edge_overlap_chance(profile, [9, 10, 2, 3], [9, 10, 11, 12], seed=3)   # same draws, same order
    assert a.draws == 10_000 and a.seed == 3
    # a middle layer rarely reaches the top 2 when the edges dominate; more often than 1 in 1,000 when it is lifted
    assert edge_rank_chance(edge_map(), 11, 2).p < 0.001 < edge_rank_chance(profile, 11, 2).p


def test_rule_text_names_the_null_and_bad_inputs():
    ref = {"value": [9, 10, 11, 12]}
    assert "edge-structured null" in SetOverlap(null="edge").describe(ref)
    assert "10,000 draws, seed 0" in SetOverlap(null="edge").describe(ref)
    assert "layers exchangeable: hypergeometric" in SetOverlap(n_layers=30).describe(ref)
    with pytest.raises(AnatomyKitError, match="null"):
        SetOverlap(null="uniform")
    with pytest.raises(AnatomyKitError, match="edge profile"):
        SetOverlap(null="edge").decide([9, 10, 11, 12], ref)
    with pytest.raises(AnatomyKitError, match="n_layers=30"):
        SetOverlap(null="edge", n_layers=30).decide({"set": [9], "profile": edge_map()}, ref)
    with pytest.raises(AnatomyKitError, match="not in the importance map"):
        edge_overlap_chance(edge_map(), [99], [9])
    with pytest.raises(AnatomyKitError, match="at least 3"):
        fit_edge_trend({0: 1.0, 1: 2.0})
    # the exchangeable null on the same mapping: n_layers from the map
    d = SetOverlap(full=3).decide({"set": [9, 10, 11, 12], "profile": edge_map()}, ref)
    assert "random 4 of 24 layers" in d.reason


def test_near_alpha_is_marked():
    ref = {"value": [0, 1, 2, 3]}
    # 1 shared of 4 with 4 drawn from n: hypergeometric tail 1 − C(n−4, 4)/C(n, 4); n = 78 gives ≈ 0.193
    d = SetOverlap(full=3, partly=1, n_layers=78, alpha=0.2).decide([0, 10, 11, 12], ref)
    assert d.near_threshold and d.verdict == "partly reproduced"
    assert not SetOverlap(full=3, partly=1, n_layers=78, alpha=0.5).decide([0, 10, 11, 12], ref).near_threshold
