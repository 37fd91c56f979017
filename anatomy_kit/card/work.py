"""Chapter 4's geometric work of every FFN at a small token count, for the card and its width suggestion.

:func:`anatomy_kit.geometry.capture_ffn_clouds` takes the same ``n`` tokens (drawn uniformly with the
card's seed from the first evaluation blocks) at every FFN, as matched residual states before and
after the FFN sub-block; :func:`anatomy_kit.geometry.layer_work` gives their mean **shift** and their
**GW** distortion (identity coupling) in the *spherical* geometry (angles between states, blind to
their growing norm). Chapter 5's width solver allocates by the GW profile. Used by the book page
*Your model's report card*.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from ..geometry import capture_ffn_clouds, layer_work

__all__ = ["WORK_SIGNALS", "WORK_GEOMETRY", "work_signals", "geometry_blocks"]

WORK_SIGNALS = ("work_shift", "work_gw")
WORK_GEOMETRY = "spherical"


def geometry_blocks(n_tokens: int, block_size: int, available: int) -> int:
    """Blocks to draw ``n_tokens`` from: two tokens offered per token kept, at most ``available``."""
    return max(1, min(available, math.ceil(2 * n_tokens / block_size)))


def work_signals(model: nn.Module, blocks: torch.Tensor, *, n_tokens: int, seed: int = 0,
                 batch_size: int = 4) -> dict[str, np.ndarray]:
    """``{"work_shift": (L,), "work_gw": (L,)}`` from ``n_tokens`` tokens of ``blocks`` (N, T) (module docstring)."""
    n = min(int(n_tokens), int(blocks.numel()))
    clouds = capture_ffn_clouds(model, blocks, n_tokens=n, sampling="uniform", seed=seed, batch_size=batch_size)
    works = [layer_work(c.x, c.y, statistics=("shift", "gw"), geometries=(WORK_GEOMETRY,)) for c in clouds]
    return {"work_shift": np.array([w[("shift", WORK_GEOMETRY)] for w in works]),
            "work_gw": np.array([w[("gw", WORK_GEOMETRY)] for w in works])}
