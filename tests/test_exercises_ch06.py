"""Chapter 6's rotation-matrix check: its reference by hand on the smallest plane, and a right answer
built another way, through the 2 × 2 block in the basis (u, v) (anatomy_kit.exercises.ch06)."""

from __future__ import annotations

import contextlib
import io
import math

import pytest
import torch

from anatomy_kit.exercises import ExerciseFailed, ch06
from anatomy_kit.exercises.ch06 import _dense


def _said(answer) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        ch06.check_rotation_matrix(answer)
    return out.getvalue()


def test_the_smallest_plane_by_hand():
    """d = k = 1: u = e₀, v = e₁, so R is the plane rotation [[c, −s], [s, c]]; ε = 0.6 gives c = 0.8."""
    want = torch.tensor([[0.8, -0.6], [0.6, 0.8]], dtype=torch.float64)
    torch.testing.assert_close(_dense(1, 1, 0.6), want, rtol=0, atol=1e-15)   # √(1 − 0.36): one rounding


def through_the_block(d, k, eps):
    """I + Q (B − I) Qᵀ with Q = [u v] (D, 2) and B the 2 × 2 block: R on the plane, I off it."""
    q = torch.zeros(d + k, 2, dtype=torch.float64)
    q[:d, 0], q[d:, 1] = 1 / math.sqrt(d), 1 / math.sqrt(k)
    c = math.sqrt(1 - eps ** 2)
    block = torch.tensor([[c, -eps], [eps, c]], dtype=torch.float64)
    return torch.eye(d + k, dtype=torch.float64) + q @ (block - torch.eye(2, dtype=torch.float64)) @ q.T


def test_the_block_route_agrees_and_its_transpose_does_not():
    assert "agrees" in _said(through_the_block)
    with pytest.raises(ExerciseFailed, match="other way"):
        _said(lambda d, k, eps: through_the_block(d, k, eps).T)
