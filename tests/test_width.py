"""Tests of the width surrogate, its exact solver, rounding and schedules (chapter 5)."""

from __future__ import annotations

import math

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
    logm = sol.log_marginal(c, a, lam)   # compared in logs: |Δ log| ≤ rtol is a relative error ≤ rtol
    free = sol.free
    assert np.all(np.abs(logm[free] - sol.log_mu) <= rtol), "gradient must equal μ on free layers"
    assert np.all(logm[sol.at_lower] <= sol.log_mu + rtol), "layers at the lower bound must not want more width"
    assert np.all(logm[sol.at_upper] >= sol.log_mu - rtol), "layers at the upper bound must want more width"


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
    assert sol.objective == pytest.approx(float(np.sum(lam * c * sol.widths ** (-aa))), rel=1e-12)


@FAST
@given(instances(common_exponent=True))
def test_closed_form_equals_general_solver(inst):
    c, a, lam, lower, upper, budget = inst
    sol = solve_widths(c, a, lam, budget=budget, lower=lower, upper=upper)
    assert sol.method == "closed-form"
    assert_kkt(sol, c, a, lam, lower, upper, budget)
    aa, lo, up = _arrays(c, a, lam, lower, upper)
    w_gen, log_mu_gen, _, method = _solve_general(np.log(lam * c * aa), aa.copy(), budget, lo, up)
    assert method == "bisection+newton"
    np.testing.assert_allclose(np.clip(w_gen, lo, up), sol.widths, rtol=1e-9, atol=1e-9 * budget)
    if sol.free.any():  # with every layer on a bound, μ is any value of an interval
        assert log_mu_gen == pytest.approx(sol.log_mu, abs=1e-8)


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


def _exact_log_objective(w, c, a, lam):
    """log Σ λ c w^(−a) in 60-digit decimal arithmetic (no float under- or overflow)."""
    from decimal import Decimal, getcontext
    getcontext().prec = 60
    total = sum(Decimal(float(l)) * Decimal(float(ci)) * Decimal(float(wi)) ** Decimal(-float(ai))
                for l, ci, wi, ai in zip(lam, c, w, a))
    return float(total.ln())


def test_extreme_inputs_neither_overflow_nor_lose_the_objective():
    # λ·c = 1e310 overflows a float; the objective e^714 too: both exist only in logs.
    c = np.array([1e300, 1e-300, 1.0, 5.0])
    a = np.array([0.01, 50.0, 200.0, 1.0])
    lam = np.array([1e10, 1.0, 1e-200, 1.0])
    with np.errstate(over="raise", divide="raise", invalid="raise"):   # no silent overflow or 0/0 anywhere
        sol = solve_widths(c, a, lam, budget=400.0, lower=1.0, upper=300.0)
    assert_kkt(sol, c, a, lam, 1.0, np.full(4, 300.0), 400.0)
    assert np.isfinite(sol.widths).all() and sol.objective == math.inf
    assert sol.log_objective == pytest.approx(_exact_log_objective(sol.widths, c, a, lam), abs=1e-9)
    # every layer free and μ ≈ 1e316 (log μ ≈ 728), past exp's range of 709
    c, a, lam = np.array([1e300, 2e300, 3e300]), np.array([1.0, 1.001, 0.999]), np.full(3, 1e20)
    with np.errstate(over="raise", divide="raise", invalid="raise"):
        sol = solve_widths(c, a, lam, budget=300.0, lower=1.0)
    assert_kkt(sol, c, a, lam, 1.0, None, 300.0)
    assert sol.free.all() and sol.log_mu > 709 and sol.mu == math.inf
    assert sol.log_objective == pytest.approx(_exact_log_objective(sol.widths, c, a, lam), abs=1e-9)


def test_large_exponents_report_the_objective_in_logs():
    c, a = np.array([1.0, 2.0, 3.0]), 300.0
    sol = solve_widths(c, a, budget=300.0, lower=1.0)
    exact = _exact_log_objective(sol.widths, c, np.full(3, a), np.ones(3))
    assert exact < -1300   # Σ c w^(−300) ≈ e^−1382: a float says 0
    assert sol.log_objective == pytest.approx(exact, abs=1e-9)
    assert surrogate_objective(sol.widths, c, a, log=True) == pytest.approx(exact, abs=1e-9)
    assert sol.objective == 0.0 and sol.method == "closed-form"
    assert_kkt(sol, c, a, None, 1.0, None, 300.0)


def test_zero_work_layers_get_their_lower_bound():
    c = np.array([0.0, 1.0, 4.0, 9.0])
    sol = solve_widths(c, 1.0, budget=100.0, lower=10.0)
    assert sol.widths[0] == 10.0 and sol.at_lower[0]
    rest = solve_widths(c[1:], 1.0, budget=90.0, lower=10.0)   # the others share what is left
    np.testing.assert_allclose(sol.widths[1:], rest.widths, rtol=1e-13)
    assert sol.log_mu == pytest.approx(rest.log_mu, abs=1e-12)
    assert_kkt(sol, c, 1.0, None, 10.0, None, 100.0)
    lam = np.array([1.0, 0.0, 1.0, 1.0])   # zero sensitivity is zero work too, with depth-dependent a
    sol = solve_widths(np.ones(4), [0.5, 1.0, 1.5, 2.0], lam, budget=100.0, lower=5.0)
    assert sol.widths[1] == 5.0 and sol.method == "bisection+newton"
    assert_kkt(sol, np.ones(4), [0.5, 1.0, 1.5, 2.0], lam, 5.0, None, 100.0)
    sol = solve_widths([0.0, 1.0], 1.0, budget=10.0)   # lower 0: the idle layer gets nothing, objective finite
    assert sol.widths.tolist() == [0.0, 10.0] and sol.objective == pytest.approx(0.1)


def test_zero_work_layers_take_only_what_the_others_cannot():
    sol = solve_widths([0.0, 1.0, 0.0], 1.0, budget=100.0, lower=5.0, upper=[60.0, 20.0, 40.0])
    assert sol.method == "bounds" and sol.mu == 0.0 and sol.at_upper.tolist() == [False, True, False]
    # the idle layers share the 70 left over in proportion to their room (55 and 35)
    assert sol.widths.tolist() == pytest.approx([5 + 70 * 55 / 90, 20.0, 5 + 70 * 35 / 90], rel=1e-14)
    with pytest.raises(AnatomyKitError, match=r"every layer has zero work"):
        solve_widths([0.0, 0.0], 1.0, budget=10.0)
    with pytest.raises(AnatomyKitError, match=r"lam\[0\]=-1 must be >= 0"):
        solve_widths([1.0, 1.0], 1.0, [-1.0, 1.0], budget=10.0)


def test_surrogate_objective_known_answers():
    assert surrogate_objective([1.0, 2.0, 4.0], [1.0, 1.0, 1.0], 1.0) == pytest.approx(1.75, rel=1e-15)
    assert surrogate_objective([1.0, 2.0, 4.0], [1.0, 1.0, 1.0], [1.0, 2.0, 0.5], [2.0, 1.0, 4.0]) \
        == pytest.approx(2 + 0.25 + 2.0, rel=1e-15)
    assert surrogate_objective([2.0], [3.0], 2.0, log=True) == pytest.approx(math.log(0.75), rel=1e-15)
    assert surrogate_objective([0.0, 2.0], [0.0, 1.0], 1.0) == pytest.approx(0.5)   # an idle layer adds nothing


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
    with pytest.raises(AnatomyKitError, match=r"c\[1\]=-1 must be >= 0"):
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
    np.testing.assert_allclose(exponents_from_intrinsic_dimension([2.0, 4.0, 10.0], rate_scale=2.0), [1.0, 0.5, 0.2])
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


def test_coefficients_and_zero_work_profiles():
    np.testing.assert_allclose(coefficients_from_profile([1.0, 2.0, 3.0]), [0.5, 1.0, 1.5], rtol=1e-15)
    np.testing.assert_allclose(coefficients_from_profile([0.0, 3.0]), [0.0, 2.0], rtol=1e-15)
    with pytest.raises(AnatomyKitError, match="zero in every layer"):
        coefficients_from_profile([0.0, 0.0])
    # a layer that does no work gets the lower bound, the rest share the budget as without it
    w = continuous_schedule("geometric", 4, 100, profile=[0.0, 1.0, 4.0, 9.0], exponent=1.0, lower_frac=0.25)
    assert w[0] == pytest.approx(25.0)
    np.testing.assert_allclose(w[1:], 375 * np.array([1, 2, 3]) / 6, rtol=1e-12)
    assert width_schedule("geometric", 4, 128, multiple=32, profile=[0.0, 1.0, 4.0, 9.0])[0] == 32
    assert anti_profile([0.0, 1.0, 5.0]).tolist() == [5.0, 1.0, 0.0]


# ---------------------------------------------------------------------------------------------
# The experiment grid and its paired comparisons
# ---------------------------------------------------------------------------------------------

def test_rule_inputs_and_grid_shapes():
    from anatomy_kit import geometry as G
    from anatomy_kit.allocation.experiment import RuleGrid, rule_inputs, rule_slug
    from anatomy_kit.lm import PRESETS

    assert rule_slug("geometric:gw/spherical") == "geometric-gw-spherical"
    vals = np.ones((12, 1, 1))
    vals[:, 0, 0] = np.linspace(3.0, 1.0, 12)
    bundle = G.ProfileBundle(G.WorkProfiles(np.arange(12), ("gw",), ("spherical",), vals, 8), {"model": "m"},
                             intrinsic_dimension=np.full(12, 4.0))
    profiles, a = rule_inputs(bundle, "intrinsic-dimension", 2.0)
    assert list(profiles) == ["gw/spherical"] and np.allclose(a, 0.5)
    assert rule_inputs(bundle, "common", 2.0)[1] == 2.0 and rule_inputs(None, "common", 0.7) == (None, 0.7)
    P = PRESETS["smoke"]
    grid = RuleGrid(preset=P, seeds=[0, 1], steps=10, vocab_size=300)
    sched = grid.schedules(["uniform", "cosine", "geometric:gw/spherical"], bundle)
    assert sched["uniform"]["widths"] == [192] * 6 and sched["cosine"]["widths"][0] > sched["cosine"]["widths"][-1]
    assert sched["geometric:gw/spherical"]["widths"][0] > sched["geometric:gw/spherical"]["widths"][-1]
    d, L = P["d_model"], P["n_layers"]
    expected = 300 * d + sum(4 * d * d + 3 * d * w + 2 * d for w in [192] * L) + d   # the model docstring
    assert set(grid.param_counts(list(sched)).values()) == {expected}
    assert grid.model_config("cosine").ffn_widths == sched["cosine"]["widths"]
    with pytest.raises(AnatomyKitError, match="no widths yet"):
        grid.model_config("reverse-cosine")


def test_grid_trains_the_key_rules_on_their_own_seeds(monkeypatch):
    """RuleGrid.train(seeds={rule: seeds}): those rules on their seeds, every other rule on the grid's,
    one job per (rule, seed) with that seed in its TrainConfig and its own checkpoint folder."""
    from anatomy_kit.allocation import experiment
    from anatomy_kit.lm import PRESETS

    seen = []
    monkeypatch.setattr(experiment, "train_many",
                        lambda jobs, *a, **k: seen.extend(jobs) or [f"r{i}" for i in range(len(jobs))])
    grid = experiment.RuleGrid(preset=PRESETS["smoke"], seeds=[0, 1, 2], steps=10, vocab_size=300)
    grid.schedules(["uniform", "cosine"], None)
    runs = grid.train(["uniform", "cosine"], None, None, run_dir=lambda r, s: f"{r}-{s}",
                      seeds={"uniform": [0, 1, 2, 3, 4, 5]})
    assert list(runs) == [("uniform", s) for s in range(6)] + [("cosine", s) for s in range(3)]
    assert [(c.seed, c.checkpoint_dir) for _, c in seen] == [(s, f"{r}-{s}") for r, s in runs]
    assert list(runs.values()) == [f"r{i}" for i in range(9)]


def test_six_paired_seeds_let_the_exact_test_decide_alone():
    """Chapter 5's key comparison: with 3 seeds the exact sign-flip test never reaches 0.05 (its smallest
    attainable p, 2/2³ = 0.25, exceeds the level: the design cannot speak, "not comparable"), with 6 seeds
    of one sign it does (p = 2/64) and one seed of the other sign leaves it undecided."""
    from anatomy_kit import stats
    from anatomy_kit.verdicts.rules import DifferenceSign

    ref = {"value": "negative"}
    three, six = [-0.03, -0.01, -0.02], [-0.03, -0.01, -0.02, -0.04, -0.005, -0.02]
    assert stats.sign_flip_test(three).p == 0.25 and stats.sign_flip_test(six).p == pytest.approx(2 / 64)
    rule = DifferenceSign(method="sign-flip")
    assert rule.decide(three, ref).verdict == "not comparable"
    assert rule.decide(six, ref).verdict == "reproduced"
    assert rule.decide(six[:-1] + [0.001], ref).verdict == "not established"
    assert rule.decide([-x for x in six], ref).verdict == "not reproduced"


FINAL = {"uniform": {0: 4.00, 1: 4.10, 2: 4.05}, "cosine": {0: 3.95, 1: 4.04, 2: 4.00},
         "geometric:gw/spherical": {0: 3.90, 1: 4.00, 2: 3.97}, "anti:topology/raw": {0: 4.2, 1: 4.3, 2: 4.2}}


def test_paired_losses_pair_seeds():
    from anatomy_kit.allocation.experiment import paired_losses

    pc = paired_losses(FINAL, "cosine")
    assert pc.deltas == pytest.approx((-0.05, -0.06, -0.05)) and pc.seeds == (0, 1, 2)
    assert pc.unit == "nats/token" and pc.t.high < 0
    assert paired_losses(FINAL, "geometric:gw/spherical", "cosine").deltas == pytest.approx((-0.05, -0.04, -0.03))
    with pytest.raises(AnatomyKitError, match="'reverse-cosine' has no results"):
        paired_losses(FINAL, "reverse-cosine")


def test_paper_comparisons_follow_the_table_and_the_papers_sign():
    from anatomy_kit.allocation.experiment import paper_comparisons
    from anatomy_kit.verdicts.rules import DifferenceSign
    from anatomy_kit.manifest import reference

    ref = reference("p2.val_loss_440m")
    comps = paper_comparisons(ref, FINAL)
    # the rows we trained (topological-hyperbolic was not): each against uniform, geometric ones against cosine too
    assert list(comps) == ["cosine − uniform", "gromov-spherical − uniform", "gromov-spherical − cosine",
                           "anti-topological-raw − uniform"]
    keys, pc = comps["anti-topological-raw − uniform"]
    assert keys == ("anti-topological-raw", "uniform") and pc.deltas == pytest.approx((0.2, 0.2, 0.15))
    verdicts = {k: DifferenceSign(paper_keys=keys).decide(pc, ref).verdict for k, (keys, pc) in comps.items()}
    assert verdicts["anti-topological-raw − uniform"] == "reproduced"      # the paper: +0.066, ours above 0
    assert verdicts["gromov-spherical − cosine"] == "reproduced"           # the paper: −0.013, ours below 0
    flipped = {r: {s: -v for s, v in d.items()} for r, d in FINAL.items()}
    keys, pc = paper_comparisons(ref, flipped)["anti-topological-raw − uniform"]
    assert DifferenceSign(paper_keys=keys).decide(pc, ref).verdict == "not reproduced"
    with pytest.raises(AnatomyKitError, match="'rules' mapping"):
        paper_comparisons({"value": {}}, FINAL)
