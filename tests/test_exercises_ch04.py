"""Chapter 4's Poincaré check accepts a right answer written another way and names a reader's slips
(anatomy_kit.exercises.ch04)."""

from __future__ import annotations

import contextlib
import io
import math

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from anatomy_kit.exercises import ExerciseFailed, ch04


def _said(answer) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        ch04.check_poincare(answer)
    return out.getvalue()


def through_the_angle(points, radius):
    """The right answer by the angle: arcosh(1 + 8r² sin²(θ/2)/(1 − r²)²), θ from scipy's cosine distance."""
    theta = np.arccos(np.clip(1 - cdist(points, points, "cosine"), -1, 1))
    return np.arccosh(1 + 8 * radius ** 2 * np.sin(theta / 2) ** 2 / (1 - radius ** 2) ** 2)


def test_the_angle_route_agrees_and_antipodes_are_four_artanh_r():
    assert "agrees" in _said(through_the_angle)
    r = 0.9                                   # hand-worked: θ = π gives arcosh(1 + 8r²/(1 − r²)²) = 4·artanh(r)
    pair = through_the_angle(np.array([[1.0, 0.0], [-2.0, 0.0]]), r)
    assert math.isclose(pair[0, 1], 4 * math.atanh(r), rel_tol=1e-12)


def test_the_angle_itself_is_not_the_distance():
    """A reader who returns the angle itself gets the generic message, never "agrees"."""
    with pytest.raises(ExerciseFailed) as err:
        _said(lambda p, r: np.arccos(np.clip(1 - cdist(p, p, "cosine"), -1, 1)))
    assert err.value.generic and "the kit's" in str(err.value)
