"""The surrogate of per-layer FFN width allocation and its exact solver.

Introduced in chapter 5 (*The width solver*).

The surrogate (paper 2, our reconstruction — INFERRED, see the book's appendix on sources):
layer ``ℓ`` with FFN width ``w_ℓ`` contributes an approximation error
``c_ℓ · w_ℓ^(−a_ℓ)`` to the loss, weighted by its sensitivity ``λ_ℓ``. With a fixed total
FFN width ``B = Σ_ℓ w_ℓ`` (FFN parameters are proportional to it) and bounds
``lower_ℓ ≤ w_ℓ ≤ upper_ℓ`` the allocation problem is

    minimise   Σ_ℓ λ_ℓ c_ℓ w_ℓ^(−a_ℓ)   subject to   Σ_ℓ w_ℓ = B,  lower ≤ w ≤ upper.

The objective is strictly convex (``a_ℓ > 0``), so the KKT conditions characterise the unique
optimum: with the *marginal benefit* ``m_ℓ(w) = λ_ℓ c_ℓ a_ℓ w^(−a_ℓ−1)`` and one multiplier
``μ > 0``, free layers have ``m_ℓ(w_ℓ) = μ``, layers at their lower bound ``m_ℓ ≤ μ`` and
layers at their upper bound ``m_ℓ ≥ μ``. Equivalently ``w_ℓ(μ) = clip((λ_ℓ c_ℓ a_ℓ/μ)^{1/(a_ℓ+1)},
lower_ℓ, upper_ℓ)`` and ``μ`` is the root of the non-increasing function ``Σ_ℓ w_ℓ(μ) − B``.

Two solvers compute it:

- a common exponent ``a`` gives ``w_ℓ = clip(t·g_ℓ, lower, upper)`` with ``g_ℓ = (λ_ℓ c_ℓ)^{1/(a+1)}``:
  the budget is piecewise *linear* in ``t``, so the breakpoints are sorted and the crossing
  segment solved exactly (water-filling over the active set of bounds, closed form);
- depth-dependent exponents: bisection on ``log μ`` until the active set is fixed, then Newton
  steps on ``log μ`` (the free-layer budget is convex and decreasing in ``log μ``) to machine
  precision.

Both work in log space (``log μ``, ``log(λ c a)``, the log of the objective), so coefficients
near the float limits or exponents in the hundreds neither overflow nor report an objective of
0; :attr:`WidthSolution.mu` and :attr:`WidthSolution.objective` are the exponentials, which may
be ``inf`` or ``0.0`` where the logs are not. A layer with zero work (``c_ℓ = 0`` or
``λ_ℓ = 0``) is well posed: its width buys nothing, so it sits at its lower bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import logsumexp

from ..validate import AnatomyKitError, as_vector, check_positive

__all__ = ["WidthSolution", "solve_widths", "surrogate_objective"]


@dataclass(frozen=True)
class WidthSolution:
    """The exact optimum of the width surrogate (continuous widths).

    ``widths`` sum to the budget (to rounding error of ``1e-12`` relative); ``log_mu`` is the log
    of the KKT multiplier μ (the common marginal benefit of the free layers); ``at_lower`` /
    ``at_upper`` are the active sets (zero-work layers are at their lower bound);
    ``log_objective`` the log of ``Σ λ c w^(−a)``; ``method`` the solver used (``"closed-form"``,
    ``"bisection+newton"``, or ``"bounds"`` when every layer with work is at its upper bound and
    the zero-work layers take the rest, so that μ = 0).
    """

    widths: np.ndarray
    log_mu: float
    at_lower: np.ndarray
    at_upper: np.ndarray
    log_objective: float
    method: str
    iterations: int

    @property
    def mu(self) -> float:
        """μ itself (``inf`` or ``0.0`` when ``log_mu`` is beyond the float range)."""
        return _exp(self.log_mu)

    @property
    def objective(self) -> float:
        """``Σ λ c w^(−a)`` itself (``0.0`` when it is below the float range; ``log_objective`` is exact)."""
        return _exp(self.log_objective)

    @property
    def free(self) -> np.ndarray:
        """Boolean mask of the layers strictly between their bounds."""
        return ~(self.at_lower | self.at_upper)

    def log_marginal(self, c: Any, a: Any, lam: Any = None) -> np.ndarray:
        """``log m_ℓ = log(λ_ℓ c_ℓ a_ℓ) − (a_ℓ + 1) log w_ℓ`` (``−inf`` for zero-work layers)."""
        lc, a = _log_weights(len(self.widths), c, a, lam)
        with np.errstate(divide="ignore"):
            return lc + np.log(a) - (a + 1.0) * np.log(self.widths)

    def marginal(self, c: Any, a: Any, lam: Any = None) -> np.ndarray:
        """``m_ℓ = λ_ℓ c_ℓ a_ℓ w_ℓ^(−a_ℓ−1)``: minus the objective's gradient at the solution."""
        with np.errstate(over="ignore"):
            return np.exp(self.log_marginal(c, a, lam))


def _exp(x: float) -> float:
    with np.errstate(over="ignore", under="ignore"):
        return float(np.exp(x))


def _log_weights(n: int | None, c: Any, a: Any, lam: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(log(λ_ℓ c_ℓ), a)``, validated: ``c``, ``λ`` ≥ 0 (0 gives ``−inf``), ``a`` > 0."""
    c = as_vector("c", c, n, allow_zero=True)
    a = as_vector("a", a, len(c))
    lam = np.ones(len(c)) if lam is None else as_vector("lam", lam, len(c), allow_zero=True)
    with np.errstate(divide="ignore"):
        return np.log(c) + np.log(lam), a


def surrogate_objective(widths: Any, c: Any, a: Any, lam: Any = None, *, log: bool = False) -> float:
    """``Σ_ℓ λ_ℓ c_ℓ w_ℓ^(−a_ℓ)`` — the surrogate error of a width allocation (chapter 5).

    Summed in log space (``log=True`` returns the log, exact where the sum itself under- or
    overflows). Zero-work layers add nothing, whatever their width.
    """
    w = as_vector("widths", widths, None, allow_zero=True)
    lc, a = _log_weights(len(w), c, a, lam)
    on = np.isfinite(lc)
    with np.errstate(divide="ignore"):
        terms = lc[on] - a[on] * np.log(w[on])
    value = float(logsumexp(terms)) if terms.size else -math.inf
    return value if log else _exp(value)


def _bounds(n: int, budget: float, lower: Any, upper: Any) -> tuple[np.ndarray, np.ndarray]:
    lo = as_vector("lower", lower, n, allow_zero=True)
    up = np.full(n, np.inf) if upper is None else as_vector("upper", upper, n)
    bad = np.flatnonzero(up < lo)
    if bad.size:
        i = int(bad[0])
        raise AnatomyKitError(f"upper[{i}]={up[i]:g} is below lower[{i}]={lo[i]:g}; each upper bound must be >= its lower bound")
    if lo.sum() > budget * (1 + 1e-12):
        raise AnatomyKitError(
            f"budget={budget:g} is infeasible: the lower bounds alone sum to {lo.sum():g} "
            f"({n} layers); raise the budget to >= {lo.sum():g} or lower the bounds")
    if up.sum() < budget * (1 - 1e-12):
        raise AnatomyKitError(
            f"budget={budget:g} is infeasible: the upper bounds sum to only {up.sum():g} "
            f"({n} layers); lower the budget to <= {up.sum():g} or raise the bounds")
    return lo, up


# ---------------------------------------------------------------------------------------------
# Solvers
# ---------------------------------------------------------------------------------------------

def solve_widths(c: Any, a: Any, lam: Any = None, *, budget: float, lower: Any = 0.0,
                 upper: Any = None) -> WidthSolution:
    """Exact minimiser of ``Σ λ_ℓ c_ℓ w_ℓ^(−a_ℓ)`` s.t. ``Σ w_ℓ = budget``, ``lower ≤ w ≤ upper``.

    Chapter 5. ``c`` (work coefficients) and ``lam`` (sensitivities, default 1) must be ≥ 0, not
    all zero in product; ``a`` (exponents; a scalar or equal entries select the closed form) > 0;
    ``lower``/``upper`` are scalars or per-layer (``upper=None``: unbounded). A zero-work layer
    gets its lower bound (more only if the others are all full). Raises :class:`AnatomyKitError`
    if the budget cannot meet the bounds.
    """
    c = as_vector("c", c, None, allow_zero=True)
    n = len(c)
    lc, a_arr = _log_weights(n, c, a, lam)
    budget = check_positive("budget", budget)
    lo, up = _bounds(n, budget, lower, upper)
    on = np.isfinite(lc)
    if not on.any():
        raise AnatomyKitError("every layer has zero work (c·λ = 0 everywhere): no allocation is better than "
                              "another; give at least one layer positive work")
    w = lo.copy()
    rest = budget - lo[~on].sum()              # what the layers with work share
    cap = up[on].sum()
    if rest > cap:                             # they are all full: the zero-work layers take the rest
        w[on], w[~on] = up[on], _spread(lo[~on], up[~on], rest - cap)
        log_mu, iters, method = -math.inf, 0, "bounds"    # more width buys nothing: μ = 0
    elif np.all(a_arr[on] == a_arr[on][0]):
        w[on], log_mu, iters, method = _solve_common(lc[on], float(a_arr[on][0]), rest, lo[on], up[on])
    else:
        w[on], log_mu, iters, method = _solve_general(lc[on] + np.log(a_arr[on]), a_arr[on], rest, lo[on], up[on])
    w = np.clip(w, lo, up)
    at_lower = w <= lo
    at_upper = (w >= up) & ~at_lower
    log_obj = surrogate_objective(w, c, a_arr, lam, log=True)
    return WidthSolution(widths=w, log_mu=float(log_mu), at_lower=at_lower, at_upper=at_upper,
                         log_objective=log_obj, method=method, iterations=iters)


def _spread(lo: np.ndarray, up: np.ndarray, extra: float) -> np.ndarray:
    """``lo`` plus ``extra`` shared in proportion to the room ``up − lo`` (equally among unbounded layers)."""
    room = up - lo
    share = np.isinf(room) / np.isinf(room).sum() if np.isinf(room).any() else room / room.sum()
    return lo + extra * share


def _degenerate_log_mu(logk: np.ndarray, a: np.ndarray, lo: np.ndarray, up: np.ndarray, budget: float):
    """All layers at a bound (budget equals Σ lower or Σ upper): the widths and the extreme valid log μ."""
    with np.errstate(divide="ignore"):
        if budget <= lo.sum() * (1 + 1e-15):
            return lo.copy(), float(np.max(logk - (a + 1.0) * np.log(lo)))  # μ ≥ every m_ℓ(lower_ℓ)
        if np.isfinite(up).all() and budget >= up.sum() * (1 - 1e-15):
            return up.copy(), float(np.min(logk - (a + 1.0) * np.log(up)))  # μ ≤ every m_ℓ(upper_ℓ)
    return None


def _solve_common(lc: np.ndarray, a: float, budget: float, lo: np.ndarray, up: np.ndarray):
    """Closed form for a common exponent: water-filling on ``w_ℓ = clip(t·g_ℓ, lo, up)``.

    ``g_ℓ = (λ_ℓ c_ℓ)^{1/(a+1)}`` is formed as ``exp(lg_ℓ − max lg)``, so ``t`` is found on a
    rescaled axis and ``log t = log t' − max lg``; then ``log μ = log a − (a + 1) log t``.
    """
    aa = np.full(len(lc), a)
    deg = _degenerate_log_mu(lc + math.log(a), aa, lo, up, budget)
    if deg is not None:
        return deg[0], deg[1], 0, "closed-form"
    lg = lc / (a + 1.0)
    shift = float(lg.max())
    g = np.exp(lg - shift)                     # in (0, 1]; the largest is 1
    # S(t) = Σ clip(t g, lo, up) is piecewise linear and non-decreasing in t; its breakpoints:
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        bps = np.concatenate([lo / g, up / g])   # g may underflow to 0: such a layer stays at its bound
    bps = np.unique(bps[np.isfinite(bps)])
    vals = np.array([float(np.clip(t * g, lo, up).sum()) for t in bps])
    # The last breakpoint with S(t) <= budget; on the next segment the free set is fixed.
    j = int(np.searchsorted(vals, budget, side="right")) - 1
    t_left = bps[j] if j >= 0 else 0.0
    t_right = bps[j + 1] if j + 1 < len(bps) else np.inf
    t_mid = t_left * 1.5 + 1.0 if not np.isfinite(t_right) else 0.5 * (t_left + t_right)
    below, above = t_mid * g <= lo, t_mid * g >= up
    free = ~(below | above)
    fixed_sum = float(lo[below].sum() + up[above & ~below].sum())
    t = (budget - fixed_sum) / float(g[free].sum())
    w = _fix_budget(np.where(free, t * g, np.where(below, lo, up)), free, budget)
    log_mu = math.log(a) - (a + 1.0) * (math.log(t) - shift)   # from t = (a/μ)^{1/(a+1)}
    return w, log_mu, len(bps), "closed-form"


def _fix_budget(w: np.ndarray, free: np.ndarray, budget: float) -> np.ndarray:
    if free.any():
        resid = budget - w.sum()
        w = w.copy()
        w[free] += resid * w[free] / w[free].sum()
    return w


@dataclass(frozen=True)
class _LogMuProblem:
    """Σ_ℓ clip(exp(p_ℓ (log k_ℓ − x)), lo_ℓ, up_ℓ) = B in x = log μ (non-increasing in x)."""

    logk: np.ndarray
    p: np.ndarray
    lo: np.ndarray
    up: np.ndarray
    budget: float

    def free_w(self, x: float) -> np.ndarray:   # unclipped (λ c a / μ)^{1/(a+1)}; inf or 0 beyond float range
        with np.errstate(over="ignore", under="ignore"):
            return np.exp(self.p * (self.logk - x))

    def total(self, x: float) -> float:
        return float(np.clip(self.free_w(x), self.lo, self.up).sum())

    def active(self, x: float) -> tuple[np.ndarray, np.ndarray]:
        f = self.free_w(x)
        return f <= self.lo, f >= self.up


def _bracket(pr: _LogMuProblem, a: np.ndarray) -> tuple[float, float]:
    """``left ≤ root ≤ right``, starting where the mean width is free for each layer, doubling steps."""
    wbar = pr.budget / len(pr.logk)
    guess = float(np.median(pr.logk - (a + 1.0) * math.log(wbar)))
    left, right, step = guess, guess, 1.0
    while pr.total(left) < pr.budget:
        left -= step
        step *= 2.0
    step = 1.0
    while pr.total(right) > pr.budget:
        right += step
        step *= 2.0
    return left, right


def _bisect_active_set(pr: _LogMuProblem, left: float, right: float) -> tuple[float, float, int]:
    """Bisect until the active set is the same at both ends of the bracket (or the bracket is at
    floating-point resolution, which happens when the root sits on a breakpoint)."""
    iters = 0
    while True:
        lo_l, up_l = pr.active(left)
        lo_r, up_r = pr.active(right)
        if (np.array_equal(lo_l, lo_r) and np.array_equal(up_l, up_r)) or right - left <= 1e-15 * max(1.0, abs(left)):
            return left, right, iters
        mid = 0.5 * (left + right)
        iters += 1
        if pr.total(mid) >= pr.budget:
            left = mid
        else:
            right = mid
        if iters > 2000:  # pragma: no cover - cannot happen for finite inputs
            return left, right, iters


def _newton_polish(pr: _LogMuProblem, left: float, right: float, free: np.ndarray, fixed: float) -> tuple[float, int]:
    """Newton on h(x) = Σ_free exp(p (log k − x)) + fixed − B, convex decreasing in x = log μ:
    from the left end (h ≥ 0) the iterates increase monotonically to the root."""
    x, iters = left, 0
    if not free.any():
        return x, iters
    for _ in range(100):
        wf = pr.free_w(x)[free]
        h = float(wf.sum()) + fixed - pr.budget
        dh = -float((pr.p[free] * wf).sum())
        iters += 1
        x_new = min(max(x - h / dh, left), right)  # safeguard: stay inside the bracket
        if abs(x_new - x) <= 4e-16 * max(1.0, abs(x)):
            return x_new, iters
        x = x_new
    return x, iters


def _solve_general(logk: np.ndarray, a: np.ndarray, budget: float, lo: np.ndarray, up: np.ndarray):
    """Depth-dependent exponents: bisection on log μ, then Newton polish on the active set.

    ``logk = log(λ c a)`` (n,); returns ``(widths, log μ, iterations, method)``.
    """
    deg = _degenerate_log_mu(logk, a, lo, up, budget)
    if deg is not None:
        return deg[0], deg[1], 0, "bisection+newton"
    pr = _LogMuProblem(logk, 1.0 / (a + 1.0), lo, up, budget)
    left, right = _bracket(pr, a)
    left, right, iters = _bisect_active_set(pr, left, right)
    at_lo, at_up = pr.active(0.5 * (left + right))
    free = ~(at_lo | at_up)
    fixed = float(lo[at_lo].sum() + up[at_up & ~at_lo].sum())
    x, newton = _newton_polish(pr, left, right, free, fixed)
    w = np.where(at_lo, lo, np.where(at_up, up, pr.free_w(x)))
    w = _fix_budget(w, free, budget)
    return w, x, iters + newton, "bisection+newton"


