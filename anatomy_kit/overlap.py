"""The chance of a set overlap when the items are exchangeable (chapter 1's ``SetOverlap``; the layer report card).

Kept out of :mod:`anatomy_kit.stats` only for that module's size; import it from there
(``from anatomy_kit.stats import overlap_chance``).
"""

from __future__ import annotations

from scipy import stats as _sps

from .validate import check_int

__all__ = ["overlap_chance"]


def overlap_chance(shared: int, n_items: int, size_a: int, size_b: int) -> float:
    """P(a random ``size_b``-set from ``n_items`` shares ≥ ``shared`` members with a fixed ``size_a``-set).

    The hypergeometric upper tail ``P(X ≥ shared)``, ``X ~ Hypergeom(n_items, size_a, size_b)``: the
    chance of a top-k overlap when the items (layers) are exchangeable. Used by
    :class:`anatomy_kit.verdicts.rules.SetOverlap` (chapter 1) and the layer report card's agreement panel.
    """
    n = check_int("n_items", n_items, minimum=1)
    a = check_int("size_a", size_a, minimum=0, maximum=n)
    b = check_int("size_b", size_b, minimum=0, maximum=n)
    k = check_int("shared", shared, minimum=0, maximum=min(a, b))
    return float(_sps.hypergeom.sf(k - 1, n, a, b))
