"""Fieller's interval for a ratio of two paired means (the share of a pruning gap that healing closes,
:mod:`anatomy_kit.card.heal_compare`): the set of ratios whose paired difference has a Student-t interval that
contains zero, unbounded when the denominator is not resolved."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as _sps

from .stats import _confidence, _sample
from .validate import AnatomyKitError

__all__ = ["RatioInterval", "paired_ratio_interval"]


@dataclass(frozen=True)
class RatioInterval:
    """Fieller's interval of ``ratio = mean(numerator) / mean(denominator)`` over paired units.

    ``bounded`` is False when the denominator's own t interval contains 0: the confidence set is
    then not an interval (``low = −inf``, ``high = +inf``), and no ratio can be excluded.
    """

    ratio: float
    low: float
    high: float
    n: int
    confidence: float
    bounded: bool


def paired_ratio_interval(numerator: Any, denominator: Any, confidence: float = 0.95) -> RatioInterval:
    """Fieller's interval for the ratio of two means measured on the same ``n`` units.

    The set of ``ρ`` whose paired difference ``numerator − ρ·denominator`` has a Student-t interval
    (:func:`paired_t_interval`, ``n − 1`` degrees of freedom) containing 0: the roots of
    ``ρ²(ȳ² − q·s_yy) − 2ρ(x̄ȳ − q·s_xy) + (x̄² − q·s_xx) = 0`` with ``q = t²/n`` (x the numerator,
    y the denominator, ``s`` sample (co)variances). Bounded exactly when the denominator's mean is
    resolved (``ȳ² > q·s_yy``, its own t interval excludes 0); otherwise ``(−inf, +inf)``.
    """
    x, y = _sample("numerator", numerator, 2), _sample("denominator", denominator, 2)
    if x.shape != y.shape:
        raise AnatomyKitError(f"numerator and denominator must pair up: {x.size} values against {y.size}")
    c = _confidence(confidence)
    n = x.size
    mx, my = float(x.mean()), float(y.mean())
    if my == 0:
        raise AnatomyKitError("the denominator's mean is 0: the ratio is undefined")
    cov = np.cov(np.stack([x, y]), ddof=1)
    q = float(_sps.t.ppf(0.5 + c / 2, n - 1)) ** 2 / n
    a = my * my - q * cov[1, 1]
    b = mx * my - q * cov[0, 1]
    k = mx * mx - q * cov[0, 0]
    ratio = mx / my
    if a <= 0:
        return RatioInterval(ratio, -math.inf, math.inf, n, c, False)
    root = math.sqrt(max(b * b - a * k, 0.0))   # ≥ 0 whenever a > 0 (the ratio itself lies inside)
    return RatioInterval(ratio, (b - root) / a, (b + root) / a, n, c, True)
