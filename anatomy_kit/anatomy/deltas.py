"""Adjacent weight deltas across depth and their null models (chapter 2).

Paper 1 reports that consecutive weight deltas oscillate (correlation ≈ −0.50).

**Delta series** (:func:`adjacent_delta_correlation`). Δ_ℓ = W_{ℓ+1} − W_ℓ and
r_ℓ = corr(vec Δ_ℓ, vec Δ_{ℓ+1}) (Pearson over elements), ℓ = 0 … L−3. For layers that are
independent with equal variance, r = −½ exactly (the two deltas share −W_{ℓ+1}); the null
models :func:`shuffled_layers` and :func:`iid_like` tell training apart from differencing, and
:func:`independent_null` gives the sampling distribution of the mean r for independent layers
with the real layers' own variances (the null the "oscillation" claim must beat).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import torch

from ..validate import AnatomyKitError, check_int
from .predictability import GramStats, check_stack, gram_stats

__all__ = ["adjacent_delta_correlation", "independent_delta_correlation", "adjacent_layer_correlation",
           "expected_delta_correlation", "shuffled_layers", "iid_like", "iid_delta_correlation", "DeltaNulls",
           "delta_nulls", "independent_null"]


def adjacent_delta_correlation(W) -> np.ndarray:
    """r_ℓ = corr(vec Δ_ℓ, vec Δ_{ℓ+1}) with Δ_ℓ = W_{ℓ+1} − W_ℓ; shape (L−2,) (chapter 2).

    Pearson correlation over the elements; W is stacked tensors (L, ...), L ≥ 3, or their
    :class:`GramStats` (the correlations follow from the Gram matrix exactly).
    """
    st = gram_stats(W)
    L, n = st.n_layers, float(st.n)
    if L < 3:
        raise AnatomyKitError(f"W has {L} layers; adjacent deltas need at least 3")
    G, s = st.gram.numpy(), st.sums.numpy()
    # centred ⟨Δ_a, Δ_b⟩ for every pair of deltas at once, (L−1, L−1), term by term in the order
    # ⟨W_{a+1} − W_a, W_{b+1} − W_b⟩ − (Σ Δ_a)(Σ Δ_b)/n (one NumPy pass instead of 3L scalar calls)
    inner = G[1:, 1:] - G[1:, :-1] - G[:-1, 1:] + G[:-1, :-1]
    ds = s[1:] - s[:-1]
    cov = inner - np.outer(ds, ds) / n
    var = np.diagonal(cov).copy()
    if (var <= 0).any():
        bad = int(np.nonzero(var <= 0)[0][0])
        raise AnatomyKitError(f"delta {bad} (W[{bad + 1}] − W[{bad}]) is constant; its correlation is undefined")
    return np.diagonal(cov, offset=1) / np.sqrt(var[:-1] * var[1:])


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
    check_stack(W, "W", min_layers=2)
    check_int("seed", seed, minimum=0)
    g = torch.Generator().manual_seed(seed)
    return W[torch.randperm(len(W), generator=g)]


def iid_like(W: torch.Tensor, seed: int = 0) -> torch.Tensor:
    """Independent standard-normal tensors of W's shape (L, ...): the i.i.d. null model."""
    check_stack(W, "W", min_layers=1)
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


def independent_null(W, *, n_draws: int = 200, seed: int = 0) -> np.ndarray:
    """Mean adjacent-delta r over depth for independent Gaussian layers with W's per-layer variances.

    Layer ℓ is n i.i.d. N(0, v_ℓ/n) values (n elements, v_ℓ = W_ℓ's centred sum of squares), all
    layers independent. Their Gram matrix is Wishart(n, diag(v/n)); we draw it directly by the
    Bartlett decomposition G = D A Aᵀ D (A lower-triangular, A_ii² ~ χ²(n − i), A_ij ~ N(0, 1)
    below the diagonal, D = diag(√(v/n))), so a draw costs O(L²) whatever n is. Returns
    ``n_draws`` values of the mean over depth of :func:`adjacent_delta_correlation` (chapter 2).
    """
    st = gram_stats(W)
    check_int("n_draws", n_draws, minimum=1)
    check_int("seed", seed, minimum=0)
    L, n = st.n_layers, st.n
    if L < 3 or n < L:
        raise AnatomyKitError(f"W has {L} layers of {n} elements; the null needs L >= 3 and n >= L")
    v = (torch.diagonal(st.gram) - st.sums ** 2 / n).numpy()
    scale = np.sqrt(np.clip(v, 0, None) / n)
    rng = np.random.default_rng(seed)
    A = np.zeros((n_draws, L, L))
    A[:, np.arange(L), np.arange(L)] = np.sqrt(rng.chisquare(n - np.arange(L), size=(n_draws, L)))
    rows, cols = np.tril_indices(L, -1)
    A[:, rows, cols] = rng.standard_normal((n_draws, rows.size))
    B = scale[None, :, None] * A
    G = B @ B.transpose(0, 2, 1)                                    # (n_draws, L, L), Wishart draws
    d = np.arange(L)
    var = G[:, d[:-1], d[:-1]] + G[:, d[1:], d[1:]] - 2 * G[:, d[:-1], d[1:]]          # ‖Δ_ℓ‖², (n_draws, L−1)
    l = d[:-2]
    cov = G[:, l + 1, l + 2] - G[:, l + 1, l + 1] - G[:, l, l + 2] + G[:, l, l + 1]     # ⟨Δ_ℓ, Δ_ℓ+1⟩
    return (cov / np.sqrt(var[:, :-1] * var[:, 1:])).mean(axis=1)
