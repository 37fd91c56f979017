"""Self-checks for chapter 2 (*Anatomy II: weights, manipulation, recovery*).

- :func:`check_delta_correlation` – the reader's adjacent-delta correlation r_ℓ of stacked weights;
- :func:`check_permuted_mlp` – the reader's reordering of one MLP's hidden units (same function,
  other weights: why element-wise regressions across depth find nothing).

Each check builds its own inputs and compares with the kit
(:func:`anatomy_kit.anatomy.deltas.adjacent_delta_correlation`,
:func:`anatomy_kit.anatomy.residual_basis.permuted_mlp_weights`).
"""

from __future__ import annotations

import numpy as np
import torch

from ..anatomy.deltas import adjacent_delta_correlation
from ..anatomy.residual_basis import permuted_mlp_weights
from ..hf.layers import layer_module
from ..hf.surgery import substituted
from .ch01 import tiny_llama
from .core import check, generic

__all__ = ["check_delta_correlation", "check_permuted_mlp", "WRONG_ANSWERS"]


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


_DELTA_MISTAKES = [
    (_layers_not_deltas, "you correlate the layers W_ℓ and W_ℓ+1; correlate their deltas Δ_ℓ = W[ℓ+1] − W[ℓ] instead"),
    (_lag_two, "you correlate Δ_ℓ with Δ_ℓ+2; the claim is about neighbouring deltas Δ_ℓ and Δ_ℓ+1"),
    (_cosine, "you compute a cosine; subtract each delta's mean first (Pearson correlation), which matters "
              "when layers have different offsets"),
]

WRONG_ANSWERS = {
    "check_delta_correlation": [(_layers_not_deltas, "correlate their deltas"), (_lag_two, "Δ_ℓ+2"),
                                (_cosine, "you compute a cosine"), (_mean_only, "not their mean")],
    "check_permuted_mlp": [(_gate_up_only, "the model's output changed"), (_inverse, "inverse permutation"),
                           (_unchanged, "original ones")],
}
