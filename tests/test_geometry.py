"""Known-answer tests for chapter 4 (Geometric work): anatomy_kit.geometry (clouds, metrics, topology, work, diagnostics, profiles)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from anatomy_kit import geometry as G
from anatomy_kit.geometry import FFNCloud, capture_ffn_clouds, ffn_sensitivity, maxmin_indices
from anatomy_kit.validate import AnatomyKitError

from conftest import f32_forward_rtol, f32_sum_rtol

ALL_STATS = ("shift", "gw", "gw_optimal", "topology")


def cloud(n=40, d=6, seed=0):
    return np.random.default_rng(seed).standard_normal((n, d))


def rotation(d, seed=1):
    q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((d, d)))
    return q


# --------------------------------------------------------------------------- geometries

def test_spherical_and_hyperbolic_match_closed_forms():
    x = cloud(12, 5)
    u = x / np.linalg.norm(x, axis=1, keepdims=True)
    theta = np.arccos(np.clip(u @ u.T, -1, 1))
    assert np.allclose(G.pairwise_distances(x, "spherical"), theta, atol=1e-7)
    r = 0.7
    p = r * u
    sq = ((p[:, None] - p[None]) ** 2).sum(-1)
    nn = (p ** 2).sum(-1)
    hyp = np.arccosh(1 + 2 * sq / ((1 - nn)[:, None] * (1 - nn)[None]))
    assert np.allclose(G.pairwise_distances(x, "hyperbolic", radius=r), hyp, atol=1e-7)
    assert np.allclose(G.pairwise_distances(x, "raw"), np.linalg.norm(x[:, None] - x[None], axis=-1), atol=1e-9)
    y = cloud(12, 5, seed=3)
    v = y / np.linalg.norm(y, axis=1, keepdims=True)
    assert np.allclose(G.matched_distances(x, y, "spherical"), np.arccos(np.clip((u * v).sum(1), -1, 1)), atol=1e-7)
    assert np.allclose(G.matched_distances(x, y, "raw"), np.linalg.norm(x - y, axis=1))
    # fixed radius: hyperbolic distance is a strictly increasing function of the angle
    t = np.linspace(0, np.pi, 50)
    assert np.all(np.diff(G.hyperbolic_from_angle(t, r)) > 0)
    assert math.isclose(G.hyperbolic_from_angle(np.pi, r), 4 * np.arctanh(r), rel_tol=1e-12)


def test_distance_matrices_are_exactly_symmetric_with_zero_diagonal():
    for g in G.GEOMETRIES:
        d = G.pairwise_distances(cloud(30, 8) * 100, g)
        assert np.array_equal(d, d.T) and np.all(np.diag(d) == 0)


# --------------------------------------------------------------------------- statistics

@pytest.mark.parametrize("geometry", G.GEOMETRIES)
def test_identity_layer_does_no_work(geometry):
    x = cloud()
    w = G.layer_work(x, x.copy(), statistics=ALL_STATS, geometries=[geometry])
    for s in ALL_STATS:
        assert w[(s, geometry)] == pytest.approx(0.0, abs=1e-12), s


def test_rotation_moves_points_but_keeps_shape():
    x = cloud(40, 6)
    y = x @ rotation(6)
    w = G.layer_work(x, y, statistics=ALL_STATS)
    assert w[("shift", "raw")] > 0.5
    assert w[("shift", "spherical")] > 0.1
    for g in G.GEOMETRIES:
        assert w[("gw", g)] < 1e-9
        assert w[("gw_optimal", g)] < 1e-9
        assert w[("topology", g)] < 1e-5  # ripser works in float32


def test_scaling_changes_raw_work_but_not_spherical_work():
    x, y = cloud(40, 6), cloud(40, 6, seed=5)
    w1 = G.layer_work(x, y, statistics=ALL_STATS)
    w3 = G.layer_work(3 * x, 3 * y, statistics=ALL_STATS)
    for s in ("shift", "gw", "topology"):
        assert w3[(s, "raw")] == pytest.approx(3 * w1[(s, "raw")], rel=1e-5)
        for g in ("spherical", "hyperbolic"):
            assert w3[(s, g)] == pytest.approx(w1[(s, g)], rel=1e-6, abs=1e-9)
    # a layer that only rescales every state: raw work, no spherical work
    w = G.layer_work(x, 2.5 * x, statistics=ALL_STATS)
    assert w[("shift", "raw")] > 1 and w[("gw", "raw")] > 0.5
    for s in ALL_STATS:
        assert w[(s, "spherical")] < 1e-6 and w[(s, "hyperbolic")] < 1e-6


def test_gw_conventions_agree_with_pot():
    x, y = cloud(50, 4), cloud(50, 4, seed=9) ** 2
    for g in G.GEOMETRIES:
        dx, dy = G.pairwise_distances(x, g), G.pairwise_distances(y, g)
        ident = G.gw_identity(dx, dy)
        assert G.gw_identity(dx, dy, convention="pot") == pytest.approx(ident ** 2)
        assert G.gw_identity(dx, dy, convention="memoli") == pytest.approx(ident / 2)
    # POT's objective at the identity coupling is our closed form squared
    import ot
    n = len(x)
    dx, dy = G.pairwise_distances(x), G.pairwise_distances(y)
    T = np.eye(n) / n
    assert ot.gromov.gwloss(*ot.gromov.init_matrix(dx, dy, np.full(n, 1 / n), np.full(n, 1 / n), "square_loss"), T) \
        == pytest.approx(G.gw_identity(dx, dy, convention="pot"), rel=1e-9)


def test_gw_objective_of_any_coupling_agrees_with_pot_and_the_closed_form():
    import ot
    x, y = cloud(30, 4), cloud(30, 4, seed=9) ** 2
    n = len(x)
    dx, dy = G.pairwise_distances(x), G.pairwise_distances(y)
    w = np.full(n, 1 / n)
    assert G.gw_objective(dx, dy, np.eye(n) / n) == pytest.approx(G.gw_identity(dx, dy), rel=1e-12)
    # at the coupling POT's solver returns, its loss; and on a soft coupling its gwloss. The O(n³) and
    # POT's evaluations sum n² float64 products of distances in other orders: ~n²·1e-16 relative.
    found, log = ot.gromov.gromov_wasserstein2(dx, dy, w, w, "square_loss", log=True)
    assert G.gw_objective(dx, dy, log["T"], convention="pot") == pytest.approx(float(found), rel=n * n * 1e-15)
    soft = (np.eye(n) / n + np.full((n, n), 1 / n ** 2)) / 2
    pot = ot.gromov.gwloss(*ot.gromov.init_matrix(dx, dy, w, w, "square_loss"), soft)
    assert G.gw_objective(dx, dy, soft, convention="pot") == pytest.approx(pot, rel=n * n * 1e-15)
    # a coupling with unequal, non-uniform marginals against the four-index sum itself (n⁴ float64 terms)
    m = 7
    ex, ey = dx[:m, :m], dy[:m, :m]
    skew = np.random.default_rng(3).random((m, m)) ** 3
    skew /= skew.sum()
    brute = np.einsum("ikjl,ij,kl->", (ex[:, :, None, None] - ey[None, None]) ** 2, skew, skew)
    assert G.gw_objective(ex, ey, skew, convention="pot") == pytest.approx(brute, rel=m ** 4 * 1e-15)
    with pytest.raises(AnatomyKitError, match="sum to 1"):
        G.gw_objective(dx, dy, np.eye(n))
    with pytest.raises(AnatomyKitError, match="shape"):
        G.gw_objective(dx, dy, np.eye(n - 1) / (n - 1))


def distance_distribution_bound(dx, dy):
    """A lower bound on the GW distortion of any coupling: T⊗T pushes forward to a coupling of the
    two distributions of pairwise distances, so the objective is at least their W2²."""
    return float(np.sqrt(np.mean((np.sort(dx, axis=None) - np.sort(dy, axis=None)) ** 2)))


@pytest.mark.parametrize("geometry", G.GEOMETRIES)
def test_gw_optimal_finds_that_a_relabelled_copy_is_the_same_cloud(geometry):
    x = cloud(60, 5, seed=3)
    perm = np.random.default_rng(7).permutation(60)
    dx, dy = G.pairwise_distances(x, geometry), G.pairwise_distances(x[perm], geometry)
    assert G.gw_identity(dx, dy) > 0.3            # the correspondence is broken ...
    assert G.gw_optimal(dx, dy) < 1e-6            # ... but the clouds are isometric: GW = 0
    starts = G.gw_local_optima(dx, dy)
    assert list(starts) == ["identity", "uniform", "permutation 1", "permutation 2", "permutation 3"]
    assert starts["identity"] > 0.1 and starts["uniform"] < 1e-6   # a local optimum is not the optimum


def test_gw_optimal_attains_the_lower_bound_of_a_scaled_copy():
    # Y = 2.5 X: the identity coupling attains the distance-distribution bound, so GW = 1.5·rms(D).
    x = cloud(40, 4, seed=11)
    dx, dy = G.pairwise_distances(x), G.pairwise_distances(2.5 * x)
    exact = 1.5 * float(np.sqrt(np.mean(dx ** 2)))
    assert distance_distribution_bound(dx, dy) == pytest.approx(exact, rel=1e-12)
    assert G.gw_optimal(dx, dy) == pytest.approx(exact, rel=1e-6)
    assert G.gw_optimal(dx, dy, convention="pot") == pytest.approx(exact ** 2, rel=1e-6)
    # and on unrelated clouds every start stays above the bound
    y = cloud(40, 4, seed=12) ** 3
    dy = G.pairwise_distances(y)
    bound = distance_distribution_bound(dx, dy)
    assert all(v >= bound - 1e-9 for v in G.gw_local_optima(dx, dy).values())


def test_gw_starts_are_validated():
    d = G.pairwise_distances(cloud(8, 3))
    assert list(G.gw_local_optima(d, d, starts=["uniform"], n_random=0)) == ["uniform"]
    with pytest.raises(AnatomyKitError, match="'random'"):
        G.gw_local_optima(d, d, starts=["random"])
    with pytest.raises(AnatomyKitError, match="no starting coupling"):
        G.gw_local_optima(d, d, starts=[], n_random=0)
    with pytest.raises(AnatomyKitError, match="n_random"):
        G.gw_optimal(d, d, n_random=-1)


def test_a_circle_has_exactly_one_dominant_h1_bar():
    t = np.linspace(0, 2 * np.pi, 60, endpoint=False)
    pts = np.c_[np.cos(t), np.sin(t), np.zeros((60, 3))] @ rotation(5)
    pts += 0.02 * np.random.default_rng(0).standard_normal(pts.shape)
    dgm = G.h1_diagram(G.pairwise_distances(pts))
    life = np.sort(dgm[:, 1] - dgm[:, 0])[::-1]
    assert life[0] > 1.0 and (len(life) == 1 or life[1] < 0.1 * life[0])


@pytest.mark.parametrize("n", [30, 60, 81])
def test_tearing_a_regular_circle_has_the_closed_form(n):
    # n evenly spaced points on the unit circle (n divisible by 3): one loop, born when neighbours
    # touch (2 sin(π/n)), dead at √3 (the inscribed equilateral triangle); the torn segment has none.
    t = 2 * np.pi * np.arange(n) / n
    x = np.c_[np.cos(t), np.sin(t)]
    dgm = G.h1_diagram(G.pairwise_distances(x))
    assert dgm.shape == (1, 2)
    assert dgm[0] == pytest.approx([2 * np.sin(np.pi / n), np.sqrt(3)], rel=1e-6)
    torn = np.c_[t - np.pi, np.zeros_like(t)]
    closed_form = (np.sqrt(3) - 2 * np.sin(np.pi / n)) / np.sqrt(2)
    w = G.layer_work(x, torn, statistics=["topology"], geometries=["raw"])
    assert w[("topology", "raw")] == pytest.approx(closed_form, rel=1e-6)
    dx, dy = G.pairwise_distances(x), G.pairwise_distances(torn)
    assert G.topological_change(dx, dy) == pytest.approx(closed_form, rel=1e-6)
    assert G.topological_change(dx, dy, order=1) == pytest.approx(closed_form, rel=1e-6)  # one point: any order


def test_work_settings_are_validated():
    ok = G.WorkSettings(corpus="python-docs", n_blocks=4, block_size=32, n_tokens=16).validate()
    assert ok.sensitivity_blocks == 4
    with pytest.raises(AnatomyKitError, match="sensitivity_blocks=8 exceeds n_blocks=4"):
        G.WorkSettings(corpus="python-docs", n_blocks=4, block_size=32, n_tokens=16, sensitivity_blocks=8).validate()
    with pytest.raises(AnatomyKitError, match="radius=1.0"):
        G.WorkSettings(corpus="python-docs", n_blocks=4, block_size=32, n_tokens=16, radius=1.0).validate()
    with pytest.raises(AnatomyKitError, match="'random'"):
        G.WorkSettings(corpus="python-docs", n_blocks=4, block_size=32, n_tokens=16, sampling="random").validate()


def test_hyperbolic_diagram_is_the_transformed_spherical_diagram():
    x = cloud(60, 4, seed=2)
    r = 0.9
    direct = G.h1_diagram(G.pairwise_distances(x, "hyperbolic", radius=r))
    mapped = G.hyperbolic_from_angle(G.h1_diagram(G.pairwise_distances(x, "spherical")), r)
    key = lambda d: d[np.lexsort((d[:, 1], d[:, 0]))]  # noqa: E731
    assert direct.shape == mapped.shape
    assert np.allclose(key(direct), key(mapped), rtol=1e-5, atol=1e-5)


def random_diagram(rng, k, scale=1.0):
    b = rng.uniform(0, scale, k)
    return np.c_[b, b + rng.exponential(scale / 3, k)]


def test_diagram_distance_equals_persim():
    import persim
    rng = np.random.default_rng(0)
    for m, k in [(0, 3), (4, 0), (1, 1), (7, 12), (40, 25), (120, 130)]:
        a, b = random_diagram(rng, m), random_diagram(rng, k)
        assert G.diagram_distance(a, b, order=1) == pytest.approx(persim.wasserstein(a, b), abs=1e-8)
    assert G.diagram_distance(np.zeros((0, 2)), np.zeros((0, 2))) == 0.0


def brute_force_wasserstein(a, b, q):
    """Minimum over all partial matchings; unmatched points go to the diagonal."""
    diag = lambda p: (p[1] - p[0]) / math.sqrt(2)  # noqa: E731
    best = math.inf
    for k in range(min(len(a), len(b)) + 1):
        for ia in itertools.combinations(range(len(a)), k):
            for ib in itertools.permutations(range(len(b)), k):
                c = sum(np.linalg.norm(a[i] - b[j]) ** q for i, j in zip(ia, ib))
                c += sum(diag(a[i]) ** q for i in range(len(a)) if i not in ia)
                c += sum(diag(b[j]) ** q for j in range(len(b)) if j not in ib)
                best = min(best, c)
    return best ** (1 / q)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 4), st.integers(0, 4), st.integers(0, 10_000), st.sampled_from([1.0, 2.0, 3.0]))
def test_diagram_distance_is_exact(m, k, seed, q):
    rng = np.random.default_rng(seed)
    a, b = random_diagram(rng, m), random_diagram(rng, k)
    assert G.diagram_distance(a, b, order=q) == pytest.approx(brute_force_wasserstein(a, b, q), abs=1e-10)


# --------------------------------------------------------------------------- profiles and diagnostics

def fake_clouds(L=5, n=30, d=6):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, d))
    out = []
    for l in range(L):
        y = x @ rotation(d, seed=l) * (1 + 0.3 * l) + 0.1 * l * rng.standard_normal((n, d))
        out.append(FFNCloud(l, x, y, np.arange(n)))
        x = y
    return out


def test_work_profiles_shape_normalisation_and_parallel_equivalence():
    clouds = fake_clouds()
    wp = G.work_profiles(clouds, progress=False)
    assert wp.values.shape == (5, 3, 3) and len(wp.names) == 9
    assert np.allclose(wp.normalised("sum").values.sum(axis=0), 1)
    assert np.allclose(wp.normalised("max").values.max(axis=0), 1)
    assert np.array_equal(wp.profile("gw", "raw"), wp.values[:, 1, 0])
    wp2 = G.work_profiles(clouds, n_jobs=2, progress=False)
    assert np.array_equal(wp.values, wp2.values)          # exact: the same float64 code per layer, in workers


def test_norm_growth_and_correlations():
    clouds = fake_clouds()
    growth = G.residual_norm_growth(clouds, kind="ratio")
    assert growth.shape == (5,) and growth[0] == pytest.approx(1.0, abs=0.05) and growth[-1] > growth[1]
    diff = G.residual_norm_growth(clouds)
    assert np.allclose(diff, G.mean_norms(clouds, "y") - G.mean_norms(clouds, "x"))
    assert G.front_loading([3, 1, 1, 1, 1, 1]) == pytest.approx(0.5)
    assert G.front_loading(np.ones(30)) == pytest.approx(1 / 3)
    wp = G.work_profiles(clouds, statistics=["shift"], geometries=["raw"], progress=False)
    corr = G.profile_correlations(wp, growth)
    assert set(corr) == {"shift/raw"} and corr["shift/raw"] == pytest.approx(1.0)
    assert G.profile_correlations(wp, -growth, method="pearson")["shift/raw"] < -0.9


def test_work_profiles_hold_each_layers_work_in_statistic_geometry_order():
    clouds = fake_clouds()
    wp = G.work_profiles(clouds, progress=False)
    for l, c in enumerate(clouds):
        w = G.layer_work(c.x, c.y)
        for si, st_ in enumerate(wp.statistics):
            for gi, g in enumerate(wp.geometries):
                assert wp.values[l, si, gi] == w[(st_, g)]      # exact: the same call on the same cloud
                assert wp.profile(st_, g)[l] == w[(st_, g)]


def test_norms_and_growth_known_answers():
    x = np.array([[3.0, 4.0], [0.0, 2.0]])            # norms 5 and 2
    c = FFNCloud(0, x, 2 * x, np.arange(2))
    assert G.mean_norms([c], "x").tolist() == [3.5] and G.mean_norms([c], "y").tolist() == [7.0]
    assert G.residual_norm_growth([c], "ratio").tolist() == [2.0]
    assert G.residual_norm_growth([c]).tolist() == [3.5]   # the difference: mean ‖y‖ − ‖x‖
    assert G.front_loading([1, 1, 1, 5, 1, 1, 1, 1, 1, 1], 1 / 3) == pytest.approx(3 / 14)  # round(3.3) = 3 layers


def test_profile_correlations_match_scipy():
    from scipy import stats
    clouds = fake_clouds(L=8)
    wp = G.work_profiles(clouds, progress=False)
    target = np.random.default_rng(4).standard_normal(8)
    rho, r = G.profile_correlations(wp, target), G.profile_correlations(wp, target, method="pearson")
    for st_, g, prof in wp.items():
        assert rho[f"{st_}/{g}"] == pytest.approx(stats.spearmanr(prof, target)[0])
        assert r[f"{st_}/{g}"] == pytest.approx(stats.pearsonr(prof, target)[0])


def test_intrinsic_dimensions_are_twonn_of_each_layer():
    rng = np.random.default_rng(0)
    clouds = [FFNCloud(l, rng.uniform(size=(400, k)) @ rotation(6)[:k], rng.standard_normal((400, 6)), np.arange(400))
              for l, k in enumerate((1, 2, 4))]
    d = G.intrinsic_dimensions(clouds)
    assert d.tolist() == [G.twonn_dimension(c.x) for c in clouds]
    assert d == pytest.approx([1, 2, 4], abs=0.5)
    assert G.intrinsic_dimensions(clouds, which="y")[0] > 4


def test_twonn_finds_a_plane_in_ten_dimensions():
    rng = np.random.default_rng(0)
    plane = rng.uniform(size=(1500, 2)) @ rotation(10)[:2]
    assert G.twonn_dimension(plane) == pytest.approx(2.0, abs=0.2)
    cube5 = rng.uniform(size=(2000, 5)) @ rotation(10)[:5]
    assert G.twonn_dimension(cube5) == pytest.approx(5.0, abs=0.6)
    dup = np.vstack([plane, plane[:100]])  # duplicates are dropped, not fatal
    assert G.twonn_dimension(dup) == pytest.approx(2.0, abs=0.25)


def test_save_and_load_round_trip(tmp_path):
    clouds = fake_clouds()
    wp = G.work_profiles(clouds, progress=False)
    p = G.save_profiles(tmp_path / "ch04" / "profiles.json", wp, {"model": "tiny", "scale": "smoke"},
                        intrinsic_dimension=np.arange(5) + 1.0, sensitivity=np.ones(5),
                        residual_norm_growth=G.residual_norm_growth(clouds))
    b = G.load_profiles(p)
    assert np.allclose(b.profiles.values, wp.values) and b.profiles.names == wp.names
    assert b.meta == {"model": "tiny", "scale": "smoke"}
    assert b.intrinsic_dimension.tolist() == [1, 2, 3, 4, 5] and b.profiles.n_tokens == 30
    import json
    doc = json.loads(p.read_text())
    assert doc["schema"] == G.SCHEMA and sum(doc["profiles"]["gw/spherical"]["normalised"]) == pytest.approx(1)
    with pytest.raises(AnatomyKitError, match="sensitivity"):
        G.save_profiles(tmp_path / "x.json", wp, {"model": "m"}, sensitivity=[1.0, 2.0])


def test_maxmin_takes_one_point_from_each_cluster():
    rng = np.random.default_rng(0)
    centres = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    pts = np.repeat(centres, [50, 5, 20], axis=0) + 0.1 * rng.standard_normal((75, 2))
    for seed in range(5):
        idx = maxmin_indices(pts, 3, seed=seed)
        assert sorted(np.repeat([0, 1, 2], [50, 5, 20])[idx].tolist()) == [0, 1, 2]


# --------------------------------------------------------------------------- bad inputs

def test_bad_inputs_raise_named_errors():
    x = cloud(10, 3)
    with pytest.raises(AnatomyKitError, match="'poincare'"):
        G.pairwise_distances(x, "poincare")
    with pytest.raises(AnatomyKitError, match="'curvature'"):
        G.work_profiles(fake_clouds(), statistics=["curvature"], progress=False)
    with pytest.raises(AnatomyKitError, match="'hyperbolic'"):
        G.WorkProfiles(np.arange(2), ("gw",), ("raw",), np.zeros((2, 1, 1)), 5).profile("gw", "hyperbolic")
    bad = x.copy()
    bad[3, 1] = np.nan
    with pytest.raises(AnatomyKitError, match="non-finite"):
        G.work_profiles([FFNCloud(0, x, bad, np.arange(10))], progress=False)
    with pytest.raises(AnatomyKitError, match="radius=1.5"):
        G.pairwise_distances(x, "hyperbolic", radius=1.5)
    with pytest.raises(AnatomyKitError, match="zero vector"):
        G.pairwise_distances(np.zeros((3, 2)), "spherical")
    with pytest.raises(AnatomyKitError, match="order=0.5"):
        G.diagram_distance(np.zeros((0, 2)), np.zeros((0, 2)), order=0.5)


# --------------------------------------------------------------------------- cloud capture on a tiny Llama

@pytest.fixture(scope="module", autouse=True)
def _one_thread(one_torch_thread):
    """Every test in this module runs on one torch thread (see conftest.one_torch_thread)."""


@pytest.fixture(scope="module")
def tiny():
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=4,
                      num_attention_heads=4, num_key_value_heads=2)
    model = LlamaForCausalLM(cfg).eval()
    ids = torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[1, 11:] = 0  # right padding on row 1
    return model, ids, mask


def test_capture_matches_a_manual_computation(tiny):
    model, ids, mask = tiny
    clouds = capture_ffn_clouds(model, ids, mask, n_tokens=20, seed=3)
    assert [c.layer for c in clouds] == [0, 1, 2, 3]
    idx = clouds[0].token_index
    assert all(np.array_equal(c.token_index, idx) for c in clouds)
    assert len(set(idx.tolist())) == 20 and mask.reshape(-1)[idx].all()
    assert (idx >= 16).any()  # tokens from both rows of the batch
    with torch.no_grad():
        hs = model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
    for c in clouds:
        layer = model.model.layers[c.layer]
        x = torch.tensor(c.x, dtype=torch.float32)
        with torch.no_grad():
            ffn = layer.mlp(layer.post_attention_layernorm(x)).double().numpy()
        assert np.allclose(c.y - c.x, ffn, atol=1e-5)
        if c.layer < 3:  # the last hidden state is taken after the final norm
            assert np.allclose(c.y, hs[c.layer + 1].reshape(-1, 32)[idx].double().numpy(), atol=1e-5)
    ffn_clouds = capture_ffn_clouds(model, ids, mask, n_tokens=20, seed=3, point="ffn")
    for c, r in zip(ffn_clouds, clouds):
        layer = model.model.layers[c.layer]
        with torch.no_grad():
            assert np.allclose(c.x, layer.post_attention_layernorm(torch.tensor(r.x, dtype=torch.float32)).numpy(), atol=1e-5)
        assert np.allclose(c.y, r.y - r.x, atol=1e-5)


def test_capture_is_batch_and_chunk_consistent(tiny):
    model, ids, mask = tiny
    a = capture_ffn_clouds(model, ids, mask, n_tokens=27, seed=0)  # all 27 real tokens
    b = capture_ffn_clouds(model, ids, mask, n_tokens=27, seed=0, batch_size=1)
    solo = capture_ffn_clouds(model, ids[:1], n_tokens=16, seed=0, layers=[2])
    assert np.array_equal(a[0].token_index, np.r_[np.arange(16), 16 + np.arange(11)])
    for ca, cb in zip(a, b):
        assert np.allclose(ca.x, cb.x, atol=1e-5) and np.allclose(ca.y, cb.y, atol=1e-5)
    assert np.allclose(solo[0].x, a[2].x[:16], atol=1e-5)


def test_maxmin_capture_is_reproducible(tiny):
    model, ids, mask = tiny
    a = capture_ffn_clouds(model, ids, mask, n_tokens=10, sampling="maxmin", seed=1)
    b = capture_ffn_clouds(model, ids, mask, n_tokens=10, sampling="maxmin", seed=1)
    assert np.array_equal(a[0].token_index, b[0].token_index) and mask.reshape(-1)[a[0].token_index].all()


def test_capture_bad_inputs(tiny):
    model, ids, mask = tiny
    with pytest.raises(AnatomyKitError, match=r"n_tokens=40 .* 27 non-padding"):
        capture_ffn_clouds(model, ids, mask, n_tokens=40)
    with pytest.raises(AnatomyKitError, match="'middle'"):
        capture_ffn_clouds(model, ids, mask, n_tokens=4, point="middle")
    with pytest.raises(AnatomyKitError, match="'random'"):
        capture_ffn_clouds(model, ids, mask, n_tokens=4, sampling="random")
    import copy
    broken = copy.deepcopy(model)
    with torch.no_grad():
        broken.model.layers[1].mlp.down_proj.weight[0, 0] = float("nan")
    with pytest.raises(AnatomyKitError, match="layer 1 FFN output states y holds"):
        capture_ffn_clouds(broken, ids, mask, n_tokens=8)


def test_ffn_sensitivity(tiny):
    model, ids, mask = tiny
    s = ffn_sensitivity(model, ids, mask, noise_scale=0.5, seed=0)
    assert s.shape == (4,) and np.isfinite(s).all()
    assert np.array_equal(s, ffn_sensitivity(model, ids, mask, noise_scale=0.5, seed=0))   # exact: same call
    assert np.allclose(ffn_sensitivity(model, ids, mask, noise_scale=1e-6, seed=0), 0, atol=1e-4)
    big = ffn_sensitivity(model, ids, mask, noise_scale=5.0, seed=0, n_draws=2)
    assert big.mean() > abs(s).mean()
    with pytest.raises(AnatomyKitError, match="noise_scale"):
        ffn_sensitivity(model, ids, mask, noise_scale=-1)


def test_ffn_sensitivity_matches_a_full_forward(tiny):
    from anatomy_kit.hf.layers import hooked
    model, ids, mask = tiny
    s = ffn_sensitivity(model, ids, mask, noise_scale=0.5, seed=7, layers=[2])
    gen = torch.Generator().manual_seed(7 * 1_000_003 + 2 * 1009)

    def noise(i, module, args, out):
        rms = out.pow(2).mean(-1, keepdim=True).sqrt()
        return out + 0.5 * rms * torch.randn(out.shape, generator=gen)

    labels = ids.masked_fill(mask == 0, -100)
    with torch.no_grad():
        base = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        with hooked([model.model.layers[2].mlp], noise):
            noisy = model(input_ids=ids, attention_mask=mask, labels=labels).loss
    # Each mean loss is a float32 sum of n per-token NLLs (the kit's by row, HF's mean) on logits of
    # 32-term dot products in matmuls of other shapes; s[0] is a difference of two such losses.
    n = int((labels[:, 1:] != -100).sum())
    tol = 2 * float(base) * (f32_sum_rtol(n) + f32_forward_rtol(1, 32))
    assert s[0] == pytest.approx(float(noisy - base), abs=tol)
