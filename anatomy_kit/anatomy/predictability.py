"""Weights across depth: how predictable is layer ℓ from its neighbours?

Chapter 2 (*Anatomy II: weights, manipulation, recovery*) uses this module to test a claim of
paper 1 (Wietrzykowski 2026): that layer weights are "highly regular across depth" (R² = 0.91).

The paper's exact regression features are unknown (INFERRED; see the book's appendix on sources). Ours:

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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np
import torch
from torch import nn

from ..hf.layers import MODULE_PATHS, decoder_layers, layer_module
from ..validate import AnatomyKitError, check_choice, check_finite, check_layer_index, check_positive

__all__ = ["MODULES", "stack_weights", "layer_statistics", "GramStats", "gram_stats", "NeighbourFit",
           "neighbour_ridge", "predictability", "pooled_r2", "predicted_layer_weights", "substitution_sets"]

#: Module short names in the order chapters report them.
MODULES = tuple(MODULE_PATHS)


def stack_weights(model: nn.Module, module: str, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Weights of ``module`` in every layer, stacked: shape (L, out_features, in_features). A copy."""
    check_choice("module", module, MODULE_PATHS)
    n = len(decoder_layers(model))
    return torch.stack([layer_module(model, l, module).weight.detach().to("cpu", dtype) for l in range(n)])


def layer_statistics(W: torch.Tensor, gram: "GramStats | None" = None) -> torch.Tensor:
    """Per-layer summary of stacked weights (L, ...): columns std and mean |w|, shape (L, 2), float64.

    ``gram``: W's :class:`GramStats` if already computed (the std then follows from it,
    std² = (G_ℓℓ − s_ℓ²/n)/(n − 1), and W is not checked again).
    """
    if gram is None:
        gram = gram_stats(W)
    n = gram.n
    var = (torch.diagonal(gram.gram) - gram.sums ** 2 / n) / max(n - 1, 1)
    mean_abs = W.reshape(len(W), -1).abs().sum(dim=1, dtype=torch.float64) / n
    return torch.stack([var.clamp_min(0).sqrt(), mean_abs], dim=1)


def check_stack(W: torch.Tensor, name: str, min_layers: int) -> None:
    check_stack_shape(W, name, min_layers)
    check_finite(name, W)


def check_stack_shape(W: torch.Tensor, name: str, min_layers: int) -> None:
    if not isinstance(W, torch.Tensor) or W.dim() < 2:
        raise AnatomyKitError(f"{name} must be a tensor of shape (L, ...) with one slice per layer, "
                              f"got {getattr(W, 'shape', type(W).__name__)!r}")
    if len(W) < min_layers:
        raise AnatomyKitError(f"{name} has {len(W)} layers; at least {min_layers} are needed")


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
    """:class:`GramStats` of stacked tensors W (L, ...) (computed in float64); passes GramStats through.

    A NaN or infinity anywhere in W makes its layer's float64 sum non-finite (float32 values cannot
    overflow a float64 sum), so the sums are the finiteness check; the named error counts the values.
    """
    if isinstance(W, GramStats):
        return W
    check_stack_shape(W, "W", min_layers=1)
    flat = W.reshape(len(W), -1).double()
    sums = flat.sum(1)
    if not bool(torch.isfinite(sums).all()):
        check_finite("W", W)
    return GramStats(n=flat.shape[1], gram=flat @ flat.T, sums=sums)


@dataclass
class NeighbourFit:
    """Held-out neighbour regression of one stacked series W (L, ...).

    ``beta`` (L, 3): the (β0, β1, β2) that predict each layer (NaN rows at the edges 0, L−1).
    ``r2`` (L,): held-out R² of each interior layer over its elements, SS_tot around the layer's
    own mean (NaN at the edges, or everywhere with ``centre="pooled"``). ``r2_pooled``:
    1 − Σ SS_res / Σ SS_tot over interior layers; with ``centre="pooled"`` SS_tot is taken
    around the mean of all interior values (the only choice for one value per layer).
    ``ss_res``, ``ss_tot`` (L,): each interior layer's two sums (NaN at the edges), from which
    :func:`pooled_r2` pools several modules.
    :meth:`predict` gives ŵ_ℓ = β0 + β1 w_{ℓ−1} + β2 w_{ℓ+1}.
    """

    beta: np.ndarray
    r2: np.ndarray
    r2_pooled: float
    ridge: float
    leave_out: bool
    ss_res: np.ndarray | None = None
    ss_tot: np.ndarray | None = None

    def predict(self, W: torch.Tensor, layer: int) -> torch.Tensor:
        """ŵ_layer from the actual neighbours W[layer ± 1]; shape W.shape[1:], W's dtype."""
        check_layer_index("layer", layer, len(self.beta))
        if not np.isfinite(self.beta[layer]).all():
            raise AnatomyKitError(f"layer={layer} has no prediction (edge layers 0 and {len(self.beta) - 1} "
                                  "have only one neighbour); choose an interior layer")
        b0, b1, b2 = (float(x) for x in self.beta[layer])
        return b0 + b1 * W[layer - 1] + b2 * W[layer + 1]


def _normal_equations(st: GramStats) -> tuple[torch.Tensor, torch.Tensor]:
    """Per interior target ℓ, XᵀX ``(L, 3, 3)`` and Xᵀy ``(L, 3)`` of w_ℓ ≈ β0 + β1 w_{ℓ−1} + β2 w_{ℓ+1}
    from the Gram matrix (rows 0 and L − 1 stay zero; :func:`neighbour_ridge`, chapter 2)."""
    G, s, n, L = st.gram, st.sums, float(st.n), st.n_layers
    xtx = torch.zeros(L, 3, 3, dtype=torch.float64)
    xty = torch.zeros(L, 3, dtype=torch.float64)
    for l in range(1, L - 1):
        a, b = l - 1, l + 1
        xtx[l] = torch.tensor([[n, s[a], s[b]], [s[a], G[a, a], G[a, b]], [s[b], G[b, a], G[b, b]]],
                              dtype=torch.float64)
        xty[l] = torch.stack([s[l], G[a, l], G[b, l]])
    return xtx, xty


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
    xtx, xty = _normal_equations(st)
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
    ss_res, ss_tot = np.full(L, np.nan), np.full(L, np.nan)
    ss_res[interior], ss_tot[interior] = res_a, tot_a
    return NeighbourFit(beta=beta, r2=r2, r2_pooled=float(pooled), ridge=float(ridge), leave_out=bool(leave_out),
                        ss_res=ss_res, ss_tot=ss_tot)


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
        stats = layer_statistics(W, st)
        z = (stats - stats.mean(0)) / stats.std(0).clamp_min(1e-30)   # equal weight to both statistics
        sfit = neighbour_ridge(z, ridge=ridge, centre="pooled")
        out[m] = {"fit": fit, "r2_layer": fit.r2, "r2_pooled": fit.r2_pooled, "stats": stats.numpy(),
                  "stats_r2": sfit.r2_pooled, "stats_fit": sfit, "gram": st}
    return out


def pooled_r2(predict: Mapping[str, dict], layers=None) -> float:
    """Held-out element R² of several modules and layers together (chapter 2): 1 − ΣΣ SS_res / ΣΣ SS_tot
    over every module of ``predict`` (from :func:`predictability`) and ``layers`` (default: every
    interior layer). This is the skill of substituting *all* those matrices at once, one number
    that no choice of the best module can inflate."""
    if not predict:
        raise AnatomyKitError("predict is empty; pass the result of predictability(model)")
    fits = [entry["fit"] for entry in predict.values()]
    L = len(fits[0].beta)
    chosen = list(range(1, L - 1)) if layers is None else [check_layer_index("layers", l, L) for l in layers]
    if not chosen or any(not 1 <= l <= L - 2 for l in chosen):
        raise AnatomyKitError(f"layers={layers!r} must be interior layers 1..{L - 2} (the edges have no prediction)")
    res = sum(float(np.sum(f.ss_res[chosen])) for f in fits)
    tot = sum(float(np.sum(f.ss_tot[chosen])) for f in fits)
    return 1 - res / tot if tot > 0 else float("nan")


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


def substitution_sets(importance, counts, *, n_random: int = 3, seed: int = 0) -> dict[str, dict[int, list[int]]]:
    """Which interior layers to substitute, for each count k, in three kinds of order (chapter 2).

    ``importance`` (L,): ΔPPL % per layer (chapter 1). ``gentlest``: the k least important
    interior layers; ``random i`` (i = 1 … n_random): the first k of a seeded random order of the
    interior layers; ``consecutive``: the window of k adjacent interior layers with the least summed
    importance. Returns ``{order name: {k: sorted layers}}``; counts above the interior size are dropped.
    """
    imp = np.asarray(importance, dtype=float)
    interior = list(range(1, len(imp) - 1))
    counts = [int(k) for k in counts if 1 <= int(k) <= len(interior)]
    if not counts:
        raise AnatomyKitError(f"no count in {list(counts)} fits the {len(interior)} interior layers")
    gentle = sorted(interior, key=lambda l: (imp[l], l))
    rng = np.random.default_rng(seed)
    orders = {"gentlest": gentle} | {f"random {i + 1}": [int(x) for x in rng.permutation(interior)]
                                     for i in range(n_random)}
    out = {name: {k: sorted(o[:k]) for k in counts} for name, o in orders.items()}
    out["consecutive"] = {k: min((list(range(s, s + k)) for s in range(1, len(imp) - k)),
                                 key=lambda w: (imp[w].sum(), w[0])) for k in counts}
    return out
