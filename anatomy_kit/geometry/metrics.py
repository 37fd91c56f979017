"""Distances in three geometries, and the shift and Gromov–Wasserstein statistics of a layer.

Chapter 4 (*Geometric work*). Each FFN transports a cloud of ``n`` token states ``X`` to
``Y`` (matched rows, see :mod:`anatomy_kit.geometry.clouds`). Its *work* is measured by three
statistics, each in three geometries — nine profiles over depth. All definitions are our
reconstruction of paper 2 (INFERRED; see the book's appendix on sources): standard definitions chosen to match
the paper's names, not read in the paper.

Geometries (metric ``d`` on states):

- ``"raw"``: Euclidean ``‖a − b‖``.
- ``"spherical"``: angle between the unit vectors, ``arccos⟨â, b̂⟩ ∈ [0, π]`` — computed as
  ``2·arcsin(‖â − b̂‖/2)`` (the same number, exact near 0 where ``arccos`` loses digits).
- ``"hyperbolic"``: ``â`` placed in the Poincaré ball at the fixed radius ``r`` (``u = r·â``),
  ``d = arcosh(1 + 2‖u − v‖²/((1 − ‖u‖²)(1 − ‖v‖²)))``. At fixed radius this is a strictly
  increasing function of the angle θ: ``arcosh(1 + 8r² sin²(θ/2)/(1 − r²)²)`` — the paper's own
  caveat (no learned radial hierarchy). Default ``r = 0.9``: the metric is ≈ linear in θ below
  ``θ* ≈ (1 − r²)/r ≈ 0.21`` rad and logarithmic above, so the angles typical of LM states
  (0.5–1.5 rad) are compressed, a genuinely different weighting of near and far pairs from
  ``"spherical"``; antipodal points are ``4·artanh(r) ≈ 5.9`` apart. ``r → 0`` recovers a
  multiple of the chordal metric.

Statistics of one layer (``DX``, ``DY`` the n×n distance matrices of X and Y):

- ``"shift"``: ``(1/n) Σ_i d(x_i, y_i)`` (correspondence-preserving displacement).
- ``"gw"``: Gromov–Wasserstein distortion of the identity coupling,
  ``((1/n²) Σ_ij (DX_ij − DY_ij)²)^{1/2}`` (closed form; the token correspondence is known).
- ``"gw_optimal"``: the same distortion minimised over couplings with POT
  (``ot.gromov.gromov_wasserstein2``, uniform weights, square loss). The problem is not convex
  and POT's solver finds a *local* optimum that depends on where it starts, so it is run from
  several couplings (the identity, the uniform product coupling and a few random permutations;
  :func:`gw_local_optima`) and the best is kept: an upper bound on the true GW distance, ``≤ gw``.
  The uniform start matters: from it the first step matches points by eccentricity, which
  recovers a relabelled copy of a cloud (distance 0) where the identity start stays far off.
  Not in the default nine (≈0.3–0.6 s per start at n = 512).
- ``"topology"``: 2-Wasserstein distance between H1 persistence diagrams
  (:mod:`anatomy_kit.geometry.topology`).

GW conventions (``convention=``): ``"distortion"`` (default, above; equals the square root of
POT's objective), ``"pot"`` (POT's raw objective ``Σ (C1_ik − C2_jl)² T_ij T_kl``, the square of
``"distortion"``), ``"memoli"`` (Mémoli's ``GW₂ = ½·√objective``).
"""


from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from ..validate import AnatomyKitError, check_choice, check_finite, check_int, check_positive

__all__ = ["GEOMETRIES", "GW_CONVENTIONS", "DEFAULT_RADIUS", "hyperbolic_from_angle", "pairwise_distances",
           "matched_distances", "gw_identity", "gw_objective", "GW_STARTS", "gw_local_optima", "gw_optimal"]

GEOMETRIES = ("raw", "spherical", "hyperbolic")
GW_CONVENTIONS = ("distortion", "pot", "memoli")
GW_STARTS = ("identity", "uniform")   # plus n_random random permutation couplings
DEFAULT_RADIUS = 0.9


# ---------------------------------------------------------------------------------------------
# Geometries
# ---------------------------------------------------------------------------------------------

def _points(name: str, points: Any) -> np.ndarray:
    arr = np.asarray(points, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[0] < 1:
        raise AnatomyKitError(f"{name} must be a (n, d) array of points, got shape {arr.shape}")
    check_finite(name, arr)
    return arr


def _unit(name: str, points: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(points, axis=1, keepdims=True)
    zero = np.flatnonzero(norms[:, 0] == 0)
    if zero.size:
        raise AnatomyKitError(f"{name} has {zero.size} zero vector(s) (rows {zero[:5].tolist()}); "
                              "the spherical and hyperbolic geometries need non-zero states")
    return points / norms


def _radius(radius: Any) -> float:
    r = check_positive("radius", radius)
    if r >= 1:
        raise AnatomyKitError(f"radius={radius!r} must lie in (0, 1): the Poincaré ball is the open unit ball")
    return r


def _euclidean(p: np.ndarray) -> np.ndarray:
    """(n, n) Euclidean distances through the Gram matrix (BLAS; ~10× faster than ``cdist``).

    Exactly symmetric with an exactly zero diagonal; absolute error ≲ 1e-7·max‖p_i‖ on
    near-coincident pairs, far below anything the statistics resolve.
    """
    sq = np.einsum("ij,ij->i", p, p)
    d2 = sq[:, None] + sq[None, :] - 2.0 * (p @ p.T)
    d = np.sqrt(np.maximum(d2, 0.0))
    d = 0.5 * (d + d.T)
    np.fill_diagonal(d, 0.0)
    return d


def _angle_from_chord(chord: np.ndarray) -> np.ndarray:
    return 2.0 * np.arcsin(np.clip(chord / 2.0, 0.0, 1.0))


def hyperbolic_from_angle(theta: Any, radius: float = DEFAULT_RADIUS) -> np.ndarray:
    """Poincaré distance between two points at radius ``r`` separated by angle ``theta`` (chapter 4).

    ``arcosh(1 + 8 r² sin²(θ/2) / (1 − r²)²)``, evaluated as ``log1p(z + √(z(z+2)))``.
    Strictly increasing in θ ∈ [0, π]; ``theta`` may be any array shape.
    """
    r = _radius(radius)
    z = 8.0 * r * r * np.sin(np.asarray(theta, dtype=np.float64) / 2.0) ** 2 / (1.0 - r * r) ** 2
    return np.log1p(z + np.sqrt(z * (z + 2.0)))


def pairwise_distances(points: Any, geometry: str = "raw", *, radius: float = DEFAULT_RADIUS) -> np.ndarray:
    """(n, n) distance matrix of ``points`` (n, d) in ``geometry`` (chapter 4, *Geometric work*)."""
    check_choice("geometry", geometry, GEOMETRIES)
    p = _points("points", points)
    if geometry == "raw":
        return _euclidean(p)
    theta = _angle_from_chord(_euclidean(_unit("points", p)))
    return theta if geometry == "spherical" else hyperbolic_from_angle(theta, radius)


def matched_distances(a: Any, b: Any, geometry: str = "raw", *, radius: float = DEFAULT_RADIUS) -> np.ndarray:
    """(n,) distances ``d(a_i, b_i)`` between matched rows of ``a`` and ``b`` (n, d) (chapter 4)."""
    check_choice("geometry", geometry, GEOMETRIES)
    a, b = _points("a", a), _points("b", b)
    if a.shape != b.shape:
        raise AnatomyKitError(f"matched points need equal shapes, got {a.shape} and {b.shape}")
    if geometry == "raw":
        return np.linalg.norm(a - b, axis=1)
    theta = _angle_from_chord(np.linalg.norm(_unit("a", a) - _unit("b", b), axis=1))
    return theta if geometry == "spherical" else hyperbolic_from_angle(theta, radius)


# ---------------------------------------------------------------------------------------------
# Statistics
# ---------------------------------------------------------------------------------------------

def _square_pair(dx: Any, dy: Any) -> tuple[np.ndarray, np.ndarray]:
    dx, dy = np.asarray(dx, dtype=np.float64), np.asarray(dy, dtype=np.float64)
    if dx.ndim != 2 or dx.shape[0] != dx.shape[1] or dx.shape != dy.shape:
        raise AnatomyKitError(f"distance matrices must be square and of equal shape, got {dx.shape} and {dy.shape}")
    check_finite("dx", dx)
    check_finite("dy", dy)
    return dx, dy


def _gw_convert(objective: float, convention: str) -> float:
    check_choice("convention", convention, GW_CONVENTIONS)
    objective = max(float(objective), 0.0)
    return {"pot": objective, "distortion": math.sqrt(objective), "memoli": 0.5 * math.sqrt(objective)}[convention]


def gw_identity(dx: Any, dy: Any, *, convention: str = "distortion") -> float:
    """GW distortion of the identity coupling between distance matrices (n, n) (chapter 4).

    ``"distortion"``: ``((1/n²) Σ_ij (dx_ij − dy_ij)²)^{1/2}``; see the module docstring for
    ``"pot"`` (its square, POT's objective at ``T = I/n``) and ``"memoli"`` (half of it).
    """
    dx, dy = _square_pair(dx, dy)
    return _gw_convert(np.mean((dx - dy) ** 2), convention)


def gw_objective(dx: Any, dy: Any, coupling: Any, *, convention: str = "distortion") -> float:
    """GW distortion of a given coupling between distance matrices (n, n) (chapter 4, *Geometric work*).

    ``coupling`` T (n, n): non-negative, summing to 1. The objective is POT's square loss
    ``Σ_ijkl (dx_ik − dy_jl)² T_ij T_kl``, evaluated in O(n³) as
    ``pᵀ(dx∘dx)p + qᵀ(dy∘dy)q − 2⟨T, dx·T·dy⟩`` with the marginals ``p = T·1``, ``q = Tᵀ·1``;
    reported in ``convention`` (module docstring). ``T = I/n`` gives :func:`gw_identity`.
    """
    dx, dy = _square_pair(dx, dy)
    t = np.asarray(coupling, dtype=np.float64)
    if t.shape != dx.shape:
        raise AnatomyKitError(f"coupling must have the shape {dx.shape} of the distance matrices, got {t.shape}")
    check_finite("coupling", t)
    if (t < 0).any() or not math.isclose(float(t.sum()), 1.0, rel_tol=1e-9 * t.size, abs_tol=0.0):
        raise AnatomyKitError(f"coupling must be non-negative and sum to 1, got sum {float(t.sum())!r} "
                              f"and minimum {float(t.min())!r}")
    p, q = t.sum(axis=1), t.sum(axis=0)
    objective = p @ (dx * dx) @ p + q @ (dy * dy) @ q - 2.0 * float(np.sum(t * (dx @ t @ dy.T)))
    return _gw_convert(objective, convention)


def _start_couplings(n: int, starts: Any, n_random: int, seed: int) -> dict[str, np.ndarray | None]:
    """Named starting couplings (n, n) for POT; ``None`` is POT's default, the uniform product."""
    out: dict[str, np.ndarray | None] = {}
    for name in starts:
        check_choice("start", name, GW_STARTS)
        out[name] = np.eye(n) / n if name == "identity" else None
    rng = np.random.default_rng(seed)
    for k in range(check_int("n_random", n_random, minimum=0)):
        out[f"permutation {k + 1}"] = np.eye(n)[rng.permutation(n)] / n
    if not out:
        raise AnatomyKitError("no starting coupling: give at least one of starts or n_random > 0")
    return out


def gw_local_optima(dx: Any, dy: Any, *, starts: Any = GW_STARTS, n_random: int = 3, seed: int = 0,
                    convention: str = "distortion", max_iter: int = 100, tol: float = 1e-9) -> dict[str, float]:
    """The GW distortion POT reaches from each starting coupling: ``{start: value}`` (chapter 4).

    ``ot.gromov.gromov_wasserstein2`` (uniform weights, square loss) is a conditional-gradient
    solver on a non-convex problem: each start ends in a local optimum, an *upper bound* on the
    GW distance. ``starts`` ⊆ :data:`GW_STARTS` (``"identity"`` = ``I/n``, ``"uniform"`` = the
    product coupling ``1/n²``), plus ``n_random`` random permutation couplings drawn with ``seed``.
    """
    import ot

    dx, dy = _square_pair(dx, dy)
    check_int("max_iter", max_iter, minimum=1)
    check_choice("convention", convention, GW_CONVENTIONS)
    n = dx.shape[0]
    w = np.full(n, 1.0 / n)
    out = {}
    for name, g0 in _start_couplings(n, starts, n_random, seed).items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            obj = float(ot.gromov.gromov_wasserstein2(dx, dy, w, w, loss_fun="square_loss", G0=g0,
                                                      max_iter=max_iter, tol_rel=tol, tol_abs=tol))
        out[name] = _gw_convert(obj, convention)
    return out


def gw_optimal(dx: Any, dy: Any, *, convention: str = "distortion", starts: Any = GW_STARTS, n_random: int = 3,
               seed: int = 0, max_iter: int = 100, tol: float = 1e-9) -> float:
    """The best GW distortion found from several starts (chapter 4, *Geometric work*).

    The smallest of :func:`gw_local_optima` and of the identity coupling's own value
    (:func:`gw_identity`): a local optimum, so an upper bound on the true GW distance, never a
    proof of it. A relabelled copy of a cloud gives 0 (the uniform start finds the relabelling).
    """
    found = gw_local_optima(dx, dy, starts=starts, n_random=n_random, seed=seed, convention=convention,
                            max_iter=max_iter, tol=tol)
    return min(min(found.values()), gw_identity(dx, dy, convention=convention))
