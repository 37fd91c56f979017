"""Known answers for anatomy_kit.stats: t and sign-flip intervals, Spearman p-values, permutation nulls."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats as sps

from anatomy_kit import stats
from anatomy_kit.validate import AnatomyKitError


# ------------------------------------------------------------------ t interval

def test_t_interval_matches_t_quantile_by_hand():
    d = np.array([0.31, -0.12, 0.48, 0.22, 0.05])
    mean, sd, n = d.mean(), d.std(ddof=1), d.size
    half = sps.t.ppf(0.975, n - 1) * sd / math.sqrt(n)
    ci = stats.paired_t_interval(d)
    assert (ci.n, ci.df, ci.method) == (5, 4, "t")
    assert ci.mean == pytest.approx(mean, abs=1e-15) and ci.sd == pytest.approx(sd, abs=1e-15)
    assert (ci.low, ci.high) == pytest.approx((mean - half, mean + half), abs=1e-12)
    assert (ci.low, ci.high) == pytest.approx(sps.t.interval(0.95, n - 1, loc=mean, scale=sps.sem(d)), abs=1e-12)
    wide = stats.paired_t_interval(d, confidence=0.99)
    assert wide.low < ci.low and wide.high > ci.high


def test_t_interval_for_one_seed_is_undefined_not_narrow():
    ci = stats.paired_t_interval([-0.4])
    assert ci.low == -math.inf and ci.high == math.inf and math.isnan(ci.sd) and ci.df == 0
    assert not ci.excludes(0.0)


@pytest.mark.parametrize("bad", [[], [0.1, float("nan")], [[0.1, 0.2]], "abc"])
def test_t_interval_rejects_bad_input(bad):
    with pytest.raises(AnatomyKitError):
        stats.paired_t_interval(bad)


@pytest.mark.parametrize("confidence", [0, 1, 1.5, -0.2])
def test_t_interval_rejects_bad_confidence(confidence):
    with pytest.raises(AnatomyKitError, match="confidence"):
        stats.paired_t_interval([0.1, 0.2], confidence)


def test_t_interval_covers_95_percent_with_three_pairs():
    """4,000 simulated experiments of 3 normal paired differences: the t interval covers ≈ 0.95."""
    rng = np.random.default_rng(12345)
    draws = rng.normal(0.3, 1.0, size=(4000, 3))
    intervals = [stats.paired_t_interval(d) for d in draws]
    covered = [ci.low <= 0.3 <= ci.high for ci in intervals]
    assert np.mean(covered) == pytest.approx(0.95, abs=0.02)


def test_percentile_bootstrap_on_three_pairs_undercovers():
    """The same 4,000 experiments: a percentile bootstrap (all 27 resamples) covers only ≈ 0.67."""
    rng = np.random.default_rng(12345)
    draws = rng.normal(0.3, 1.0, size=(4000, 3))
    resamples = np.array(list(itertools.product(range(3), repeat=3)))
    means = draws[:, resamples].mean(axis=-1)
    low, high = np.quantile(means, [0.025, 0.975], axis=1)
    coverage = np.mean((low <= 0.3) & (0.3 <= high))
    assert 0.60 <= coverage <= 0.78 and coverage < 0.9


# ------------------------------------------------------------------ sign flips

def test_sign_flip_exact_known_answers():
    three = stats.sign_flip_test([-0.3, -0.1, -0.2])
    assert (three.p, three.n_patterns, three.method) == (0.25, 8, "exact")
    assert stats.sign_flip_test([-0.3, -0.1, -0.2], "less").p == 0.125
    assert stats.sign_flip_test([-0.3, -0.1, -0.2], "greater").p == 1.0
    assert stats.sign_flip_test([-1.0, -2.0, -3.0, -4.0, -5.0]).p == 1 / 16
    assert stats.sign_flip_test([0.0, 0.0]).p == 1.0


def _brute_sign_flip(d, alternative):
    s, hits, total = sum(d), 0, 0
    for signs in itertools.product((1, -1), repeat=len(d)):
        t = sum(e * x for e, x in zip(signs, d))
        total += 1
        hits += {"two-sided": abs(t) >= abs(s) - 1e-12, "less": t <= s + 1e-12, "greater": t >= s - 1e-12}[alternative]
    return hits / total


@pytest.mark.parametrize("alternative", ["two-sided", "less", "greater"])
def test_sign_flip_matches_brute_force(alternative):
    d = list(np.random.default_rng(3).normal(0.4, 1.0, size=7))
    assert stats.sign_flip_test(d, alternative).p == pytest.approx(_brute_sign_flip(d, alternative), abs=1e-15)


def test_sign_flip_monte_carlo_above_sixteen_is_close_to_exact():
    d = np.random.default_rng(5).normal(0.45, 1.0, size=18)
    signs = 1 - 2 * ((np.arange(2 ** 18)[:, None] >> np.arange(18)) & 1)
    exact = np.mean(np.abs(signs @ d) >= abs(d.sum()) - 1e-9)
    mc = stats.sign_flip_test(d, n_mc=40_000, seed=1)
    assert mc.method == "monte carlo" and mc.n_patterns == 40_000
    assert mc.p == pytest.approx(exact, abs=4 * math.sqrt(exact * (1 - exact) / 40_000) + 1e-4)
    assert stats.sign_flip_test(d, n_mc=40_000, seed=1).p == mc.p


def test_sign_flip_interval_is_the_inverted_test():
    d = np.random.default_rng(7).normal(0.2, 1.0, size=7)
    ci = stats.sign_flip_interval(d, 0.9)
    k = math.floor(0.05 * 2 ** 7)
    assert ci.achieved == pytest.approx(1 - 2 * k / 2 ** 7) and ci.method == "sign-flip"
    for mu in np.random.default_rng(8).uniform(d.min() - 0.5, d.max() + 0.5, size=300):
        accepted = (stats.sign_flip_test(d - mu, "greater").p > 0.05 and stats.sign_flip_test(d - mu, "less").p > 0.05)
        assert accepted == (ci.low <= mu <= ci.high), mu


def test_sign_flip_interval_is_unbounded_with_too_few_seeds():
    ci = stats.sign_flip_interval([-0.3, -0.2, -0.25, -0.4, -0.1], 0.95)   # smallest one-sided p = 1/32 > 0.025
    assert (ci.low, ci.high, ci.achieved) == (-math.inf, math.inf, 1.0)
    six = stats.sign_flip_interval([-0.3, -0.2, -0.25, -0.4, -0.1, -0.35], 0.95)
    assert six.high < 0 and six.achieved == pytest.approx(1 - 2 / 64)


# ------------------------------------------------------------------ paired seeds

def test_paired_difference_pairs_shared_seeds_and_describes():
    a = {0: 1.0, 1: 2.0, 2: 3.0, 7: 9.0}
    b = {0: 1.01, 1: 2.03, 2: 2.99, 8: 1.0}
    pc = stats.paired_difference(a, b, unit="nats")
    assert pc.seeds == (0, 1, 2) and pc.unpaired == (7, 8) and pc.n == 3
    assert pc.deltas == pytest.approx((-0.01, -0.03, 0.01))
    assert pc.sign_flip.p == 0.75
    assert pc.describe().startswith("Δ = −0.010 nats, 95 % t interval [−0.060, +0.040], n = 3 seeds, sign-flip p = 0.75")


def test_paired_difference_by_position_and_errors():
    pc = stats.paired_difference([1.0, 2.0], [0.5, 1.0])
    assert pc.deltas == (0.5, 1.0) and pc.seeds == (0, 1)
    with pytest.raises(AnatomyKitError, match="equal lengths"):
        stats.paired_difference([1.0, 2.0], [1.0])
    with pytest.raises(AnatomyKitError, match="share no seed"):
        stats.paired_difference({0: 1.0}, {1: 1.0})
    with pytest.raises(AnatomyKitError, match="both"):
        stats.paired_difference({0: 1.0}, [1.0])
    with pytest.raises(AnatomyKitError, match="non-finite"):
        stats.paired_difference({0: float("nan")}, {0: 1.0})
    one = stats.paired_difference({0: 1.0}, {0: 2.0})
    assert "undefined" in one.describe() and "n = 1 seed," in one.describe()


# ------------------------------------------------------------------ Spearman

def test_spearman_n4_monotone_exact_p_is_one_twelfth():
    r = stats.spearman([1, 2, 3, 4], [40, 30, 20, 10])
    assert r.rho == -1.0 and r.method == "exact"
    assert r.p == pytest.approx(1 / 12, abs=1e-15)
    assert stats.format_spearman(r) == "ρ = −1.00 (n = 4, too few layers for a p-value)"


def _brute_spearman_p(x, y):
    rho = sps.spearmanr(x, y).statistic
    rx = sps.rankdata(x)
    others = [np.corrcoef(rx, sps.rankdata(np.asarray(y)[list(perm)]))[0, 1]
              for perm in itertools.permutations(range(len(y)))]
    return rho, np.mean(np.abs(others) >= abs(rho) - 1e-9)


def test_spearman_n7_matches_brute_force_with_ties():
    x, y = [0.1, 0.4, 0.4, 0.9, 1.3, 2.0, 2.2], [3.0, 1.0, 2.5, 2.5, 0.5, 0.7, -1.0]
    rho, p = _brute_spearman_p(x, y)
    r = stats.spearman(x, y)
    assert r.rho == pytest.approx(rho, abs=1e-12) and r.p == pytest.approx(p, abs=1e-12) and r.method == "exact"


def test_spearman_n20_permutation_is_close_to_scipy():
    rng = np.random.default_rng(11)
    x = rng.normal(size=20)
    y = 0.6 * x + rng.normal(size=20)
    ref = sps.spearmanr(x, y)
    r = stats.spearman(x, y)
    assert r.method == "permutation" and r.rho == pytest.approx(ref.statistic, abs=1e-12)
    assert 0.005 < ref.pvalue < 0.2 and r.p == pytest.approx(ref.pvalue, abs=0.01)
    assert stats.spearman(x, y).p == r.p   # seeded


def test_spearman_one_sided_and_undefined_and_errors():
    x = list(range(7))
    assert stats.spearman(x, x, alternative="greater").p == pytest.approx(1 / 5040)
    assert stats.spearman(x, x, alternative="less").p == 1.0
    const = stats.spearman(x, [1.0] * 7)
    assert const.method == "undefined" and math.isnan(const.rho) and "undefined" in stats.format_spearman(const)
    for bad in (([1, 2], [1, 2]), ([1, 2, 3], [1, 2]), ([1, 2, float("nan")], [1, 2, 3])):
        with pytest.raises(AnatomyKitError):
            stats.spearman(*bad)


def test_format_spearman_prints_p_from_six_points_and_never_zero():
    six = stats.spearman(range(6), [1, 3, 2, 4, 6, 5])
    assert stats.format_spearman(six).startswith("ρ = 0.89 (n = 6, exact p = ")
    nine = stats.format_spearman(stats.spearman(range(9), range(9)))
    assert nine == "ρ = 1.00 (n = 9, exact p < 0.001)"
    assert stats.format_spearman(stats.spearman(range(5), range(5))) == "ρ = 1.00 (n = 5, too few layers for a p-value)"


# ------------------------------------------------------------------ permutation null

def test_permutation_null_exact_known_answers():
    r = stats.permutation_null(lambda v: v[0], [3.0, 2.0, 1.0])
    assert (r.method, r.n_perm, r.observed) == ("exact", 6, 3.0) and r.p == pytest.approx(1 / 3)
    tied = stats.permutation_null(lambda v: v[:2].sum(), [1, 1, 0, 0])   # 4!/(2!·2!) = 6 distinct orders
    assert tied.n_perm == 6 and tied.p == pytest.approx(1 / 6) and tied.null_mean == pytest.approx(1.0)
    assert tied.p_value("less") == 1.0 and tied.p_value("two-sided") == pytest.approx(2 / 6)


def test_permutation_null_monte_carlo_close_to_exact():
    values = np.arange(12.0)[::-1]     # front-loaded: the first 3 layers hold the largest values
    share = lambda v: v[:3].sum() / v.sum()  # noqa: E731
    r = stats.permutation_null(share, values, n_perm=4000, seed=2)
    exact = 1 / math.comb(12, 3)       # only the top three in front reach the observed share
    assert r.method == "monte carlo" and r.n_perm == 4000
    assert r.p == pytest.approx(exact, abs=4 * math.sqrt(exact / 4000) + 1 / 4001)
    assert r.null_mean == pytest.approx(0.25, abs=0.01) and r.null_low < 0.25 < r.null_high
    assert "null" not in r.to_dict() and r.to_dict()["method"] == "monte carlo"


def test_permutation_null_errors():
    with pytest.raises(AnatomyKitError, match="not finite"):
        stats.permutation_null(lambda v: float("nan"), [1.0, 2.0])
    with pytest.raises(AnatomyKitError, match="at least 2"):
        stats.permutation_null(lambda v: v[0], [1.0])
    with pytest.raises(AnatomyKitError, match="one number"):
        stats.permutation_null(lambda v: v, [1.0, 2.0])


def test_signed_never_prints_a_non_zero_number_as_zero():
    from anatomy_kit.stats import signed

    assert signed(0.00047) == "+0.00047" and signed(-0.00047) == "−0.00047"
    assert signed(0.0) == "+0.000" and signed(-0.0123) == "−0.012"
    assert float(signed(1e-9).replace("−", "-")) == 1e-9
    assert signed(float("inf")) == "+∞" and signed(float("nan")) == "NaN"


def _t_stat(x, y, rho):
    """|mean(x − ρy)| / (sd/√n) by hand."""
    d = np.asarray(x, float) - rho * np.asarray(y, float)
    return abs(d.mean()) / (d.std(ddof=1) / math.sqrt(d.size))


def test_paired_ratio_interval_ends_are_where_the_paired_t_statistic_reaches_the_quantile():
    from anatomy_kit.ratio_interval import paired_ratio_interval

    rng = np.random.default_rng(3)
    y = 0.37 + 0.05 * rng.standard_normal(8)           # the gap: resolved, about 7 standard errors from 0
    x = 0.4 * y + 0.03 * rng.standard_normal(8)
    r = paired_ratio_interval(x, y)
    t = sps.t.ppf(0.975, 7)
    assert r.bounded and r.n == 8 and r.ratio == pytest.approx(x.mean() / y.mean(), rel=1e-12)
    assert r.low < r.ratio < r.high
    for end in (r.low, r.high):                         # on the ends, the statistic is the quantile
        assert _t_stat(x, y, end) == pytest.approx(t, rel=1e-9)
    width = r.high - r.low
    assert _t_stat(x, y, r.low + 1e-6 * width) < t < _t_stat(x, y, r.low - 1e-6 * width)
    assert _t_stat(x, y, r.high - 1e-6 * width) < t < _t_stat(x, y, r.high + 1e-6 * width)
    wider = paired_ratio_interval(x, y, confidence=0.99)
    assert wider.low < r.low and wider.high > r.high


def test_paired_ratio_interval_with_a_constant_denominator_is_the_t_interval_scaled():
    from anatomy_kit.ratio_interval import paired_ratio_interval

    x = np.array([0.1, 0.3, 0.2, 0.6])
    r = paired_ratio_interval(x, np.full(4, 2.0))
    half = sps.t.ppf(0.975, 3) * x.std(ddof=1) / 2     # sd/√4
    assert (r.low, r.high) == pytest.approx(((x.mean() - half) / 2, (x.mean() + half) / 2), rel=1e-12)


def test_paired_ratio_interval_is_unbounded_when_the_denominator_is_not_resolved():
    from anatomy_kit.ratio_interval import paired_ratio_interval

    x = np.array([0.1, 0.2, 0.15, 0.12])
    spread = np.array([-1.0, 1.0, -1.0, 1.0])            # sd 2/√3, so se = 1/√3
    t = sps.t.ppf(0.975, 3)
    edge = t / math.sqrt(3)                              # the denominator's interval just touches 0
    above = paired_ratio_interval(x, edge * 1.001 + spread)
    below = paired_ratio_interval(x, edge * 0.999 + spread)
    assert above.bounded and math.isfinite(above.low) and math.isfinite(above.high)
    assert not below.bounded and (below.low, below.high) == (-math.inf, math.inf)


@pytest.mark.parametrize("x, y, words", [
    ([0.1, 0.2], [0.1, 0.2, 0.3], "pair up"),
    ([0.1], [0.1], "at least 2"),
    ([0.1, 0.2], [1.0, -1.0], "denominator's mean is 0"),
    ([0.1, float("nan")], [1.0, 1.0], "non-finite"),
])
def test_paired_ratio_interval_rejects_bad_input(x, y, words):
    from anatomy_kit.ratio_interval import paired_ratio_interval

    with pytest.raises(AnatomyKitError, match=words):
        paired_ratio_interval(x, y)
