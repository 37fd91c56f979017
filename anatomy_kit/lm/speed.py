"""Speed on one device for :func:`anatomy_kit.lm.train` (chapter 5 at full scale): fast matmuls, the
optimiser, activation checkpointing, and how fast a run went against the device's peak.

- :func:`fast_matmuls`: TF32 matmuls and convolutions on CUDA for the duration of a run (float32
  inputs, 10-bit mantissa products, float32 accumulation); nothing changes on a CPU;
- :func:`make_optimizer`: AdamW, decoupled weight decay on matrices only; ``fused=True`` on CUDA
  (one kernel for every parameter), the single-tensor path on a CPU (bit-reproducible, and as fast
  for small models);
- :func:`activation_checkpointing`: recompute each decoder layer's activations in the backward
  pass instead of keeping them (:class:`~anatomy_kit.lm.model.PerLayerWidthLM`, or a Hugging Face
  model's ``gradient_checkpointing_enable``): about a third more compute for far less memory;
- :func:`flops_per_token`, :func:`device_peak_flops`, :func:`utilisation`: achieved FLOP/s and
  model FLOPs utilisation (MFU, the share of the device's dense peak that the model's own FLOPs
  used; PaLM's definition, no credit for recomputation).

Peaks (:data:`DEVICE_PEAKS`, dense, without structured sparsity) are the vendors' data-sheet
figures: NVIDIA's data sheets for the B200, H200, H100 (SXM, PCIe, NVL), GH200, A100, L40S, L4 and
A10. A device not in the table has no peak, and its MFU is ``None``.
"""

from __future__ import annotations

import math
import re
from contextlib import contextmanager
from typing import Iterator

import torch
from torch import nn

from ..validate import AnatomyKitError, check_choice

__all__ = ["DEVICE_PEAKS", "device_name", "device_peak_flops", "flops_per_token", "utilisation", "fast_matmuls",
           "make_optimizer", "activation_checkpointing"]

#: (regular expression on ``torch.cuda.get_device_name()``, bf16 dense FLOP/s, TF32 dense FLOP/s), first match wins.
DEVICE_PEAKS: list[tuple[str, float, float]] = [
    (r"\bB200\b", 2.25e15, 1.1e15),
    (r"\bGH200\b", 989e12, 494e12),
    (r"\bH200\b", 989e12, 494e12),
    (r"\bH100\b.*\bPCIe\b", 756e12, 378e12),
    (r"\bH100\b.*\bNVL\b", 835e12, 418e12),
    (r"\bH100\b", 989e12, 494e12),            # SXM (HBM3)
    (r"\bA100\b", 312e12, 156e12),
    (r"\bL40S\b", 362e12, 183e12),
    (r"\bL4\b", 121e12, 60e12),
    (r"\bA10\b", 125e12, 62.5e12),
]


def device_name(device: torch.device | str) -> str:
    """``torch.cuda.get_device_name`` for a CUDA device, ``"cpu"`` otherwise."""
    device = torch.device(device)
    if device.type == "cuda" and torch.cuda.is_available():
        return torch.cuda.get_device_name(device)
    return device.type


def device_peak_flops(name: str, precision: str) -> float | None:
    """Dense peak FLOP/s of device ``name`` for ``precision`` ("bf16" or "tf32"); ``None`` if unknown.

    Plain IEEE float32 ("fp32", TF32 off) has no entry: its peak is a small fraction of these.
    """
    check_choice("precision", precision, ("bf16", "tf32", "fp32"))
    for pattern, bf16, tf32 in DEVICE_PEAKS:
        if re.search(pattern, name):
            return {"bf16": bf16, "tf32": tf32}.get(precision)
    return None


def flops_per_token(model: nn.Module, seq_len: int) -> float:
    """Training FLOPs per token (forward and backward, every weight gradient) of ``model`` at context ``seq_len``.

    For the kit's decoder, :func:`anatomy_kit.lm.model.training_flops`; for any other model
    ``6·N + 12·L·T·d`` with ``N`` the parameters of its matrices (counted once; an untied input
    embedding is counted although a lookup costs nothing) and ``L``, ``d`` from its config — an
    estimate. Partly frozen training does less (no weight gradients for frozen matrices).
    """
    from .model import LMConfig, training_flops

    cfg = getattr(model, "config", None)
    if isinstance(cfg, LMConfig):
        return training_flops(cfg, 1.0, seq_len)
    seen, n = set(), 0
    for p in model.parameters():
        if p.ndim >= 2 and p.data_ptr() not in seen:
            seen.add(p.data_ptr())
            n += p.numel()
    layers = getattr(cfg, "num_hidden_layers", None) or getattr(cfg, "n_layer", 0) or 0
    width = getattr(cfg, "hidden_size", None) or getattr(cfg, "n_embd", 0) or 0
    return 6.0 * n + 12.0 * layers * seq_len * width


def utilisation(flops_per_s: float, device: torch.device | str, precision: str, world_size: int = 1
                ) -> float | None:
    """MFU: achieved FLOP/s over the dense peak of ``world_size`` such devices (``precision``: "bf16", "tf32"
    or "fp32"); ``None`` for a CPU, an unknown device or plain float32."""
    peak = device_peak_flops(device_name(device), precision)
    if peak is None or not math.isfinite(flops_per_s):
        return None
    return flops_per_s / (peak * world_size)


@contextmanager
def fast_matmuls(device: torch.device, enabled: bool = True) -> Iterator[None]:
    """TF32 matmuls and cuDNN convolutions on CUDA inside the block (restored afterwards); no-op elsewhere."""
    if device.type != "cuda" or not enabled:
        yield
        return
    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def make_optimizer(params: dict[str, nn.Parameter], lr: float, betas: tuple[float, float], weight_decay: float,
                   device: torch.device) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices (``ndim ≥ 2``) only; fused on CUDA, single-tensor on CPU."""
    decay = [p for p in params.values() if p.ndim >= 2]
    no_decay = [p for p in params.values() if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    if device.type == "cuda":
        return torch.optim.AdamW(groups, lr=lr, betas=tuple(betas), fused=True)
    # foreach=False: the single-tensor path is bit-reproducible and, for small models on CPU, as fast.
    return torch.optim.AdamW(groups, lr=lr, betas=tuple(betas), foreach=False)


@contextmanager
def activation_checkpointing(model: nn.Module, enabled: bool) -> Iterator[None]:
    """Inside the block, ``model`` recomputes its decoder layers' activations in the backward pass.

    Works for :class:`~anatomy_kit.lm.model.PerLayerWidthLM` (``checkpoint_activations``) and for
    Hugging Face models (``activation_checkpointing_enable``, or ``gradient_checkpointing_enable`` before
    transformers 5); anything else is an error.
    """
    if not enabled:
        yield
        return
    if hasattr(model, "checkpoint_activations"):
        before = model.checkpoint_activations
        model.checkpoint_activations = True
        try:
            yield
        finally:
            model.checkpoint_activations = before
        return
    hf = "activation_checkpointing" if hasattr(model, "activation_checkpointing_enable") else "gradient_checkpointing"
    if hasattr(model, f"{hf}_enable"):                 # transformers 5 renamed gradient_ to activation_
        before = bool(getattr(model, f"is_{hf}", False))
        getattr(model, f"{hf}_enable")(**{f"{hf}_kwargs": {"use_reentrant": False}})
        try:
            yield
        finally:
            if not before:
                getattr(model, f"{hf}_disable")()
        return
    raise AnatomyKitError(f"activation_checkpointing=True needs a PerLayerWidthLM or a Hugging Face model; "
                          f"{type(model).__name__} has neither checkpoint_activations nor activation_checkpointing_enable")
