"""Rounding continuous FFN widths to hardware multiples with an exact budget (chapter 5)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..validate import AnatomyKitError, as_vector, check_int

__all__ = ["round_widths"]


def round_widths(widths: Any, multiple: int, budget: int, lower: Any = None, upper: Any = None) -> list[int]:
    """Round continuous widths to multiples of ``multiple`` whose sum is exactly ``budget``.

    Chapter 5. Largest-remainder rounding with bounds: every width starts at the multiple below
    it (clamped into ``[lower, upper]`` after rounding the bounds inward to multiples), then
    whole multiples are handed to the layers furthest below their continuous value (or taken
    from those furthest above) until the budget is met. This minimises ``Σ (w_int − w)²`` under
    the constraints. Infeasible requests raise :class:`AnatomyKitError` naming the numbers.
    """
    w = as_vector("widths", widths, None, allow_zero=True)
    n = len(w)
    m = check_int("multiple", multiple, minimum=1)
    budget = check_int("budget", budget, minimum=1)
    if budget % m:
        raise AnatomyKitError(
            f"budget={budget} is not a multiple of multiple={m}; widths that are multiples of {m} "
            f"can only sum to a multiple of {m} (nearest: {budget // m * m} or {(budget // m + 1) * m})")
    lo = np.zeros(n) if lower is None else as_vector("lower", lower, n, allow_zero=True)
    up = np.full(n, np.inf) if upper is None else as_vector("upper", upper, n)
    lo_u = np.ceil(lo / m - 1e-9).astype(np.int64)
    lo_u = np.maximum(lo_u, 1)  # a layer keeps at least one multiple (a zero-width FFN is not a layer)
    up_u = np.where(np.isfinite(up), np.floor(np.where(np.isfinite(up), up, 0) / m + 1e-9), np.iinfo(np.int64).max // (4 * n)).astype(np.int64)
    bad = np.flatnonzero(lo_u > up_u)
    if bad.size:
        i = int(bad[0])
        raise AnatomyKitError(
            f"layer {i}: no multiple of {m} lies in [lower={max(lo[i], m):g}, upper={up[i]:g}] "
            "(widths must be positive multiples); widen the bounds or use a smaller multiple")
    units = budget // m
    if lo_u.sum() > units:
        raise AnatomyKitError(
            f"budget={budget} is infeasible: the lower bounds rounded up to multiples of {m} "
            f"(at least {m} per layer) sum to {int(lo_u.sum()) * m} over {n} layers")
    if np.isfinite(up).all() and up_u.sum() < units:
        raise AnatomyKitError(
            f"budget={budget} is infeasible: the upper bounds rounded down to multiples of {m} "
            f"sum to only {int(up_u.sum()) * m} over {n} layers")
    target = w / m
    base = np.clip(np.floor(target + 1e-9).astype(np.int64), lo_u, up_u)
    resid = int(units - base.sum())
    # Hand out / take back whole units greedily by the signed remainder (target − base).
    while resid != 0:
        rem = target - base
        if resid > 0:
            cand = np.flatnonzero(base < up_u)
            take = cand[np.argsort(-rem[cand], kind="stable")][:resid]
            base[take] += 1
        else:
            cand = np.flatnonzero(base > lo_u)
            take = cand[np.argsort(rem[cand], kind="stable")][:-resid]
            base[take] -= 1
        resid = int(units - base.sum())
    return [int(b) * m for b in base]


