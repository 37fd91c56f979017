"""H1 persistent homology of a cloud and the Wasserstein distance between persistence diagrams (chapter 4).

The topological statistic of a layer is the ``order``-Wasserstein distance (Euclidean ground
metric on (birth, death)) between the H1 diagrams of the Vietoris–Rips filtrations of
``(X, d)`` and ``(Y, d)``; ripser computes the diagrams, an exact assignment the distance.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.spatial.distance import cdist

from ..validate import AnatomyKitError, check_finite, check_positive
from .metrics import _square_pair

__all__ = ["h1_diagram", "diagram_distance", "topological_change"]


def h1_diagram(distances: Any) -> np.ndarray:
    """H1 persistence diagram (k, 2) of the Vietoris–Rips filtration of a distance matrix (chapter 4).

    ripser with ``distance_matrix=True, maxdim=1`` and no threshold, so every H1 point is finite.
    ripser works in float32: births and deaths carry relative errors of about 1e-7.
    """
    from ripser import ripser

    d = np.asarray(distances, dtype=np.float64)
    if d.ndim != 2 or d.shape[0] != d.shape[1]:
        raise AnatomyKitError(f"distances must be a square matrix, got shape {d.shape}")
    check_finite("distances", d)
    return np.asarray(ripser(d, distance_matrix=True, maxdim=1)["dgms"][1], dtype=np.float64).reshape(-1, 2)


def _finite_points(name: str, dgm: Any) -> np.ndarray:
    d = np.asarray(dgm, dtype=np.float64)
    if d.size == 0:
        return np.zeros((0, 2))
    if d.ndim != 2 or d.shape[1] < 2:
        raise AnatomyKitError(f"{name} must be a (k, 2) array of (birth, death) pairs, got shape {d.shape}")
    d = d[:, :2]
    keep = np.isfinite(d).all(axis=1)
    if not keep.all():
        warnings.warn(f"{name} has {int((~keep).sum())} points with non-finite coordinates; ignoring them "
                      "(as persim does)")
    return d[keep]


def diagram_distance(dgm1: Any, dgm2: Any, *, order: float = 2.0) -> float:
    """Exact ``order``-Wasserstein distance between persistence diagrams (k, 2) (chapter 4).

    Ground metric: Euclidean on (birth, death); a point may be matched to its orthogonal
    projection on the diagonal at cost ``(death − birth)/√2``. Solved exactly as one square
    assignment problem on the augmented cost matrix ``[[C, Δ₁], [Δ₂, 0]]`` of size
    ``(k₁+k₂)²`` (``C`` = point–point costs, ``Δ₁`` = each point of diagram 1 to the diagonal,
    repeated along the row, likewise ``Δ₂``; diagonal–diagonal costs 0) with
    ``scipy.optimize.linear_sum_assignment``; the result is ``(Σ cost^order)^{1/order}``.
    ``order=1`` equals ``persim.wasserstein``; points with non-finite coordinates are ignored
    with a warning, as there.
    """
    order = check_positive("order", order)
    if order < 1:
        raise AnatomyKitError(f"order={order} must be >= 1 (a Wasserstein order)")
    a, b = _finite_points("dgm1", dgm1), _finite_points("dgm2", dgm2)
    m, k = len(a), len(b)
    if m + k == 0:
        return 0.0
    to_diag_a = (a[:, 1] - a[:, 0]) / math.sqrt(2.0)
    to_diag_b = (b[:, 1] - b[:, 0]) / math.sqrt(2.0)
    cost = np.zeros((m + k, m + k))
    cost[:m, :k] = cdist(a, b) if m and k else 0.0
    cost[:m, k:] = np.abs(to_diag_a)[:, None]
    cost[m:, :k] = np.abs(to_diag_b)[None, :]
    cost = cost ** order
    rows, cols = linear_sum_assignment(cost)
    return float(cost[rows, cols].sum() ** (1.0 / order))


def topological_change(dx: Any, dy: Any, *, order: float = 2.0) -> float:
    """``W_order(Dgm₁(VR(dx)), Dgm₁(VR(dy)))`` for two distance matrices (chapter 4)."""
    dx, dy = _square_pair(dx, dy)
    return diagram_distance(h1_diagram(dx), h1_diagram(dy), order=order)
