"""The work of every FFN over depth: nine profiles (three statistics × three geometries; chapter 4)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np

from ..progress import progress_bar
from ..validate import AnatomyKitError, check_choice, check_int
from .clouds import FFNCloud
from .metrics import (DEFAULT_RADIUS, GEOMETRIES, _euclidean, _points, _radius, gw_identity, gw_optimal,
                      hyperbolic_from_angle, matched_distances, pairwise_distances)
from .topology import diagram_distance, h1_diagram

__all__ = ["STATISTICS", "DEFAULT_STATISTICS", "layer_work", "WorkProfiles", "work_profiles"]

STATISTICS = ("shift", "gw", "gw_optimal", "topology")
DEFAULT_STATISTICS = ("shift", "gw", "topology")


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
    bar = progress_bar(total=len(clouds), desc="geometric work", unit="layer", enabled=progress, leave=True)
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
