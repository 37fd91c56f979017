"""One optimiser step of :func:`anatomy_kit.lm.train.train`, and how its losses reach the host (chapters 3, 5, 6).

A step reads ``grad_accum`` micro-batches (their rows from :func:`~anatomy_kit.lm.batches.batch_indices`),
moves them to the device (on CUDA from pinned memory without blocking, all of the step's
micro-batches at once, so the copies overlap the compute), runs forward and backward on each
(bf16 autocast when asked; the logits are dropped before the backward pass, so only what
cross-entropy saves stays alive), synchronises gradients across ranks once, after the last
micro-batch (:func:`~anatomy_kit.lm.distributed.gradient_sync`), clips and steps the optimiser.

Nothing in a step waits for the GPU: the step's mean loss stays a float64 tensor on the device
(:attr:`Progress.pending`) until :func:`flush_losses` reads the losses of many steps at once (one
all-reduce over the ranks, one copy to the host) — every :data:`FLUSH_EVERY` steps and before
every evaluation and checkpoint. On a CPU the numbers are those of reading every step at once:
the mean over micro-batches is the same float64 sum in the same order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..validate import AnatomyKitError
from . import distributed as dist_
from .batches import batch_indices, rows_of
from .loss import logits_of

__all__ = ["FLUSH_EVERY", "Progress", "Session", "micro_batches", "micro_loss", "optimiser_step", "flush_losses"]

#: optimiser steps between two reads of the training loss (a host sync on a GPU)
FLUSH_EVERY = 10


@dataclass
class Progress:
    """Where a run stands: optimiser steps done, data position, curves so far, losses not yet read."""

    step: int = 0
    position: int = 0
    loss_curve: list = field(default_factory=list)
    eval_curve: list = field(default_factory=list)
    resumed_from: int = 0
    pending: list = field(default_factory=list)      # (step, float64 loss tensor on the device)


@dataclass
class Session:
    """What one call of ``train`` works with: the model (``step_model`` is what the step runs:
    the model, its DDP wrapper or its compiled form), optimiser, schedule, this process's place."""

    model: nn.Module
    step_model: nn.Module
    opt: torch.optim.Optimizer
    sched: Any
    params: dict[str, nn.Parameter]
    names: list[str]                  # optimised parameters in the optimiser's order
    cfg: Any                          # the TrainConfig
    device: torch.device
    ctx: dist_.Distributed
    identity: dict


def micro_batches(run: Session, train_blocks: Any, prog: Progress) -> list[torch.Tensor]:
    """The step's ``grad_accum`` micro-batches ``(b, T+1)`` on the device (this rank's rows); advances the
    position (chapter 5)."""
    cfg, n = run.cfg, train_blocks.shape[0]
    cuda = run.device.type == "cuda"
    out = []
    for _ in range(cfg.grad_accum):
        rows = dist_.local_rows(batch_indices(prog.position, cfg.batch_size, n, cfg.seed), run.ctx)
        batch = rows_of(train_blocks, rows)
        out.append(batch.pin_memory().to(run.device, non_blocking=True) if cuda else batch.to(run.device))
        prog.position += cfg.batch_size
    return out


def micro_loss(step_model: nn.Module, batch: torch.Tensor, bf16: bool, device: torch.device) -> torch.Tensor:
    """Mean next-token cross-entropy of one micro-batch ``(b, T+1)`` (0-dim); the logits die on return (chapter 5)."""
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
        logits = logits_of(step_model(batch[:, :-1]))                      # (b, T, V)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))


def optimiser_step(run: Session, train_blocks: Any, prog: Progress) -> None:
    """One optimiser step over ``grad_accum`` micro-batches; its mean loss joins ``prog.pending`` (chapters 3, 5, 6)."""
    cfg = run.cfg
    batches = micro_batches(run, train_blocks, prog)
    run.opt.zero_grad(set_to_none=True)
    total = None
    for i, batch in enumerate(batches):
        with dist_.gradient_sync(run.step_model, run.model, run.ctx, enabled=i == len(batches) - 1):
            loss = micro_loss(run.step_model, batch, cfg.precision == "bf16", run.device)
            (loss / cfg.grad_accum if cfg.grad_accum > 1 else loss).backward()
        part = loss.detach().double() / cfg.grad_accum                       # float64, summed in order
        total = part if total is None else total + part
    if cfg.grad_clip is not None:
        # foreach on CUDA (a few kernels for all parameters); the single-tensor path on a CPU (bit-reproducible)
        torch.nn.utils.clip_grad_norm_(list(run.params.values()), cfg.grad_clip,
                                       foreach=None if run.device.type == "cuda" else False)
    run.opt.step()
    run.sched.step()
    prog.step += 1
    prog.pending.append((prog.step, total))


def flush_losses(run: Session, prog: Progress) -> None:
    """Read the pending losses (mean over ranks) into ``prog.loss_curve``; raise at the first non-finite one
    (chapter 5)."""
    if not prog.pending:
        return
    steps = [s for s, _ in prog.pending]
    values = dist_.mean_over_ranks(torch.stack([v for _, v in prog.pending]), run.ctx)
    prog.pending.clear()
    for step, value in zip(steps, values):
        if not math.isfinite(value):
            raise AnatomyKitError(f"training loss became {value} at step {step}; lower lr={run.cfg.lr}")
        prog.loss_curve.append((step, value))
