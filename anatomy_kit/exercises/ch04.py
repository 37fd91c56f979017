"""Self-checks for chapter 4 (*Geometric work*).

- :func:`check_shift` – the reader's shift statistic (mean matched distance) in the raw and the
  spherical geometry, against :func:`anatomy_kit.geometry.layer_work`;
- :func:`check_gw_coupling` – the reader's GW distortion of a given coupling, against
  :func:`anatomy_kit.geometry.gw_objective`;
- :func:`check_poincare` – the reader's pairwise distances of unit vectors placed in the Poincaré
  ball at a fixed radius, against :func:`anatomy_kit.geometry.pairwise_distances`.

Each check builds its own small clouds, runs the reader's function on copies, and names the slip
in one sentence when the answer matches a typical mistake on the same inputs.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from .core import check, generic

__all__ = ["check_shift", "check_gw_coupling", "check_poincare", "WRONG_ANSWERS"]


def _clouds() -> tuple[np.ndarray, np.ndarray]:
    """A cloud (24, 5) lifted off the origin, and its image under a rotation and a scaling by 2.5."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((24, 5)) + 3.0
    q, _ = np.linalg.qr(rng.standard_normal((5, 5)))
    return x, 2.5 * x @ q


def _close(a: float, b: float) -> bool:
    # Float64 answers in any summation order agree to ~1e-13 relative here; 1e-6 leaves room for
    # another formula of the same quantity (arccos of the dot product instead of the kit's arcsin).
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)


def _unit(p: np.ndarray) -> np.ndarray:
    return p / np.linalg.norm(p, axis=1, keepdims=True)


@check("check_shift")
def check_shift(shift: Callable) -> str | None:
    """``shift(x, y, geometry)`` (x, y: (n, d) matched rows; geometry ``"raw"`` or ``"spherical"``) returns
    the mean over tokens of d(x_i, y_i): the Euclidean distance, or the angle between the unit vectors in radians."""
    from ..geometry import layer_work, pairwise_distances

    x, y = _clouds()
    for g in ("raw", "spherical"):
        ref = layer_work(x, y, statistics=["shift"], geometries=[g])[("shift", g)]
        got = float(shift(x.copy(), y.copy(), g))
        if _close(got, ref):
            continue
        ux, uy = _unit(x), _unit(y)
        both = np.vstack([x, y])
        if _close(got, ref * len(x)):
            return f"in the {g} geometry you summed the distances; the shift is their mean over the n tokens"
        if _close(got, float(pairwise_distances(both, g)[: len(x), len(x):].mean())):
            return "you averaged d(x_i, y_j) over all pairs; the shift pairs each token with itself, d(x_i, y_i)"
        if g == "spherical" and _close(got, float(np.linalg.norm(x - y, axis=1).mean())):
            return "the spherical shift must ignore scale: normalise each state to unit length first"
        if g == "spherical" and _close(got, float(np.linalg.norm(ux - uy, axis=1).mean())):
            return "you returned the chord ‖x̂ − ŷ‖; the spherical distance is the angle arccos⟨x̂, ŷ⟩ in radians"
        if g == "spherical" and _close(got, math.degrees(ref)):
            return "your angles are in degrees; the spherical distance is measured in radians"
        return generic(f"your {g} shift is {got:.6g}, the kit's is {ref:.6g} (the mean over tokens of d(x_i, y_i))")
    return None


def _couplings(n: int) -> dict[str, np.ndarray]:
    """Three couplings (n, n) with uniform marginals 1/n: the identity, a relabelling, and a soft mixture."""
    identity = np.eye(n) / n
    relabel = np.eye(n)[np.random.default_rng(6).permutation(n)] / n
    return {"the identity coupling I/n": identity, "a relabelling coupling": relabel,
            "a soft coupling": (identity + relabel + np.full((n, n), 1 / n ** 2)) / 3}


def _pairing_slip(dx: np.ndarray, dy: np.ndarray, t: np.ndarray) -> float:
    """√Σ (dx_ij − dy_kl)² T_ij T_kl: the coupling's indices paired with the wrong distances."""
    return math.sqrt(float(np.einsum("ijkl,ij,kl->", (dx[:, :, None, None] - dy[None, None]) ** 2, t, t)))


@check("check_gw_coupling", hint="every pair of pairs counts: compare the distance of i and k in X with that of "
                                 "j and l in Y, weigh the squared mismatch by how much the coupling sends i to j and "
                                 "k to l (np.einsum does the sum), and report in the book's convention")
def check_gw_coupling(gw: Callable) -> str | None:
    """``gw(dx, dy, coupling)`` (two (n, n) distance matrices and a coupling T (n, n) summing to 1) returns the
    distortion (Σ_ijkl (dx_ik − dy_jl)² T_ij T_kl)^½: POT's square-loss objective, then its square root."""
    from ..geometry import gw_identity, gw_objective, pairwise_distances

    x, y = _clouds()
    y = y + np.random.default_rng(5).standard_normal(y.shape)   # a map that distorts, not only rescales
    dx, dy = pairwise_distances(x), pairwise_distances(y)
    for name, t in _couplings(len(dx)).items():
        ref = gw_objective(dx, dy, t)
        got = float(gw(dx.copy(), dy.copy(), t.copy()))
        if _close(got, ref):
            continue
        if _close(got, ref ** 2):
            return f"for {name} that is POT's objective, the square of the distortion; take its square root"
        if _close(got, ref / 2):
            return "that is Mémoli's convention (half the square root); the book reports the square root itself"
        if _close(got, gw_identity(dx, dy)):
            return f"for {name} you returned the identity coupling's value: weight each (dx_ik − dy_jl)² by T_ij·T_kl"
        if _close(got, _pairing_slip(dx, dy, t)):
            return "you paired dx_ij with dy_kl; the coupling's T_ij·T_kl weighs (dx_ik − dy_jl)², i with j and k with l"
        absolute = float(np.einsum("ikjl,ij,kl->", np.abs(dx[:, :, None, None] - dy[None, None]), t, t))
        if _close(got, absolute) or _close(got, math.sqrt(absolute)):
            return "you weighted |dx_ik − dy_jl|; GW uses the square loss (dx_ik − dy_jl)², then a square root"
        return generic(f"for {name} your distortion is {got:.6g}, the kit's is {ref:.6g}")
    return None


#: The radii the Poincaré check tries: near the centre (≈ a multiple of the chord) and near the rim.
_RADII = (0.3, 0.9)


def _poincare_slips(x: np.ndarray, r: float) -> dict[str, np.ndarray]:
    """Each slip's (n, n) matrix for points ``x`` (n, d) at radius ``r``: the typical wrong formulas."""
    u = r * _unit(x)
    sq = ((u[:, None] - u[None]) ** 2).sum(-1)                     # ‖u_i − u_j‖², (n, n)
    raw = ((x[:, None] - x[None]) ** 2).sum(-1)
    rx = np.linalg.norm(r * x, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        unnormalised = np.arccosh(1 + 2 * r * r * raw / ((1 - rx ** 2)[:, None] * (1 - rx ** 2)[None]))
    return {
        "no factor 2": np.arccosh(1 + sq / (1 - r * r) ** 2),
        "no arcosh": 1 + 2 * sq / (1 - r * r) ** 2,
        "chord": np.sqrt(sq),
        "one minus r": np.arccosh(1 + 2 * sq / (1 - r) ** 2),
        "not unit": unnormalised,
    }


_POINCARE_SLIPS = {
    "no factor 2": "the argument of arcosh is 1 + 2‖u − v‖²/((1 − ‖u‖²)(1 − ‖v‖²)): you dropped the 2",
    "no arcosh": "you returned the argument 1 + 2‖u − v‖²/(…) itself; the distance is its arcosh",
    "chord": "you returned the Euclidean distance ‖u − v‖ of the placed points; the Poincaré metric is "
             "arcosh(1 + 2‖u − v‖²/((1 − ‖u‖²)(1 − ‖v‖²)))",
    "one minus r": "the denominator is (1 − ‖u‖²)(1 − ‖v‖²) with ‖u‖ = r, so (1 − r²)², not (1 − r)²",
    "not unit": "place the unit vectors u = r·x/‖x‖ in the ball; you scaled the raw states by r",
}


@check("check_poincare", hint="place every point at the same distance r from the ball's centre first, along its "
                              "own direction; then every point has the same norm, and the derivation's distance "
                              "simplifies")
def check_poincare(fn: Callable) -> str | None:
    """``fn(points, radius)`` (points (n, d), 0 < radius < 1) returns the (n, n) Poincaré distances of the
    unit vectors placed at that radius, u = r·x/‖x‖: arcosh(1 + 2‖u − v‖²/((1 − ‖u‖²)(1 − ‖v‖²)))."""
    from ..geometry import pairwise_distances

    x, _ = _clouds()
    x = x[:10] / 3.0          # states of norm ≈ 2–3, so that placing raw states by r leaves the ball
    for r in _RADII:
        ref = pairwise_distances(x, "hyperbolic", radius=r)
        got = np.asarray(fn(x.copy(), r), dtype=np.float64)
        if got.shape != ref.shape:
            return f"return the ({len(x)}, {len(x)}) matrix of every pair's distance; yours has shape {got.shape}"
        # An angle from float64 dot products of unit vectors in d dimensions is exact to ~(d+3)·u/sin θ,
        # never worse than 2√((d+3)·u) (at θ → 0, the diagonal); the distance's slope in θ is at most
        # 2r/(1 − r²): twice that product bounds any right route (arccos, the chord, ‖u − v‖²)
        u = np.finfo(np.float64).eps / 2
        atol = 2 * 2 * math.sqrt((x.shape[1] + 3) * u) * 2 * r / (1 - r * r)
        if np.allclose(got, ref, rtol=1e-7, atol=atol):
            continue
        for slip, wrong in _poincare_slips(x, r).items():
            with np.errstate(invalid="ignore"):
                if np.allclose(got, wrong, rtol=1e-7, atol=atol, equal_nan=True):
                    return _POINCARE_SLIPS[slip]
        i, j = np.unravel_index(np.nanargmax(np.abs(got - ref)), ref.shape)
        return generic(f"at radius {r} your distance between points {i} and {j} is {got[i, j]:.6g}, the kit's "
                       f"is {ref[i, j]:.6g}")
    return None


def _angle(x, y):
    return np.arccos(np.clip((_unit(x) * _unit(y)).sum(axis=1), -1.0, 1.0))


def _shift_summed(x, y, g):
    return float((np.linalg.norm(x - y, axis=1) if g == "raw" else _angle(x, y)).sum())


def _shift_unnormalised(x, y, g):
    return float(np.linalg.norm(x - y, axis=1).mean())


def _shift_degrees(x, y, g):
    return float(np.linalg.norm(x - y, axis=1).mean() if g == "raw" else np.degrees(_angle(x, y)).mean())


def _shift_chord(x, y, g):
    return float(np.linalg.norm(x - y, axis=1).mean() if g == "raw" else np.linalg.norm(_unit(x) - _unit(y), axis=1).mean())


def _shift_all_pairs(x, y, g):
    return float(np.linalg.norm(x[:, None] - y[None], axis=-1).mean())


def _objective(dx, dy, t):
    return float(np.einsum("ikjl,ij,kl->", (dx[:, :, None, None] - dy[None, None]) ** 2, t, t))


def _gw_pot(dx, dy, t):
    return _objective(dx, dy, t)


def _gw_memoli(dx, dy, t):
    return 0.5 * math.sqrt(_objective(dx, dy, t))


def _gw_ignores_coupling(dx, dy, t):
    return float(np.sqrt(np.mean((dx - dy) ** 2)))


def _gw_wrong_pairing(dx, dy, t):
    return _pairing_slip(dx, dy, t)


def _gw_absolute(dx, dy, t):
    return float(np.einsum("ikjl,ij,kl->", np.abs(dx[:, :, None, None] - dy[None, None]), t, t))


def _poincare_slip(name: str) -> Callable:
    def wrong(points, radius):
        return _poincare_slips(points, radius)[name]
    wrong.__name__ = f"poincare_{name.replace(' ', '_')}"
    return wrong


#: Typical mistakes each check must name: (answer, words its message must contain) (tests/test_exercises.py).
WRONG_ANSWERS = {
    "check_shift": [(_shift_summed, "summed the distances"), (_shift_unnormalised, "normalise each state"),
                    (_shift_degrees, "degrees"), (_shift_chord, "chord"), (_shift_all_pairs, "all pairs")],
    "check_gw_coupling": [(_gw_pot, "POT's objective"), (_gw_memoli, "Mémoli"),
                          (_gw_ignores_coupling, "identity coupling's value"), (_gw_wrong_pairing, "paired dx_ij"),
                          (_gw_absolute, "square loss")],
    "check_poincare": [(_poincare_slip("no factor 2"), "dropped the 2"), (_poincare_slip("no arcosh"), "its arcosh"),
                       (_poincare_slip("chord"), "Euclidean distance"), (_poincare_slip("one minus r"), "(1 − r²)²"),
                       (_poincare_slip("not unit"), "unit vectors")],
}
