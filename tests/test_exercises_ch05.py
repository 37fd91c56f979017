"""Chapter 5's widths-at-μ check: it judges widths by the KKT conditions, so a right answer written
in logs agrees, and widths that miss μ by a little do not (anatomy_kit.exercises.ch05)."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest

from anatomy_kit.exercises import ExerciseFailed, ch05
from anatomy_kit.exercises.ch05 import _MU_CASES, _kkt_problem


def _said(answer) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        ch05.check_widths_at(answer)
    return out.getvalue()


def in_logs(c, a, mu, lower, upper):
    with np.errstate(divide="ignore"):
        return np.clip(np.exp((np.log(c * a) - np.log(mu)) / (a + 1)), lower, upper)


def test_the_clip_in_logs_agrees():
    assert "agrees" in _said(in_logs)


def test_kkt_by_hand():
    """c = 2, a = 1, μ = 1/8: m(w) = 2w⁻² = 1/8 at w = 4, free inside [1, 10]; at [5, 10] the layer
    sits at 5 with m(5) = 0.08 ≤ μ; at [1, 3] at 3 with m(3) = 0.22 ≥ μ."""
    c, a = np.array([2.0]), np.array([1.0])
    assert _kkt_problem(np.array([4.0]), c, a, 0.125, 1.0, 10.0) is None
    assert _kkt_problem(np.array([5.0]), c, a, 0.125, 5.0, 10.0) is None
    assert _kkt_problem(np.array([3.0]), c, a, 0.125, 1.0, 3.0) is None
    assert _kkt_problem(np.array([4.4]), c, a, 0.125, 1.0, 10.0) is not None      # 10 % off: not free
    assert _kkt_problem(np.array([1.0]), c, a, 0.125, 1.0, 10.0) is not None      # m(1) = 2 > μ: not at l


def test_free_widths_a_little_off_are_rejected():
    """Only the free layers move, by 0.1 %: log m_ℓ moves by (a_ℓ + 1)·0.001, far beyond the check's 1e-9."""
    def off(c, a, mu, lower, upper):
        w = in_logs(c, a, mu, lower, upper)
        free = (w > lower) & (w < upper)
        assert free.any()
        return np.where(free, w * 1.001, w)

    with pytest.raises(ExerciseFailed) as err:
        _said(off)
    assert err.value.generic and "neither free" in str(err.value)
    assert len(_MU_CASES[0][0]) == 5
