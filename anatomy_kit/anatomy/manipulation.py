"""Weight manipulation strategies (paper 1, Wietrzykowski 2026).

Chapter 2 (*Anatomy II: weights, manipulation, recovery*) uses this module.

**Manipulation.** Each strategy rewrites the linear weights of one decoder layer ℓ (by
default all seven: q, k, v, o, gate, up, down; the RMSNorm gains are left alone). With W the
layer's own matrix and N the matching matrix of a neighbour layer (``neighbour="previous"``:
ℓ−1, or ℓ+1 for layer 0; ``"next"``: ℓ+1, or ℓ−1 for the last layer; ``"mean"``:
½(W_{ℓ−1} + W_{ℓ+1}), one neighbour at the edges):

=================  ==========================================================================
``zero``           W ← 0. With o and down zero both residual branches vanish: the block is the identity.
``clone``          W ← N.
``blend``          W ← β W + (1 − β) N                        (β = share of the layer's own weights)
``lowrank-blend``  W ← W + (1 − β) [N − W]_r                  ([·]_r: best rank-r approximation, :func:`low_rank`)
``scale``          W ← α W                                    (α > 0)
=================  ==========================================================================

``lowrank-blend`` moves W towards N only along the top-r singular directions of their
difference: the change has rank ≤ r, and with r = full rank it equals ``blend``. The paper
names the five strategies; their exact definitions are INFERRED (ours; see the book's appendix on sources). Note that
``scale`` multiplies every matrix of the block, so the attention logits scale by α² and a
SwiGLU MLP's output by about α³.

Neighbours come from :func:`anatomy_kit.hf.surgery.neighbour_weight`; the weights are put in
place and restored by :func:`anatomy_kit.hf.surgery.substituted`.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Sequence

import torch
from torch import nn

from ..hf.layers import MODULE_PATHS, decoder_layers, layer_module
from ..hf.surgery import NEIGHBOURS, neighbour_weight, substituted
from ..validate import AnatomyKitError, check_choice, check_int, check_layer_index, check_positive
from .predictability import MODULES

__all__ = ["STRATEGIES", "NEIGHBOURS", "low_rank", "manipulated_weights", "manipulated"]

STRATEGIES = ("zero", "clone", "blend", "lowrank-blend", "scale")


def _check_modules(modules: Sequence[str]) -> tuple[str, ...]:
    if isinstance(modules, str) or not modules:
        raise AnatomyKitError(f"modules={modules!r} must be a non-empty list of names from {list(MODULE_PATHS)}")
    for m in modules:
        check_choice("module", m, MODULE_PATHS)
    return tuple(modules)


def low_rank(M: torch.Tensor, rank: int) -> torch.Tensor:
    """Best rank-``rank`` approximation of a matrix (out, in) (Eckart–Young), in float64 (chapter 2).

    The truncated SVD ``U_r S_r V_rᵀ`` equals ``M V_r V_rᵀ``, with ``V_r`` the top ``rank`` eigenvectors
    of the smaller Gram matrix ``MᵀM`` (or ``U_r U_rᵀ M`` from ``MMᵀ``): the right (left) singular
    vectors, found by one symmetric eigendecomposition of a min(out, in)-square matrix, about 2.5×
    less work on the CPU than a full SVD of a 1536 × 576 matrix. The Gram matrix squares the
    condition number, which costs accuracy only in the *small* singular directions, not in the top
    ones kept here (float64: agrees with the SVD to ~1e-15 of ‖M‖).
    """
    if not isinstance(M, torch.Tensor) or M.dim() != 2:
        raise AnatomyKitError(f"low_rank needs a 2-D matrix, got {getattr(M, 'shape', type(M).__name__)!r}")
    check_int("rank", rank, minimum=1, maximum=min(M.shape))
    X = M.double()
    wide = X.shape[0] < X.shape[1]                    # the Gram matrix of the smaller side
    _, vectors = torch.linalg.eigh(X @ X.T if wide else X.T @ X)   # eigenvalues ascending
    top = vectors[:, -rank:]
    return (top @ (top.T @ X) if wide else (X @ top) @ top.T).to(M.dtype)


def manipulated_weights(model: nn.Module, layer: int, strategy: str, *, modules: Sequence[str] = MODULES,
                        neighbour: str = "previous", beta: float = 0.5, rank: int = 8,
                        alpha: float = 0.9) -> dict[tuple[int, str], torch.Tensor]:
    """The new weights {(layer, module): tensor} that ``strategy`` gives ``layer`` (pure; chapter 2).

    ``beta`` ∈ [0, 1] (blend, lowrank-blend), ``rank`` ≥ 1 (lowrank-blend), ``alpha`` > 0 (scale).
    """
    check_choice("strategy", strategy, STRATEGIES)
    modules = _check_modules(modules)
    check_layer_index("layer", layer, len(decoder_layers(model)))
    check_choice("neighbour", neighbour, NEIGHBOURS)
    if strategy == "scale":
        check_positive("alpha", alpha)
    if strategy in ("blend", "lowrank-blend"):
        try:
            b = float(beta)
        except (TypeError, ValueError):
            raise AnatomyKitError(f"beta={beta!r} must be a number in [0, 1]") from None
        if not 0 <= b <= 1:
            raise AnatomyKitError(f"beta={beta!r} must lie in [0, 1] (the share of the layer's own weights)")
    out = {}
    for m in modules:
        W = layer_module(model, layer, m).weight.detach()
        if strategy == "zero":
            new = torch.zeros_like(W)
        elif strategy == "scale":
            new = float(alpha) * W
        else:
            N = neighbour_weight(model, layer, m, neighbour)
            if strategy == "clone":
                new = N.clone()
            elif strategy == "blend":
                new = float(beta) * W + (1 - float(beta)) * N
            else:
                if isinstance(rank, bool) or not isinstance(rank, int) or not 1 <= rank <= min(W.shape):
                    raise AnatomyKitError(f"rank={rank!r} must be an integer in 1..{min(W.shape)} "
                                          f"for module {m!r} of shape {tuple(W.shape)}")
                new = W + (1 - float(beta)) * low_rank(N - W, rank)
        out[(layer, m)] = new
    return out


@contextmanager
def manipulated(model: nn.Module, layers: int | Sequence[int], strategy: str, **kwargs) -> Iterator[None]:
    """Context manager: ``strategy`` applied to every layer in ``layers``; restored exactly afterwards.

    All new weights are computed from the *original* model before any is written, so
    manipulating neighbouring layers together never reads an already-manipulated neighbour.
    Keyword arguments as in :func:`manipulated_weights` (chapter 2).
    """
    layers = [layers] if isinstance(layers, int) else list(layers)
    if not layers:
        raise AnatomyKitError("layers is empty; give at least one layer index")
    new: dict[tuple[int, str], torch.Tensor] = {}
    for l in layers:
        new.update(manipulated_weights(model, l, strategy, **kwargs))
    with substituted(model, new):
        yield
