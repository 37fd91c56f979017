"""The per-unit spread of a smoke interval, for :mod:`anatomy_kit.book.power`: which scale the interval is
symmetric on (the statistic, its log, or ``log(1 + x/100)`` of a percent change), and ``sd = h·√n / t`` from
the half-width ``h`` facing the nearest boundary."""

from __future__ import annotations

import math
from typing import Any

from scipy import stats as _sps


def _number(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else None


def _infinite_end(iv: dict) -> bool:
    """An interval stored with an end that is infinite (JSON keeps ``±inf`` as ``null``; a finite mean and an end
    that is ``null`` or infinite)."""
    ends = [iv.get("low"), iv.get("high")]
    return _number(iv.get("mean")) is not None and any(
        e is None or (isinstance(e, float) and math.isinf(e)) for e in ends)


def _intervals(data: Any) -> list[tuple[str, dict]]:
    """``[(name, interval dict)]`` of a claim's data: one interval, or a mapping of them."""
    if isinstance(data, dict) and "low" in data and "n" in data:
        return [("", data)]
    if isinstance(data, dict):
        return [(str(k), v) for k, v in data.items() if isinstance(v, dict) and "low" in v and "n" in v]
    return []


#: the scales an interval may be symmetric on: the statistic, its log, log(1 + x/100) of a percent change
_TRANSFORMS = ((lambda x: x, lambda y: y),
               (lambda x: math.log(x) if x > 0 else None, math.exp),
               (lambda x: math.log1p(x / 100) if x > -100 else None, lambda y: 100 * math.expm1(y)))


def scale_of(iv: dict) -> tuple[Any, Any]:
    """``(forward, inverse)`` of the scale on which the interval ``iv`` is most symmetric."""
    mean, low, high = _number(iv.get("mean")), _number(iv.get("low")), _number(iv.get("high"))
    best, chosen = None, _TRANSFORMS[0]
    for fwd, inv in _TRANSFORMS:
        vals = [fwd(v) if v is not None else 0.0 for v in (mean, low, high)]
        if None in vals or mean is None:
            continue
        m, lo, hi = vals
        asym = abs((hi - m) - (m - lo)) / (hi - lo) if low is not None and high is not None and hi > lo else 0.0
        if best is None or asym < best - 1e-9:
            best, chosen = asym, (fwd, inv)
    return chosen


def spread(iv: dict, boundaries: list[float], confidence: float,
            scale: tuple[Any, Any] | None = None) -> tuple[float, float, int, tuple] | None:
    """``(distance to the nearest boundary, per-unit sd, n, (centre, forward, inverse))`` on the scale where
    the interval is most symmetric (or on ``scale``); ``None`` without a usable interval."""
    mean, low, high, n = _number(iv.get("mean")), _number(iv.get("low")), _number(iv.get("high")), iv.get("n")
    if mean is None or not isinstance(n, int) or n < 2 or (low is None and high is None):
        return None
    fwd, inv = scale or scale_of(iv)
    m, lo, hi = fwd(mean), fwd(low) if low is not None else None, fwd(high) if high is not None else None
    bs = [b for b in (fwd(b) for b in boundaries) if b is not None]
    if m is None or not bs or (low is not None and lo is None) or (high is not None and hi is None):
        return None
    b = min(bs, key=lambda v: abs(v - m))
    h = (hi - m) if (b > m and hi is not None) or lo is None else (m - lo)
    if h <= 0:
        return None
    t = _sps.t.ppf(1 - (1 - confidence) / 2, n - 1)
    return abs(b - m), h * math.sqrt(n) / t, n, (m, fwd, inv)
