"""The edge-structured chance null for layer sets and ranks (chapter 1, through ``SetOverlap(null="edge")``
and ``RankAtMost(null="edge")``).

In most trained decoders the layers next to the edges (the first and the last) matter more than the
middle ones, so a null that draws layer sets as if the layers were exchangeable (the hypergeometric
chance) makes any edge-heavy set look special. The edge null keeps that structure and shuffles the rest:

1. rank-transform the importance map (one value per candidate layer): ``rᵢ = rank(xᵢ) / n`` (scale-free,
   so one enormous edge layer does not dominate);
2. each layer's distance from the nearest edge, ``dᵢ = min(ℓᵢ − first, last − ℓᵢ)`` (``first``, ``last``:
   the first and last candidate layers);
3. the edge trend ``g``: the least-squares fit of ``r`` on ``d`` that does not rise with ``d``
   (pool-adjacent-violators); its residuals are ``eᵢ = rᵢ − g(dᵢ)``;
4. a null map is ``g(dᵢ) + e_π(i)`` for a random permutation ``π`` (ties broken at random);
5. a null set holds the layers at the same ranks of the null map as our set holds in ours (our top 4
   → the null map's top 4; our bottom third → its bottom third); a null rank is the item's rank there.

p-values are ``(1 + #draws at least as extreme) / (1 + draws)``, from ``draws`` seeded draws
(deterministic given ``seed``; 10,000 draws give p to about ±0.002 near 0.05). A map without edge
trend gives the exchangeable null back. Conservative: the trend is fitted on the map being tested,
so a bump near the edges partly counts as structure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ..validate import AnatomyKitError, check_int

__all__ = ["EdgeTrend", "ChanceResult", "centres", "fit_edge_trend", "edge_null_maps", "edge_overlap_chance",
           "edge_rank_chance"]

EDGE_NULL_TEXT = ("the edge-structured null (our map's trend of importance with distance from the nearest edge kept, "
                  "the rest shuffled)")


@dataclass(frozen=True)
class EdgeTrend:
    """An importance map split into its edge trend and residuals; arrays have shape ``(n,)``, in ``layers`` order."""
    layers: tuple[int, ...]
    values: np.ndarray
    distance: np.ndarray
    trend: np.ndarray
    residual: np.ndarray


@dataclass(frozen=True)
class ChanceResult:
    """How often the null gives a result at least as extreme as ours: ``p``, the null's mean, the draws."""
    p: float
    null_mean: float
    draws: int
    seed: int


def _decreasing_fit(y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Weighted least-squares non-increasing fit of ``y`` (ordered by distance), pool-adjacent-violators."""
    blocks: list[list[float]] = []                       # [mean, weight, count]
    for yi, wi in zip(y, w):
        blocks.append([float(yi), float(wi), 1])
        while len(blocks) > 1 and blocks[-2][0] < blocks[-1][0]:
            m2, w2, c2 = blocks.pop()
            m1, w1, c1 = blocks.pop()
            blocks.append([(m1 * w1 + m2 * w2) / (w1 + w2), w1 + w2, c1 + c2])
    return np.concatenate([np.full(int(c), m) for m, _, c in blocks])


def centres(profile: Mapping[Any, Any]) -> dict[int, float]:
    """``{layer: value}`` from a map whose values are numbers, :class:`~anatomy_kit.stats.Interval` s (their
    mean), :class:`~anatomy_kit.stats.PairedComparison` s (their mean) or ``(low, high)`` pairs (the midpoint).
    Chapter 1 (the maps ``SetOverlap`` and ``RankAtMost`` judge)."""
    if not isinstance(profile, Mapping):
        raise AnatomyKitError(f"an importance map must be a mapping {{layer: value or interval}}, got {profile!r}")
    out = {}
    for k, v in profile.items():
        v = (v[0] + v[1]) / 2 if isinstance(v, tuple) and len(v) == 2 else getattr(v, "mean", v)
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not np.isfinite(v):
            raise AnatomyKitError(f"importance map entry {k!r}: {v!r} is not a finite number or interval")
        out[check_int("profile layer", k)] = float(v)
    return out


def fit_edge_trend(profile: Mapping[Any, float]) -> EdgeTrend:
    """Split an importance map ``{layer: importance}`` (larger = more important, at least 3 layers) into its
    edge trend and residuals (steps 1–3 of the module docstring). Chapter 1."""
    if not isinstance(profile, Mapping) or len(profile) < 3:
        raise AnatomyKitError(f"the edge null needs an importance map {{layer: value}} of at least 3 layers, "
                              f"got {profile!r}")
    profile = centres(profile)
    layers = tuple(sorted(profile))
    values = np.array([profile[k] for k in layers])
    ranks = (values.argsort(kind="stable").argsort(kind="stable") + 1) / len(layers)
    arr = np.array(layers)
    distance = np.minimum(arr - arr[0], arr[-1] - arr)
    uniq = np.unique(distance)                                   # pool the layers at one distance first
    mean_at = np.array([ranks[distance == u].mean() for u in uniq])
    fitted = _decreasing_fit(mean_at, np.array([(distance == u).sum() for u in uniq], dtype=float))
    trend = fitted[np.searchsorted(uniq, distance)]
    return EdgeTrend(layers, values, distance, trend, ranks - trend)


def edge_null_maps(trend: EdgeTrend, draws: int, seed: int) -> np.ndarray:
    """``(draws, n)`` null maps ``g(dᵢ) + e_π(i)`` (step 4), from ``numpy.random.default_rng(seed)``. Chapter 1."""
    draws = check_int("draws", draws, minimum=100)
    rng = np.random.default_rng(check_int("seed", seed, minimum=0))
    n = len(trend.layers)
    perm = rng.random((draws, n)).argsort(axis=1)
    jitter = 1e-9 * rng.random((draws, n))                      # breaks exact ties at random, below any residual
    return trend.trend[None, :] + trend.residual[perm] + jitter


def _positions(trend: EdgeTrend, members: Any) -> np.ndarray:
    """Ascending-rank positions (0 = least important) that ``members`` hold in the observed map."""
    index = {l: i for i, l in enumerate(trend.layers)}
    missing = sorted(int(m) for m in members if int(m) not in index)
    if missing:
        raise AnatomyKitError(f"layers {missing} are not in the importance map (its layers: {list(trend.layers)})")
    rank_of = trend.values.argsort(kind="stable").argsort(kind="stable")
    return np.sort(rank_of[[index[int(m)] for m in members]])


def edge_overlap_chance(profile: Mapping[Any, float], ours: Any, paper: Any, *, draws: int = 10_000,
                        seed: int = 0) -> ChanceResult:
    """How often a null set (step 5) shares at least as many layers with ``paper`` as ``ours`` does. Chapter 1
    (``SetOverlap(null="edge")``)."""
    trend = fit_edge_trend(profile)
    ours = {int(v) for v in ours}
    positions = _positions(trend, ours)
    paper = {int(v) for v in paper}
    in_paper = np.array([l in paper for l in trend.layers])
    order = edge_null_maps(trend, draws, seed).argsort(axis=1, kind="stable")
    shared = in_paper[order[:, positions]].sum(axis=1)
    observed = len(ours & paper)
    return ChanceResult(float((1 + (shared >= observed).sum()) / (1 + draws)), float(shared.mean()), draws, seed)


def edge_rank_chance(profile: Mapping[Any, float], item: int, k: int, *, draws: int = 10_000,
                     seed: int = 0) -> ChanceResult:
    """How often layer ``item`` ranks among the top ``k`` (1 = most important) of a null map. Chapter 1
    (``RankAtMost(null="edge")``)."""
    trend = fit_edge_trend(profile)
    if int(item) not in trend.layers:
        raise AnatomyKitError(f"item={item!r} is not in the importance map (its layers: {list(trend.layers)})")
    maps = edge_null_maps(trend, draws, seed)
    column = maps[:, trend.layers.index(int(item))]
    rank = 1 + (maps > column[:, None]).sum(axis=1)
    hits = int((rank <= check_int("k", k, minimum=1)).sum())
    return ChanceResult(float((1 + hits) / (1 + draws)), float(rank.mean()), draws, seed)
