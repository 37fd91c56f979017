"""Per-layer FFN width allocation: the surrogate, its exact solver, and width schedules.

Introduced in chapter 5 (*The width solver*).

The surrogate (paper 2, our reconstruction — see ``shared/papers/SPECS.md`` §2.4, INFERRED):
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
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .validate import AnatomyKitError, check_choice, check_finite, check_int, check_positive

__all__ = [
    "WidthSolution",
    "solve_widths",
    "surrogate_objective",
    "round_widths",
    "exponents_from_intrinsic_dimension",
    "coefficients_from_profile",
    "anti_profile",
    "resample_profile",
    "width_schedule",
    "allocate",
    "parse_rule",
    "SCHEDULE_KINDS",
]


# ---------------------------------------------------------------------------------------------
# Input handling
# ---------------------------------------------------------------------------------------------

def _vector(name: str, value: Any, n: int | None, *, positive: bool = True, allow_zero: bool = False) -> np.ndarray:
    """A finite float vector of length ``n`` (a scalar is broadcast); positivity checked."""
    arr = np.asarray(value, dtype=float)
    if arr.ndim == 0:
        if n is None:
            raise AnatomyKitError(f"{name}={value!r} must be a sequence of per-layer values")
        arr = np.full(n, float(arr))
    if arr.ndim != 1:
        raise AnatomyKitError(f"{name} must be a scalar or a 1-D sequence; got shape {arr.shape}")
    if n is not None and arr.shape[0] != n:
        raise AnatomyKitError(f"{name} has {arr.shape[0]} entries; expected one per layer ({n})")
    if arr.shape[0] == 0:
        raise AnatomyKitError(f"{name} is empty; expected at least one layer")
    check_finite(name, arr)
    if positive:
        bad = arr < 0 if allow_zero else arr <= 0
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            bound = ">= 0" if allow_zero else "> 0"
            raise AnatomyKitError(f"{name}[{i}]={arr[i]:g} must be {bound} (every entry must be)")
    return arr


@dataclass(frozen=True)
class WidthSolution:
    """The exact optimum of the width surrogate (continuous widths).

    ``widths`` sum to the budget (to rounding error of ``1e-12`` relative), ``mu`` is the KKT
    multiplier (the common marginal benefit of the free layers), ``at_lower``/``at_upper`` are
    the active sets, ``objective`` the surrogate value ``Σ λ c w^(−a)``, ``method`` the solver
    used (``"closed-form"`` or ``"bisection+newton"``).
    """

    widths: np.ndarray
    mu: float
    at_lower: np.ndarray
    at_upper: np.ndarray
    objective: float
    method: str
    iterations: int

    @property
    def free(self) -> np.ndarray:
        """Boolean mask of the layers strictly between their bounds."""
        return ~(self.at_lower | self.at_upper)

    def marginal(self, c: Any, a: Any, lam: Any = None) -> np.ndarray:
        """``m_ℓ = λ_ℓ c_ℓ a_ℓ w_ℓ^(−a_ℓ−1)``: minus the objective's gradient at the solution."""
        n = len(self.widths)
        c = _vector("c", c, n)
        a = _vector("a", a, n)
        lam = np.ones(n) if lam is None else _vector("lam", lam, n)
        return lam * c * a * self.widths ** (-a - 1.0)


def surrogate_objective(widths: Any, c: Any, a: Any, lam: Any = None) -> float:
    """``Σ_ℓ λ_ℓ c_ℓ w_ℓ^(−a_ℓ)`` — the surrogate error of a width allocation (chapter 5)."""
    w = _vector("widths", widths, None)
    n = len(w)
    c = _vector("c", c, n)
    a = _vector("a", a, n)
    lam = np.ones(n) if lam is None else _vector("lam", lam, n)
    return float(np.sum(lam * c * w ** (-a)))


def _bounds(n: int, budget: float, lower: Any, upper: Any) -> tuple[np.ndarray, np.ndarray]:
    lo = _vector("lower", lower, n, allow_zero=True)
    up = np.full(n, np.inf) if upper is None else _vector("upper", upper, n)
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

    Chapter 5. ``c`` (work coefficients), ``a`` (exponents; a scalar or equal entries select the
    closed form) and ``lam`` (sensitivities, default 1) must be positive; ``lower``/``upper`` are
    scalars or per-layer (``upper=None``: unbounded). Raises :class:`AnatomyKitError` if the budget
    cannot meet the bounds.
    """
    c = _vector("c", c, None)
    n = len(c)
    a_arr = _vector("a", a, n)
    lam = np.ones(n) if lam is None else _vector("lam", lam, n)
    budget = check_positive("budget", budget)
    lo, up = _bounds(n, budget, lower, upper)
    k = lam * c * a_arr  # m_ℓ(w) = k_ℓ w^(−a_ℓ−1)

    if np.all(a_arr == a_arr[0]):
        w, mu, iters, method = _solve_common(lam * c, float(a_arr[0]), budget, lo, up)
    else:
        w, mu, iters, method = _solve_general(k, a_arr, budget, lo, up)

    at_lower = w <= lo
    at_upper = w >= up
    w = np.clip(w, lo, up)
    objective = float(np.sum(lam * c * w ** (-a_arr)))
    return WidthSolution(widths=w, mu=float(mu), at_lower=at_lower, at_upper=at_upper & ~at_lower,
                         objective=objective, method=method, iterations=iters)


def _degenerate_mu(k: np.ndarray, a: np.ndarray, lo: np.ndarray, up: np.ndarray, budget: float):
    """All layers at a bound (budget equals Σ lower or Σ upper): the smallest valid μ."""
    if budget <= lo.sum() * (1 + 1e-15):
        with np.errstate(divide="ignore"):
            m = k * lo ** (-a - 1.0)
        return lo.copy(), float(np.max(m))  # μ ≥ every m_ℓ(lower_ℓ)
    if np.isfinite(up).all() and budget >= up.sum() * (1 - 1e-15):
        m = k * up ** (-a - 1.0)
        return up.copy(), float(np.min(m))  # μ ≤ every m_ℓ(upper_ℓ)
    return None


def _solve_common(lc: np.ndarray, a: float, budget: float, lo: np.ndarray, up: np.ndarray):
    """Closed form for a common exponent: water-filling on w_ℓ = clip(t·g_ℓ, lo, up)."""
    k = lc * a
    aa = np.full(len(lc), a)
    deg = _degenerate_mu(k, aa, lo, up, budget)
    if deg is not None:
        return deg[0], deg[1], 0, "closed-form"
    g = lc ** (1.0 / (a + 1.0))
    # S(t) = Σ clip(t g, lo, up) is piecewise linear and non-decreasing in t; its breakpoints:
    t_lo = lo / g
    t_up = up / g
    bps = np.unique(np.concatenate([t_lo, t_up[np.isfinite(t_up)]]))

    def S(t: float) -> float:
        return float(np.clip(t * g, lo, up).sum())

    # Find the last breakpoint with S(t) <= budget; on the next segment the free set is fixed.
    vals = np.array([S(t) for t in bps])
    j = int(np.searchsorted(vals, budget, side="right")) - 1
    t_left = bps[j] if j >= 0 else 0.0
    t_right = bps[j + 1] if j + 1 < len(bps) else np.inf
    t_mid = t_left * 1.5 + 1.0 if not np.isfinite(t_right) else 0.5 * (t_left + t_right)
    free = (t_mid * g > lo) & (t_mid * g < up)
    fixed_sum = float(np.where(t_mid * g <= lo, lo, 0.0).sum() + np.where(t_mid * g >= up, up, 0.0).sum())
    t = (budget - fixed_sum) / float(g[free].sum())
    w = np.where(free, t * g, np.where(t_mid * g <= lo, lo, up))
    # Rescale the free layers so Σ w equals the budget to the last bit we can.
    w = _fix_budget(w, free, budget)
    mu = a * t ** (-(a + 1.0))  # from t = (a/μ)^{1/(a+1)}
    return w, mu, len(bps), "closed-form"


def _fix_budget(w: np.ndarray, free: np.ndarray, budget: float) -> np.ndarray:
    if free.any():
        resid = budget - w.sum()
        w = w.copy()
        w[free] += resid * w[free] / w[free].sum()
    return w


def _solve_general(k: np.ndarray, a: np.ndarray, budget: float, lo: np.ndarray, up: np.ndarray):
    """Depth-dependent exponents: bisection on log μ, then Newton polish on the active set."""
    deg = _degenerate_mu(k, a, lo, up, budget)
    if deg is not None:
        return deg[0], deg[1], 0, "bisection+newton"
    logk = np.log(k)
    p = 1.0 / (a + 1.0)

    def free_w(logmu: float) -> np.ndarray:  # unclipped (λ c a / μ)^{1/(a+1)}
        return np.exp(p * (logk - logmu))

    def S(logmu: float) -> float:
        return float(np.clip(free_w(logmu), lo, up).sum())

    # Bracket: S is non-increasing in log μ; start where the mean width is free for each layer.
    wbar = budget / len(k)
    guess = float(np.median(logk - (a + 1.0) * math.log(wbar)))
    left, right, step = guess, guess, 1.0
    while S(left) < budget:
        left -= step
        step *= 2.0
    step = 1.0
    while S(right) > budget:
        right += step
        step *= 2.0

    def active(logmu: float) -> tuple[np.ndarray, np.ndarray]:
        f = free_w(logmu)
        return f <= lo, f >= up

    iters = 0
    # Bisection until the active set is the same at both ends of the bracket (or the bracket
    # is at floating-point resolution, which happens when the root sits on a breakpoint).
    while True:
        lo_l, up_l = active(left)
        lo_r, up_r = active(right)
        if (np.array_equal(lo_l, lo_r) and np.array_equal(up_l, up_r)) or right - left <= 1e-15 * max(1.0, abs(left)):
            break
        mid = 0.5 * (left + right)
        iters += 1
        if S(mid) >= budget:
            left = mid
        else:
            right = mid
        if iters > 2000:  # pragma: no cover - cannot happen for finite inputs
            break

    # Newton on h(x) = Σ_free exp(p (log k − x)) + fixed − B, convex decreasing in x = log μ:
    # from the left end (h ≥ 0) Newton iterates increase monotonically to the root.
    x = left
    at_lo, at_up = active(0.5 * (left + right))
    free = ~(at_lo | at_up)
    fixed = float(lo[at_lo].sum() + up[at_up & ~at_lo].sum())
    if free.any():
        for _ in range(100):
            wf = free_w(x)[free]
            h = float(wf.sum()) + fixed - budget
            dh = -float((p[free] * wf).sum())
            iters += 1
            x_new = x - h / dh
            x_new = min(max(x_new, left), right)  # safeguard: stay inside the bracket
            if abs(x_new - x) <= 4e-16 * max(1.0, abs(x)):
                x = x_new
                break
            x = x_new
    w = np.where(at_lo, lo, np.where(at_up, up, free_w(x)))
    w = _fix_budget(w, free, budget)
    return w, math.exp(x), iters, "bisection+newton"


# ---------------------------------------------------------------------------------------------
# Rounding to hardware multiples with an exact budget
# ---------------------------------------------------------------------------------------------

def round_widths(widths: Any, multiple: int, budget: int, lower: Any = None, upper: Any = None) -> list[int]:
    """Round continuous widths to multiples of ``multiple`` whose sum is exactly ``budget``.

    Chapter 5. Largest-remainder rounding with bounds: every width starts at the multiple below
    it (clamped into ``[lower, upper]`` after rounding the bounds inward to multiples), then
    whole multiples are handed to the layers furthest below their continuous value (or taken
    from those furthest above) until the budget is met. This minimises ``Σ (w_int − w)²`` under
    the constraints. Infeasible requests raise :class:`AnatomyKitError` naming the numbers.
    """
    w = _vector("widths", widths, None, allow_zero=True)
    n = len(w)
    m = check_int("multiple", multiple, minimum=1)
    budget = check_int("budget", budget, minimum=1)
    if budget % m:
        raise AnatomyKitError(
            f"budget={budget} is not a multiple of multiple={m}; widths that are multiples of {m} "
            f"can only sum to a multiple of {m} (nearest: {budget // m * m} or {(budget // m + 1) * m})")
    lo = np.zeros(n) if lower is None else _vector("lower", lower, n, allow_zero=True)
    up = np.full(n, np.inf) if upper is None else _vector("upper", upper, n)
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


# ---------------------------------------------------------------------------------------------
# Surrogate parameters from measurements
# ---------------------------------------------------------------------------------------------

def exponents_from_intrinsic_dimension(d_int: Any, kappa: float = 1.0) -> np.ndarray:
    """``a_ℓ = κ / d_int,ℓ`` — the surrogate exponents from per-layer intrinsic dimensions.

    Chapter 5. INFERRED (our reconstruction, not read in paper 2): the classical rate for
    approximating a Lipschitz map on a ``d``-dimensional manifold with ``w`` units is
    ``w^(−1/d)``; ``κ`` rescales it (smoothness / a fitted constant).
    """
    d = _vector("d_int", d_int, None)
    kappa = check_positive("kappa", kappa)
    return kappa / d


def coefficients_from_profile(profile: Any) -> np.ndarray:
    """``c_ℓ`` from a per-layer work profile, normalised to mean 1 (chapter 5).

    The scale of ``c`` does not change the optimal widths (it only rescales ``μ``); normalising
    makes ``μ`` comparable between profiles.
    """
    p = _vector("profile", profile, None)
    return p / p.mean()


def anti_profile(profile: Any) -> np.ndarray:
    """The rank-reversed profile: the layer with the k-th largest work gets the k-th smallest value.

    Chapter 5. Our choice for the paper's anti-topological control (INFERRED): the same multiset of
    values, assigned in the opposite order, so the control keeps the spread of the geometric
    allocation and changes only its alignment with depth-wise work.
    """
    p = _vector("profile", profile, None)
    order = np.argsort(p, kind="stable")  # ascending
    out = np.empty_like(p)
    out[order] = np.sort(p)[::-1]
    return out


def resample_profile(profile: Any, n_layers: int) -> np.ndarray:
    """Transfer a per-layer profile to a model with ``n_layers`` layers by relative depth (chapter 5).

    Layer ``ℓ`` of an ``L``-layer model is read as the depth interval ``[ℓ/L, (ℓ+1)/L)`` and the
    profile as piecewise constant on those intervals; each target layer gets the *mean* of the
    profile over its own interval (exact overlap integral). So 30 → 6 layers averages groups of
    five, ``L → L`` is the identity, and the mean of the profile is preserved. Our choice (the
    paper measures a schedule on a reference model and transfers it; how is not known).
    """
    p = _vector("profile", profile, None, positive=False)
    n = check_int("n_layers", n_layers, minimum=1)
    src = len(p)
    edges_src = np.arange(src + 1) / src
    edges_tgt = np.arange(n + 1) / n
    out = np.empty(n)
    for j in range(n):
        lo, hi = edges_tgt[j], edges_tgt[j + 1]
        overlap = np.clip(np.minimum(edges_src[1:], hi) - np.maximum(edges_src[:-1], lo), 0.0, None)
        out[j] = float(np.dot(overlap, p) / (hi - lo))
    return out


# ---------------------------------------------------------------------------------------------
# Schedules
# ---------------------------------------------------------------------------------------------

SCHEDULE_KINDS = ("uniform", "cosine", "reverse-cosine", "linear", "geometric", "anti", "importance")


def _taper(kind: str, n: int, mean: float, start: float, end: float) -> np.ndarray:
    if n == 1:
        return np.array([mean])
    x = np.arange(n) / (n - 1)
    d0, d1 = start * mean, end * mean
    if kind in ("cosine", "reverse-cosine"):
        d = d1 + (d0 - d1) * (1.0 + np.cos(np.pi * x)) / 2.0
    else:  # linear
        d = d0 + (d1 - d0) * x
    return d[::-1].copy() if kind == "reverse-cosine" else d


def continuous_schedule(kind: str, n_layers: int, mean_width: float, *, profile: Any = None,
                        exponent: Any = 1.0, lam: Any = None, ratio: tuple[float, float] = (1.5, 0.5),
                        lower_frac: float = 0.25, upper_frac: float | None = None) -> np.ndarray:
    """The schedule before rounding: float widths with mean exactly ``mean_width`` (chapter 5).

    See :func:`width_schedule` for the kinds and arguments.
    """
    kind = check_choice("kind", kind, SCHEDULE_KINDS)
    n = check_int("n_layers", n_layers, minimum=1)
    mean = check_positive("mean_width", mean_width)
    if kind == "uniform":
        return np.full(n, mean)
    if kind in ("cosine", "reverse-cosine", "linear"):
        start, end = (check_positive("ratio[0]", ratio[0]), check_positive("ratio[1]", ratio[1], allow_zero=True))
        if abs((start + end) / 2 - 1.0) > 1e-12:
            raise AnatomyKitError(f"ratio={tuple(ratio)!r} must average to 1 (e.g. (1.5, 0.5)) so the mean width is kept")
        return _taper(kind, n, mean, start, end)
    if profile is None:
        raise AnatomyKitError(f"kind={kind!r} needs a per-layer profile (a sequence of {n} positive values)")
    p = _vector("profile", profile, n, positive=(kind != "importance"))
    if kind == "importance":
        # Importance (e.g. ablation damage in %) spans orders of magnitude and may be negative
        # (anti-layers): compress with log1p of the positive part, floored at 1 % of the maximum.
        q = np.log1p(np.maximum(p, 0.0))
        if q.max() <= 0:
            raise AnatomyKitError("profile has no positive importance; cannot allocate by importance")
        p = np.maximum(q, 0.01 * q.max())
    elif kind == "anti":
        p = anti_profile(p)
    lower = check_positive("lower_frac", lower_frac, allow_zero=True) * mean
    upper = None if upper_frac is None else check_positive("upper_frac", upper_frac) * mean
    sol = solve_widths(coefficients_from_profile(p), exponent, lam, budget=n * mean, lower=lower, upper=upper)
    return sol.widths


def width_schedule(kind: str, n_layers: int, mean_width: int, *, multiple: int = 64, profile: Any = None,
                   exponent: Any = 1.0, lam: Any = None, ratio: tuple[float, float] = (1.5, 0.5),
                   lower_frac: float = 0.25, upper_frac: float | None = None) -> list[int]:
    """Integer per-layer FFN widths, multiples of ``multiple``, summing to ``n_layers * mean_width``.

    Chapter 5. Kinds:

    - ``"uniform"``: every layer ``mean_width``;
    - ``"cosine"``: the TLM taper ``d(ℓ) = d_end + (d_start − d_end)(1 + cos(π ℓ/(L−1)))/2`` with
      ``(d_start, d_end) = ratio · mean_width`` (default 1.5×→0.5×; mean exact before rounding);
    - ``"reverse-cosine"`` (0.5×→1.5×) and ``"linear"`` (1.5×→0.5×): contrasts;
    - ``"geometric"``: the surrogate optimum with ``c ∝ profile`` (a per-layer work profile),
      exponents ``exponent`` (scalar or per layer, e.g. from
      :func:`exponents_from_intrinsic_dimension`), sensitivities ``lam`` (default 1), bounds
      ``lower_frac·mean ≤ w ≤ upper_frac·mean``;
    - ``"anti"``: the control — the same solver on :func:`anti_profile` (rank-reversed profile);
    - ``"importance"``: the solver on a compressed importance profile (``log1p`` of the positive
      part, e.g. chapter 1's ablation damage).
    """
    w = continuous_schedule(kind, n_layers, mean_width, profile=profile, exponent=exponent, lam=lam,
                            ratio=ratio, lower_frac=lower_frac, upper_frac=upper_frac)
    mean = check_int("mean_width", mean_width, minimum=1)
    m = check_int("multiple", multiple, minimum=1)
    budget = n_layers * mean
    lower = None
    upper = None
    if kind in ("geometric", "anti", "importance"):
        lower = lower_frac * mean
        upper = None if upper_frac is None else upper_frac * mean
    return round_widths(w, m, budget, lower=lower, upper=upper)


def parse_rule(rule: str) -> tuple[str, str | None]:
    """Split an allocation rule ``"kind"`` or ``"kind:profile"`` (chapter 5).

    ``"uniform"``, ``"cosine"``, ``"linear"``, ``"reverse-cosine"`` take no profile;
    ``"geometric:<statistic>/<geometry>"``, ``"anti:<statistic>/<geometry>"`` and
    ``"importance:<name>"`` name the profile they allocate by, e.g. ``"geometric:topology/hyperbolic"``.
    """
    if not isinstance(rule, str) or not rule:
        raise AnatomyKitError(f"rule={rule!r} must be a string like 'cosine' or 'geometric:gw/spherical'")
    kind, _, name = rule.partition(":")
    check_choice("rule kind", kind, SCHEDULE_KINDS)
    needs = kind in ("geometric", "anti", "importance")
    if needs and not name:
        raise AnatomyKitError(f"rule={rule!r} needs a profile name after ':' (e.g. '{kind}:topology/hyperbolic')")
    if not needs and name:
        raise AnatomyKitError(f"rule={rule!r}: kind {kind!r} takes no profile; write just {kind!r}")
    return kind, (name or None)


def allocate(rule: str, n_layers: int, mean_width: int, *, multiple: int = 64, profiles: Any = None,
             exponent: Any = 1.0, lam: Any = None, lower_frac: float = 0.25, upper_frac: float | None = None,
             continuous: bool = False) -> Any:
    """Per-layer widths for an allocation rule (see :func:`parse_rule`) — chapter 5.

    ``profiles`` maps profile names to per-layer values of *any* depth: they are transferred to
    ``n_layers`` with :func:`resample_profile`. ``exponent`` and ``lam`` may also be per-layer
    arrays of any depth (resampled the same way). Returns the integer widths of
    :func:`width_schedule`, or with ``continuous=True`` the float widths before rounding.
    """
    kind, name = parse_rule(rule)
    profile = None
    if name is not None:
        if profiles is None or name not in profiles:
            have = sorted(profiles) if profiles is not None else []
            raise AnatomyKitError(f"rule={rule!r} needs profile {name!r}; available: {have}")
        profile = resample_profile(profiles[name], n_layers)
    if np.ndim(exponent) == 1:
        exponent = resample_profile(exponent, n_layers)
    if lam is not None and np.ndim(lam) == 1:
        lam = resample_profile(lam, n_layers)
    kw = dict(profile=profile, exponent=exponent, lam=lam, lower_frac=lower_frac, upper_frac=upper_frac)
    if continuous:
        return continuous_schedule(kind, n_layers, mean_width, **kw)
    return width_schedule(kind, n_layers, mean_width, multiple=multiple, **kw)
