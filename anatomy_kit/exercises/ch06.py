"""Self-checks of chapter 6 (*Growing the residual stream*).

``check_srio_rotation``: the reader writes the dense SRIO rotation ``R(d, k, ε)`` (D × D); the check
compares it with :func:`anatomy_kit.growth.srio.srio_rotation` and names the usual slips (the sign of
the sine, cosine and sine swapped, a cosine that is not √(1 − ε²), a missing term).
``check_entropy_rank``: the reader writes the entropy effective rank of a list of singular values;
the check compares it with :func:`anatomy_kit.growth.diagnostics.entropy_rank`.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import torch

from .core import check

__all__ = ["check_srio_rotation", "check_entropy_rank", "WRONG_ANSWERS"]

#: (d, k, ε): a generic angle, a large one, and ε* = √(k/D).
_ROTATIONS = [(4, 2, 0.3), (6, 3, 0.8), (5, 5, math.sqrt(0.5))]


def _units(d: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    u = torch.cat([torch.ones(d), torch.zeros(k)]).double() / math.sqrt(d)
    v = torch.cat([torch.zeros(d), torch.ones(k)]).double() / math.sqrt(k)
    return u, v


def _diagnose_rotation(R: torch.Tensor, ref: torch.Tensor, d: int, k: int, eps: float) -> str:
    D, s, c = d + k, eps, math.sqrt(1 - eps * eps)
    u, v = _units(d, k)
    x = torch.randn(3, D, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    x = x - (x @ u)[:, None] * u - (x @ v)[:, None] * v
    if (x @ R.T - x).abs().max() > 1e-8:
        return "R must leave every vector orthogonal to u and v unchanged; build it as I plus terms in u and v only"
    Ru, Rv = R @ u, R @ v
    if (Ru - (c * u - s * v)).abs().max() < 1e-8:
        return "the sine has the wrong sign: R should turn u towards v, R u = c·u + s·v (the term is s(v uᵀ − u vᵀ))"
    if (Ru - (s * u + c * v)).abs().max() < 1e-8:
        return "cosine and sine are swapped: s = ε is the sine, c = √(1 − ε²) the cosine, so ε = 0 is the identity"
    if (R.T @ R - torch.eye(D, dtype=torch.float64)).abs().max() > 1e-8:
        return (f"your R is not orthogonal (max |RᵀR − I| = {(R.T @ R - torch.eye(D, dtype=torch.float64)).abs().max():.2g}); "
                "use c = √(1 − ε²) and subtract (1 − c) along both u and v")
    if (Ru - (c * u + s * v)).abs().max() > 1e-8:
        return "R u should be c·u + s·v with s = ε and c = √(1 − ε²): R turns the old all-ones direction towards the new"
    if (Rv - (-s * u + c * v)).abs().max() > 1e-8:
        return "R v should be −s·u + c·v: the 2 × 2 block on (u, v) is [[c, −s], [s, c]]"
    return f"for d={d}, k={k}, ε={eps:.3g} your R differs from the kit's by {(R - ref).abs().max():.2g}"


@check("check_srio_rotation")
def check_srio_rotation(rotation_fn: Callable) -> str | None:
    """``rotation_fn(d, k, eps)`` → the (d+k, d+k) SRIO rotation (any float dtype; tensor or array)."""
    from ..growth.srio import srio_rotation

    for d, k, eps in _ROTATIONS:
        ref = srio_rotation(d, k, eps)
        R = torch.as_tensor(np.asarray(rotation_fn(d, k, eps), dtype=np.float64))
        if R.shape != ref.shape:
            return f"for d={d}, k={k} return a ({d + k}, {d + k}) matrix, not one of shape {tuple(R.shape)}"
        if (R - ref).abs().max() < 1e-8:
            continue
        return _diagnose_rotation(R, ref, d, k, eps)
    return None


_SPECTRA = [np.array([3.0, 3.0, 3.0, 3.0]), np.array([5.0, 1.0, 0.2, 0.0]), np.array([2.0, 1.5, 1.0, 0.5, 1e-9])]


@check("check_entropy_rank")
def check_entropy_rank(rank_fn: Callable) -> str | None:
    """``rank_fn(sigma)`` (1-D array of singular values) → exp(−Σ p log p), p = σ / Σσ."""
    from ..growth.diagnostics import entropy_rank

    for sigma in _SPECTRA:
        ref = entropy_rank(sigma)
        got = float(rank_fn(sigma.copy()))
        if math.isclose(got, ref, rel_tol=1e-6):
            continue
        p = sigma[sigma > 0] / sigma.sum()
        if math.isclose(got, -(p * np.log(p)).sum(), rel_tol=1e-6):
            return "that is the entropy itself; the effective rank is its exponential, exp(H)"
        q = sigma[sigma > 0] ** 2 / (sigma ** 2).sum()
        if math.isclose(got, math.exp(-(q * np.log(q)).sum()), rel_tol=1e-6):
            return "normalise the singular values themselves, p = σ / Σσ, not their squares"
        if math.isclose(got, float((sigma > 0).sum()), rel_tol=1e-9):
            return "counting non-zero singular values is the algebraic rank; weigh them by p = σ / Σσ instead"
        return f"for σ = {sigma.tolist()} your rank is {got:.4g}, the kit's is {ref:.4g}"
    return None


def _units_np(d, k):
    u, v = _units(d, k)
    return u.numpy(), v.numpy()


def _rotation(d, k, c, s, vv=True):
    u, v = _units_np(d, k)
    R = np.eye(d + k) + (c - 1) * np.outer(u, u) + s * (np.outer(v, u) - np.outer(u, v))
    return R + ((c - 1) * np.outer(v, v) if vv else 0)


def _sign_flipped(d, k, eps):
    return _rotation(d, k, math.sqrt(1 - eps * eps), -eps)


def _swapped(d, k, eps):
    return _rotation(d, k, eps, math.sqrt(1 - eps * eps))


def _linear_cosine(d, k, eps):
    return _rotation(d, k, 1 - eps, eps)


def _no_vv(d, k, eps):
    return _rotation(d, k, math.sqrt(1 - eps * eps), eps, vv=False)


def _coordinate_givens(d, k, eps):
    """A rotation of coordinates 0 and d instead of the all-ones directions."""
    R = np.eye(d + k)
    c, s = math.sqrt(1 - eps * eps), eps
    R[0, 0], R[d, d], R[d, 0], R[0, d] = c, c, s, -s
    return R


def _entropy_only(sigma):
    p = sigma[sigma > 0] / sigma.sum()
    return float(-(p * np.log(p)).sum())


def _squared(sigma):
    q = sigma[sigma > 0] ** 2 / (sigma ** 2).sum()
    return float(np.exp(-(q * np.log(q)).sum()))


#: Typical mistakes each check must reject (tests/test_exercises.py runs them).
WRONG_ANSWERS = {
    "check_srio_rotation": [_sign_flipped, _swapped, _linear_cosine, _no_vv, _coordinate_givens,
                            lambda d, k, eps: np.eye(d + k), lambda d, k, eps: np.eye(d + k + 1)],
    "check_entropy_rank": [_entropy_only, _squared, lambda s: float((s > 0).sum()), lambda s: float(len(s))],
}
