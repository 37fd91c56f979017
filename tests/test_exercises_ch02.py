"""Chapter 2's R² and held-out-fit checks accept right answers written another way and name the
slips a reader makes (anatomy_kit.exercises.ch02)."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest
import torch

from anatomy_kit.exercises import ExerciseFailed, ch02


def _said(check, answer) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        check(answer)
    return out.getvalue()


def test_r_squared_on_a_hand_worked_case():
    """y = (1, 2, 3), ŷ = (1, 2, 2): SS_res = 1, SS_tot = 2, so R² = ½ (the check's own formula)."""
    from anatomy_kit.exercises.ch02 import _r2_values

    values = _r2_values(np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.0, 2.0]))
    assert values["right"] == 0.5 and values["ratio"] == 0.5     # exact in binary: 1/2
    assert values["uncentred"] == 1 - 1 / 14


def test_r_squared_through_the_residual_variance_is_named():
    """A reader's `1 − np.var(y − ŷ) / np.var(y)`: right only when the residuals have mean 0."""
    with pytest.raises(ExerciseFailed, match="variance of the residuals"):
        _said(ch02.check_r_squared, lambda y, y_hat: 1 - np.var(y - y_hat) / np.var(y))


def augmented_least_squares(W, ell, lam):
    """The right answer another way: ridge as least squares on the design plus two penalty rows."""
    rows, targets = [], []
    for j in range(1, len(W) - 1):
        if abs(j - ell) >= 2:
            rows.append(np.stack([np.ones(W[j].numel()), W[j - 1].flatten().numpy(),
                                  W[j + 1].flatten().numpy()], axis=1))
            targets.append(W[j].flatten().numpy())
    X, y = np.concatenate(rows), np.concatenate(targets)
    s_bar = ((X[:, 1] ** 2).sum() + (X[:, 2] ** 2).sum()) / 2
    penalty = np.sqrt(lam * s_bar) * np.array([[0.0, 1, 0], [0, 0, 1]])
    return np.linalg.lstsq(np.vstack([X, penalty]), np.r_[y, 0, 0], rcond=None)[0]


def test_held_out_beta_by_augmented_least_squares_agrees():
    assert "agrees" in _said(ch02.check_held_out_beta, augmented_least_squares)


def test_held_out_beta_that_ignores_lambda_is_not_accepted():
    """Ordinary least squares (λ ignored) differs from the ridge fit at the check's λ = 0.05 and 0.5."""
    with pytest.raises(ExerciseFailed):
        _said(ch02.check_held_out_beta, lambda W, ell, lam: augmented_least_squares(W, ell, 0.0))
    assert torch.is_tensor(ch02._beta_stack())
