"""Depth-normalised layer profiles: do the edge layers (first and last) matter most?

Models of different depth are compared on a common depth axis: layer ℓ of an L-layer model sits at
depth ``ℓ/(L−1)`` (:func:`layer_depth`; 0 = the first layer, 1 = the last). Two pure functions:

- :func:`edge_importance`: is the mean importance percentile of the first and last layer higher
  than that of a pair of layers chosen at random? Percentiles from ranks (rank 1 = most
  important, ties get their average rank): ``percentile = 1 − (rank − 1)/(L − 1)``, so the most
  important layer has 1 and the least 0. The statistic is the mean percentile of layers 0 and
  L − 1; its null is the same mean for every unordered pair of distinct layers, enumerated
  exactly (C(L, 2) pairs, the observed pair among them), and ``p`` is the share of pairs whose
  mean is at least the observed one. The smallest possible ``p`` is therefore ``1 / C(L, 2)``
  (1/6 at L = 4, 1/435 at L = 30): a 4-layer model cannot make the edges significant alone.
- :func:`layer_importance`: one layer (the first, or the last) judged alone: its percentile against
  every layer's (exact, L values, ours among them), so ``p`` = (layers at least as important)/L and
  the smallest possible ``p`` is ``1/L`` (1/10 at L = 10: such a model cannot make one edge
  significant, and the verdict says so). Averaging the two edges would let one carry the other.
- :func:`edge_contrasts`: the paired data of "the edges are the most important layers": for each edge
  layer (first, last) and each interior layer j (every layer but the two edges), the per-block
  difference of the loss with the edge skipped and with j skipped, in nats per token (positive: the
  edge matters more). Blocks are the units, so a model of few layers is judged as firmly as its text
  allows: ``book.edges_everywhere`` holds for a model when every such difference's interval lies
  above 0 (an intersection-union test over its 2 (L − 2) contrasts).
- :func:`resample_depth`: a profile linearly interpolated onto the grid ``linspace(0, 1, n)``, for
  plotting models of different depth on one axis (values only at the models' own layers are
  measurements; the points between are drawn lines, not data).

Used by chapter 7 (*Synthesis*).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from typing import Any

import numpy as np
from scipy import stats as scipy_stats

from ..stats import PermutationNull
from ..validate import AnatomyKitError, check_int

__all__ = ["layer_depth", "importance_percentiles", "edge_importance", "layer_importance", "edge_contrasts",
           "resample_depth"]


def _profile(name: str, values: Any, min_layers: int) -> np.ndarray:
    """``values`` as a finite 1-D float array (one value per layer) of at least ``min_layers`` entries."""
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise AnatomyKitError(f"{name} must be a sequence of numbers (one per layer), "
                              f"got {type(values).__name__}") from None
    if arr.ndim != 1:
        raise AnatomyKitError(f"{name} must be one-dimensional (one value per layer), got shape {arr.shape}")
    if arr.size < min_layers:
        raise AnatomyKitError(f"{name} has {arr.size} layer(s); at least {min_layers} are needed")
    if not np.isfinite(arr).all():
        raise AnatomyKitError(f"{name} holds {int((~np.isfinite(arr)).sum())} non-finite values (NaN or inf) "
                              f"out of {arr.size}")
    return arr


def layer_depth(n_layers: int) -> np.ndarray:
    """Relative depth ``ℓ/(L−1)`` of each layer, shape (L,); a one-layer model sits at depth 0."""
    n = check_int("n_layers", n_layers, minimum=1)
    return np.arange(n) / (n - 1) if n > 1 else np.zeros(1)


def importance_percentiles(values: Any) -> np.ndarray:
    """Importance percentile of each layer, shape (L,): 1 = most important, 0 = least (L ≥ 2).

    ``values`` (L,): higher = more important. Rank 1 is the largest value (ties share their
    average rank); ``percentile = 1 − (rank − 1)/(L − 1)``.
    """
    v = _profile("values", values, 2)
    rank = scipy_stats.rankdata(-v, method="average")
    return 1.0 - (rank - 1.0) / (v.size - 1)


def edge_importance(values: Any) -> PermutationNull:
    """Mean importance percentile of the first and last layer against every pair of layers (module docstring).

    ``values`` (L,), L ≥ 3: per-layer importance, higher = more important (e.g. skip ΔPPL %).
    Returns a :class:`~anatomy_kit.stats.PermutationNull` with ``method="exact"``, ``alternative="greater"``,
    ``n = L``, ``n_perm = C(L, 2)`` and ``null`` (C(L, 2),) the mean percentile of each pair
    ``(i, j)``, ``i < j``, in :func:`itertools.combinations` order; ``p`` counts the pairs whose
    mean is at least the observed one (ties within a relative 1e-9, as everywhere in
    :mod:`anatomy_kit.stats`).
    """
    v = _profile("values", values, 3)
    pct = importance_percentiles(v)
    observed = float((pct[0] + pct[-1]) / 2)
    null = np.array([(pct[i] + pct[j]) / 2 for i, j in itertools.combinations(range(v.size), 2)])
    low, high = np.quantile(null, [0.025, 0.975])
    result = PermutationNull(observed, math.nan, "greater", int(v.size), int(null.size), "exact",
                             float(null.mean()), float(null.std()), float(low), float(high), null)
    return replace(result, p=result.p_value("greater"))   # exact: #pairs as extreme / C(L, 2)


def layer_importance(values: Any, layer: int) -> PermutationNull:
    """Importance percentile of ``layer`` against every layer's (module docstring).

    ``values`` (L,), L ≥ 2: per-layer importance, higher = more important; ``layer``: an index, negative
    counts from the end (−1: the last layer). A :class:`~anatomy_kit.stats.PermutationNull` with
    ``method="exact"``, ``alternative="greater"``, ``n = n_perm = L`` and ``null`` (L,) every layer's
    percentile; ``p`` counts the layers whose percentile is at least ours (ties within 1e-9).
    """
    v = _profile("values", values, 2)
    i = check_int("layer", layer, minimum=-v.size, maximum=v.size - 1) % v.size
    pct = importance_percentiles(v)
    low, high = np.quantile(pct, [0.025, 0.975])
    result = PermutationNull(float(pct[i]), math.nan, "greater", int(v.size), int(v.size), "exact",
                             float(pct.mean()), float(pct.std()), float(low), float(high), pct)
    return replace(result, p=result.p_value("greater"))


def edge_contrasts(block_nll: Any, block_tokens: Any) -> dict[str, list[float]]:
    """``{"first − layer j" | "last − layer j": [per-block difference]}`` for every interior layer j (module docstring).

    ``block_nll`` (L, B), L ≥ 3, B ≥ 2: each block's summed NLL with layer ℓ skipped (row ℓ); ``block_tokens``
    (B,): the tokens each block scores. Each difference is ``(nll[edge, b] − nll[j, b]) / tokens[b]`` (nats per
    token; the intact model's loss cancels), in block order; keys in layer order, the first layer's first.
    """
    try:
        nll, tokens = np.asarray(block_nll, dtype=float), np.asarray(block_tokens, dtype=float)
    except (TypeError, ValueError):
        raise AnatomyKitError("block_nll and block_tokens must hold numbers") from None
    if nll.ndim != 2 or nll.shape[0] < 3 or nll.shape[1] < 2:
        raise AnatomyKitError(f"block_nll has shape {nll.shape}; expected (L, B) with L ≥ 3 layers (two edges and an "
                              "interior) and B ≥ 2 blocks")
    if tokens.shape != (nll.shape[1],) or not np.isfinite(tokens).all() or (tokens < 1).any():
        raise AnatomyKitError(f"block_tokens must be {nll.shape[1]} token counts ≥ 1 (one per block), got "
                              f"{tokens.tolist()}")
    if not np.isfinite(nll).all():
        raise AnatomyKitError("block_nll holds non-finite values")
    per_token = nll / tokens
    last = nll.shape[0] - 1
    return {f"{name} − layer {j}": (per_token[edge] - per_token[j]).tolist()
            for name, edge in (("first", 0), ("last", last)) for j in range(1, last)}


def resample_depth(values: Any, n_points: int) -> np.ndarray:
    """A per-layer profile (L,), L ≥ 2, at ``n_points`` depths ``linspace(0, 1, n_points)``, shape (n_points,).

    Linear interpolation between the layers' depths ``ℓ/(L−1)``, so the first and last values are
    the first and last layer's. Not :func:`anatomy_kit.allocation.schedules.resample_profile`: that
    averages over depth bins ``[ℓ/L, (ℓ+1)/L)`` (right for carrying a schedule across depths, a
    step function when a 4-layer profile is drawn on 30 points).
    """
    v = _profile("values", values, 2)
    n = check_int("n_points", n_points, minimum=2)
    return np.interp(np.linspace(0.0, 1.0, n), layer_depth(v.size), v)
