"""Tests of weight predictability, the delta series and the importance profile (chapter 2)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from anatomy_kit.anatomy import AblationMap, importance
from anatomy_kit.anatomy import deltas as DL
from anatomy_kit.anatomy import predictability as P
from anatomy_kit.hf import surgery
from anatomy_kit.hf.layers import layer_module
from anatomy_kit.validate import AnatomyKitError

from conftest import f32_forward_rtol, f32_sum_rtol, tiny_llama


def _linear_in_depth(L=8, shape=(12, 7), seed=0):
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(shape, generator=g, dtype=torch.float64)
    B = torch.randn(shape, generator=g, dtype=torch.float64)
    return torch.stack([A + l * B for l in range(L)])


@pytest.mark.parametrize("leave_out", [True, False])
def test_ridge_is_exact_on_weights_linear_in_depth(leave_out):
    W = _linear_in_depth()
    fit = P.neighbour_ridge(W, ridge=0.0, leave_out=leave_out)
    interior = np.arange(1, len(W) - 1)
    np.testing.assert_allclose(fit.r2[interior], 1.0, atol=1e-10)
    assert fit.r2_pooled == pytest.approx(1.0, abs=1e-10)
    assert np.isnan(fit.r2[0]) and np.isnan(fit.r2[-1])
    # W_ℓ = ½(W_{ℓ−1} + W_{ℓ+1}) exactly: β = (0, ½, ½), and the prediction is exact
    np.testing.assert_allclose(fit.beta[interior], np.tile([0.0, 0.5, 0.5], (len(interior), 1)), atol=1e-9)
    for l in interior:
        torch.testing.assert_close(fit.predict(W, int(l)), W[l], rtol=0, atol=1e-9)


def test_ridge_penalty_shrinks_and_held_out_differs_from_in_sample():
    W = _linear_in_depth() + 0.3 * torch.randn(8, 12, 7, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    ols = P.neighbour_ridge(W, ridge=0.0)
    shrunk = P.neighbour_ridge(W, ridge=10.0)
    assert np.nanmean(np.abs(shrunk.beta[:, 1:])) < np.nanmean(np.abs(ols.beta[:, 1:]))
    in_sample = P.neighbour_ridge(W, ridge=0.0, leave_out=False)
    rows = in_sample.beta[1:-1]
    np.testing.assert_allclose(rows, np.tile(rows[0], (len(rows), 1)))   # in-sample: one β for all layers
    assert not np.allclose(ols.beta[1], ols.beta[3])                       # held out: one β per target
    # GramStats input gives the same answer as the tensor
    again = P.neighbour_ridge(P.gram_stats(W), ridge=0.0)
    np.testing.assert_allclose(again.r2, ols.r2, equal_nan=True, rtol=1e-12)


def test_ridge_r2_matches_direct_residuals():
    W = torch.randn(7, 5, 9, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    fit = P.neighbour_ridge(W, ridge=0.1)
    for l in range(1, 6):
        pred = fit.predict(W, l)
        direct = 1 - ((W[l] - pred) ** 2).sum() / ((W[l] - W[l].mean()) ** 2).sum()
        assert fit.r2[l] == pytest.approx(float(direct), abs=1e-10)


def test_held_out_fit_never_sees_the_target_layer():
    W = torch.randn(9, 6, 6, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    fit = P.neighbour_ridge(W, ridge=0.0)
    W2 = W.clone()
    W2[4] = 100 * torch.randn(6, 6, dtype=torch.float64)      # change layer 4 only
    fit2 = P.neighbour_ridge(W2, ridge=0.0)
    np.testing.assert_allclose(fit2.beta[4], fit.beta[4], rtol=1e-10)   # its coefficients are unchanged


def test_alternating_sequence_has_delta_correlation_minus_one():
    g = torch.Generator().manual_seed(0)
    A, B = torch.randn(2, 10, 6, generator=g, dtype=torch.float64)
    W = torch.stack([A + (-1) ** l * B for l in range(7)])
    np.testing.assert_allclose(DL.adjacent_delta_correlation(W), -1.0, atol=1e-12)
    # a straight line in depth: every delta equal, correlation +1
    np.testing.assert_allclose(DL.adjacent_delta_correlation(_linear_in_depth()), 1.0, atol=1e-12)


def test_delta_correlation_matches_numpy_and_iid_gives_minus_half():
    W = torch.randn(6, 40, 30, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    r = DL.adjacent_delta_correlation(W)
    D = (W[1:] - W[:-1]).reshape(5, -1).numpy()
    np.testing.assert_allclose(r, [np.corrcoef(D[i], D[i + 1])[0, 1] for i in range(4)], rtol=1e-10)
    iid = DL.adjacent_delta_correlation(DL.iid_like(torch.zeros(30, 200, 100), seed=3))
    assert iid.mean() == pytest.approx(-0.5, abs=0.005)
    cached = np.array(DL.iid_delta_correlation(30, 20_000))
    assert cached.shape == (28,) and cached.mean() == pytest.approx(-0.5, abs=0.01)
    assert DL.expected_delta_correlation(0.0, 0.0) == -0.5


def test_independent_delta_correlation_matches_heteroscedastic_iid_layers():
    g = torch.Generator().manual_seed(8)
    scales = torch.tensor([0.2, 1.0, 3.0, 0.5, 2.0, 1.0], dtype=torch.float64)
    W = scales[:, None, None] * torch.randn(6, 300, 200, generator=g, dtype=torch.float64)
    np.testing.assert_allclose(DL.adjacent_delta_correlation(W), DL.independent_delta_correlation(W), atol=0.01)
    equal = torch.randn(5, 4, 4, generator=g, dtype=torch.float64)
    equal = equal / equal.reshape(5, -1).std(1)[:, None, None]
    np.testing.assert_allclose(DL.independent_delta_correlation(equal - equal.mean()), -0.5, atol=0.05)


def test_expected_delta_correlation_formula_on_an_ar1_series():
    # AR(1) across depth with ρ: lag-1 ρ, lag-2 ρ²; r = (2ρ − ρ² − 1)/(2(1 − ρ)) = −(1 − ρ)/2
    rho, L, n = 0.6, 12, 60_000
    g = torch.Generator().manual_seed(4)
    x = [torch.randn(n, generator=g, dtype=torch.float64)]
    for _ in range(L - 1):
        x.append(rho * x[-1] + np.sqrt(1 - rho ** 2) * torch.randn(n, generator=g, dtype=torch.float64))
    r = DL.adjacent_delta_correlation(torch.stack(x)[:, :, None]).mean()
    assert r == pytest.approx(DL.expected_delta_correlation(rho, rho ** 2), abs=0.01)
    assert DL.expected_delta_correlation(rho, rho ** 2) == pytest.approx(-(1 - rho) / 2)


def test_delta_nulls_and_shuffles_keep_layers():
    W = torch.randn(8, 20, 10, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    s = DL.shuffled_layers(W, seed=2)
    assert sorted(float(x.sum()) for x in s) == pytest.approx(sorted(float(x.sum()) for x in W))
    nulls = DL.delta_nulls(W, n_shuffles=20, seed=1)
    assert nulls.observed.shape == (6,) and nulls.shuffled.shape == (20,) and nulls.iid.shape == (6,)
    # a permuted GramStats equals the Gram of the permuted tensor
    order = torch.tensor([3, 1, 0, 2, 7, 5, 6, 4])
    np.testing.assert_allclose(DL.adjacent_delta_correlation(P.gram_stats(W).permuted(order)),
                               DL.adjacent_delta_correlation(W[order]), rtol=1e-10)


def test_on_a_tiny_model_predictability_and_substitution_restore():
    model = tiny_llama(n_layers=6)
    pred = P.predictability(model, ["gate", "q"])
    assert set(pred) == {"gate", "q"} and pred["gate"]["r2_layer"].shape == (6,)
    assert np.isfinite(pred["gate"]["stats_r2"])
    W = P.stack_weights(model, "gate")
    assert W.shape == (6, 64, 32)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    new = P.predicted_layer_weights(model, pred, 2)
    torch.testing.assert_close(new[(2, "gate")], pred["gate"]["fit"].predict(W, 2).float(), rtol=1e-6, atol=1e-6)
    with surgery.substituted(model, new):
        torch.testing.assert_close(layer_module(model, 2, "gate").weight, new[(2, "gate")], rtol=0, atol=0)  # in place
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k               # exact: the saved tensors are put back
    with pytest.raises(RuntimeError), surgery.substituted(model, {(1, "q"): torch.zeros(32, 32)}):
        raise RuntimeError("inside")                      # restored even when the block raises
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k


def test_bad_inputs_name_the_value():
    model = tiny_llama(n_layers=6)
    with pytest.raises(AnatomyKitError, match="'attn'"):
        P.stack_weights(model, "attn")
    with pytest.raises(AnatomyKitError, match="layer=6"):
        P.predicted_layer_weights(model, P.predictability(model, ["q"]), 6)
    with pytest.raises(AnatomyKitError, match="layer=0"):
        P.predicted_layer_weights(model, P.predictability(model, ["q"]), 0)
    with pytest.raises(AnatomyKitError, match="ridge=-1"):
        P.neighbour_ridge(torch.randn(6, 3, 3), ridge=-1)
    with pytest.raises(AnatomyKitError, match="4 layers"):
        P.neighbour_ridge(torch.randn(4, 3, 3))
    with pytest.raises(AnatomyKitError, match="non-finite"):
        DL.adjacent_delta_correlation(torch.full((5, 2, 2), float("nan")))
    with pytest.raises(AnatomyKitError, match="shape"):
        with surgery.substituted(model, {(1, "q"): torch.zeros(3, 3)}):
            pass
    with pytest.raises(AnatomyKitError, match="rho1=1"):
        DL.expected_delta_correlation(1, 0)


def _profile(n=6):
    amap = AblationMap(strategy="neighbour-mean", baseline_ppl=20.0, layers=np.arange(n),
                       ppl=np.array([80.0, 30.0, 19.0, 25.0, 21.0, 60.0][:n]), n_tokens=100)
    return importance.ImportanceProfile.from_ablation_map(amap, model="tiny", corpus="python-docs", scale="smoke")


def test_importance_profile_round_trip(tmp_path):
    p = _profile()
    np.testing.assert_allclose(p.importance, [300, 50, -5, 25, 5, 200])
    assert p.critical(2) == [1, 3] and p.redundant(2) == [2, 4] and p.anti_layers() == [2]
    assert p.ranked()[:2] == [0, 5]
    p.set_recovery(3, 7, max_steps=10, noise_fraction=0.5)
    p.set_recovery(1, None, max_steps=10, noise_fraction=0.5)
    p.extra["note"] = {"a": np.float64(1.5)}
    path = importance.save_profile(p, tmp_path)
    assert path == tmp_path / importance.FILENAME
    doc = json.loads(path.read_text())
    assert doc["schema"] == importance.SCHEMA and doc["recovery_steps"] == [None, None, None, 7, None, None]
    back = importance.load_profile(tmp_path)
    assert back.to_dict() == importance.load_profile(path).to_dict()
    assert back.recovery_recovered[1] is False and back.recovery_recovered[3] is True
    assert back.recovery_recovered[0] is None and back.extra["note"]["a"] == 1.5


def test_importance_profile_bad_inputs(tmp_path):
    with pytest.raises(AnatomyKitError, match="no importance profile"):
        importance.load_profile(tmp_path)
    (tmp_path / "x.json").write_text(json.dumps({"model": "m"}))
    with pytest.raises(AnatomyKitError, match="lacks field"):
        importance.load_profile(tmp_path / "x.json")
    d = _profile().to_dict()
    d["ablation_ppl"] = d["ablation_ppl"][:3]
    (tmp_path / "y.json").write_text(json.dumps(d))
    with pytest.raises(AnatomyKitError, match="ablation_ppl has 3 entries"):
        importance.load_profile(tmp_path / "y.json")
    with pytest.raises(AnatomyKitError, match="layer=9"):
        _profile().set_recovery(9, 1, max_steps=2, noise_fraction=0.5)
    amap = AblationMap(strategy="skip", baseline_ppl=20.0, layers=np.array([1, 2]), ppl=np.array([1.0, 2.0]), n_tokens=3)
    with pytest.raises(AnatomyKitError, match="covers layers"):
        importance.ImportanceProfile.from_ablation_map(amap, model="m", corpus="c", scale="smoke", n_layers=4)


def test_ablation_map_from_chapter_one_metrics(tmp_path):
    amap = _profile()
    assert importance.ablation_map_from_metrics(tmp_path, model="tiny", corpus="python-docs") == (None, None)
    m = AblationMap(strategy="neighbour-mean", baseline_ppl=20.0, layers=np.arange(3), ppl=np.array([21.0, 19.0, 40.0]),
                    n_tokens=10)
    doc = {"run": {"model": "embedded", "corpus": "python-docs", "sizes": {}},
           "metrics": {"maps": {"neighbour-mean": m.to_dict()}}}
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "ch01_ablation_map.json").write_text(json.dumps(doc))
    back, run = importance.ablation_map_from_metrics(tmp_path, model="embedded", corpus="python-docs")
    np.testing.assert_allclose(back.delta_pct, m.delta_pct)
    assert back.n_tokens == 10 and run["model"] == "embedded"
    other, run = importance.ablation_map_from_metrics(tmp_path, model="embedded", corpus="fineweb-edu")
    assert other is None and run["corpus"] == "python-docs"
    assert amap.n_layers == 6


# ------------------------------------------------------------------ the independent-layer null (chapter 2)

def test_independent_null_matches_direct_simulation():
    """The Wishart draw of the Gram equals simulating independent Gaussian layers of these variances."""
    L, n, reps = 6, 300, 400
    scales = np.array([0.5, 1.0, 2.0, 1.0, 0.7, 1.5])
    g = torch.Generator().manual_seed(0)
    direct = np.array([DL.adjacent_delta_correlation(torch.from_numpy(scales)[:, None]
                                                     * torch.randn(L, n, generator=g, dtype=torch.float64)).mean()
                       for _ in range(reps)])
    exact = P.GramStats(n=n, gram=torch.diag(torch.from_numpy(scales ** 2 * n)), sums=torch.zeros(L, dtype=torch.float64))
    null = DL.independent_null(exact, n_draws=4000, seed=1)
    assert null.mean() == pytest.approx(direct.mean(), abs=3 * direct.std() / np.sqrt(reps))
    assert null.std() == pytest.approx(direct.std(), rel=0.15)
    assert null.mean() == pytest.approx(DL.independent_delta_correlation(exact).mean(), abs=0.01)
    assert np.array_equal(DL.independent_null(exact, n_draws=5, seed=3), DL.independent_null(exact, n_draws=5, seed=3))


def test_independent_null_separates_an_oscillation():
    """Alternating layers (r ≈ −1) lie far below the null of their own variances; i.i.d. layers inside it."""
    g = torch.Generator().manual_seed(2)
    A, B = torch.randn(2, 400, generator=g, dtype=torch.float64)
    alt = torch.stack([A + (-1) ** l * B + 0.3 * torch.randn(400, generator=g, dtype=torch.float64) for l in range(8)])
    iid = torch.randn(8, 400, generator=g, dtype=torch.float64)
    for W, inside in ((alt, False), (iid, True)):
        lo, hi = np.percentile(DL.independent_null(W, n_draws=2000), [2.5, 97.5])
        r = DL.adjacent_delta_correlation(W).mean()
        assert (lo <= r <= hi) == inside
    with pytest.raises(AnatomyKitError, match="L >= 3"):
        DL.independent_null(torch.randn(2, 10))


# ------------------------------------------------------------------ the residual basis (chapter 2)

def test_permuted_mlp_keeps_the_function_and_changes_the_weights():
    from anatomy_kit.anatomy import residual_basis as RB

    model = tiny_llama(n_layers=4)
    ids = torch.randint(3, 512, (2, 10), generator=torch.Generator().manual_seed(0))
    perm = torch.randperm(64, generator=torch.Generator().manual_seed(1))
    new = RB.permuted_mlp_weights(model, 2, perm)
    with torch.no_grad():
        before = model(ids).logits
        with surgery.substituted(model, new):
            after = model(ids).logits
    # The permutation reorders layer 2's 64-term down-projection sums (≤ 2·64·u apart), which the next
    # layers and the head (32-term dot products) carry to the logits (of order 1: atol = rtol)
    tol = f32_sum_rtol(64) + f32_forward_rtol(2, 32)
    torch.testing.assert_close(after, before, rtol=tol, atol=tol)
    W = layer_module(model, 2, "gate").weight
    assert torch.equal(new[(2, "gate")][0], W[perm[0]]) and not torch.equal(new[(2, "gate")], W)   # rows moved
    assert torch.equal(new[(2, "down")][:, 0], layer_module(model, 2, "down").weight[:, perm[0]])
    with pytest.raises(AnatomyKitError, match="permutation"):
        RB.permuted_mlp_weights(model, 2, [0, 0, 1])


def test_residual_norms_are_predictable_and_hidden_norms_are_not():
    """A model built so that residual-dimension scales vary smoothly with depth while hidden units are
    shuffled from layer to layer: the residual-side R² is high, the hidden-side one is not."""
    from anatomy_kit.anatomy import residual_basis as RB

    model = tiny_llama(n_layers=8)
    g = torch.Generator().manual_seed(5)
    profile = torch.rand(32, generator=g) + 0.2          # one scale per residual dimension, shared by depth
    unit = torch.rand(64, generator=g) + 0.2             # one scale per hidden unit of layer 0
    new = {}
    for l in range(8):
        perm = torch.randperm(64, generator=g)
        base = torch.randn(32, 64, generator=g)
        new[(l, "down")] = (profile * (1 + 0.05 * l))[:, None] * base * unit[perm][None, :]
    with surgery.substituted(model, new):
        rn = RB.residual_norms(model, "down")
        hn = RB.hidden_norms(model, "down")
        r2 = RB.norm_predictability(model, ["down"])["down"]
    assert rn.shape == (8, 32) and hn.shape == (8, 64)
    torch.testing.assert_close(rn[3], new[(3, "down")].double().norm(dim=1))
    torch.testing.assert_close(hn[3], new[(3, "down")].double().norm(dim=0))
    assert r2["residual"] > 0.8 and r2["hidden"] < 0.2
    q = RB.residual_norms(model, "q")                    # q reads the residual: column norms
    torch.testing.assert_close(q[1], layer_module(model, 1, "q").weight.detach().double().norm(dim=0))


def test_substitution_sets_gentlest_random_and_consecutive():
    imp = np.array([900.0, 5.0, 40.0, 1.0, 30.0, 2.0, 3.0, 800.0])       # interior layers 1..6
    sets = P.substitution_sets(imp, [1, 2, 3, 9], n_random=2, seed=4)
    assert list(sets) == ["gentlest", "random 1", "random 2", "consecutive"]
    assert sets["gentlest"] == {1: [3], 2: [3, 5], 3: [3, 5, 6]}           # 9 > 6 interior layers: dropped
    assert sets["consecutive"] == {1: [3], 2: [5, 6], 3: [3, 4, 5]}        # least summed importance (33 < 35)
    for name in ("random 1", "random 2"):
        assert all(set(v) <= set(range(1, 7)) and len(v) == k for k, v in sets[name].items())
        assert set(sets[name][1]) <= set(sets[name][2]) <= set(sets[name][3])   # one order, growing prefixes
    assert sets["random 1"] != sets["random 2"]
    assert P.substitution_sets(imp, [3], n_random=1, seed=4)["random 1"] == {3: sets["random 1"][3]}
    with pytest.raises(AnatomyKitError, match="no count"):
        P.substitution_sets(imp, [7])


def test_chapter_metric_reads_chapter_one(tmp_path):
    assert importance.chapter_metric(tmp_path, "x") is None
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "ch01_ablation_map.json").write_text(json.dumps({"metrics": {"x": [1, 2]}}))
    assert importance.chapter_metric(tmp_path, "x") == [1, 2]
    assert importance.chapter_metric(tmp_path, "y") is None


# ---------------------------------------------------------------------------- pooled R², cheaper statistics (chapter 2)

def test_pooled_r2_pools_the_sums_of_squares_of_every_module_and_layer():
    model = tiny_llama(n_layers=7)
    pred = P.predictability(model, ["gate", "q"])
    # one module, every interior layer: the fit's own pooled R² (the same sums, the same order)
    assert P.pooled_r2({"q": pred["q"]}) == pytest.approx(pred["q"]["r2_pooled"], rel=1e-12)
    # one module, one layer: that layer's R² (SS_tot around the layer's own mean)
    assert P.pooled_r2({"gate": pred["gate"]}, [3]) == pytest.approx(pred["gate"]["r2_layer"][3], rel=1e-12)
    # two modules, two layers: 1 − Σ SS_res / Σ SS_tot from residuals computed directly
    res = tot = 0.0
    for m in ("gate", "q"):
        W = P.stack_weights(model, m)
        for l in (2, 4):
            y, yhat = W[l], pred[m]["fit"].predict(W, l)
            res += float(((y - yhat) ** 2).sum())
            tot += float(((y - y.mean()) ** 2).sum())
    # float64 sums of ≤ 4,096 terms in two orders (Gram expansion vs direct): ~n·2⁻⁵³ relative, far below 1e-9
    assert P.pooled_r2(pred, [2, 4]) == pytest.approx(1 - res / tot, abs=1e-9)
    with pytest.raises(AnatomyKitError, match="interior"):
        P.pooled_r2(pred, [0])
    with pytest.raises(AnatomyKitError, match="empty"):
        P.pooled_r2({})


def test_layer_statistics_from_the_gram_match_a_direct_pass():
    W = 0.3 + torch.randn(6, 40, 30, generator=torch.Generator().manual_seed(4)) * torch.linspace(0.5, 2, 6)[:, None, None]
    st = P.layer_statistics(W)
    flat = W.reshape(6, -1).double()
    # std from G_ℓℓ − s_ℓ²/n (one pass) against the two-pass std: float64, 1,200 terms, means ≈ 0.3·std:
    # both are exact to ~n·2⁻⁵³ ≈ 1e-13 relative
    torch.testing.assert_close(st[:, 0], flat.std(dim=1), rtol=1e-10, atol=0)
    torch.testing.assert_close(st[:, 1], flat.abs().mean(dim=1), rtol=1e-10, atol=0)
    torch.testing.assert_close(P.layer_statistics(W, P.gram_stats(W)), st, rtol=0, atol=0)   # the same computation


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_gram_stats_rejects_non_finite_weights_by_name(bad):
    W = torch.randn(5, 3, 4)
    W[2, 1, 1] = bad
    with pytest.raises(AnatomyKitError, match="1 non-finite"):
        P.gram_stats(W)
    W[3, 0, 0] = -W[2, 1, 1]                 # +inf and −inf in two layers: each layer's sum is still non-finite
    with pytest.raises(AnatomyKitError, match="2 non-finite"):
        P.neighbour_ridge(W)
