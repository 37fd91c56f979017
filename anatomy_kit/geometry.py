"""Geometric work of FFN layers: shift, Gromov–Wasserstein distortion, H1 topological change.

Chapter 4 (*Geometric work*). Each FFN transports a cloud of ``n`` token states ``X`` to
``Y`` (matched rows, see :mod:`anatomy_kit.clouds`). Its *work* is measured by three
statistics, each in three geometries — nine profiles over depth. All definitions are our
reconstruction of paper 2 (SPECS §2.4, INFERRED): standard definitions chosen to match
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
  (``ot.gromov.gromov_wasserstein2``, uniform weights, square loss, warm-started from the
  identity coupling), so ``gw_optimal ≤ gw``. Not in the default nine (≈0.3–0.6 s per call at
  n = 512).
- ``"topology"``: 2-Wasserstein distance (Euclidean ground metric on (birth, death)) between
  the H1 persistence diagrams of the Vietoris–Rips filtrations of ``(X, d)`` and ``(Y, d)``.

GW conventions (``convention=``): ``"distortion"`` (default, above; equals the square root of
POT's objective), ``"pot"`` (POT's raw objective ``Σ (C1_ik − C2_jl)² T_ij T_kl``, the square of
``"distortion"``), ``"memoli"`` (Mémoli's ``GW₂ = ½·√objective``).
"""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.spatial.distance import cdist

from .clouds import FFNCloud, capture_ffn_clouds, ffn_sensitivity, maxmin_indices  # noqa: F401 (re-exported)
from .validate import AnatomyKitError, check_choice, check_finite, check_int, check_positive

GEOMETRIES = ("raw", "spherical", "hyperbolic")
STATISTICS = ("shift", "gw", "gw_optimal", "topology")
DEFAULT_STATISTICS = ("shift", "gw", "topology")
GW_CONVENTIONS = ("distortion", "pot", "memoli")
DEFAULT_RADIUS = 0.9
SCHEMA = "anatomy_kit/work-profiles/1"


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


def gw_optimal(dx: Any, dy: Any, *, convention: str = "distortion", warm_start: bool = True,
               max_iter: int = 100, tol: float = 1e-9) -> float:
    """GW distortion minimised over couplings with POT (chapter 4, *Geometric work*).

    ``ot.gromov.gromov_wasserstein2`` with uniform weights and the square loss (a local
    conditional-gradient solver on a non-convex problem). ``warm_start`` starts it from the
    identity coupling ``I/n``; the returned objective is the smaller of POT's and the identity
    coupling's, both feasible, so the result is always ``≤`` :func:`gw_identity`.
    """
    import ot

    dx, dy = _square_pair(dx, dy)
    check_int("max_iter", max_iter, minimum=1)
    n = dx.shape[0]
    w = np.full(n, 1.0 / n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        obj = float(ot.gromov.gromov_wasserstein2(dx, dy, w, w, loss_fun="square_loss",
                                                  G0=np.eye(n) / n if warm_start else None,
                                                  max_iter=max_iter, tol_rel=tol, tol_abs=tol))
    return _gw_convert(min(obj, float(np.mean((dx - dy) ** 2))), convention)


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


def layer_work(x: Any, y: Any, *, statistics: Sequence[str] = DEFAULT_STATISTICS,
               geometries: Sequence[str] = GEOMETRIES, radius: float = DEFAULT_RADIUS,
               diagram_order: float = 2.0) -> dict[tuple[str, str], float]:
    """Work of one FFN moving ``x`` to ``y`` (n, d): ``{(statistic, geometry): value}`` (chapter 4).

    H1 diagrams are computed once per metric: since the hyperbolic metric is a strictly
    increasing function ``f`` of the angle, its Vietoris–Rips filtration orders simplices
    exactly as the spherical one, and its diagram is the spherical diagram with ``f`` applied
    to every birth and death (no second ripser call).
    """
    statistics = [check_choice("statistic", s, STATISTICS) for s in statistics]
    geometries = [check_choice("geometry", g, GEOMETRIES) for g in geometries]
    radius = _radius(radius)
    x, y = _points("x", x), _points("y", y)
    if x.shape != y.shape:
        raise AnatomyKitError(f"x and y must be matched clouds of equal shape, got {x.shape} and {y.shape}")
    out: dict[tuple[str, str], float] = {}
    need_pairwise = any(s != "shift" for s in statistics)
    angular: tuple | None = None
    diagrams: dict[str, tuple] = {}
    for g in geometries:
        if "shift" in statistics:
            out[("shift", g)] = float(matched_distances(x, y, g, radius=radius).mean())
        if not need_pairwise:
            continue
        if g == "raw":
            dx, dy = _euclidean(x), _euclidean(y)
        else:
            if angular is None:
                angular = (pairwise_distances(x, "spherical"), pairwise_distances(y, "spherical"))
            dx, dy = angular if g == "spherical" else tuple(hyperbolic_from_angle(a, radius) for a in angular)
        if "gw" in statistics:
            out[("gw", g)] = gw_identity(dx, dy)
        if "gw_optimal" in statistics:
            out[("gw_optimal", g)] = gw_optimal(dx, dy)
        if "topology" in statistics:
            base = "raw" if g == "raw" else "angular"
            if base not in diagrams:
                diagrams[base] = tuple(h1_diagram(d) for d in ((dx, dy) if g == "raw" else angular))
            dgx, dgy = diagrams[base]
            if g == "hyperbolic":
                dgx, dgy = hyperbolic_from_angle(dgx, radius), hyperbolic_from_angle(dgy, radius)
            out[("topology", g)] = diagram_distance(dgx, dgy, order=diagram_order)
    return out


# ---------------------------------------------------------------------------------------------
# Profiles over depth
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class WorkProfiles:
    """Work of every FFN: ``values[l, s, g]`` (L, S, G) for ``layers[l]``, ``statistics[s]``,
    ``geometries[g]`` (chapter 4, *Geometric work*). ``n_tokens``, ``point`` and ``radius``
    record how the clouds were measured.
    """

    layers: np.ndarray
    statistics: tuple[str, ...]
    geometries: tuple[str, ...]
    values: np.ndarray
    n_tokens: int
    point: str = "residual"
    radius: float = DEFAULT_RADIUS

    @property
    def names(self) -> list[str]:
        """Profile names ``"statistic/geometry"`` in (statistic, geometry) order."""
        return [f"{s}/{g}" for s in self.statistics for g in self.geometries]

    def profile(self, statistic: str, geometry: str) -> np.ndarray:
        """One profile over depth, (L,)."""
        s = self.statistics.index(check_choice("statistic", statistic, self.statistics))
        g = self.geometries.index(check_choice("geometry", geometry, self.geometries))
        return self.values[:, s, g].copy()

    def items(self) -> Iterable[tuple[str, str, np.ndarray]]:
        """``(statistic, geometry, profile (L,))`` for every profile."""
        for s in self.statistics:
            for g in self.geometries:
                yield s, g, self.profile(s, g)

    def normalised(self, how: str = "sum") -> "WorkProfiles":
        """Each profile divided by its sum (``"sum"``) or maximum (``"max"``) over layers.

        This rescales profiles *across depth* for comparison or allocation; it is unrelated to
        the scale-normalised *geometries* (``"spherical"``, ``"hyperbolic"``). All-zero
        profiles stay zero.
        """
        check_choice("how", how, ("sum", "max"))
        denom = self.values.sum(axis=0) if how == "sum" else self.values.max(axis=0)
        vals = np.divide(self.values, denom, out=np.zeros_like(self.values), where=denom > 0)
        return WorkProfiles(self.layers.copy(), self.statistics, self.geometries, vals,
                            self.n_tokens, self.point, self.radius)


def _pool(n_jobs: int):
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    # fork: workers inherit the imported modules (no re-import of torch); they run only
    # numpy, scipy and ripser, never torch.
    method = "fork" if "fork" in mp.get_all_start_methods() else "spawn"
    return ProcessPoolExecutor(max_workers=n_jobs, mp_context=mp.get_context(method))


def work_profiles(clouds: Sequence[FFNCloud], statistics: Sequence[str] = DEFAULT_STATISTICS,
                  geometries: Sequence[str] = GEOMETRIES, *, radius: float = DEFAULT_RADIUS,
                  diagram_order: float = 2.0, n_jobs: int = 1, progress: bool = True) -> WorkProfiles:
    """Nine (by default) work profiles over depth from per-layer clouds (chapter 4).

    ``clouds``: from :func:`capture_ffn_clouds`, one per layer, all with the same ``n``.
    ``statistics`` ⊆ :data:`STATISTICS`, ``geometries`` ⊆ :data:`GEOMETRIES`.
    ``n_jobs > 1`` computes layers in that many worker processes (ripser holds the GIL, so
    threads would not help); results are identical to ``n_jobs=1``.
    """
    from tqdm import tqdm

    statistics = tuple(check_choice("statistic", s, STATISTICS) for s in statistics)
    geometries = tuple(check_choice("geometry", g, GEOMETRIES) for g in geometries)
    n_jobs = check_int("n_jobs", n_jobs, minimum=1)
    radius = _radius(radius)
    if not statistics or not geometries:
        raise AnatomyKitError(f"statistics={statistics!r} and geometries={geometries!r} must both be non-empty")
    if not clouds:
        raise AnatomyKitError("clouds is empty; capture them with capture_ffn_clouds")
    ns = {c.n for c in clouds}
    if len(ns) != 1:
        raise AnatomyKitError(f"clouds have different sizes {sorted(ns)}; use one n_tokens for all layers")
    kw = dict(statistics=statistics, geometries=geometries, radius=radius, diagram_order=diagram_order)
    bar = tqdm(total=len(clouds), desc="geometric work", unit="layer", disable=not progress)
    if n_jobs == 1 or len(clouds) == 1:
        works = []
        for c in clouds:
            works.append(layer_work(c.x, c.y, **kw))
            bar.update()
    else:
        with _pool(min(n_jobs, len(clouds))) as pool:
            futures = [pool.submit(layer_work, c.x, c.y, **kw) for c in clouds]
            for f in futures:
                f.add_done_callback(lambda _: bar.update())
            works = [f.result() for f in futures]
    bar.close()
    values = np.array([[[w[(s, g)] for g in geometries] for s in statistics] for w in works])
    return WorkProfiles(np.array([c.layer for c in clouds]), statistics, geometries, values,
                        ns.pop(), clouds[0].point, float(radius))


# ---------------------------------------------------------------------------------------------
# Diagnostics
# ---------------------------------------------------------------------------------------------

def residual_norm_growth(clouds: Sequence[FFNCloud], kind: str = "difference") -> np.ndarray:
    """Per-layer growth of the state norm across the FFN, (L,) (chapter 4).

    ``"difference"`` (default): mean over tokens of ``‖y_i‖ − ‖x_i‖`` — in the units of raw work,
    and bounded by the raw shift (``‖y‖ − ‖x‖ ≤ ‖y − x‖``); ``"ratio"``: mean of ``‖y_i‖/‖x_i‖``.
    With ``point="residual"`` clouds this is residual-norm growth through the FFN sub-block.
    """
    check_choice("kind", kind, ("difference", "ratio"))
    out = []
    for c in clouds:
        nx, ny = np.linalg.norm(c.x, axis=1), np.linalg.norm(c.y, axis=1)
        if kind == "ratio":
            if (nx == 0).any():
                raise AnatomyKitError(f"layer {c.layer} has zero-norm input states; use kind='difference'")
            out.append(float(np.mean(ny / nx)))
        else:
            out.append(float(np.mean(ny - nx)))
    return np.array(out)


def mean_norms(clouds: Sequence[FFNCloud], which: str = "x") -> np.ndarray:
    """Mean state norm ``(1/n) Σ ‖x_i‖`` (or of ``y``) of every layer's cloud, (L,) (chapter 4)."""
    check_choice("which", which, ("x", "y"))
    return np.array([float(np.linalg.norm(getattr(c, which), axis=1).mean()) for c in clouds])


def front_loading(profile: Any, fraction: float = 1 / 3) -> float:
    """Share of a non-negative profile's total that falls in the first ``fraction`` of layers (chapter 4).

    A flat profile gives ≈ ``fraction``; a "front-loaded" one more. The first
    ``round(fraction·L)`` layers count (at least one).
    """
    p = np.asarray(profile, dtype=np.float64).reshape(-1)
    check_finite("profile", p)
    if p.size == 0 or (p < 0).any():
        raise AnatomyKitError(f"profile must be a non-empty, non-negative array, got {p!r}")
    f = check_positive("fraction", fraction)
    if f >= 1:
        raise AnatomyKitError(f"fraction={fraction!r} must be in (0, 1)")
    k = max(1, int(round(f * p.size)))
    total = p.sum()
    return float(p[:k].sum() / total) if total > 0 else float("nan")


def profile_correlations(profiles: WorkProfiles, target: Any, method: str = "spearman") -> dict[str, float]:
    """Correlation over layers of every profile with ``target`` (L,): ``{"statistic/geometry": r}``.

    ``method``: ``"spearman"`` (rank) or ``"pearson"``. A constant profile gives NaN.
    Chapter 4 (*Geometric work*).
    """
    from scipy import stats

    check_choice("method", method, ("spearman", "pearson"))
    t = np.asarray(target, dtype=np.float64).reshape(-1)
    if t.shape[0] != len(profiles.layers):
        raise AnatomyKitError(f"target has {t.shape[0]} values but the profiles have {len(profiles.layers)} layers")
    check_finite("target", t)
    fn = stats.spearmanr if method == "spearman" else stats.pearsonr
    out = {}
    for s, g, p in profiles.items():
        if np.ptp(p) == 0 or np.ptp(t) == 0 or len(t) < 3:
            out[f"{s}/{g}"] = float("nan")
        else:
            out[f"{s}/{g}"] = float(fn(p, t)[0])
    return out


def _two_nearest(points: np.ndarray, chunk: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    n = points.shape[0]
    r = np.empty((n, 2))
    for s in range(0, n, chunk):
        d = cdist(points[s:s + chunk], points)
        d[np.arange(d.shape[0]), np.arange(s, s + d.shape[0])] = np.inf
        r[s:s + chunk] = np.partition(d, 1, axis=1)[:, :2]
    return r[:, 0], r[:, 1]


def twonn_dimension(points: Any, *, discard_fraction: float = 0.1) -> float:
    """Intrinsic dimension of a point cloud (n, d) by TwoNN (Facco et al. 2017) (chapter 4).

    ``μ_i = r₂/r₁`` (second over first nearest-neighbour distance, Euclidean) is Pareto with
    exponent ``d``; with the ``μ`` sorted and ``F_i = i/N``, ``d`` is the slope through the
    origin of ``−log(1 − F_i)`` against ``log μ_i``, after discarding the largest
    ``discard_fraction`` of ``μ`` (the paper's 10 %). Points with a duplicate (``r₁ = 0``) are
    dropped.
    """
    p = _points("points", points)
    f = check_positive("discard_fraction", discard_fraction, allow_zero=True)
    if f >= 1:
        raise AnatomyKitError(f"discard_fraction={discard_fraction!r} must be in [0, 1)")
    r1, r2 = _two_nearest(p)
    keep = r1 > 0
    mu = np.sort(r2[keep] / r1[keep])
    n = mu.size
    if n < 3:
        raise AnatomyKitError(f"TwoNN needs at least 3 distinct points, got {n}")
    f_emp = np.arange(1, n + 1) / n
    m = max(2, int(np.floor(n * (1 - f))))
    m = min(m, n - 1)  # F = 1 at the last point
    x, y = np.log(mu[:m]), -np.log(1 - f_emp[:m])
    return float((x @ y) / (x @ x)) if x @ x > 0 else float("inf")


def intrinsic_dimensions(clouds: Sequence[FFNCloud], *, which: str = "x", discard_fraction: float = 0.1) -> np.ndarray:
    """TwoNN intrinsic dimension of every layer's FFN input (``"x"``) or output (``"y"``) cloud, (L,)."""
    check_choice("which", which, ("x", "y"))
    return np.array([twonn_dimension(getattr(c, which), discard_fraction=discard_fraction) for c in clouds])


# ---------------------------------------------------------------------------------------------
# Save / load (consumed by chapter 5, the width solver)
# ---------------------------------------------------------------------------------------------

@dataclass
class ProfileBundle:
    """What :func:`load_profiles` returns: the profiles, per-layer diagnostics, and metadata."""

    profiles: WorkProfiles
    meta: dict
    intrinsic_dimension: np.ndarray | None = None
    sensitivity: np.ndarray | None = None
    residual_norm_growth: np.ndarray | None = None


def _layer_vector(name: str, value: Any, n: int) -> list[float] | None:
    if value is None:
        return None
    v = np.asarray(value, dtype=np.float64).reshape(-1)
    if v.shape[0] != n:
        raise AnatomyKitError(f"{name} has {v.shape[0]} values but the profiles have {n} layers")
    check_finite(name, v)
    return v.tolist()


def save_profiles(path: str | Path, profiles: WorkProfiles, meta: dict, *, intrinsic_dimension: Any = None,
                  sensitivity: Any = None, residual_norm_growth: Any = None) -> Path:
    """Write work profiles and per-layer diagnostics as JSON for chapter 5 (chapter 4).

    Schema (``"schema": "anatomy_kit/work-profiles/1"``)::

        {"schema": str, "model": str, "n_tokens": int, "point": "residual"|"ffn",
         "radius": float, "layers": [int] (L),
         "statistics": [str], "geometries": [str],
         "profiles": {"<statistic>/<geometry>": {"raw": [float] (L), "normalised": [float] (L)}},
         "intrinsic_dimension": [float] (L) | null,     # TwoNN of the FFN input clouds
         "sensitivity": [float] (L) | null,             # loss increase under FFN-output noise, nats
         "residual_norm_growth": [float] (L) | null,    # mean ‖y‖/‖x‖
         "meta": {...}}                                 # everything else passed in ``meta``

    ``"normalised"`` divides each profile by its sum over layers. ``meta`` must contain
    ``"model"`` (a name or hub id). Returns the path written.
    """
    if not isinstance(meta, dict) or not isinstance(meta.get("model"), str):
        raise AnatomyKitError(f"meta must be a dict with a 'model' name, got {meta!r}")
    n = len(profiles.layers)
    norm = profiles.normalised("sum")
    doc = {
        "schema": SCHEMA, "model": meta["model"], "n_tokens": int(profiles.n_tokens), "point": profiles.point,
        "radius": float(profiles.radius), "layers": [int(l) for l in profiles.layers],
        "statistics": list(profiles.statistics), "geometries": list(profiles.geometries),
        "profiles": {f"{s}/{g}": {"raw": p.tolist(), "normalised": norm.profile(s, g).tolist()}
                     for s, g, p in profiles.items()},
        "intrinsic_dimension": _layer_vector("intrinsic_dimension", intrinsic_dimension, n),
        "sensitivity": _layer_vector("sensitivity", sensitivity, n),
        "residual_norm_growth": _layer_vector("residual_norm_growth", residual_norm_growth, n),
        "meta": {k: v for k, v in meta.items() if k != "model"},
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, default=_json_default))
    return path


def _json_default(o: Any):
    if isinstance(o, (np.integer, np.floating)):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def load_profiles(path: str | Path) -> ProfileBundle:
    """Read a file written by :func:`save_profiles` (chapter 4; consumed by chapter 5)."""
    path = Path(path)
    if not path.exists():
        raise AnatomyKitError(f"profiles file {path} does not exist; run chapter 4 first")
    doc = json.loads(path.read_text())
    if doc.get("schema") != SCHEMA:
        raise AnatomyKitError(f"{path} has schema {doc.get('schema')!r}; expected {SCHEMA!r}")
    stats, geoms = tuple(doc["statistics"]), tuple(doc["geometries"])
    values = np.array([[doc["profiles"][f"{s}/{g}"]["raw"] for g in geoms] for s in stats]).transpose(2, 0, 1)
    profiles = WorkProfiles(np.array(doc["layers"]), stats, geoms, values.astype(np.float64),
                            int(doc["n_tokens"]), doc["point"], float(doc["radius"]))
    vec = lambda k: None if doc.get(k) is None else np.array(doc[k], dtype=np.float64)  # noqa: E731
    return ProfileBundle(profiles, {"model": doc["model"], **doc.get("meta", {})}, vec("intrinsic_dimension"),
                         vec("sensitivity"), vec("residual_norm_growth"))
