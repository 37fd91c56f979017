"""Tests of the width surrogate, its exact solver, rounding and schedules (chapter 5)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize

from anatomy_kit.validate import AnatomyKitError
from anatomy_kit.allocation import (
    SCHEDULE_KINDS,
    allocate,
    anti_profile,
    parse_rule,
    coefficients_from_profile,
    continuous_schedule,
    exponents_from_intrinsic_dimension,
    resample_profile,
    round_widths,
    solve_widths,
    surrogate_objective,
    width_schedule,
)
from anatomy_kit.allocation.solver import _solve_general

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def instances(draw, common_exponent: bool = False):
    """Random feasible problems: c, a (depth-dependent unless common), λ, bounds, budget."""
    n = draw(st.integers(1, 14))
    pos = lambda lo, hi: st.floats(lo, hi, allow_nan=False, allow_infinity=False)  # noqa: E731
    c = np.array(draw(st.lists(pos(0.05, 20.0), min_size=n, max_size=n)))
    lam = np.array(draw(st.lists(pos(0.1, 10.0), min_size=n, max_size=n)))
    if common_exponent:
        a = draw(pos(0.1, 3.0))
    else:
        a = np.array(draw(st.lists(pos(0.1, 3.0), min_size=n, max_size=n)))
    if draw(st.booleans()):
        lower = np.array(draw(st.lists(pos(0.0, 50.0), min_size=n, max_size=n)))
    else:
        lower = draw(pos(0.0, 50.0))
    lo = np.broadcast_to(lower, (n,)).astype(float)
    upper = None
    if draw(st.booleans()):
        upper = lo + np.array(draw(st.lists(pos(1.0, 400.0), min_size=n, max_size=n)))
        frac = draw(pos(0.01, 0.99))
        budget = float(lo.sum() + frac * (upper.sum() - lo.sum()))
    else:
        budget = float(lo.sum() + draw(pos(1.0, 3000.0)))
    return c, a, lam, lower, upper, budget


def _arrays(c, a, lam, lower, upper):
    n = len(c)
    a = np.broadcast_to(np.asarray(a, float), (n,))
    lo = np.broadcast_to(np.asarray(lower, float), (n,))
    up = np.full(n, np.inf) if upper is None else np.asarray(upper, float)
    return a, lo, up


def assert_kkt(sol, c, a, lam, lower, upper, budget, rtol=1e-9):
    a, lo, up = _arrays(c, a, lam, lower, upper)
    w = sol.widths
    assert abs(w.sum() - budget) <= 1e-11 * budget
    assert np.all(w >= lo) and np.all(w <= up)
    m = sol.marginal(c, a, lam)
    mu = sol.mu
    free = sol.free
    assert np.all(np.abs(m[free] / mu - 1.0) <= rtol), "gradient must equal μ on free layers"
    assert np.all(m[sol.at_lower] <= mu * (1 + rtol)), "layers at the lower bound must not want more width"
    assert np.all(m[sol.at_upper] >= mu * (1 - rtol)), "layers at the upper bound must want more width"


@FAST
@given(instances())
def test_solver_beats_scipy_and_satisfies_kkt(inst):
    c, a, lam, lower, upper, budget = inst
    sol = solve_widths(c, a, lam, budget=budget, lower=lower, upper=upper)
    assert_kkt(sol, c, a, lam, lower, upper, budget)
    aa, lo, up = _arrays(c, a, lam, lower, upper)
    n = len(c)
    scale = budget / n  # optimise in units of the mean width
    f = lambda x: float(np.sum(lam * c * (x * scale) ** (-aa)))  # noqa: E731
    grad = lambda x: -lam * c * aa * (x * scale) ** (-aa - 1) * scale  # noqa: E731
    lo_x = np.maximum(lo / scale, 1e-6)
    up_x = np.where(np.isfinite(up), up / scale, np.inf)
    x0 = lo / scale + (n - lo.sum() / scale) * (
        (up_x - lo / scale) / np.sum(up_x - lo / scale) if np.isfinite(up_x).all() else np.full(n, 1.0 / n))
    x0 = np.clip(x0, lo_x, up_x)
    res = minimize(f, x0, jac=grad, method="SLSQP",
                   bounds=[(l, (u if np.isfinite(u) else None)) for l, u in zip(lo_x, up_x)],
                   constraints=[{"type": "eq", "fun": lambda x: x.sum() - n, "jac": lambda x: np.ones(n)}],
                   options={"ftol": 1e-14, "maxiter": 1000})
    ws = np.clip(res.x * scale, lo, up)  # box-feasible; the budget may be off by scipy's tolerance
    fs = float(np.sum(lam * c * ws ** (-aa)))
    # Convexity + KKT: f(w*) <= f(w) + μ·(Σw − B) for every box-feasible w, so this is the exact
    # statement "ours is not worse than scipy's point", corrected for scipy's budget violation.
    slack = sol.mu * (ws.sum() - budget)
    assert sol.objective <= fs + slack + 1e-9 * abs(fs)
    # Plain comparison after making scipy's point exactly feasible (spread its budget error over
    # its layers that are off their bounds, as far as the bounds allow).
    inner = (ws > lo) & (ws < up)
    if inner.any():
        wp = ws.copy()
        wp[inner] += (budget - ws.sum()) * wp[inner] / wp[inner].sum()
        if np.all(wp >= lo) and np.all(wp <= up):
            fp = float(np.sum(lam * c * wp ** (-aa)))
            assert sol.objective <= fp * (1 + 1e-9)
    assert sol.objective == pytest.approx(surrogate_objective(sol.widths, c, a, lam), rel=1e-14)


@FAST
@given(instances(common_exponent=True))
def test_closed_form_equals_general_solver(inst):
    c, a, lam, lower, upper, budget = inst
    sol = solve_widths(c, a, lam, budget=budget, lower=lower, upper=upper)
    assert sol.method == "closed-form"
    assert_kkt(sol, c, a, lam, lower, upper, budget)
    aa, lo, up = _arrays(c, a, lam, lower, upper)
    w_gen, mu_gen, _, method = _solve_general(lam * c * aa, aa.copy(), budget, lo, up)
    assert method == "bisection+newton"
    np.testing.assert_allclose(np.clip(w_gen, lo, up), sol.widths, rtol=1e-9, atol=1e-9 * budget)
    if sol.free.any():  # with every layer on a bound, μ is any value of an interval
        assert mu_gen == pytest.approx(sol.mu, rel=1e-8)


def test_closed_form_known_answer():
    # No bounds active, a = 1: w ∝ sqrt(λ c).
    c = np.array([1.0, 4.0, 9.0, 16.0])
    sol = solve_widths(c, 1.0, budget=100.0, lower=0.0)
    np.testing.assert_allclose(sol.widths, 100 * np.sqrt(c) / np.sqrt(c).sum(), rtol=1e-14)
    assert sol.mu == pytest.approx((np.sqrt(c).sum() / 100.0) ** 2, rel=1e-13)  # μ = a t^-(a+1), t = B/Σg
    # A binding lower bound: the first layer is raised to 15 and the rest share what is left.
    sol = solve_widths(c, 1.0, budget=100.0, lower=15.0)
    assert sol.at_lower.tolist() == [True, False, False, False]
    np.testing.assert_allclose(sol.widths[1:], 85 * np.sqrt(c[1:]) / np.sqrt(c[1:]).sum(), rtol=1e-13)


def test_degenerate_budgets_put_every_layer_on_a_bound():
    c, a = [1.0, 2.0, 3.0], [0.5, 1.0, 2.0]
    sol = solve_widths(c, a, budget=30.0, lower=10.0)
    np.testing.assert_array_equal(sol.widths, [10.0, 10.0, 10.0])
    assert sol.at_lower.all()
    assert_kkt(sol, c, a, None, 10.0, None, 30.0)
    sol = solve_widths(c, a, budget=60.0, lower=10.0, upper=[20.0, 20.0, 20.0])
    np.testing.assert_array_equal(sol.widths, [20.0, 20.0, 20.0])
    assert_kkt(sol, c, a, None, 10.0, [20.0] * 3, 60.0)


def test_infeasible_budgets_name_the_numbers():
    with pytest.raises(AnatomyKitError, match=r"budget=100 is infeasible: the lower bounds alone sum to 120"):
        solve_widths([1, 1, 1], 1.0, budget=100, lower=40)
    with pytest.raises(AnatomyKitError, match=r"budget=500 is infeasible: the upper bounds sum to only 300"):
        solve_widths([1, 1, 1], [1, 2, 3], budget=500, lower=10, upper=100)
    with pytest.raises(AnatomyKitError, match=r"upper\[1\]=5 is below lower\[1\]=10"):
        solve_widths([1, 1], 1.0, budget=30, lower=10, upper=[20, 5])
    with pytest.raises(AnatomyKitError, match=r"c\[1\]=-1 must be > 0"):
        solve_widths([1, -1], 1.0, budget=30)
    with pytest.raises(AnatomyKitError, match=r"a has 3 entries; expected one per layer \(2\)"):
        solve_widths([1, 1], [1, 1, 1], budget=30)
    with pytest.raises(AnatomyKitError, match="budget"):
        solve_widths([1, 1], 1.0, budget=0)


# ---------------------------------------------------------------------------------------------
# Rounding
# ---------------------------------------------------------------------------------------------

@FAST
@given(st.integers(1, 24), st.sampled_from([1, 8, 64, 256]), st.integers(1, 12), st.data())
def test_rounding_keeps_the_budget_exact(n, multiple, mean_units, data):
    budget = n * mean_units * multiple
    raw = np.array(data.draw(st.lists(st.floats(0.05, 3.0), min_size=n, max_size=n)))
    w = raw / raw.sum() * budget  # continuous widths with the right sum
    lower = multiple * data.draw(st.integers(0, 1))
    out = round_widths(w, multiple, budget, lower=lower)
    assert sum(out) == budget
    assert all(x % multiple == 0 and x >= max(lower, multiple) for x in out)
    if np.all(w >= multiple):  # bounds inactive: largest remainder is within one multiple
        assert np.all(np.abs(np.array(out) - w) < multiple + 1e-9)


def test_rounding_respects_upper_bounds_and_is_largest_remainder():
    out = round_widths([100.0, 100.0, 56.0], 64, 256)
    assert out == [128, 64, 64] or out == [64, 128, 64]
    out = round_widths([300.0, 20.0, 20.0], 64, 384, lower=64, upper=192)
    assert out == [192, 128, 64] or out == [192, 64, 128]
    assert round_widths([10.3, 20.6, 30.1], 1, 61) == [10, 21, 30]


def test_rounding_infeasible_requests_name_the_numbers():
    with pytest.raises(AnatomyKitError, match=r"budget=1000 is not a multiple of multiple=64;.*960 or 1024"):
        round_widths([500.0, 500.0], 64, 1000)
    with pytest.raises(AnatomyKitError, match=r"budget=128 is infeasible: the lower bounds rounded up .* sum to 192"):
        round_widths([64.0, 64.0], 64, 128, lower=[70, 64])
    with pytest.raises(AnatomyKitError, match=r"budget=512 is infeasible: the upper bounds rounded down .* sum to only 256"):
        round_widths([256.0, 256.0], 64, 512, upper=[130, 130])
    with pytest.raises(AnatomyKitError, match=r"layer 0: no multiple of 64 lies in \[lower=70, upper=120\]"):
        round_widths([100.0, 100.0], 64, 256, lower=70, upper=[120, 200])
    with pytest.raises(AnatomyKitError, match=r"budget=64 is infeasible"):  # 2 layers need >= 2 multiples
        round_widths([32.0, 32.0], 64, 64)


# ---------------------------------------------------------------------------------------------
# Schedules and surrogate parameters
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 2, 3, 7, 12, 24, 30, 64])
def test_cosine_taper_mean_is_exact_before_rounding(n):
    w = continuous_schedule("cosine", n, 1536)
    assert abs(w.mean() - 1536) <= 1e-12 * 1536
    if n > 1:
        assert w[0] == pytest.approx(1.5 * 1536) and w[-1] == pytest.approx(0.5 * 1536)
        assert np.all(np.diff(w) <= 1e-9)  # monotone non-increasing (TLM)
    np.testing.assert_allclose(continuous_schedule("reverse-cosine", n, 1536), w[::-1])
    assert continuous_schedule("linear", n, 1536).mean() == pytest.approx(1536, rel=1e-14)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(SCHEDULE_KINDS), st.integers(1, 32), st.sampled_from([8, 64, 128]),
       st.integers(2, 16), st.data())
def test_every_schedule_sums_to_the_budget(kind, n, multiple, units, data):
    mean = units * multiple
    profile = np.array(data.draw(st.lists(st.floats(0.01, 100.0), min_size=n, max_size=n)))
    w = width_schedule(kind, n, mean, multiple=multiple, profile=profile)
    assert len(w) == n and sum(w) == n * mean
    assert all(isinstance(x, int) and x % multiple == 0 and x >= multiple for x in w)
    if kind in ("geometric", "anti"):
        assert min(w) >= 0.25 * mean - 1e-9  # default lower_frac survives rounding (bounds rounded inward)


def test_geometric_follows_the_profile_and_anti_reverses_it():
    profile = np.array([8.0, 4.0, 2.0, 1.0, 1.5, 3.0])
    g = width_schedule("geometric", 6, 256, multiple=16, profile=profile)
    anti = width_schedule("anti", 6, 256, multiple=16, profile=profile)
    assert np.argmax(g) == 0 and np.argmin(g) == 3
    assert np.argmax(anti) == 3 and np.argmin(anti) == 0
    assert sorted(anti_profile(profile)) == sorted(profile)
    assert anti_profile(profile).tolist() == [1.0, 1.5, 3.0, 8.0, 4.0, 2.0]
    # The surrogate's scale does not matter.
    s1 = solve_widths(profile, 0.8, budget=600, lower=10)
    s2 = solve_widths(coefficients_from_profile(profile), 0.8, budget=600, lower=10)
    np.testing.assert_allclose(s1.widths, s2.widths, rtol=1e-12)


def test_uniform_and_errors():
    assert width_schedule("uniform", 4, 1536, multiple=256) == [1536] * 4
    with pytest.raises(AnatomyKitError, match=r"kind='sigmoid' is not accepted"):
        width_schedule("sigmoid", 4, 256)
    with pytest.raises(AnatomyKitError, match=r"needs a per-layer profile"):
        width_schedule("geometric", 4, 256)
    with pytest.raises(AnatomyKitError, match=r"profile has 3 entries; expected one per layer \(4\)"):
        width_schedule("geometric", 4, 256, profile=[1, 2, 3])
    with pytest.raises(AnatomyKitError, match=r"budget=300 is not a multiple of multiple=64"):
        width_schedule("cosine", 3, 100, multiple=64)


def test_exponents_from_intrinsic_dimension():
    np.testing.assert_allclose(exponents_from_intrinsic_dimension([2.0, 4.0, 10.0], kappa=2.0), [1.0, 0.5, 0.2])
    with pytest.raises(AnatomyKitError, match=r"d_int\[1\]=0 must be > 0"):
        exponents_from_intrinsic_dimension([2.0, 0.0])
    # Depth-dependent exponents through a schedule: still exact budget.
    a = exponents_from_intrinsic_dimension([4, 6, 8, 10, 12, 14])
    w = width_schedule("geometric", 6, 512, multiple=64, profile=[3, 2, 2, 1, 1, 1], exponent=a)
    assert sum(w) == 6 * 512


def test_resample_profile_by_relative_depth():
    p = np.arange(30, dtype=float)
    np.testing.assert_allclose(resample_profile(p, 6), [2, 7, 12, 17, 22, 27])
    np.testing.assert_allclose(resample_profile(p, 30), p)
    np.testing.assert_allclose(resample_profile([1.0, 3.0], 4), [1, 1, 3, 3])
    q = np.random.default_rng(0).uniform(0, 1, 17)
    assert resample_profile(q, 5).mean() == pytest.approx(q.mean(), rel=1e-12)  # the mean survives
    assert resample_profile(q, 1).tolist() == pytest.approx([q.mean()])


def test_allocate_by_rule_name():
    profiles = {"topology/raw": np.linspace(4.0, 1.0, 30), "gw/spherical": np.linspace(1.0, 2.0, 30)}
    assert allocate("uniform", 6, 192, multiple=32) == [192] * 6
    g = allocate("geometric:topology/raw", 6, 192, multiple=32, profiles=profiles)
    anti = allocate("anti:topology/raw", 6, 192, multiple=32, profiles=profiles)
    assert sum(g) == sum(anti) == 6 * 192 and g == sorted(g, reverse=True) and anti == sorted(anti)
    w = allocate("geometric:gw/spherical", 6, 192, profiles=profiles, exponent=np.full(30, 0.5), continuous=True)
    assert w.sum() == pytest.approx(6 * 192) and np.all(np.diff(w) > 0)
    assert parse_rule("geometric:gw/spherical") == ("geometric", "gw/spherical")
    with pytest.raises(AnatomyKitError, match=r"needs profile 'shift/raw'; available: \['gw/spherical', 'topology/raw'\]"):
        allocate("geometric:shift/raw", 6, 192, profiles=profiles)
    with pytest.raises(AnatomyKitError, match=r"needs a profile name after ':'"):
        parse_rule("anti")
    with pytest.raises(AnatomyKitError, match=r"kind 'cosine' takes no profile"):
        parse_rule("cosine:gw/raw")
