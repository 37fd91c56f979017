"""Chapter 7's Spearman check: its own ranks on a hand-worked case, the no-ties shortcut as a second
value of ρ, and a right answer written another way (anatomy_kit.exercises.ch07)."""

from __future__ import annotations

import contextlib
import io
import math

import numpy as np
from scipy import stats as scipy_stats

from anatomy_kit.exercises import ch07
from anatomy_kit.exercises.ch07 import _average_ranks, _spearman_cases, _spearman_values


def test_average_ranks_by_hand():
    """3, 1, 1, 4: the two 1s share ranks 1 and 2, so 1.5 each; then 3 and 4."""
    assert _average_ranks(np.array([3.0, 1.0, 1.0, 4.0])).tolist() == [3.0, 1.5, 1.5, 4.0]


def test_the_shortcut_formula_agrees_without_ties_and_not_with_them():
    (_, x, y), (_, tx, ty) = _spearman_cases()
    plain, tied = _spearman_values(x, y), _spearman_values(tx, ty)
    assert math.isclose(plain["right"], plain["shortcut"], rel_tol=1e-12)   # 1 − 6Σd²/(n(n²−1)), exact
    assert abs(tied["right"] - tied["shortcut"]) > 1e-3      # the tie case can tell the slip apart


def test_ranks_from_scipy_agree():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        ch07.check_spearman(lambda x, y: np.corrcoef(scipy_stats.rankdata(x), scipy_stats.rankdata(y))[0, 1])
    assert "agrees" in out.getvalue()


def test_block_influence_by_hand():
    """One token: h_in = (1, 0), h_out = (1, 1): cos = 1/√2, so BI = 1 − 1/√2 (the check's own loop)."""
    import torch

    from anatomy_kit.exercises.ch07 import _bi_values

    values = _bi_values(torch.tensor([[[1.0, 0.0]]]), torch.tensor([[[1.0, 1.0]]]))
    assert math.isclose(values["right"], 1 - 1 / math.sqrt(2), rel_tol=1e-12)
    assert math.isclose(values["angular"], 0.25, rel_tol=1e-12)             # 45° is a quarter of π
    assert math.isclose(values["update norm"], 1.0, rel_tol=1e-12)          # ‖(0, 1)‖ / ‖(1, 0)‖
