"""Weights across depth: how predictable is layer ℓ from its neighbours, and how do deltas behave.

Chapter 2 (*Anatomy II: weights, manipulation, recovery*) uses this module to test two claims
of paper 1 (Wietrzykowski 2026): that layer weights are "highly regular across depth"
(R² = 0.91) and that adjacent weight deltas oscillate (correlation ≈ −0.50).

The paper's exact regression features are unknown (SPECS §1.5, INFERRED). Ours:

**Neighbour ridge** (:func:`neighbour_ridge`). For one module type, stack the per-layer
tensors into ``W`` of shape (L, *shape) and fit, for interior layers ℓ = 1 … L−2, one linear
model shared by all elements and layers,

    w_ℓ[e] ≈ β0 + β1 · w_{ℓ−1}[e] + β2 · w_{ℓ+1}[e]        (every element e of the tensor)

by ridge least squares (penalty on β1, β2, not on β0). Evaluation is held out,
*leave-one-layer-out*: the coefficients that predict layer ℓ are fitted without any
equation that contains W_ℓ (targets ℓ−1, ℓ, ℓ+1 are left out), so the prediction of ℓ never
saw ℓ. R²_ℓ = 1 − Σ_e (w_ℓ − ŵ_ℓ)² / Σ_e (w_ℓ − mean w_ℓ)². The same code applied to a
series of per-layer *statistics* (shape (L, k), e.g. the standard deviation of each layer's
matrix) measures whether the *scale* of the weights is regular across depth.

**Delta series** (:func:`adjacent_delta_correlation`). Δ_ℓ = W_{ℓ+1} − W_ℓ and
r_ℓ = corr(vec Δ_ℓ, vec Δ_{ℓ+1}) (Pearson over elements), ℓ = 0 … L−3. For layers that are
independent with equal variance, r = −½ exactly (the two deltas share −W_{ℓ+1}); the null
models :func:`shuffled_layers` and :func:`iid_like` tell training apart from differencing.

:func:`substituted` is a context manager that puts any tensors into named modules and
restores the originals bit for bit afterwards.
"""

from __future__ import annotations

import functools
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Mapping

import numpy as np
import torch
from torch import nn

from .layers import MODULE_PATHS, decoder_layers, layer_module
from .validate import AnatomyKitError, check_choice, check_finite, check_int, check_layer_index, check_positive

__all__ = ["MODULES", "stack_weights", "layer_statistics", "GramStats", "gram_stats", "NeighbourFit",
           "neighbour_ridge", "predictability", "predicted_layer_weights", "adjacent_delta_correlation",
           "adjacent_layer_correlation", "independent_delta_correlation", "expected_delta_correlation", "shuffled_layers", "iid_like",
           "delta_nulls", "DeltaNulls", "iid_delta_correlation", "substituted"]

#: Module short names in the order chapters report them.
MODULES = tuple(MODULE_PATHS)


def stack_weights(model: nn.Module, module: str, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Weights of ``module`` in every layer, stacked: shape (L, out_features, in_features). A copy."""
    check_choice("module", module, MODULE_PATHS)
    n = len(decoder_layers(model))
    return torch.stack([layer_module(model, l, module).weight.detach().to("cpu", dtype) for l in range(n)])


def layer_statistics(W: torch.Tensor) -> torch.Tensor:
    """Per-layer summary of stacked weights (L, ...): columns std and mean |w|, shape (L, 2)."""
    _check_stack(W, "W", min_layers=1)
    flat = W.reshape(len(W), -1).double()
    return torch.stack([flat.std(dim=1), flat.abs().mean(dim=1)], dim=1)


def _check_stack(W: torch.Tensor, name: str, min_layers: int) -> None:
    if not isinstance(W, torch.Tensor) or W.dim() < 2:
        raise AnatomyKitError(f"{name} must be a tensor of shape (L, ...) with one slice per layer, "
                              f"got {getattr(W, 'shape', type(W).__name__)!r}")
    if len(W) < min_layers:
        raise AnatomyKitError(f"{name} has {len(W)} layers; at least {min_layers} are needed")
    check_finite(name, W)


@dataclass
class GramStats:
    """Sufficient statistics of stacked tensors W (L, ...): everything below needs only these.

    ``n``: elements per layer; ``gram`` (L, L): G_ij = ⟨vec W_i, vec W_j⟩; ``sums`` (L,): Σ_e W_i[e];
    all float64. One pass over the weights; regressions and correlations are then O(L²).
    """

    n: int
    gram: torch.Tensor
    sums: torch.Tensor

    @property
    def n_layers(self) -> int:
        return len(self.sums)

    def permuted(self, order) -> "GramStats":
        """The statistics of W[order] (layers reordered), without touching the weights."""
        idx = torch.as_tensor(order, dtype=torch.long)
        return GramStats(n=self.n, gram=self.gram[idx][:, idx], sums=self.sums[idx])


def gram_stats(W) -> GramStats:
    """:class:`GramStats` of stacked tensors W (L, ...) (computed in float64); passes GramStats through."""
    if isinstance(W, GramStats):
        return W
    _check_stack(W, "W", min_layers=1)
    flat = W.reshape(len(W), -1).double()
    return GramStats(n=flat.shape[1], gram=flat @ flat.T, sums=flat.sum(1))


@dataclass
class NeighbourFit:
    """Held-out neighbour regression of one stacked series W (L, ...).

    ``beta`` (L, 3): the (β0, β1, β2) that predict each layer (NaN rows at the edges 0, L−1).
    ``r2`` (L,): held-out R² of each interior layer over its elements, SS_tot around the layer's
    own mean (NaN at the edges, or everywhere with ``centre="pooled"``). ``r2_pooled``:
    1 − Σ SS_res / Σ SS_tot over interior layers; with ``centre="pooled"`` SS_tot is taken
    around the mean of all interior values (the only choice for one value per layer).
    :meth:`predict` gives ŵ_ℓ = β0 + β1 w_{ℓ−1} + β2 w_{ℓ+1}.
    """

    beta: np.ndarray
    r2: np.ndarray
    r2_pooled: float
    ridge: float
    leave_out: bool

    def predict(self, W: torch.Tensor, layer: int) -> torch.Tensor:
        """ŵ_layer from the actual neighbours W[layer ± 1]; shape W.shape[1:], W's dtype."""
        check_layer_index("layer", layer, len(self.beta))
        if not np.isfinite(self.beta[layer]).all():
            raise AnatomyKitError(f"layer={layer} has no prediction (edge layers 0 and {len(self.beta) - 1} "
                                  "have only one neighbour); choose an interior layer")
        b0, b1, b2 = (float(x) for x in self.beta[layer])
        return b0 + b1 * W[layer - 1] + b2 * W[layer + 1]


def neighbour_ridge(W, *, ridge: float = 1e-3, leave_out: bool = True, centre: str = "layer") -> NeighbourFit:
    """Fit w_ℓ ≈ β0 + β1 w_{ℓ−1} + β2 w_{ℓ+1} elementwise across interior layers (chapter 2).

    Parameters
    ----------
    W: stacked tensors (L, ...) or their :class:`GramStats`; L ≥ 3, and L ≥ 5 with
        ``leave_out`` (so that equations remain after dropping the three that contain W_ℓ).
    ridge: penalty λ on (β1, β2), relative to the features' scale: λ · ½(a·a + b·b) is added to
        the slopes' diagonal of the normal equations. 0 = ordinary least squares.
    leave_out: predict layer ℓ with coefficients fitted only on the equations of targets j with
        |j − ℓ| ≥ 2 (held out: W_ℓ is neither target nor feature); ``False`` fits once on all
        interior layers (in-sample).
    centre: ``"layer"`` or ``"pooled"``: what SS_tot is measured around (see :class:`NeighbourFit`).

    Everything is computed from the Gram matrix of the layers, so the cost after one pass over
    the weights is O(L²); residual sums use SS_res = yᵀy − 2βᵀXᵀy + βᵀXᵀXβ in float64.
    """
    check_positive("ridge", ridge, allow_zero=True)
    check_choice("centre", centre, ("layer", "pooled"))
    st = gram_stats(W)
    L = st.n_layers
    if L < (5 if leave_out else 3):
        raise AnatomyKitError(f"W has {L} layers; neighbour_ridge needs at least {5 if leave_out else 3}"
                              f"{' with leave_out=True' if leave_out else ''}")
    G, s, n = st.gram, st.sums, float(st.n)
    interior = list(range(1, L - 1))
    xtx = torch.zeros(L, 3, 3, dtype=torch.float64)
    xty = torch.zeros(L, 3, dtype=torch.float64)
    for l in interior:
        a, b = l - 1, l + 1
        xtx[l] = torch.tensor([[n, s[a], s[b]], [s[a], G[a, a], G[a, b]], [s[b], G[b, a], G[b, b]]],
                              dtype=torch.float64)
        xty[l] = torch.stack([s[l], G[a, l], G[b, l]])
    beta = np.full((L, 3), np.nan)
    r2 = np.full(L, np.nan)
    full_a, full_b = xtx[interior].sum(0), xty[interior].sum(0)
    res, tot = [], []
    mu = float(s[interior].sum()) / (n * len(interior))
    for l in interior:
        if leave_out:
            drop = [j for j in (l - 1, l, l + 1) if 1 <= j <= L - 2]
            A, b = full_a - xtx[drop].sum(0), full_b - xty[drop].sum(0)
        else:
            A, b = full_a.clone(), full_b.clone()
        pen = ridge * float(A[1, 1] + A[2, 2]) / 2
        A[1, 1] += pen
        A[2, 2] += pen
        coef = torch.linalg.lstsq(A, b[:, None], driver="gelsd").solution[:, 0] \
            if torch.linalg.matrix_rank(A) < 3 else torch.linalg.solve(A, b)
        beta[l] = coef.numpy()
        res.append(max(float(G[l, l] - 2 * coef @ xty[l] + coef @ xtx[l] @ coef), 0.0))
        tot.append(float(G[l, l] - s[l] ** 2 / n) if centre == "layer"
                   else float(G[l, l] - 2 * mu * s[l] + n * mu * mu))
    res_a, tot_a = np.array(res), np.array(tot)
    if centre == "layer" and st.n > 1:
        with np.errstate(divide="ignore", invalid="ignore"):
            r2[interior] = 1 - res_a / tot_a
    pooled = 1 - res_a.sum() / tot_a.sum() if tot_a.sum() > 0 else float("nan")
    return NeighbourFit(beta=beta, r2=r2, r2_pooled=float(pooled), ridge=float(ridge), leave_out=bool(leave_out))


def predictability(model: nn.Module, modules: tuple[str, ...] | list[str] = MODULES, *,
                   ridge: float = 1e-3) -> dict[str, dict]:
    """Held-out R² of every module type: of its elements, and of its per-layer scale (chapter 2).

    Returns ``{module: {"fit": NeighbourFit, "r2_layer": (L,), "r2_pooled": float,
    "stats": (L, 2) per-layer (std, mean |w|), "stats_r2": float, "gram": GramStats}}``.
    ``stats_r2`` is the pooled held-out R² of the same neighbour model applied to the
    standardised (std, mean |w|) series: is the *scale* of the weights regular across depth?
    """
    out = {}
    for m in modules:
        W = stack_weights(model, m, dtype=torch.float32)
        st = gram_stats(W)
        fit = neighbour_ridge(st, ridge=ridge)
        stats = layer_statistics(W)
        z = (stats - stats.mean(0)) / stats.std(0).clamp_min(1e-30)   # equal weight to both statistics
        sfit = neighbour_ridge(z, ridge=ridge, centre="pooled")
        out[m] = {"fit": fit, "r2_layer": fit.r2, "r2_pooled": fit.r2_pooled, "stats": stats.numpy(),
                  "stats_r2": sfit.r2_pooled, "stats_fit": sfit, "gram": st}
    return out


def predicted_layer_weights(model: nn.Module, predict: Mapping[str, dict], layer: int) -> dict[tuple[int, str], torch.Tensor]:
    """{(layer, module): ŵ} for every module in ``predict`` (from :func:`predictability`), ready
    for :func:`substituted`. Features are the model's *current* neighbours of ``layer``."""
    n = len(decoder_layers(model))
    check_layer_index("layer", layer, n)
    out = {}
    for m, entry in predict.items():
        fit: NeighbourFit = entry["fit"]
        if not np.isfinite(fit.beta[layer]).all():
            raise AnatomyKitError(f"layer={layer} has no prediction (edge layers 0 and {n - 1} "
                                  "have only one neighbour); choose an interior layer")
        b0, b1, b2 = (float(x) for x in fit.beta[layer])
        prev = layer_module(model, layer - 1, m).weight.detach()
        nxt = layer_module(model, layer + 1, m).weight.detach()
        out[(layer, m)] = b0 + b1 * prev + b2 * nxt
    return out


def adjacent_delta_correlation(W) -> np.ndarray:
    """r_ℓ = corr(vec Δ_ℓ, vec Δ_{ℓ+1}) with Δ_ℓ = W_{ℓ+1} − W_ℓ; shape (L−2,) (chapter 2).

    Pearson correlation over the elements; W is stacked tensors (L, ...), L ≥ 3, or their
    :class:`GramStats` (the correlations follow from the Gram matrix exactly).
    """
    st = gram_stats(W)
    L, G, s, n = st.n_layers, st.gram, st.sums, float(st.n)
    if L < 3:
        raise AnatomyKitError(f"W has {L} layers; adjacent deltas need at least 3")

    def cov(i, j, k, m):   # centred ⟨W_j − W_i, W_m − W_k⟩
        inner = G[j, m] - G[j, k] - G[i, m] + G[i, k]
        return float(inner - (s[j] - s[i]) * (s[m] - s[k]) / n)

    var = np.array([cov(l, l + 1, l, l + 1) for l in range(L - 1)])
    if (var <= 0).any():
        bad = int(np.nonzero(var <= 0)[0][0])
        raise AnatomyKitError(f"delta {bad} (W[{bad + 1}] − W[{bad}]) is constant; its correlation is undefined")
    return np.array([cov(l, l + 1, l + 1, l + 2) / np.sqrt(var[l] * var[l + 1]) for l in range(L - 2)])


def independent_delta_correlation(W) -> np.ndarray:
    """r_ℓ that *independent* layers with W's own per-layer variances would give; shape (L−2,).

    r_ℓ = −v_{ℓ+1} / √((v_ℓ + v_{ℓ+1})(v_{ℓ+1} + v_{ℓ+2})), v_ℓ = Σ_e (w_ℓ[e] − mean w_ℓ)²: the
    adjacent-delta correlation with every cross-layer covariance set to zero (chapter 2).
    """
    st = gram_stats(W)
    if st.n_layers < 3:
        raise AnatomyKitError(f"W has {st.n_layers} layers; adjacent deltas need at least 3")
    v = (torch.diagonal(st.gram) - st.sums ** 2 / st.n).numpy()
    return np.array([-v[l + 1] / np.sqrt((v[l] + v[l + 1]) * (v[l + 1] + v[l + 2])) for l in range(st.n_layers - 2)])


def adjacent_layer_correlation(W, lag: int = 1) -> np.ndarray:
    """corr(vec W_ℓ, vec W_{ℓ+lag}) for ℓ = 0 … L−1−lag (Pearson over elements)."""
    st = gram_stats(W)
    check_int("lag", lag, minimum=1, maximum=st.n_layers - 1)
    G, s, n = st.gram, st.sums, float(st.n)
    c = G - torch.outer(s, s) / n
    d = torch.sqrt(torch.diagonal(c))
    return np.array([float(c[l, l + lag] / (d[l] * d[l + lag])) for l in range(st.n_layers - lag)])


def expected_delta_correlation(rho1: float, rho2: float) -> float:
    """r for a stationary series with lag-1/lag-2 correlations ρ1, ρ2: (2ρ1 − ρ2 − 1) / (2(1 − ρ1)).

    Independent layers (ρ1 = ρ2 = 0) give −½; a smooth trend (ρ1, ρ2 → 1) pushes r upwards.
    """
    if not -1 <= rho1 < 1:
        raise AnatomyKitError(f"rho1={rho1!r} must lie in [-1, 1)")
    if not -1 <= rho2 <= 1:
        raise AnatomyKitError(f"rho2={rho2!r} must lie in [-1, 1]")
    return (2 * rho1 - rho2 - 1) / (2 * (1 - rho1))


def shuffled_layers(W: torch.Tensor, seed: int = 0) -> torch.Tensor:
    """The same per-layer tensors in a random layer order (a null model that keeps each layer)."""
    _check_stack(W, "W", min_layers=2)
    check_int("seed", seed, minimum=0)
    g = torch.Generator().manual_seed(seed)
    return W[torch.randperm(len(W), generator=g)]


def iid_like(W: torch.Tensor, seed: int = 0) -> torch.Tensor:
    """Independent standard-normal tensors of W's shape (L, ...): the i.i.d. null model."""
    _check_stack(W, "W", min_layers=1)
    check_int("seed", seed, minimum=0)
    g = torch.Generator().manual_seed(seed)
    return torch.randn(W.shape, generator=g, dtype=torch.float64)


@functools.lru_cache(maxsize=16)
def iid_delta_correlation(n_layers: int, n_elements: int, seed: int = 0) -> tuple[float, ...]:
    """Adjacent-delta correlations (L−2 values) of ``n_layers`` i.i.d. N(0, 1) tensors of
    ``n_elements`` each: the i.i.d. null, which depends only on (L, n). Cached per (L, n, seed)."""
    check_int("n_layers", n_layers, minimum=3)
    check_int("n_elements", n_elements, minimum=2)
    g = torch.Generator().manual_seed(seed)
    gram = torch.zeros(n_layers, n_layers, dtype=torch.float64)
    sums = torch.zeros(n_layers, dtype=torch.float64)
    chunk = max(1, 4_000_000 // n_layers)          # bounded memory: (L, chunk) floats at a time
    for start in range(0, n_elements, chunk):
        x = torch.randn(n_layers, min(chunk, n_elements - start), generator=g, dtype=torch.float32).double()
        gram += x @ x.T
        sums += x.sum(1)
    return tuple(adjacent_delta_correlation(GramStats(n=n_elements, gram=gram, sums=sums)).tolist())


@dataclass
class DeltaNulls:
    """Adjacent-delta correlation of the real stack and of its two null models (chapter 2).

    ``observed`` (L−2,): r_ℓ of the weights in their real order. ``shuffled`` (n_shuffles,):
    mean r over depth after a random reordering of the layers (each layer kept intact).
    ``iid`` (L−2,): r_ℓ of i.i.d. standard-normal tensors of the same shape (expected −½).
    """

    observed: np.ndarray
    shuffled: np.ndarray
    iid: np.ndarray

    @property
    def observed_mean(self) -> float:
        return float(self.observed.mean())

    @property
    def shuffled_interval(self) -> tuple[float, float]:
        """The central 95 % of the shuffled means."""
        lo, hi = np.percentile(self.shuffled, [2.5, 97.5])
        return float(lo), float(hi)

    @property
    def inside_shuffled(self) -> bool:
        lo, hi = self.shuffled_interval
        return lo <= self.observed_mean <= hi


def delta_nulls(W, *, n_shuffles: int = 200, seed: int = 0) -> DeltaNulls:
    """:func:`adjacent_delta_correlation` of W (L, ...) or its :class:`GramStats`, with nulls."""
    check_int("n_shuffles", n_shuffles, minimum=1)
    st = gram_stats(W)
    g = torch.Generator().manual_seed(seed)
    shuffled = [adjacent_delta_correlation(st.permuted(torch.randperm(st.n_layers, generator=g))).mean()
                for _ in range(n_shuffles)]
    return DeltaNulls(observed=adjacent_delta_correlation(st), shuffled=np.array(shuffled),
                      iid=np.array(iid_delta_correlation(st.n_layers, st.n, seed)))


@contextmanager
def substituted(model: nn.Module, new: Mapping[tuple[int, str], torch.Tensor]) -> Iterator[None]:
    """Inside the block, ``layer_module(model, l, m).weight`` holds ``new[(l, m)]``; restored exactly after.

    ``new`` maps (layer, module short name) to a tensor of that weight's shape (any float dtype;
    it is cast). The parameters' storage is *swapped*, not copied: inside the block a weight may
    share memory with the tensor given (a tensor that is already some parameter's storage is
    cloned first), and afterwards each parameter gets its original storage back, so restoration
    is exact and costs nothing. Raises :class:`AnatomyKitError` naming a bad layer, module,
    shape or a non-finite value (chapter 2).
    """
    targets = []
    for (layer, module), value in new.items():
        lin = layer_module(model, layer, module)
        if not isinstance(value, torch.Tensor) or tuple(value.shape) != tuple(lin.weight.shape):
            raise AnatomyKitError(f"replacement for layer {layer} module {module!r} has shape "
                                  f"{tuple(getattr(value, 'shape', ()))}; the weight has shape {tuple(lin.weight.shape)}")
        if not torch.isfinite(value.sum()):        # cheap screen; check_finite counts the bad values
            check_finite(f"replacement for layer {layer} module {module!r}", value)
        targets.append((lin.weight, value))
    owned = {p.data_ptr() for p in model.parameters()}
    originals = [w.data for w, _ in targets]
    try:
        with torch.no_grad():
            for w, value in targets:
                value = value.detach().to(w.device, w.dtype)
                if value.data_ptr() in owned or not value.is_contiguous():
                    value = value.clone(memory_format=torch.contiguous_format)
                w.data = value
        yield
    finally:
        for (w, _), old in zip(targets, originals):
            w.data = old
