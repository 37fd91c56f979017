"""Self-checks for chapter 2 (*Anatomy II: weights, manipulation, recovery*).

- :func:`check_r_squared` – the reader's coefficient of determination R² of a prediction;
- :func:`check_held_out_beta` – the reader's held-out ridge coefficients (β0, β1, β2) that predict one
  layer from its neighbours;
- :func:`check_delta_correlation` – the reader's adjacent-delta correlation r_ℓ of stacked weights;
- :func:`check_permuted_mlp` – the reader's reordering of one MLP's hidden units (same function,
  other weights: why element-wise regressions across depth find nothing).

Each check builds its own inputs and compares with a few lines of numpy (R²) or with the kit
(:func:`anatomy_kit.anatomy.predictability.neighbour_ridge`, which fits from the layers' Gram matrix,
:func:`anatomy_kit.anatomy.deltas.adjacent_delta_correlation`,
:func:`anatomy_kit.anatomy.residual_basis.permuted_mlp_weights`).
"""

from __future__ import annotations

import numpy as np
import torch

from ..anatomy.deltas import adjacent_delta_correlation
from ..anatomy.predictability import neighbour_ridge
from ..anatomy.residual_basis import permuted_mlp_weights
from ..hf.layers import layer_module
from ..hf.surgery import substituted
from .ch01 import tiny_llama
from .core import check, generic

__all__ = ["check_r_squared", "check_held_out_beta", "check_delta_correlation", "check_permuted_mlp", "WRONG_ANSWERS"]


def _stacks() -> dict[str, torch.Tensor]:
    """Test stacks (L, 20, 12) with known answers: i.i.d. (≈ −½), alternating (−1), a trend (+1),
    and independent layers of unequal variance and non-zero means (centring matters)."""
    g = torch.Generator().manual_seed(11)
    A, B = torch.randn(2, 20, 12, generator=g, dtype=torch.float64)
    L = 7
    scales = torch.tensor([0.5, 2.0, 1.0, 3.0, 0.7, 1.5, 1.0], dtype=torch.float64)
    offsets = torch.linspace(-2.0, 2.0, L, dtype=torch.float64)
    return {"i.i.d. layers": torch.randn(L, 20, 12, generator=g, dtype=torch.float64),
            "an alternating sequence": torch.stack([A + (-1) ** l * B for l in range(L)]),
            "a linear trend": torch.stack([A + l * B for l in range(L)]),
            "layers with unequal scales and offsets": scales[:, None, None] * torch.randn(L, 20, 12, generator=g,
                                                                                      dtype=torch.float64)
            + offsets[:, None, None]}


# ---------------------------------------------------------------------------- R² and the held-out fit

def _r2_cases() -> list[tuple[np.ndarray, np.ndarray]]:
    """``[(y, ŷ), …]`` float64 (n,): a good prediction with an offset and a slope ≠ 1 (so that R² differs from the
    squared correlation), and a poor one (R² < 0)."""
    rng = np.random.default_rng(21)
    y = rng.normal(2.0, 1.5, 40)
    return [(y, 0.3 + 0.8 * y + rng.normal(0, 0.4, 40)), (y, rng.normal(2.0, 1.5, 40))]


def _r2_values(y: np.ndarray, y_hat: np.ndarray) -> dict[str, float]:
    res, tot = float(((y - y_hat) ** 2).sum()), float(((y - y.mean()) ** 2).sum())
    return {"right": 1 - res / tot, "uncentred": 1 - res / float((y ** 2).sum()),
            "correlation": float(np.corrcoef(y, y_hat)[0, 1] ** 2), "ratio": res / tot,
            "swapped": 1 - res / float(((y_hat - y_hat.mean()) ** 2).sum()),
            "residual variance": 1 - float(np.var(y - y_hat)) / float(np.var(y))}


_R2_SLIPS = {
    "uncentred": "your SS_tot is Σ y², around 0; measure it around the target's mean, Σ (y − ȳ)²",
    "correlation": "you returned the squared correlation, which forgives any offset and slope of the prediction; "
                   "R² = 1 − SS_res/SS_tot scores the prediction itself",
    "ratio": "you returned SS_res/SS_tot, the share left unexplained; R² is 1 minus it",
    "swapped": "you measured SS_tot around the prediction; the spread to explain is the target's, Σ (y − ȳ)²",
    "residual variance": "you used the variance of the residuals, which forgives a constant offset of the "
                         "prediction; SS_res is their plain sum of squares Σ (y − ŷ)²",
}


@check()
def check_r_squared(fn) -> str | None:
    """``fn(y, y_hat)`` (two float arrays of equal shape) must return R² = 1 − Σ(y − ŷ)²/Σ(y − ȳ)², the share of
    the target's spread around its mean that the prediction explains (negative when it is worse than ȳ)."""
    for k, (y, y_hat) in enumerate(_r2_cases()):
        yours = float(fn(y.copy(), y_hat.copy()))
        values = _r2_values(y, y_hat)
        # float64 sums of 40 terms: any order agrees to ~40·1e-16 relative; 1e-9 separates right from wrong
        if abs(yours - values["right"]) <= 1e-9:
            continue
        for slip, message in _R2_SLIPS.items():
            if abs(yours - values[slip]) <= 1e-9:
                return message
        return generic(f"on case {k + 1} your R² is {yours:.6g}, 1 − SS_res/SS_tot gives {values['right']:.6g}")
    return None


def _beta_stack() -> torch.Tensor:
    """Stacked float64 weights (7, 6, 5): a trend across depth plus noise, so β1, β2 are far from 0."""
    g = torch.Generator().manual_seed(17)
    a, b = torch.randn(2, 6, 5, generator=g, dtype=torch.float64)
    return torch.stack([a + 0.4 * l * b + 0.3 * torch.randn(6, 5, generator=g, dtype=torch.float64)
                        for l in range(7)])


def _direct_beta(W: torch.Tensor, ell: int, lam: float, *, gap: int = 2, penalty: str = "slopes") -> np.ndarray:
    """β from the design rows (1, w_{j−1}[e], w_{j+1}[e]) of targets 1 ≤ j ≤ L−2 with |j − ℓ| ≥ ``gap``;
    ``penalty``: ``"slopes"`` (λ·s̄ on β1, β2: the book's), ``"all"`` (on β0 too), ``"unscaled"`` (λ on β1, β2)."""
    L = len(W)
    xtx, xty = np.zeros((3, 3)), np.zeros(3)
    for j in range(1, L - 1):
        if abs(j - ell) >= gap:
            X = np.stack([np.ones(W[j].numel()), W[j - 1].flatten().numpy(), W[j + 1].flatten().numpy()], axis=1)
            xtx += X.T @ X
            xty += X.T @ W[j].flatten().numpy()
    s_bar = (xtx[1, 1] + xtx[2, 2]) / 2
    diag = {"slopes": [0, s_bar, s_bar], "all": [s_bar, s_bar, s_bar], "unscaled": [0, 1, 1]}[penalty]
    return np.linalg.solve(xtx + lam * np.diag(diag), xty)


_BETA_SLIPS = [
    (dict(gap=0), "you fitted on every interior layer, ℓ included; hold layer ℓ out: use only targets j with "
                  "|j − ℓ| ≥ 2"),
    (dict(gap=1), "the equations of targets ℓ ± 1 hold W_ℓ as a feature; drop them too (|j − ℓ| ≥ 2)"),
    (dict(penalty="all"), "do not penalise the intercept β0: λ·s̄ goes on the two slopes' diagonal only"),
    (dict(penalty="unscaled"), "the penalty is relative to the features' scale: add λ·s̄, with s̄ the mean of the "
                               "slopes' diagonal entries of XᵀX, not λ itself"),
]


@check()
def check_held_out_beta(fn) -> str | None:
    """``fn(W, ell, lam)`` (stacked weights W (L, m, n) float64, an interior layer ℓ, the penalty λ) must return
    (β0, β1, β2) of the ridge fit w_j ≈ β0 + β1·w_{j−1} + β2·w_{j+1} on the targets j with |j − ℓ| ≥ 2."""
    W = _beta_stack()
    for ell, lam in ((3, 0.05), (1, 0.5)):
        yours = np.asarray(fn(W.clone(), ell, lam), dtype=np.float64).reshape(-1)
        want = neighbour_ridge(W, ridge=lam).beta[ell]
        if yours.shape != (3,):
            return f"return the three coefficients (β0, β1, β2); you returned {yours.size} values"
        # two float64 routes (the design rows, the kit's Gram matrix) on 30-element layers: ~1e-13 apart
        if np.allclose(yours, want, rtol=1e-8, atol=1e-10):
            continue
        for options, message in _BETA_SLIPS:
            if np.allclose(yours, _direct_beta(W, ell, lam, **options), rtol=1e-8, atol=1e-10):
                return message
        return generic(f"for ℓ = {ell}, λ = {lam} your β is {np.round(yours, 4)}, the kit's {np.round(want, 4)}")
    return None


@check()
def check_delta_correlation(fn) -> str | None:
    """``fn(W)`` for stacked weights W (L, ...) must return r_ℓ = corr(vec Δ_ℓ, vec Δ_ℓ+1), Δ_ℓ = W[ℓ+1] − W[ℓ],
    as an array of L − 2 Pearson correlations."""
    for name, W in _stacks().items():
        yours = np.asarray(fn(W.clone()), dtype=float).reshape(-1)
        want = adjacent_delta_correlation(W)
        if yours.shape != want.shape:
            return (f"for {len(W)} layers there are {len(W) - 1} deltas and {len(want)} adjacent pairs, so return "
                    f"{len(want)} correlations (one per pair, not their mean); you returned {yours.size} values")
        # float64 stacks of 240 elements: both sides are exact to ~1e-13, so 1e-6 separates right from wrong
        if not np.allclose(yours, want, atol=1e-6):
            for mistake, message in _DELTA_MISTAKES:
                if np.allclose(yours, mistake(W), atol=1e-6):
                    return message
            return generic(f"on {name} you give r = {yours.mean():+.3f} on average, the kit {want.mean():+.3f}: take "
                           "Δ_ℓ = W[ℓ+1] − W[ℓ] and the Pearson correlation of vec Δ_ℓ with vec Δ_ℓ+1")
    return None


@check()
def check_permuted_mlp(fn) -> str | None:
    """``fn(model, layer, perm)`` must return ``{(layer, "gate"|"up"|"down"): tensor}``: the MLP with its
    hidden units reordered by ``perm``, computing the same function."""
    model = tiny_llama()
    layer, perm = 3, torch.randperm(64, generator=torch.Generator().manual_seed(2))
    ids = torch.randint(0, 128, (2, 12), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        before = model(ids).logits
    yours = fn(model, layer, perm.clone())
    want = permuted_mlp_weights(model, layer, perm)
    if not isinstance(yours, dict) or set(yours) != set(want):
        return f"return a dict with exactly the keys {sorted(want)} (the three MLP matrices of layer {layer})"
    with substituted(model, yours), torch.no_grad():
        after = model(ids).logits
    # renumbering reorders float32 sums over the 64 hidden units: logits move by ~64·2⁻²⁴ of their size at most
    if not torch.allclose(after, before, atol=1e-5):
        return ("the model's output changed: the rows of gate and up and the columns of down must be reordered "
                "by the same permutation")
    if all(torch.equal(yours[k], layer_module(model, layer, k[1]).weight) for k in yours):
        return "your weights are the original ones; apply the permutation"
    if any(not torch.allclose(yours[k], want[k]) for k in want):
        inverse = permuted_mlp_weights(model, layer, torch.argsort(perm))
        if all(torch.allclose(yours[k], inverse[k]) for k in want):
            return ("the function is unchanged but you applied the inverse permutation: hidden unit perm[j] goes to "
                    "position j, i.e. index the rows with perm itself")
        return generic("the function is unchanged but your weights differ from the kit's: hidden unit perm[j] goes "
                       "to position j (gate and up rows, down columns)")
    return None


# ---------------------------------------------------------------------------- typical mistakes

def _layers_not_deltas(W):
    flat = W.reshape(len(W), -1).numpy()
    return np.array([np.corrcoef(flat[l], flat[l + 1])[0, 1] for l in range(len(W) - 2)])


def _lag_two(W):
    D = (W[1:] - W[:-1]).reshape(len(W) - 1, -1).numpy()
    return np.array([np.corrcoef(D[l], D[min(l + 2, len(D) - 1)])[0, 1] for l in range(len(W) - 2)])


def _cosine(W):
    D = (W[1:] - W[:-1]).reshape(len(W) - 1, -1).numpy()
    return np.array([D[l] @ D[l + 1] / np.linalg.norm(D[l]) / np.linalg.norm(D[l + 1]) for l in range(len(D) - 1)])


def _mean_only(W):
    return np.array([adjacent_delta_correlation(W).mean()])


def _gate_up_only(model, layer, perm):
    new = permuted_mlp_weights(model, layer, perm)
    new[(layer, "down")] = layer_module(model, layer, "down").weight.detach().clone()
    return new


def _inverse(model, layer, perm):
    return permuted_mlp_weights(model, layer, torch.argsort(torch.as_tensor(perm)))


def _unchanged(model, layer, perm):
    return {(layer, m): layer_module(model, layer, m).weight.detach().clone() for m in ("gate", "up", "down")}


def _r2_slip(name: str):
    def wrong(y, y_hat):
        return _r2_values(y, y_hat)[name]
    wrong.__name__ = f"r2_{name}"
    return wrong


def _beta_slip(**options):
    def wrong(W, ell, lam):
        return _direct_beta(W, ell, lam, **options)
    wrong.__name__ = "beta_" + "_".join(f"{k}_{v}" for k, v in options.items())
    return wrong


_DELTA_MISTAKES = [
    (_layers_not_deltas, "you correlate the layers W_ℓ and W_ℓ+1; correlate their deltas Δ_ℓ = W[ℓ+1] − W[ℓ] instead"),
    (_lag_two, "you correlate Δ_ℓ with Δ_ℓ+2; the claim is about neighbouring deltas Δ_ℓ and Δ_ℓ+1"),
    (_cosine, "you compute a cosine; subtract each delta's mean first (Pearson correlation), which matters "
              "when layers have different offsets"),
]

WRONG_ANSWERS = {
    "check_r_squared": [(_r2_slip("uncentred"), "around the target's mean"),
                        (_r2_slip("correlation"), "squared correlation"), (_r2_slip("ratio"), "1 minus it"),
                        (_r2_slip("swapped"), "around the prediction"),
                        (_r2_slip("residual variance"), "variance of the residuals")],
    "check_held_out_beta": [(_beta_slip(gap=0), "hold layer ℓ out"), (_beta_slip(gap=1), "targets ℓ ± 1"),
                            (_beta_slip(penalty="all"), "intercept"), (_beta_slip(penalty="unscaled"), "λ·s̄")],
    "check_delta_correlation": [(_layers_not_deltas, "correlate their deltas"), (_lag_two, "Δ_ℓ+2"),
                                (_cosine, "you compute a cosine"), (_mean_only, "not their mean")],
    "check_permuted_mlp": [(_gate_up_only, "the model's output changed"), (_inverse, "inverse permutation"),
                           (_unchanged, "original ones")],
}
