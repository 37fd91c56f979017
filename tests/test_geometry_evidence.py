"""Known answers for the null models behind chapter 4's verdicts (anatomy_kit.geometry.evidence)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats as sps

from anatomy_kit import geometry as G
from anatomy_kit.verdicts.rules import BeyondNull
from anatomy_kit.validate import AnatomyKitError


# --------------------------------------------------------------------------- front-loading

def test_front_loading_null_exact_known_answer():
    # 6 layers, front = first 2; one heavy layer. It is in front in 2·5·4! = 240 of the 720 orders.
    p = np.array([10.0, 1, 1, 1, 1, 1])
    r = G.front_loading_null(p, 1 / 3)
    assert r.method == "exact" and r.n_perm == 720
    assert r.observed == pytest.approx(11 / 15)
    assert r.p == pytest.approx(240 / 720)
    assert r.null_mean == pytest.approx(2 / 6)          # a shuffle's expected share is k/L
    back = G.front_loading_null(p[::-1], 1 / 3)
    assert back.observed == pytest.approx(2 / 15) and back.p == pytest.approx(1.0)


def test_front_loading_null_with_edges_fixed_shuffles_only_the_inner_layers():
    # 6 layers, front = first 2, a heavy first layer and an inner layer of weight 3. With the edges
    # fixed the 4! = 24 inner orders put the weight-3 layer at place 1 in 6 of them: only those are
    # as front-loaded as the observed order; the heavy layer 0 is in front in every one.
    p = np.array([10.0, 3, 1, 1, 1, 1])
    r = G.front_loading_null(p, 1 / 3, keep_edges=True)
    assert r.method == "exact" and r.n_perm == 24
    assert r.observed == pytest.approx(13 / 17) and r.p == pytest.approx(6 / 24)
    assert r.null_mean == pytest.approx((10 + 6 / 4) / 17)      # layer 0, and a quarter of the inner sum
    # an edge layer alone in front is what every edge-fixed order gives: the null's value, p = 1
    edge = G.front_loading_null(np.array([10.0, 1, 1, 1, 1, 1]), 1 / 3, keep_edges=True)
    assert edge.p == pytest.approx(1.0) and edge.observed == pytest.approx(edge.null_mean)
    assert BeyondNull("greater").decide(edge, {}).verdict == "not established"
    with pytest.raises(AnatomyKitError, match="at least 4 layers"):
        G.front_loading_null(np.ones(3), keep_edges=True)
    with pytest.raises(AnatomyKitError, match="keep_edges"):
        G.front_loading_null(np.ones(6), keep_edges="yes")


def test_front_loading_null_pools_profiles_with_one_shuffle():
    a = np.array([4.0, 3, 2, 1, 1, 1, 1, 1, 1])
    b = np.array([1.0, 1, 1, 1, 1, 1, 1, 1, 10])
    joint = G.front_loading_null({"a": a, "b": b}, 1 / 3, n_perm=20_000, seed=1)
    assert joint.observed == pytest.approx((G.front_loading(a) + G.front_loading(b)) / 2)
    assert joint.null_mean == pytest.approx(3 / 9, abs=0.01)
    # a perfectly front-loaded profile beats almost every shuffle; a flat one is in the middle
    steep = G.front_loading_null(np.r_[np.full(10, 5.0), np.full(20, 1.0)], n_perm=5000)
    assert steep.observed == pytest.approx(50 / 70) and steep.p < 1e-3
    assert BeyondNull("greater").decide(steep, {}).verdict == "reproduced"
    flat = G.front_loading_null(np.full(30, 2.0) + np.arange(30) % 2, n_perm=5000)
    assert BeyondNull("greater").decide(flat, {}).verdict == "not established"


def test_front_loading_null_meets_its_level_on_shuffled_profiles():
    # the bar the chapter replaced was met by shuffled orders about half of the time; the null's
    # one-sided test at 0.05 is met about 5 % of the time
    rng = np.random.default_rng(0)
    base = rng.lognormal(size=30)
    hits = sum(G.front_loading_null(rng.permutation(base), n_perm=400, seed=k).p <= 0.05 for k in range(200))
    assert 2 <= hits <= 20


def test_front_loading_null_rejects_bad_profiles():
    with pytest.raises(AnatomyKitError, match="non-negative"):
        G.front_loading_null([1.0, -1.0, 2.0])
    with pytest.raises(AnatomyKitError, match="not all zero"):
        G.front_loading_null(np.zeros(5))
    with pytest.raises(AnatomyKitError, match="fraction"):
        G.front_loading_null(np.ones(5), 1.5)
    with pytest.raises(AnatomyKitError, match="L >= 2"):
        G.front_loading_null([3.0])


# --------------------------------------------------------------------------- GW against topology

def brute_force_swap_null(a, b, t):
    ra, rb, rt = (sps.rankdata(v) for v in (a, b, t))
    out = []
    for pattern in itertools.product([False, True], repeat=len(a)):
        s = np.array(pattern)
        sa, sb = np.where(s, rb, ra), np.where(s, ra, rb)
        out.append(np.corrcoef(sa, rt)[0, 1] - np.corrcoef(sb, rt)[0, 1])
    return np.sort(out)


def test_association_difference_null_is_exact_for_few_layers():
    t = np.array([0.1, 0.5, 0.2, 0.9, 0.4])
    a = t + np.array([0.0, 0.01, -0.02, 0.0, 0.03])     # the same order as t: ρ = 1
    b = -t                                               # the reverse: ρ = −1
    r = G.association_difference_null(a, b, t)
    assert r.method == "exact" and r.n_perm == 32
    assert r.observed == pytest.approx(2.0)
    assert np.allclose(np.sort(r.null), brute_force_swap_null(a, b, t))
    # D = 2 only unswapped, or with the middle layer swapped (rank 3 in both a and b)
    assert r.p == pytest.approx(2 / 32)
    assert r.null_mean == pytest.approx(0.0, abs=1e-12)   # swapping everything negates D
    assert "layer-swap null" in r.describe() and "all 32 swap patterns" in r.describe()
    rev = G.association_difference_null(b, a, t)
    assert rev.observed == pytest.approx(-2.0) and rev.p == pytest.approx(1.0)


def test_association_difference_null_observed_is_the_spearman_difference():
    rng = np.random.default_rng(3)
    t = rng.standard_normal(30)
    a, b = t + rng.standard_normal(30), rng.standard_normal(30)
    r = G.association_difference_null(a, b, t, n_perm=2000, seed=0)
    assert r.method == "monte carlo"
    assert r.observed == pytest.approx(sps.spearmanr(a, t)[0] - sps.spearmanr(b, t)[0], rel=1e-12)
    assert r.p < 0.05


def test_association_difference_null_keeps_its_level_when_a_and_b_are_alike():
    rng = np.random.default_rng(1)
    hits = 0
    for _ in range(200):
        t = rng.standard_normal(10)
        a, b = t + rng.standard_normal(10), t + rng.standard_normal(10)
        hits += G.association_difference_null(a, b, t).p <= 0.05     # exact: 1,024 patterns
    assert 3 <= hits <= 20


def test_association_difference_null_errors():
    with pytest.raises(AnatomyKitError, match="constant"):
        G.association_difference_null(np.ones(5), np.arange(5.0), np.arange(5.0))
    with pytest.raises(AnatomyKitError, match="must hold 5"):
        G.association_difference_null(np.arange(5.0), np.arange(4.0), np.arange(5.0))


# --------------------------------------------------------------------------- one model's evidence

# --------------------------------------------------------------------------- raw work and the norm, given depth

# Deviations orthogonal to the constant and to the layer index (sums of second differences), by hand:
# 0.1·(1, −2, 1, 0, 0, 0) + 0.3·(0, 0, 1, −2, 1, 0) and 0.2·(0, 1, −2, 1, 0, 0) + 0.05·(0, 0, 0, 1, −2, 1).
E6 = np.array([0.1, -0.2, 0.4, -0.6, 0.3, 0.0])
F6 = np.array([0.0, 0.2, -0.4, 0.25, -0.1, 0.05])


def test_the_hand_made_deviations_are_orthogonal_to_a_line_in_depth():
    depth = np.arange(6)
    for v in (E6, F6):
        assert v.sum() == pytest.approx(0, abs=1e-15) and v @ depth == pytest.approx(0, abs=1e-15)


@pytest.mark.parametrize("scale, make", [("log", lambda d, e: np.exp(2.0 + 0.5 * d + e)),
                                         ("linear", lambda d, e: 3.0 - 2.0 * d + e)])
def test_depth_residuals_leave_exactly_the_deviation_from_the_line(scale, make):
    d = np.arange(6.0)
    got = G.depth_residuals(make(d, E6), scale)
    # float64 logs of values up to e^4.5 and a 6-point fit: a few ulps of 4.5
    assert got == pytest.approx(E6, abs=64 * np.finfo(float).eps * 5)
    # a pure line in depth leaves nothing: exact zeros, not rounding noise
    assert not G.depth_residuals(make(d, 0 * E6), scale).any()


def test_depth_residuals_boundaries_and_errors():
    assert G.depth_residuals([1.0, 2.0, 4.0], "log") == pytest.approx([0, 0, 0])   # 3 layers: a line in log
    assert G.depth_residuals([1.0, 3.0, 2.0], "linear") == pytest.approx([-0.5, 1.0, -0.5])
    with pytest.raises(AnatomyKitError, match="at least 3 finite values"):
        G.depth_residuals([1.0, 2.0])
    with pytest.raises(AnatomyKitError, match=r"positive on the log scale; layers \[1\]"):
        G.depth_residuals([1.0, 0.0, 2.0])
    assert G.depth_residuals([1.0, 0.0, 2.0], "linear") == pytest.approx([0.5, -1.0, 0.5])    # zero is fine there
    with pytest.raises(AnatomyKitError, match="scale='ranks'"):
        G.depth_residuals([1.0, 2.0, 3.0], "ranks")


def test_depth_partial_spearman_sees_the_deviations_not_the_shared_growth():
    d = np.arange(6.0)
    x = np.exp(0.3 + 1.5 * d + E6)       # both climb in rank order with depth: plain ρ = 1
    y = np.exp(1.0 + 1.0 * d + F6)
    assert sps.spearmanr(x, y)[0] == pytest.approx(1.0)
    r = G.depth_partial_spearman(x, y)
    rho = sps.spearmanr(E6, F6)[0]
    # exact p: the share of the 6! orders of F6's ranks at least as far from 0 as the observed ρ
    rank_e, rank_f = sps.rankdata(E6), sps.rankdata(F6)
    null = [sps.spearmanr(rank_e, np.array(o))[0] for o in itertools.permutations(rank_f)]
    assert r.rho == pytest.approx(rho) and r.method == "exact" and r.n == 6
    assert r.p == pytest.approx(np.mean(np.abs(null) >= abs(rho) - 1e-12))
    # the same deviations in y: ρ = 1, the exact floor 2/6!
    same = G.depth_partial_spearman(x, np.exp(-4.0 + 0.2 * d + E6))
    assert same.rho == pytest.approx(1.0) and same.p == pytest.approx(2 / 720)
    # on the linear scale the deviations of x are others (its line in depth is no line there)
    lin = G.depth_partial_spearman(x, y, scale="linear")
    assert lin.rho == pytest.approx(sps.spearmanr(G.depth_residuals(x, "linear"), G.depth_residuals(y, "linear"))[0])
    assert lin.rho != pytest.approx(rho)
    # a profile that is a pure line in depth carries nothing beyond depth: undefined, not a number
    flat = G.depth_partial_spearman(np.exp(0.5 * d), y)
    assert flat.method == "undefined" and np.isnan(flat.rho)
    with pytest.raises(AnatomyKitError, match="share their layers"):
        G.depth_partial_spearman(x, y[:5])


def test_depth_partial_spearman_forwards_its_draws_seed_and_side():
    rng = np.random.default_rng(3)
    d = np.arange(20.0)
    e, f = rng.normal(size=20), rng.normal(size=20)
    x, y = np.exp(0.2 * d + e), np.exp(0.1 * d + 0.3 * e + f)     # weakly related deviations: p far from its floor
    r = G.depth_partial_spearman(x, y, n_perm=999, seed=4, alternative="greater")
    from anatomy_kit.stats import spearman
    want = spearman(G.depth_residuals(x), G.depth_residuals(y), n_perm=999, seed=4, alternative="greater")
    assert (r.rho, r.p, r.method, r.alternative) == (want.rho, want.p, "permutation", "greater")
    assert 0.01 < r.p < 0.9                      # so that another seed or side moves it
    assert r.p != G.depth_partial_spearman(x, y, n_perm=999, seed=5, alternative="greater").p
    assert r.p != G.depth_partial_spearman(x, y, n_perm=999, seed=4, alternative="less").p
    few = G.depth_partial_spearman(x, y, n_perm=99, seed=4, alternative="greater")
    assert few.p == spearman(G.depth_residuals(x), G.depth_residuals(y), n_perm=99, seed=4, alternative="greater").p
    assert few.p != r.p


def synthetic_bundle(L=12):
    depth = np.arange(L, dtype=float)
    lam = np.random.default_rng(0).uniform(0.1, 1.0, L)
    vals = np.empty((L, 3, 3))
    for gi in range(3):
        vals[:, 0, gi] = (1 + depth) if gi == 0 else 1 + 0.01 * np.cos(depth)   # shift
        vals[:, 1, gi] = lam * (10 if gi == 0 else 1) + 0.01                      # gw follows λ
        vals[:, 2, gi] = np.roll(lam, 5) + 0.01                                   # topology does not
    vals[:4, :, 1:] *= 20                                                         # normalised: front-loaded
    wp = G.WorkProfiles(np.arange(L), ("shift", "gw", "topology"), G.GEOMETRIES, vals, 16)
    meta = {"model": "synthetic", "residual_norm": (1 + depth).tolist()}
    return G.ProfileBundle(wp, meta, sensitivity=lam)


def test_model_evidence_reads_the_three_claims():
    e = G.model_evidence("synthetic", synthetic_bundle(), n_perm=2000)
    assert e.n_layers == 12 and set(e.front_by_profile) == {f"{s}/{g}" for s in ("shift", "gw", "topology")
                                                            for g in G.SCALE_FREE}
    assert e.norm_correlation["shift/raw"].rho == pytest.approx(1.0)
    assert e.sensitivity_correlation["gw/raw"].rho == pytest.approx(1.0)
    assert e.front.p < 0.01                          # 1 of the C(12, 4) = 495 front sets is as heavy
    assert e.gw_minus_topology["raw"].p < 0.05 and all(v.observed > 0 for v in e.gw_minus_topology.values())
    assert set(e.gw_minus_topology) == set(G.GEOMETRIES)


def test_model_evidence_needs_the_sensitivity_and_norm():
    b = synthetic_bundle()
    b.sensitivity = None
    with pytest.raises(AnatomyKitError, match="sensitivity"):
        G.model_evidence("synthetic", b)


def test_composite_profile_weighs_each_profile_equally_whatever_its_units():
    a, b = np.array([1.0, 1, 2]), np.array([300.0, 0, 0])     # b in units 100× larger
    q = G.composite_profile({"a": a, "b": b})
    assert q == pytest.approx([(0.25 + 1) / 2, 0.25 / 2, 0.5 / 2]) and q.sum() == pytest.approx(1.0)
    assert G.composite_profile(a) == pytest.approx(a / a.sum())
    with pytest.raises(AnatomyKitError, match="not all zero"):
        G.composite_profile({"a": a, "zero": np.zeros(3)})


def test_each_claim_is_decided_by_the_composite_of_the_profiles_it_names():
    b = synthetic_bundle()
    e = G.model_evidence("synthetic", b, n_perm=2000)
    P, lam, norm = b.profiles, b.sensitivity, np.asarray(b.meta["residual_norm"])
    raw = G.composite_profile(np.column_stack([P.profile(s, "raw") for s in ("shift", "gw", "topology")]))
    assert e.raw_norm.rho == pytest.approx(sps.spearmanr(raw, norm)[0])
    # the primary: the partial rank correlation given depth, on the log scale, with the same draws and seed
    depth = np.arange(len(norm))
    resid = {k: np.log(v) - np.polyval(np.polyfit(depth, np.log(v), 1), depth) for k, v in (("raw", raw), ("norm", norm))}
    # the synthetic norm is 1 + depth: curved in log, so its residuals are not zero
    assert e.raw_norm_depth.rho == pytest.approx(sps.spearmanr(resid["raw"], resid["norm"])[0])
    assert e.raw_norm_depth.p == G.depth_partial_spearman(raw, norm, n_perm=2000, seed=0).p
    # on the linear scale the synthetic norm is a line in depth: nothing is left of it to correlate
    assert e.raw_norm_depth_linear.method == "undefined"
    assert e.norm_depth.rho == pytest.approx(1.0)      # the confound: the norm in the order of depth
    assert e.raw_growth is None                        # the bundle saved no norm increment
    gw = G.composite_profile(np.column_stack([P.profile("gw", g) for g in G.GEOMETRIES]))
    top = G.composite_profile(np.column_stack([P.profile("topology", g) for g in G.GEOMETRIES]))
    assert e.gw_sensitivity.rho == pytest.approx(sps.spearmanr(gw, lam)[0])
    assert e.topology_sensitivity.rho == pytest.approx(sps.spearmanr(top, lam)[0])
    assert e.gw_vs_topology.observed == pytest.approx(e.gw_sensitivity.rho - e.topology_sensitivity.rho)
    assert e.gw_vs_topology.p < 0.05                  # GW follows λ exactly, topology a rolled copy
    assert e.front.observed == pytest.approx(G.front_loading(G.composite_profile(
        np.column_stack([P.profile(s, g) for s in ("shift", "gw", "topology") for g in G.SCALE_FREE]))))
    # a bundle without a profile a claim names is refused, naming it
    wp = G.WorkProfiles(P.layers, ("shift", "gw"), P.geometries, P.values[:, :2], P.n_tokens)
    with pytest.raises(AnatomyKitError, match="topology/raw"):
        G.model_evidence("partial", G.ProfileBundle(wp, b.meta, sensitivity=lam))
