"""Self-checks for chapter 5 (*The width solver*): water-filling widths and the paired t interval."""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
from scipy import stats as _sps

from .core import check

__all__ = ["check_water_filling", "check_paired_t_interval", "WRONG_ANSWERS"]

#: (c, a, budget, lower, upper): no bound active; lower bounds active; upper bounds active.
_PROBLEMS = (
    (np.array([1.0, 4.0, 9.0, 16.0]), 1.0, 400.0, 10.0, 1000.0),
    (np.array([0.05, 0.1, 3.0, 8.0, 20.0]), 0.5, 500.0, 60.0, 1000.0),
    (np.array([50.0, 1.0, 1.0, 1.0]), 2.0, 400.0, 20.0, 150.0),
)


@check("check_water_filling")
def check_water_filling(widths_fn: Callable) -> str | None:
    """``widths_fn(c, a, budget, lower, upper)`` (c: (L,), a, budget, lower, upper: numbers) → widths (L,)
    minimising ``Σ c_ℓ w_ℓ^(−a)`` with ``Σ w = budget`` and ``lower ≤ w ≤ upper``."""
    from ..allocation import solve_widths

    for c, a, budget, lower, upper in _PROBLEMS:
        ref = solve_widths(c, a, budget=budget, lower=lower, upper=upper).widths
        got = np.asarray(widths_fn(c.copy(), a, budget, lower, upper), dtype=float).reshape(-1)
        if got.shape != ref.shape:
            return f"return one width per layer ({len(c)} here), not an array of shape {got.shape}"
        if np.allclose(got, ref, rtol=1e-6):
            continue
        if not math.isclose(got.sum(), budget, rel_tol=1e-6):
            return f"your widths sum to {got.sum():.6g}, not the budget {budget:g}: re-share what clipping frees"
        if np.allclose(got, budget * c / c.sum(), rtol=1e-6):
            return "widths proportional to c ignore the exponent: a free layer gets w ∝ c^(1/(a+1))"
        if (got < lower - 1e-9).any() or (got > upper + 1e-9).any():
            i = int(np.flatnonzero((got < lower - 1e-9) | (got > upper + 1e-9))[0])
            return f"layer {i} gets {got[i]:.4g}, outside its bounds [{lower:g}, {upper:g}]: clip it there"
        return (f"for c = {c.tolist()}, a = {a:g}, budget {budget:g} in [{lower:g}, {upper:g}] your widths are "
                f"{np.round(got, 2).tolist()}, the optimum is {np.round(ref, 2).tolist()}")
    return None


@check("check_paired_t_interval")
def check_paired_t_interval(interval_fn: Callable) -> str | None:
    """``interval_fn(a, b)`` (per-seed losses of two rules, same seed order) → ``(low, high)``, the 95 %
    t interval of the mean paired difference ``a − b``."""
    from ..stats import paired_t_interval

    a = [3.912, 3.951, 3.940]
    b = [3.949, 3.960, 3.993]
    ref = paired_t_interval(np.subtract(a, b))
    low, high = (float(v) for v in interval_fn(list(a), list(b)))
    if math.isclose(low, ref.low, abs_tol=1e-9) and math.isclose(high, ref.high, abs_tol=1e-9):
        return None
    d = np.subtract(a, b)
    half = high - (low + high) / 2
    if not math.isclose((low + high) / 2, d.mean(), abs_tol=1e-9):
        return f"the interval should be centred on the mean paired difference {d.mean():+.4f}, not {(low + high) / 2:+.4f}"
    if math.isclose(half, 1.959964 * d.std(ddof=1) / math.sqrt(3), rel_tol=1e-4):
        return "with 3 seeds use Student's t with n − 1 = 2 degrees of freedom (4.30), not the normal 1.96"
    if math.isclose(half, float(_sps.t.ppf(0.975, 2)) * d.std(ddof=0) / math.sqrt(3), rel_tol=1e-6):
        return "use the sample standard deviation (ddof = 1) of the differences, not ddof = 0"
    unpaired = float(_sps.t.ppf(0.975, 4)) * math.sqrt(np.var(a, ddof=1) / 3 + np.var(b, ddof=1) / 3)
    if math.isclose(half, unpaired, rel_tol=1e-3) or half > 1.5 * (ref.high - ref.mean):
        return "you treated the rules as unpaired; subtract seed by seed first, then take the t interval of the differences"
    return f"your interval is [{low:+.4f}, {high:+.4f}], the kit's is [{ref.low:+.4f}, {ref.high:+.4f}]"


def _proportional(c, a, budget, lower, upper):
    return budget * c / c.sum()


def _no_bounds(c, a, budget, lower, upper):
    g = c ** (1 / (a + 1))
    return budget * g / g.sum()


def _clip_only(c, a, budget, lower, upper):
    return np.clip(_no_bounds(c, a, budget, lower, upper), lower, upper)


def _z_interval(a, b):
    d = np.subtract(a, b)
    half = 1.959964 * d.std(ddof=1) / math.sqrt(len(d))
    return d.mean() - half, d.mean() + half


def _unpaired(a, b):
    d = np.mean(a) - np.mean(b)
    half = float(_sps.t.ppf(0.975, 4)) * math.sqrt(np.var(a, ddof=1) / 3 + np.var(b, ddof=1) / 3)
    return d - half, d + half


def _ddof0(a, b):
    d = np.subtract(a, b)
    half = float(_sps.t.ppf(0.975, len(d) - 1)) * d.std(ddof=0) / math.sqrt(len(d))
    return d.mean() - half, d.mean() + half


#: Typical mistakes each check must reject (tests/test_exercises.py runs them).
WRONG_ANSWERS = {
    "check_water_filling": [_proportional, _no_bounds, _clip_only,
                            lambda c, a, budget, lower, upper: _no_bounds(c, a - 1 if a > 1 else a / 2, budget, lower,
                                                                          upper)],
    "check_paired_t_interval": [_z_interval, _unpaired, _ddof0],
}
