"""The power formulas against simulations of the rules themselves, the sign-flip floor, and hand-worked sizes."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from anatomy_kit.stats import paired_t_interval, sign_flip_test
from anatomy_kit.validate import AnatomyKitError
from anatomy_kit.verdicts import power as P

DRAWS = 2000          # simulated experiments per case: a rate's standard error is ≤ 0.5/√2000 ≈ 0.011
TOLERANCE = 0.04      # "within a few percent": about 3.5 standard errors of the simulated rate


@pytest.mark.parametrize("n, effect", [(5, 2.0), (6, 1.0), (6, 1.5), (8, 0.8), (10, 0.7), (12, 0.5)])
def test_sign_flip_power_matches_a_simulation_of_the_exact_test(n, effect):
    rng = np.random.default_rng(n * 100 + int(10 * effect))
    hits = sum(sign_flip_test(rng.normal(effect, 1.0, n)).p <= 0.05 for _ in range(DRAWS))
    assert abs(P.sign_flip_power(effect, 1.0, n) - hits / DRAWS) <= TOLERANCE


@pytest.mark.parametrize("n, distance", [(4, 1.5), (8, 0.6), (20, 0.4)])
def test_interval_power_matches_a_simulation_of_the_t_interval(n, distance):
    rng = np.random.default_rng(n)
    boundary = 0.0                                  # the true mean lies `distance` above it
    cleared = 0
    for _ in range(DRAWS):
        ci = paired_t_interval(rng.normal(boundary + distance, 2.0, n), 0.95)
        cleared += ci.low > boundary
    assert abs(P.interval_power(distance, 2.0, n) - cleared / DRAWS) <= TOLERANCE


def test_the_sign_flip_floor_two_over_two_to_the_n():
    assert P.attainable_alpha(5) == 0.0                        # 2/32 = 0.0625 > 0.05: nothing decides
    assert P.attainable_alpha(6) == 2 / 64                     # only the floor itself
    assert P.attainable_alpha(7) == 6 / 128                    # floor(0.05 · 64) = 3 pattern pairs
    assert P.attainable_alpha(5, alpha=0.0625) == 2 / 32       # touching the floor counts


def test_the_attainable_level_of_many_seeds_needs_no_float_two_to_the_n():
    # 2ⁿ overflows a float from n = 1024; the level is then within 2/2ⁿ of alpha (the function's guard
    # against rounding lets it exceed alpha by at most 1e-12 relative, as for fewer seeds)
    for n in (1023, 1024, 1100, 100_000):
        assert 0.05 - 2 / 2 ** min(n, 1074) <= P.attainable_alpha(n) <= 0.05 * (1 + 1e-12)
    # a tiny effect under the sign-flip test: the search runs past 1024 seeds and ends at max_n
    assert P.units_needed(1e-3, 1.0, method="sign-flip", max_n=100_000) is None
    assert P.sign_flip_power(100.0, 1.0, 5) == 0.0             # however large the effect
    z = 1.2                                                     # all six of one sign, by hand
    assert P.sign_flip_power(z, 1.0, 6) == pytest.approx(sps.norm.cdf(z) ** 6 + sps.norm.cdf(-z) ** 6, rel=1e-12)
    # five seeds never decide, so the fewest that do is six, even for a huge effect
    assert P.units_needed(100.0, 1.0, method="sign-flip") == 6


def test_units_needed_agrees_with_the_normal_approximation_and_is_the_first_to_reach_it():
    d, sd = 0.5, 2.0
    approx = ((sps.norm.ppf(0.975) + sps.norm.ppf(0.8)) * sd / d) ** 2   # ≈ 125.6, t adds a little
    n = P.units_needed(d, sd)
    assert approx <= n <= approx * 1.03
    assert P.interval_power(d, sd, n) >= 0.8 > P.interval_power(d, sd, n - 1)
    assert P.units_needed(d, 2 * sd) > 3.5 * n                          # twice the spread: about 4 times
    assert P.units_needed(0.0, sd) is None                             # the boundary itself cannot be cleared
    assert P.units_needed(1e-6, sd, max_n=1000) is None


def test_half_width_is_t_sd_over_root_n():
    assert P.half_width(3.0, 9) == pytest.approx(sps.t.ppf(0.975, 8) * 3.0 / 3.0, rel=1e-12)
    assert P.half_width(3.0, 9, 0.9) < P.half_width(3.0, 9)


@pytest.mark.parametrize("call", [lambda: P.interval_power(1.0, 0.0, 5), lambda: P.interval_power(1.0, 1.0, 1),
                                  lambda: P.sign_flip_power(1.0, 1.0, 6, alpha=1.5),
                                  lambda: P.rule_power(1.0, 1.0, 6, method="bootstrap"),
                                  lambda: P.units_needed(1.0, math.nan)])
def test_bad_input_is_named(call):
    with pytest.raises(AnatomyKitError):
        call()


def test_a_huge_effect_needs_the_fewest_units_that_can_decide():
    # scipy's non-central t returns NaN far in its tail; the power there is 1, not "undecided"
    assert P.sign_flip_power(50.0, 1.0, 8) == pytest.approx(1.0)
    assert P.units_needed(40.0, 1.0, method="sign-flip") == 6
    assert P.units_needed(40.0, 1.0) == 2
