"""Where a growth schedule's importance comes from (chapter 3).

(a) :func:`reference_importance`: the neighbour-mean ablation map (chapter 1's protocol) of a
reference model of the same architecture trained briefly, measured on *training* blocks (the
evaluation blocks never choose the schedule). (b) :func:`transferred_importance`: another model's
profile (SmolLM2's, 30 layers, from chapter 2's ``importance_profile.json``) carried to ``n_layers``
layers by relative depth.

Transfer rule (ours): ΔPPL % spans seven orders of magnitude on SmolLM2, so a plain mean over the
source layers that fall into one target layer would be the largest of them; we average the
signed log ``sign(x)·log10(1 + |x|)`` instead (:func:`signed_log`), with the exact overlap weights
of :func:`anatomy_kit.allocation.resample_profile`. A target layer is negative (an anti-layer)
only if the anti-layers dominate its share of depth.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from ..allocation.schedules import resample_profile
from ..validate import AnatomyKitError, as_vector, check_int

__all__ = ["signed_log", "transferred_importance", "reference_importance"]


def signed_log(x: Any) -> np.ndarray:
    """``sign(x) · log10(1 + |x|)``: order of magnitude with the sign kept (0 ↦ 0)."""
    v = as_vector("importance", x, None, positive=False)
    return np.sign(v) * np.log10(1.0 + np.abs(v))


def transferred_importance(delta_pct: Any, n_layers: int) -> np.ndarray:
    """Another model's per-layer ΔPPL % carried to ``n_layers`` layers by relative depth, shape (n_layers,).

    Returns signed-log importances (see the module docstring): only their order and sign matter to
    :func:`~anatomy_kit.phased_training.phases.schedule_from_importance`.
    """
    return resample_profile(signed_log(delta_pct), check_int("n_layers", n_layers, minimum=1))


def reference_importance(model: nn.Module, blocks: torch.Tensor, *, batch_size: int = 8, store=None,
                         progress: bool = False):
    """The neighbour-mean ablation map of a (briefly trained) reference ``model`` on ``blocks`` (N, T).

    Returns the :class:`~anatomy_kit.anatomy.ablation.AblationMap`; its ``delta_pct`` is source (a)
    of chapter 3. ``store`` makes the sweep resumable (see :func:`anatomy_kit.anatomy.ablation_map`).
    """
    from ..anatomy import ablation_map
    from ..hf.evaluation import make_batches

    if not isinstance(blocks, torch.Tensor) or blocks.ndim != 2 or blocks.shape[0] < 1:
        raise AnatomyKitError(f"blocks must be a (N, T) token tensor with N ≥ 1, got {getattr(blocks, 'shape', blocks)}")
    device = next(model.parameters()).device
    batches = make_batches(blocks.long(), check_int("batch_size", batch_size, minimum=1), device=device)
    was_training = model.training
    model.eval()
    try:
        return ablation_map(model, batches, strategy="neighbour-mean", store=store, progress=progress)
    finally:
        model.train(was_training)
