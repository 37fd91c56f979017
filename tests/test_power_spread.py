"""The spread behind the power tables (anatomy_kit.book.power_spread), worked by hand: which scale an interval is
symmetric on, and which side's half-width faces the boundary, on asymmetric intervals where the side matters."""

from __future__ import annotations

import math

import pytest

from anatomy_kit.book.power_spread import _intervals, _number, scale_of, spread

T975_4 = 2.7764451051977987      # Student's t, 97.5 % quantile, 4 degrees of freedom (tables)
T95_4 = 2.1318467863266504       # 95 % quantile, 4 degrees of freedom


def _iv(mean, low, high, n=5):
    return {"mean": mean, "low": low, "high": high, "n": n}


def _which(scale):
    """The scale's name, read off what it does to numbers (not off the kit's table)."""
    fwd, inv = scale
    if fwd(2.0) == 2.0:
        return "identity"
    if fwd(math.e) == pytest.approx(1.0):
        return "log"
    assert fwd(100 * (math.e - 1)) == pytest.approx(1.0) and inv(1.0) == pytest.approx(100 * (math.e - 1))
    return "log1p percent"


def test_number_keeps_finite_numbers_only():
    assert _number(2) == 2.0 and _number(-0.5) == -0.5
    for bad in (True, False, "1", None, float("inf"), float("nan"), [1]):
        assert _number(bad) is None


def test_intervals_of_one_interval_or_a_mapping_of_them():
    one = _iv(1, 0, 2)
    assert _intervals(one) == [("", one)]
    mapping = {"a": one, 3: _iv(2, 1, 3), "no n": {"low": 1}, "no low": {"n": 3}, "text": "x"}
    assert _intervals(mapping) == [("a", one), ("3", _iv(2, 1, 3))]
    assert _intervals([one]) == [] and _intervals(None) == []


def test_the_scale_is_the_one_on_which_the_interval_is_symmetric():
    assert _which(scale_of(_iv(5, 3, 7))) == "identity"
    assert _which(scale_of(_iv(10, 5, 20))) == "log"                         # 10 / 2 and 10 · 2
    pct = [100 * math.expm1(y) for y in (0.2, 0.1, 0.3)]
    assert _which(scale_of(_iv(*pct))) == "log1p percent"
    # negative values: no log; a percent change symmetric on log(1 + x/100) is still found after it
    neg = [100 * math.expm1(y) for y in (-0.2, -0.3, -0.1)]
    assert _which(scale_of(_iv(*neg))) == "log1p percent"
    assert _which(scale_of(_iv(-5, -7, -3))) == "identity"


def test_ties_and_what_cannot_be_measured_keep_the_statistics_own_scale():
    assert _which(scale_of(_iv(5, None, 7))) == "identity"         # one end: every scale is "symmetric"
    assert _which(scale_of(_iv(5, 5, 5))) == "identity"            # zero width
    assert _which(scale_of(_iv(None, 1, 2))) == "identity"         # no mean


IDENTITY = (lambda x: x, lambda y: y)


def test_the_half_width_is_read_on_the_side_that_faces_the_nearest_boundary():
    # mean 0, interval [−1, 3]: the upper half-width is 3, the lower 1
    up = spread(_iv(0.0, -1.0, 3.0), [2.0], 0.95, scale=IDENTITY)
    assert up[:3] == (2.0, pytest.approx(3 * math.sqrt(5) / T975_4), 5)
    down = spread(_iv(0.0, -1.0, 3.0), [-2.0], 0.95, scale=IDENTITY)
    assert down[:3] == (2.0, pytest.approx(1 * math.sqrt(5) / T975_4), 5)
    # the nearest boundary decides the side: from mean 1, boundary 3 (distance 2) before −2 (distance 3)
    near = spread(_iv(1.0, -1.0, 6.0), [3.0, -2.0], 0.95, scale=IDENTITY)
    assert near[:2] == (2.0, pytest.approx(5 * math.sqrt(5) / T975_4))
    other = spread(_iv(1.0, -1.0, 6.0), [-2.0, 5.0], 0.95, scale=IDENTITY)
    assert other[:2] == (3.0, pytest.approx(2 * math.sqrt(5) / T975_4))
    # the boundary at the mean itself faces the lower side
    at = spread(_iv(0.0, -1.0, 3.0), [0.0], 0.95, scale=IDENTITY)
    assert at[:2] == (0.0, pytest.approx(1 * math.sqrt(5) / T975_4))


def test_a_one_sided_interval_uses_the_side_it_has():
    assert spread(_iv(0.0, None, 3.0), [-2.0], 0.95, scale=IDENTITY)[1] == pytest.approx(3 * math.sqrt(5) / T975_4)
    assert spread(_iv(0.0, -1.0, None), [2.0], 0.95, scale=IDENTITY)[1] == pytest.approx(math.sqrt(5) / T975_4)


def test_the_confidence_sets_the_t_quantile():
    assert spread(_iv(0.0, -1.0, 1.0), [2.0], 0.90, scale=IDENTITY)[1] == pytest.approx(math.sqrt(5) / T95_4)


def test_the_spread_is_measured_on_the_intervals_own_scale_and_returns_it():
    dist, sd, n, (m, fwd, inv) = spread(_iv(10.0, 5.0, 20.0), [40.0], 0.95)
    assert m == pytest.approx(math.log(10)) and inv(m) == pytest.approx(10.0) and n == 5
    assert dist == pytest.approx(math.log(4)) and sd == pytest.approx(math.log(2) * math.sqrt(5) / T975_4)
    # a boundary the scale cannot hold (log of 0) is dropped; none left: no spread
    assert spread(_iv(10.0, 5.0, 20.0), [0.0, 40.0], 0.95)[0] == pytest.approx(math.log(4))
    assert spread(_iv(10.0, 5.0, 20.0), [0.0], 0.95) is None
    log = (lambda x: math.log(x) if x > 0 else None, math.exp)
    assert spread(_iv(10.0, -5.0, 20.0), [40.0], 0.95, scale=log) is None        # an end the scale cannot hold
    assert spread(_iv(10.0, 5.0, -20.0), [40.0], 0.95, scale=log) is None


@pytest.mark.parametrize("iv", [_iv(None, -1.0, 1.0), _iv(0.0, -1.0, 1.0, n=1), _iv(0.0, -1.0, 1.0, n=2.0),
                                _iv(0.0, None, None), _iv(0.0, -1.0, 0.0), {"low": -1.0, "high": 1.0, "n": 5}])
def test_no_spread_without_a_usable_interval(iv):
    # the last but one: the side facing the boundary (above) has zero width
    assert spread(iv, [2.0], 0.95, scale=IDENTITY) is None


def test_two_seeds_are_enough():
    t1 = 12.706204736174698      # t, 97.5 %, 1 degree of freedom
    assert spread(_iv(0.0, -1.0, 1.0, n=2), [2.0], 0.95, scale=IDENTITY)[1] == pytest.approx(math.sqrt(2) / t1)


def test_asymmetry_is_measured_relative_to_the_width_on_each_scale():
    # [30, 80] around 50: on the log scale the halves are 0.470 and 0.511 of a width 0.981 (0.042 of it); on
    # log(1 + x/100) 0.182 and 0.143 of 0.325 (0.12); raw 30 and 20 of 50 (0.2): the log scale is the most symmetric
    # (unscaled differences would pick log(1 + x/100), whose width is smaller)
    assert _which(scale_of(_iv(50.0, 30.0, 80.0))) == "log"


def test_a_missing_end_is_never_handed_to_the_scale():
    log = (lambda x: math.log(x) if x > 0 else None, math.exp)
    assert spread(_iv(10.0, None, 20.0), [5.0], 0.95, scale=log)[1] == pytest.approx(
        math.log(2) * math.sqrt(5) / T975_4)
    assert spread(_iv(10.0, 5.0, None), [40.0], 0.95, scale=log)[1] == pytest.approx(
        math.log(2) * math.sqrt(5) / T975_4)
