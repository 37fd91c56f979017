"""Self-checks of chapter 6 (*Growing the residual stream*).

``check_rotation_matrix``: the reader builds the dense D × D rotation R of the SRIO plane; the check tests
it on the plane (R u = c u + s v, R v = −s u + c v, with ε the sine) and off it (R x = x), and compares
with :func:`anatomy_kit.width_growth.srio.srio_rotation`.
``check_rotate_rows``: the reader applies the SRIO rotation to the rows of a matrix in O(D), without
forming the D × D matrix; the check compares it with :meth:`anatomy_kit.width_growth.srio.srio_operator`'s
``rows`` and names the usual slips (the inverse rotation, cosine and sine swapped, a cosine that is
not √(1 − ε²), a missing term, block means instead of projections on u and v).
``check_entropy_rank``: the reader writes the entropy effective rank of a list of singular values;
the check compares it with :func:`anatomy_kit.width_growth.diagnostics.entropy_rank`.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import torch

from .core import check, generic

__all__ = ["check_rotation_matrix", "check_rotate_rows", "check_entropy_rank", "WRONG_ANSWERS"]

#: (d, k, ε): a generic angle, a large one, and ε* = √(k/D).
_ROTATIONS = [(4, 2, 0.3), (6, 3, 0.8), (5, 5, math.sqrt(0.5))]
_TOL = 1e-8      # float64 answers of a few dozen operations on O(1) numbers: ~1e-15; 1e-8 tells slips apart


def _units(d: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    u = torch.cat([torch.ones(d), torch.zeros(k)]).double() / math.sqrt(d)
    v = torch.cat([torch.zeros(d), torch.ones(k)]).double() / math.sqrt(k)
    return u, v


def _rows_with(x: np.ndarray, d: int, c: float, s: float, scale_a: float, scale_b: float) -> np.ndarray:
    """x + ((c−1)a − s b) u + (s a + (c−1) b) v for every row, with a = scale_a·(old block sum), b likewise."""
    D = x.shape[-1]
    u, v = (t.numpy() for t in _units(d, D - d))
    a = x[:, :d].sum(1, keepdims=True) * scale_a
    b = x[:, d:].sum(1, keepdims=True) * scale_b
    return x + ((c - 1) * a - s * b) * u + (s * a + (c - 1) * b) * v


def _diagnose(R: torch.Tensor, d: int, k: int, eps: float) -> str:
    """Name the slip from the matrix R the answer implies (its action on the unit vectors)."""
    D, s, c = d + k, eps, math.sqrt(1 - eps * eps)
    u, v = _units(d, k)
    x = torch.randn(3, D, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    x = x - (x @ u)[:, None] * u - (x @ v)[:, None] * v
    if (x @ R.T - x).abs().max() > _TOL:
        return "R must leave every vector orthogonal to u and v unchanged; add terms along u and v only"
    Ru, Rv = R @ u, R @ v
    if (Ru - (c * u - s * v)).abs().max() < _TOL:
        return ("that is the inverse rotation Rᵀ (the sine's sign is flipped): R turns u towards v, "
                "R u = c·u + s·v")
    if (Ru - (s * u + c * v)).abs().max() < _TOL:
        return "cosine and sine are swapped: s = ε is the sine, c = √(1 − ε²) the cosine, so ε = 0 is the identity"
    if (R.T @ R - torch.eye(D, dtype=torch.float64)).abs().max() > _TOL:
        return "your R is not orthogonal: use c = √(1 − ε²) and add (c − 1) times the projections on both u and v"
    if (Ru - (c * u + s * v)).abs().max() > _TOL:
        return "R u should be c·u + s·v with s = ε and c = √(1 − ε²): R turns the old all-ones direction towards the new"
    return "R v should be −s·u + c·v: the 2 × 2 block on (u, v) is [[c, −s], [s, c]]"


def _dense(d: int, k: int, eps: float, *, sign: float = 1.0, unit: bool = True, angle: bool = False,
           vv: bool = True, swap: bool = False) -> torch.Tensor:
    """R = I + (c − 1)(uuᵀ + vvᵀ) + s(vuᵀ − uvᵀ) and its slips: ``sign`` −1 turns the other way, ``unit``
    False uses the all-ones vectors unnormalised, ``angle`` takes ε as the angle, ``vv`` False drops vvᵀ,
    ``swap`` puts the cosine where the sine goes and the sine where the cosine goes."""
    u, v = _units(d, k)
    if not unit:
        u, v = u * math.sqrt(d), v * math.sqrt(k)
    c, s_ = (math.cos(eps), math.sin(eps)) if angle else (math.sqrt(1 - eps * eps), eps)
    if swap:
        c, s_ = s_, c
    return torch.eye(d + k, dtype=torch.float64) + (c - 1) * (torch.outer(u, u) + (torch.outer(v, v) if vv else 0)) \
        + sign * s_ * (torch.outer(v, u) - torch.outer(u, v))


_MATRIX_SLIPS = [
    (dict(sign=-1.0), "R u must turn towards v, R u = c u + s v; yours turns the other way (the sign of s)"),
    (dict(unit=False), "u and v are unit vectors: divide the all-ones blocks by √d and √k"),
    (dict(angle=True), "ε is the sine of the angle, s = ε and c = √(1 − ε²), not cos ε and sin ε"),
    (dict(vv=False), "R fixes the plane's length only with (c − 1)(uuᵀ + vvᵀ): yours leaves out vvᵀ"),
    (dict(swap=True), "cosine and sine are swapped: s = ε is the sine and c = √(1 − ε²) the cosine, so that "
                      "ε = 0 gives the identity"),
]


@check("check_rotation_matrix", hint="R moves only the plane of u and v: it turns u towards v by the angle whose "
                                      "sine is ε and leaves every direction orthogonal to both alone, so build it "
                                      "from the identity and outer products of u and v")
def check_rotation_matrix(fn: Callable) -> str | None:
    """``fn(d, k, eps)`` returns the dense (D, D) rotation R = I + (c − 1)(uuᵀ + vvᵀ) + s(vuᵀ − uvᵀ), D = d + k,
    u and v the unit all-ones vectors of the old and the new block, s = ε, c = √(1 − ε²)."""
    from ..width_growth.srio import srio_rotation

    for d, k, eps in _ROTATIONS:
        R = torch.as_tensor(np.asarray(fn(d, k, eps), dtype=np.float64))
        if R.shape != (d + k, d + k):
            return f"for d = {d}, k = {k} return a ({d + k}, {d + k}) matrix; yours has shape {tuple(R.shape)}"
        u, v = _units(d, k)
        c, s_ = math.sqrt(1 - eps * eps), eps
        off_plane = torch.zeros(d + k, dtype=torch.float64)
        off_plane[0], off_plane[1] = 1.0, -1.0                    # orthogonal to u and v: R must keep it
        right = (torch.allclose(R @ u, c * u + s_ * v, atol=_TOL) and torch.allclose(R @ v, -s_ * u + c * v, atol=_TOL)
                 and torch.allclose(R @ off_plane, off_plane, atol=_TOL)
                 and torch.allclose(R, srio_rotation(d, k, eps), atol=_TOL))
        if right:
            continue
        for options, message in _MATRIX_SLIPS:
            if torch.allclose(R, _dense(d, k, eps, **options), atol=_TOL):
                return message
        return generic(f"for d = {d}, k = {k}, ε = {eps:.3g} your R is not the kit's: check R u = c u + s v, "
                       "R v = −s u + c v and R x = x off the plane")
    return None


@check("check_rotate_rows")
def check_rotate_rows(rotate_fn: Callable) -> str | None:
    """``rotate_rows(x, d, eps)``: every row of x (n, D) rotated by R, i.e. x Rᵀ, using a = uᵀx and
    b = vᵀx (two block sums) instead of a D × D matrix."""
    from ..width_growth.srio import srio_operator

    gen = torch.Generator().manual_seed(1)
    for d, k, eps in _ROTATIONS:
        D, c = d + k, math.sqrt(1 - eps * eps)
        x = torch.randn(4, D, dtype=torch.float64, generator=gen)
        ref = srio_operator(d, k, eps).rows(x)
        got = torch.as_tensor(np.asarray(rotate_fn(x.numpy().copy(), d, eps), dtype=np.float64))
        if got.shape != ref.shape:
            return f"for x of shape {tuple(x.shape)} return an array of the same shape, not {tuple(got.shape)}"
        if (got - ref).abs().max() < _TOL:
            continue
        if np.abs(got.numpy() - _rows_with(x.numpy(), d, c, eps, 1 / d, 1 / k)).max() < _TOL:
            return "a and b are the projections uᵀx = (block sum)/√d and vᵀx = (block sum)/√k, not block means"
        implied = torch.as_tensor(np.asarray(rotate_fn(np.eye(D), d, eps), dtype=np.float64)).T
        if implied.shape != (D, D) or (implied @ x.T - got.T).abs().max() > _TOL:
            return generic(f"for d={d}, ε={eps:.3g} your rows differ from the kit's by {(got - ref).abs().max():.2g}, "
                           "and not by a linear map")
        return _diagnose(implied, d, k, eps)
    return None


_SPECTRA = [np.array([3.0, 3.0, 3.0, 3.0]), np.array([5.0, 1.0, 0.2, 0.0]), np.array([2.0, 1.5, 1.0, 0.5, 1e-9])]


@check("check_entropy_rank", hint="make the singular values a probability distribution, take its entropy, and "
                                   "ask how many equally likely values would have the same entropy")
def check_entropy_rank(rank_fn: Callable) -> str | None:
    """``entropy_rank(sigma)`` (1-D array of singular values) → exp(−Σ p log p), p = σ / Σσ."""
    from ..width_growth.diagnostics import entropy_rank

    for sigma in _SPECTRA:
        ref = entropy_rank(sigma)
        got = float(rank_fn(sigma.copy()))
        if math.isclose(got, ref, rel_tol=1e-6):
            continue
        p = sigma[sigma > 0] / sigma.sum()
        if math.isclose(got, -(p * np.log(p)).sum(), rel_tol=1e-6):
            return "that is the entropy itself; the effective rank is its exponential, exp(H)"
        if math.isclose(got, math.exp(-(p * np.log2(p)).sum()), rel_tol=1e-6):
            return ("you took the entropy in bits (log₂) but raised e to it: use the natural log with exp, "
                    "or raise 2 to the entropy in bits")
        q = sigma[sigma > 0] ** 2 / (sigma ** 2).sum()
        if math.isclose(got, math.exp(-(q * np.log(q)).sum()), rel_tol=1e-6):
            return "normalise the singular values themselves, p = σ / Σσ, not their squares"
        if math.isclose(got, float((sigma > 0).sum()), rel_tol=1e-9):
            return "counting non-zero singular values is the algebraic rank; weigh them by p = σ / Σσ instead"
        if math.isclose(got, float(sigma.size), rel_tol=1e-9):
            return "the length of σ is the full rank; the effective rank weighs each σ by p = σ / Σσ"
        return generic(f"for σ = {sigma.tolist()} your rank is {got:.4g}, the kit's is {ref:.4g}")
    return None


def _rows(c_of: Callable[[float], float], s_sign: float = 1.0, swap: bool = False, vv: bool = True) -> Callable:
    """A wrong ``rotate_rows``: the formula with one slip."""
    def rotate_rows(x, d, eps):
        x = np.asarray(x, dtype=float)
        D = x.shape[-1]
        c, s = c_of(eps), s_sign * eps
        if swap:
            c, s = s, c
        u, v = (t.numpy() for t in _units(d, D - d))
        a, b = (x @ u)[:, None], (x @ v)[:, None]
        return x + ((c - 1) * a - s * b) * u + (s * a + ((c - 1) * b if vv else 0)) * v
    return rotate_rows


def _cosine(eps: float) -> float:
    return math.sqrt(1 - eps * eps)


def _block_means(x, d, eps):
    x = np.asarray(x, dtype=float)
    return _rows_with(x, d, _cosine(eps), eps, 1 / d, 1 / (x.shape[-1] - d))


def _entropy_only(sigma):
    p = sigma[sigma > 0] / sigma.sum()
    return float(-(p * np.log(p)).sum())


def _bits(sigma):
    p = sigma[sigma > 0] / sigma.sum()
    return float(np.exp(-(p * np.log2(p)).sum()))


def _squared(sigma):
    q = sigma[sigma > 0] ** 2 / (sigma ** 2).sum()
    return float(np.exp(-(q * np.log(q)).sum()))


#: Typical mistakes each check must name (tests/test_exercises.py runs them): (answer, words).
def _matrix_slip(**options) -> Callable:
    def wrong(d, k, eps):
        return _dense(d, k, eps, **options)
    wrong.__name__ = "rotation_" + "_".join(options)
    return wrong


WRONG_ANSWERS = {
    "check_rotation_matrix": [(_matrix_slip(sign=-1.0), "other way"), (_matrix_slip(unit=False), "unit vectors"),
                              (_matrix_slip(angle=True), "sine of the angle"), (_matrix_slip(vv=False), "vvᵀ"),
                              (_matrix_slip(swap=True), "swapped")],
    "check_rotate_rows": [
        (_rows(_cosine, s_sign=-1.0), "inverse rotation"),
        (_rows(_cosine, swap=True), "swapped"),
        (_rows(lambda e: 1 - e), "not orthogonal"),
        (_rows(_cosine, vv=False), "not orthogonal"),
        (_block_means, "not block means"),
        (lambda x, d, eps: np.asarray(x), "R u should be"),
        (lambda x, d, eps: np.asarray(x)[:, :d], "same shape"),
    ],
    "check_entropy_rank": [
        (_entropy_only, "exponential"),
        (_bits, "in bits"),
        (_squared, "not their squares"),
        (lambda s: float((s > 0).sum()), "algebraic rank"),
        (lambda s: float(len(s)), "full rank"),
    ],
}
