"""Self-checks for chapter 4 (*Geometric work*): the shift statistic and the identity-coupling GW distortion."""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from .core import check

__all__ = ["check_shift", "check_gw_identity", "WRONG_ANSWERS"]


def _clouds() -> tuple[np.ndarray, np.ndarray]:
    """A cloud (24, 5) lifted off the origin, and its image under a rotation and a scaling by 2.5."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((24, 5)) + 3.0
    q, _ = np.linalg.qr(rng.standard_normal((5, 5)))
    return x, 2.5 * x @ q


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)


@check("check_shift")
def check_shift(shift: Callable) -> str | None:
    """``shift(x, y, geometry)`` (x, y: (n, d); geometry ``"raw"`` or ``"spherical"``) → the mean matched distance."""
    from ..geometry import layer_work, pairwise_distances

    x, y = _clouds()
    for g in ("raw", "spherical"):
        ref = layer_work(x, y, statistics=["shift"], geometries=[g])[("shift", g)]
        got = float(shift(x.copy(), y.copy(), g))
        if _close(got, ref):
            continue
        ux, uy = x / np.linalg.norm(x, axis=1, keepdims=True), y / np.linalg.norm(y, axis=1, keepdims=True)
        raw = np.linalg.norm(x - y, axis=1)
        both = np.vstack([x, y]) if g == "raw" else np.vstack([ux, uy])
        if _close(got, ref * len(x)):
            return f"in the {g} geometry you summed the distances; the shift is their mean over the n tokens"
        if _close(got, float(pairwise_distances(both, g)[: len(x), len(x):].mean())):
            return "you averaged d(x_i, y_j) over all pairs; the shift pairs each token with itself, d(x_i, y_i)"
        if g == "spherical" and _close(got, float(raw.mean())):
            return "the spherical shift must ignore scale: normalise each state to unit length first"
        if g == "spherical" and _close(got, float(np.linalg.norm(ux - uy, axis=1).mean())):
            return "you returned the chord ‖x̂ − ŷ‖; the spherical distance is the angle arccos⟨x̂, ŷ⟩ in radians"
        if g == "spherical" and _close(got, math.degrees(ref)):
            return "your angles are in degrees; the spherical distance is measured in radians"
        return f"your {g} shift is {got:.6g}, the kit's is {ref:.6g} (the mean over tokens of d(x_i, y_i))"
    return None


@check("check_gw_identity")
def check_gw_identity(gw: Callable) -> str | None:
    """``gw(dx, dy)`` (two (n, n) distance matrices) → ``((1/n²) Σ_ij (dx_ij − dy_ij)²)^{1/2}``."""
    from ..geometry import gw_identity, pairwise_distances

    x, y = _clouds()
    y = y + np.random.default_rng(5).standard_normal(y.shape)   # a map that distorts, not only rescales
    dx, dy = pairwise_distances(x), pairwise_distances(y)
    ref, got = gw_identity(dx, dy), float(gw(dx.copy(), dy.copy()))
    if _close(got, ref):
        return None
    if _close(got, ref ** 2):
        return "that is POT's objective, the square of the distortion; take its square root"
    if _close(got, ref / 2):
        return "that is Mémoli's convention (half the square root); the book reports the square root itself"
    if _close(got, float(np.abs(dx - dy).mean())):
        return "you averaged |dx − dy|; the distortion is the root mean square of dx − dy"
    if _close(got, ref * len(dx)) or _close(got, ref ** 2 * len(dx) ** 2):
        return "divide by n² (the number of pairs) before taking the square root"
    return f"your distortion is {got:.6g}, the kit's is {ref:.6g}"


def _angle(x, y):
    ux, uy = x / np.linalg.norm(x, axis=1, keepdims=True), y / np.linalg.norm(y, axis=1, keepdims=True)
    return np.arccos(np.clip((ux * uy).sum(axis=1), -1.0, 1.0))


#: Typical mistakes each check must reject (tests/test_exercises.py runs them).
WRONG_ANSWERS = {
    "check_shift": [
        lambda x, y, g: float((np.linalg.norm(x - y, axis=1) if g == "raw" else _angle(x, y)).sum()),
        lambda x, y, g: float(np.linalg.norm(x - y, axis=1).mean()),
        lambda x, y, g: float(np.linalg.norm(x - y, axis=1).mean() if g == "raw" else np.degrees(_angle(x, y)).mean()),
        lambda x, y, g: float(np.linalg.norm(x[:, None] - y[None], axis=-1).mean()),
    ],
    "check_gw_identity": [
        lambda dx, dy: float(((dx - dy) ** 2).mean()),
        lambda dx, dy: float(np.abs(dx - dy).mean()),
        lambda dx, dy: 0.5 * float(np.sqrt(((dx - dy) ** 2).mean())),
        lambda dx, dy: float(np.sqrt(((dx - dy) ** 2).sum())),
    ],
}
