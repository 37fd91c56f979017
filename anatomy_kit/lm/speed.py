"""Speed on one device for :func:`anatomy_kit.lm.train` (chapter 5 at full scale): fast matmuls, the
optimiser, activation checkpointing, and how fast a run went against the device's peak.

- :func:`fast_matmuls`: TF32 matmuls and convolutions on CUDA for the duration of a run (float32
  inputs, 10-bit mantissa products, float32 accumulation), through PyTorch's ``fp32_precision``
  settings (the legacy ``allow_tf32`` flags on torch < 2.9); nothing changes on a CPU;
- :func:`native_bf16`, :func:`training_precision`: bf16 autocast only where the GPU computes bf16
  natively (compute capability ≥ 8.0: A100, H100, L4, …); elsewhere (V100, T4) and on a CPU the
  kit trains in float32 (no fp16 loss scaling: one code path, and exact where it runs);
- :func:`make_optimizer`: AdamW, decoupled weight decay on matrices only, ``fused=True`` (one
  kernel per parameter on a CPU, one for every parameter on CUDA; elementwise, so a CPU run is
  bit-reproducible whatever its thread count);
- :func:`activation_checkpointing`: recompute each decoder layer's activations in the backward
  pass instead of keeping them (:class:`~anatomy_kit.lm.model.PerLayerWidthLM`, or a Hugging Face
  model's ``gradient_checkpointing_enable``): about a third more compute for far less memory;
- :func:`flops_per_token`, :func:`device_peak_flops`, :func:`utilisation`: achieved FLOP/s and
  model FLOPs utilisation (MFU, the share of the device's dense peak that the model's own FLOPs
  used; PaLM's definition, no credit for recomputation).

Peaks (:data:`DEVICE_PEAKS`, dense, without structured sparsity) are the vendors' data-sheet
figures: NVIDIA's data sheets for the B200, H200 (SXM, NVL), H100 (SXM, PCIe, NVL), GH200, A100,
L40S, L4 and A10. A device not in the table has no peak, and its MFU is ``None``.
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
           "make_optimizer", "activation_checkpointing", "native_bf16", "training_precision", "free_memory"]

#: (regular expression on ``torch.cuda.get_device_name()``, bf16 dense FLOP/s, TF32 dense FLOP/s), first match wins.
DEVICE_PEAKS: list[tuple[str, float, float]] = [
    (r"\bB200\b", 2.25e15, 1.1e15),
    (r"\bGH200\b", 989e12, 494e12),
    (r"\bH200\b.*\bNVL\b", 835e12, 418e12),
    (r"\bH200\b", 989e12, 494e12),          # SXM
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
    ``6·N + 12·L·T·d`` with ``N`` the parameters of its matrices (each parameter once, tied ones
    too; counted by object, so the shards of an FSDP model count with their global size) and
    ``L``, ``d`` from its config (Hugging Face's ``num_hidden_layers``/``hidden_size``, GPT-2's
    ``n_layer``/``n_embd``, or the kit's ``n_layers``/``d_model``: chapter 6's GPT) — an estimate;
    an untied input embedding is counted although a lookup costs nothing. Partly frozen training
    does less (no weight gradients for frozen matrices). Chapters 5 and 6.
    """
    from .model import LMConfig, training_flops

    cfg = getattr(model, "config", None)
    if isinstance(cfg, LMConfig):
        return training_flops(cfg, 1.0, seq_len)
    n = sum(p.numel() for p in model.parameters() if p.ndim >= 2)   # parameters() yields a tied one once
    layers = _config_int(cfg, ("num_hidden_layers", "n_layer", "n_layers"))
    width = _config_int(cfg, ("hidden_size", "n_embd", "d_model"))
    return 6.0 * n + 12.0 * layers * seq_len * width


def _config_int(cfg, names: tuple[str, ...]) -> int:
    """The first of ``names`` that ``cfg`` sets (0 if none)."""
    for name in names:
        value = getattr(cfg, name, None)
        if value:
            return int(value)
    return 0


def utilisation(flops_per_s: float, device: torch.device | str, precision: str, world_size: int = 1
                ) -> float | None:
    """MFU: achieved FLOP/s over the dense peak of ``world_size`` such devices (``precision``: "bf16", "tf32"
    or "fp32"); ``None`` for a CPU, an unknown device or plain float32."""
    peak = device_peak_flops(device_name(device), precision)
    if peak is None or not math.isfinite(flops_per_s):
        return None
    return flops_per_s / (peak * world_size)


def _tf32_settings() -> list[tuple[object, str, object]]:
    """(owner, attribute, TF32 value) of the switches that allow TF32 in matmuls and convolutions.

    PyTorch ≥ 2.9 has ``fp32_precision`` ("tf32" / "ieee" / "none"); reading the legacy
    ``allow_tf32`` after someone set ``fp32_precision`` raises there, so only the new API is used
    when it exists.
    """
    matmul, conv = torch.backends.cuda.matmul, getattr(torch.backends.cudnn, "conv", None)
    if hasattr(matmul, "fp32_precision") and conv is not None and hasattr(conv, "fp32_precision"):
        return [(matmul, "fp32_precision", "tf32"), (conv, "fp32_precision", "tf32")]
    return [(matmul, "allow_tf32", True), (torch.backends.cudnn, "allow_tf32", True)]


@contextmanager
def fast_matmuls(device: torch.device, enabled: bool = True) -> Iterator[None]:
    """TF32 matmuls and cuDNN convolutions on CUDA inside the block (restored afterwards); no-op elsewhere.

    Chapter 5. Works whatever the caller set before (``torch.set_float32_matmul_precision``, the
    ``fp32_precision`` settings or the legacy ``allow_tf32`` flags).
    """
    if device.type != "cuda" or not enabled:
        yield
        return
    switches = _tf32_settings()
    before = [getattr(owner, name) for owner, name, _ in switches]
    for owner, name, value in switches:
        setattr(owner, name, value)
    try:
        yield
    finally:
        for (owner, name, _), value in zip(switches, before):
            setattr(owner, name, value)


def native_bf16(device: torch.device | str) -> bool:
    """Whether ``device`` computes bf16 natively (a CUDA GPU of compute capability ≥ 8.0; chapter 5).

    V100s and T4s only emulate bf16 (slower than float32); a CPU is not counted (the kit trains
    in float32 there).
    """
    device = torch.device(device)
    if device.type != "cuda" or not torch.cuda.is_available():
        return False
    try:
        return bool(torch.cuda.is_bf16_supported(including_emulation=False))
    except TypeError:                                   # torch < 2.5 has no including_emulation
        return tuple(torch.cuda.get_device_capability(device)) >= (8, 0)


def training_precision(requested: str, device: torch.device | str) -> str:
    """The precision a run on ``device`` uses when its recipe asks for ``requested`` (chapters 5 and 6).

    ``"bf16"`` stays bf16 only on a GPU that computes it natively (:func:`native_bf16`); on a CPU
    or an older GPU the run trains in float32 (``"fp32"``; TF32 does not exist there either).
    """
    check_choice("precision", requested, ("fp32", "bf16"))
    return "bf16" if requested == "bf16" and native_bf16(device) else "fp32"


def free_memory(device: torch.device | str) -> int | None:
    """Free bytes on a CUDA ``device`` (``torch.cuda.mem_get_info``); ``None`` on a CPU (chapter 5)."""
    device = torch.device(device)
    if device.type != "cuda":
        return None
    return int(torch.cuda.mem_get_info(device)[0])


def make_optimizer(params: dict[str, nn.Parameter], lr: float, betas: tuple[float, float], weight_decay: float,
                   device: torch.device) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices (``ndim ≥ 2``) only; the fused implementation on every device."""
    decay = [p for p in params.values() if p.ndim >= 2]
    no_decay = [p for p in params.values() if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    # fused: one kernel per parameter (on a CPU about four times faster than the single-tensor loop for
    # the chapters' small models); elementwise, so bit-reproducible whatever the thread count
    return torch.optim.AdamW(groups, lr=lr, betas=tuple(betas), fused=True)


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
