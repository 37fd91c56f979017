"""The next-token loss of a model's output, and evaluation on token blocks (chapters 3, 5 and 6)."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..validate import AnatomyKitError
from .batches import rows_of as _rows

__all__ = ["evaluate", "logits_of"]


@torch.no_grad()
def evaluate(model: nn.Module, blocks: torch.Tensor, batch_size: int, max_batches: int | None = None,
             device: str = "cpu") -> float:
    """Mean next-token cross-entropy of ``model`` on ``blocks`` ``(N, T+1)`` (chapter 5).

    The batches' summed losses add up in float64 on the device and are read once, at the end
    (the same float64 sums, in the same order, as reading each batch's).
    """
    was_training = model.training
    model.eval()
    total, count = None, 0
    n_batches = math.ceil(blocks.shape[0] / batch_size)
    if max_batches is not None:
        n_batches = min(n_batches, max_batches)
    for b in range(n_batches):
        chunk = _rows(blocks, torch.arange(b * batch_size, min((b + 1) * batch_size, blocks.shape[0]))).to(device)
        logits = logits_of(model(chunk[:, :-1]))
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), chunk[:, 1:].reshape(-1), reduction="sum")
        total = loss.double() if total is None else total + loss.double()
        count += chunk[:, 1:].numel()
    model.train(was_training)
    return float(total) / count


def logits_of(output: Any) -> torch.Tensor:
    """Logits ``(B, T, V)`` from a model's output: a tensor, a ``(logits, loss)`` pair or an object with ``.logits``."""
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, tuple) and output and isinstance(output[0], torch.Tensor):
        return output[0]
    if hasattr(output, "logits"):
        return output.logits
    raise AnatomyKitError(f"cannot find logits in a model output of type {type(output).__name__}")
