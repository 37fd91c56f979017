"""Layer rankings by importance, and the one meaning of "interior" layers (chapters 1 and 2).

Kept apart from :mod:`.ablation` and :mod:`.importance` so that both can use it without importing
each other.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..validate import AnatomyKitError, check_int

__all__ = ["interior_layers", "rank_layers"]


def interior_layers(n_layers: int) -> list[int]:
    """Layers 1 … L−2: every layer but the first and the last of the model.

    The one meaning of "interior" in the kit. Chapter 1's neighbour-mean ablation replaces an
    interior layer by the mean of two neighbours but an edge layer by a copy of its single
    neighbour, so edge and interior importances are not comparable.
    """
    check_int("n_layers", n_layers, minimum=1)
    return list(range(1, n_layers - 1))


def rank_layers(importance: Sequence[float], layers: Sequence[int] | None = None, *, n_layers: int | None = None,
                interior_only: bool = True) -> list[int]:
    """Layers from most to least important (ties by layer index).

    ``importance[i]`` belongs to layer ``layers[i]`` (default ``0 … len−1``); ``n_layers`` is the
    model's depth (default: one more than the largest layer), which fixes the edges that
    ``interior_only`` leaves out (see :func:`interior_layers`).
    """
    imp = np.asarray(importance, dtype=float).reshape(-1)
    layers = list(range(len(imp))) if layers is None else [int(l) for l in layers]
    if len(layers) != len(imp):
        raise AnatomyKitError(f"importance has {len(imp)} values but layers has {len(layers)}")
    n = n_layers if n_layers is not None else (max(layers) + 1 if layers else 0)
    keep = set(interior_layers(n)) if interior_only else set(layers)
    value = dict(zip(layers, imp))
    return sorted((l for l in layers if l in keep), key=lambda l: (-value[l], l))
