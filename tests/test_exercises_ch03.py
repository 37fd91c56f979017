"""Chapter 3's schedule checks: the clone rule's own count by hand, groups that are right but listed in
another order, and a clone rule that is wrong only on a tie (anatomy_kit.exercises.ch03)."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest

from anatomy_kit.exercises import ExerciseFailed, ch03
from anatomy_kit.exercises.ch03 import _nearest, _kit_groups, _GROUP_CASES


def _said(check, answer) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        check(answer)
    return out.getvalue()


def test_nearest_by_hand():
    assert _nearest(5, [3, 7, 10]) == 3          # 3 and 7 both 2 away: the shallower
    assert _nearest(8, [3, 7, 10]) == 7
    assert _nearest(0, [4, 8]) == 4


def test_the_kits_groups_on_the_first_case_by_hand():
    """13 layers, anti-layers 7 and 11 (the two most negative; layer 3 at −0.2 trains), the other 11 by
    importance: 2 (9.0), 5 (7.0), 12 (6.0), 0 (5.0), 10 (4.0), 8 (2.5), 4 (1.5), 6 (0.8), 1 (0.3), 9 (0.1),
    3 (−0.2); groups of 2, 2, 2, 2, 3."""
    anti, groups = _kit_groups(*_GROUP_CASES[0])
    assert anti == [7, 11]
    assert groups == [{2, 5}, {12, 0}, {10, 8}, {4, 6}, {1, 9, 3}]


def test_groups_in_another_order_agree():
    def reversed_lists(importance, max_anti):
        anti, groups = _kit_groups(importance, max_anti)
        return tuple(reversed(anti)), [sorted(g, reverse=True) for g in groups]

    assert "agrees" in _said(ch03.check_growth_groups, reversed_lists)


def test_a_clone_rule_wrong_only_on_a_tie_is_caught():
    with pytest.raises(ExerciseFailed, match="shallower"):
        _said(ch03.check_clone_source, lambda layer, trained: min(trained, key=lambda t: (abs(t - layer), -t)))
    assert isinstance(_GROUP_CASES[0][0], np.ndarray)
