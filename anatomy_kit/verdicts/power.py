"""How many blocks or seeds a rule needs to decide: power of the interval rules, sign-flip floor included.

The rules of :mod:`.rules` decide when an interval of the primary statistic lies wholly on one side
of a boundary (a threshold, a margin, a factor of the paper's value). With ``n`` independent units
(evaluation blocks, paired seeds) of standard deviation ``sd`` and a true distance ``distance`` from
the statistic to its nearest boundary, the two-sided ``confidence`` t interval clears the boundary
exactly when a one-sided t test at level ``(1 − confidence)/2`` rejects, so its probability is the
power of that test: ``P(T > t_crit)`` with ``T`` non-central t (``n − 1`` degrees of freedom,
non-centrality ``distance·√n / sd``; :func:`interval_power`).

Paired seeds decided by the exact **sign-flip** test have a discrete floor: ``n`` seeds give
``p ≥ 2/2ⁿ`` two-sided, so below ``n = 6`` (at α = 0.05) no data decide at all.
:func:`sign_flip_power` respects it: the test runs at the largest attainable level ``2k/2ⁿ ≤ α``
(:func:`attainable_alpha`); where that level is the floor itself the test rejects only when all
``n`` differences share a sign, whose probability for normal differences is
``Φ(δ/σ)ⁿ + Φ(−δ/σ)ⁿ``, exactly; above it, the t test's power at the attainable level (the
sign-flip test of the mean is asymptotically the t test; ``tests/test_power.py`` checks both
against a simulation of the sign-flip test itself). :func:`units_needed` inverts either.

Pure functions of numbers; bad input raises :class:`~anatomy_kit.validate.AnatomyKitError`.
"""

from __future__ import annotations

import math
from fractions import Fraction

from scipy import stats as _sps

from ..validate import AnatomyKitError, check_int

__all__ = ["POWER", "attainable_alpha", "interval_power", "sign_flip_power", "rule_power", "units_needed",
           "half_width"]

#: the power at which a size counts as "decides"
POWER = 0.8
METHODS = ("t", "sign-flip")


def _positive(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise AnatomyKitError(f"{name}={value!r} must be a finite number > 0")
    return float(value)


def _level(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
        raise AnatomyKitError(f"{name}={value!r} must be a number strictly between 0 and 1")
    return float(value)


def _tail(p: float) -> float:
    """A tail probability of scipy's non-central t, whose far tail can come back NaN (it is then 0)."""
    return float(p) if math.isfinite(p) else 0.0


def attainable_alpha(n: int, alpha: float = 0.05) -> float:
    """The largest two-sided level ``2k/2ⁿ ≤ alpha`` of an exact sign-flip test on ``n`` seeds (0: none).

    >>> attainable_alpha(5), attainable_alpha(6)
    (0.0, 0.03125)
    """
    check_int("n", n, minimum=1)
    _level("alpha", alpha)
    # exact rational arithmetic: a float 2ⁿ overflows from n = 1024, which units_needed's search can reach
    k = math.floor(Fraction(alpha) * 2 ** n / 2 * (1 + Fraction(1, 10 ** 12)))
    return 2 * k / 2 ** n


def interval_power(distance: float, sd: float, n: int, confidence: float = 0.95) -> float:
    """Probability that a two-sided ``confidence`` t interval of the mean of ``n`` units (each of standard
    deviation ``sd``) lies wholly on the far side of a boundary ``distance`` away from the true mean."""
    check_int("n", n, minimum=2)
    d, s, c = abs(float(distance)), _positive("sd", sd), _level("confidence", confidence)
    crit = _sps.t.ppf(1 - (1 - c) / 2, n - 1)
    return _tail(_sps.nct.sf(crit, n - 1, d * math.sqrt(n) / s))


def sign_flip_power(effect: float, sd: float, n: int, alpha: float = 0.05) -> float:
    """Probability that an exact two-sided sign-flip test on ``n`` paired differences ~ N(effect, sd²)
    gives ``p ≤ alpha`` (module docstring: the floor ``2/2ⁿ`` and the two regimes)."""
    check_int("n", n, minimum=1)
    s = _positive("sd", sd)
    level = attainable_alpha(n, alpha)
    if level == 0.0:
        return 0.0
    z = abs(float(effect)) / s
    if level == 2 / 2 ** n:                       # only the two all-same-sign patterns reject
        return float(_sps.norm.cdf(z) ** n + _sps.norm.cdf(-z) ** n)
    crit = _sps.t.ppf(1 - level / 2, n - 1)
    nc = z * math.sqrt(n)
    return min(1.0, _tail(_sps.nct.sf(crit, n - 1, nc)) + _tail(_sps.nct.cdf(-crit, n - 1, nc)))


def rule_power(distance: float, sd: float, n: int, *, method: str = "t", confidence: float = 0.95) -> float:
    """The power of a claim's rule at ``n`` units: :func:`interval_power` (``method="t"``) or, for paired
    seeds decided by the exact test, :func:`sign_flip_power` at ``alpha = 1 − confidence``."""
    if method not in METHODS:
        raise AnatomyKitError(f"method={method!r}; accepted: {list(METHODS)}")
    if method == "sign-flip":
        return sign_flip_power(distance, sd, n, 1 - _level("confidence", confidence))
    return interval_power(distance, sd, n, confidence)


def units_needed(distance: float, sd: float, *, method: str = "t", confidence: float = 0.95,
                 power: float = POWER, max_n: int = 1_000_000) -> int | None:
    """The fewest units (blocks, seeds) at which :func:`rule_power` reaches ``power``; ``None`` if more than
    ``max_n`` would be needed (e.g. a true distance of 0: the boundary itself cannot be cleared)."""
    _level("power", power)
    check_int("max_n", max_n, minimum=2)
    if abs(float(distance)) == 0:
        return None

    def ok(n: int) -> bool:
        return rule_power(distance, sd, n, method=method, confidence=confidence) >= power

    lo = 2
    if ok(lo):
        return lo
    hi = 4
    while not ok(hi):                             # the power grows with n above the sign-flip floor
        if hi >= max_n:
            return None
        lo, hi = hi, min(2 * hi, max_n)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


def half_width(sd: float, n: int, confidence: float = 0.95) -> float:
    """The half-width ``t·sd/√n`` of a two-sided ``confidence`` t interval of the mean of ``n`` units."""
    check_int("n", n, minimum=2)
    return float(_sps.t.ppf(1 - (1 - _level("confidence", confidence)) / 2, n - 1) * _positive("sd", sd)
                 / math.sqrt(n))
