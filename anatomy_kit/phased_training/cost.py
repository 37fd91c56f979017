"""What a training schedule costs, three ways (chapter 3).

1. **Trainable-layer-steps**: Σ over phases of steps × the number of decoder layers that train
   (the interface is not counted). Uniform training of L layers for S steps costs L·S. This is
   the cheapest reading of the paper's "cost" and ignores that frozen layers still compute.
2. **FLOPs** (per token, summed over the run's tokens), from a per-layer model:

   - forward of decoder layer ℓ: ``F_ℓ = 2·N_ℓ + 4·T·d`` (``N_ℓ`` its matrix weights, each used
     once per token as a multiply-add; ``4·T·d`` for the attention scores and the weighted sum
     over a context of T tokens, counted in full as the kernel computes it);
   - backward, split in two parts: the **activation gradient** ``A_ℓ = 2·N_ℓ + 8·T·d`` (the
     gradient with respect to the layer's input, which the attention core's backward belongs to)
     and the **weight gradient** ``W_ℓ = 2·N_ℓ``; so ``F + A + W = 6·N + 12·T·d`` per layer, the
     rule of :func:`anatomy_kit.lm.model.training_flops`;
   - the tied LM head: forward ``2·V·d``, activation gradient ``2·V·d``, weight gradient ``2·V·d``;
     the embedding lookup and its gradient (a gather / scatter) and the norms are not counted.

   In a step, every layer runs forward. A training layer pays ``A_ℓ + W_ℓ``. A **frozen layer above
   the lowest training part** still pays ``A_ℓ``: the gradient has to pass through it to reach
   what trains below. A frozen layer below the lowest training part pays nothing backward. With
   the interface training, the embedding (below layer 0) trains, so every layer passes gradients
   back. The head pays its activation gradient whenever anything trains and its weight gradient
   when the interface trains. (Ours: a training layer is counted whole even when nothing below it
   needs its input gradient, a small over-count for the lowest training layer.)
3. **Wall time**: measured optimiser-step seconds (:mod:`.curriculum` records them per phase;
   :func:`measure_step_seconds` times every phase's trainable set interleaved in one process).
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ..lm.model import LMConfig
from ..lm.speed import make_optimizer
from ..lm.train import logits_of
from ..validate import AnatomyKitError, check_int
from .phases import GrowthSchedule

__all__ = ["StackFlops", "stack_flops", "step_flops", "schedule_flops", "schedule_costs", "relative_saving",
           "measure_step_seconds"]


@dataclass(frozen=True)
class StackFlops:
    """Per-token FLOPs of a decoder stack: per layer (tuples of length L) and for the LM head."""

    forward: tuple[float, ...]
    act_grad: tuple[float, ...]
    weight_grad: tuple[float, ...]
    head_forward: float
    head_act_grad: float
    head_weight_grad: float

    n_layers = property(lambda self: len(self.forward), doc="L, the number of decoder layers")


def stack_flops(config: LMConfig, seq_len: int, *, attention: bool = True) -> StackFlops:
    """The FLOP model of the module docstring for a :class:`~anatomy_kit.lm.model.PerLayerWidthLM`.

    ``attention=False`` leaves out the attention-score terms (``4·T·d`` forward, ``8·T·d``
    backward): the matrix multiplies alone, which is what ``torch.utils.flop_counter`` counts on CPU.
    """
    config.validate()
    T, d, V = check_int("seq_len", seq_len, minimum=1), config.d_model, config.vocab_size
    mats = 3 if config.ffn == "swiglu" else 2
    n = [4 * d * d + mats * d * int(w) for w in config.ffn_widths]
    att = float(T * d) if attention else 0.0
    return StackFlops(tuple(2.0 * x + 4.0 * att for x in n), tuple(2.0 * x + 8.0 * att for x in n),
                      tuple(2.0 * x for x in n), 2.0 * V * d, 2.0 * V * d, 2.0 * V * d)


def step_flops(flops: StackFlops, trainable_layers: Iterable[int], interface: bool) -> float:
    """Training FLOPs per token of one step in which ``trainable_layers`` (and the interface, if
    ``interface``) train; see the module docstring for the rule."""
    L = flops.n_layers
    train = {int(l) for l in trainable_layers}
    bad = sorted(l for l in train if not 0 <= l < L)
    if bad:
        raise AnatomyKitError(f"trainable_layers {bad} are not layers of a {L}-layer stack")
    total = sum(flops.forward) + flops.head_forward
    if not train and not interface:
        return total
    lowest = -1 if interface else min(train)
    total += flops.head_act_grad + (flops.head_weight_grad if interface else 0.0)
    for l in range(L):
        if l in train:
            total += flops.act_grad[l] + flops.weight_grad[l]
        elif l > lowest:
            total += flops.act_grad[l]
    return total


def schedule_flops(schedule: GrowthSchedule, flops: StackFlops, tokens_per_step: int) -> float:
    """Training FLOPs of the whole schedule: Σ over phases of steps × tokens × :func:`step_flops`."""
    if flops.n_layers != schedule.n_layers:
        raise AnatomyKitError(f"the FLOP model has {flops.n_layers} layers, the schedule {schedule.n_layers}")
    check_int("tokens_per_step", tokens_per_step, minimum=1)
    return float(sum(ph.steps * tokens_per_step * step_flops(flops, ph.layers, ph.interface)
                     for ph in schedule.phases))


def schedule_costs(schedule: GrowthSchedule, flops: StackFlops, tokens_per_step: int) -> dict[str, float]:
    """``{"layer_steps": …, "flops": …}`` of a schedule (the two costs that need no clock)."""
    return {"layer_steps": float(schedule.layer_steps()), "flops": schedule_flops(schedule, flops, tokens_per_step)}


def relative_saving(cost: float, baseline: float) -> float:
    """``100 · (1 − cost / baseline)`` %: how much cheaper than the baseline (negative: dearer)."""
    if not baseline > 0:
        raise AnatomyKitError(f"baseline={baseline!r} must be > 0")
    return 100.0 * (1.0 - float(cost) / float(baseline))


def _one_step(model: nn.Module, opt: torch.optim.Optimizer, batch: torch.Tensor) -> None:
    opt.zero_grad(set_to_none=True)
    logits = logits_of(model(batch[:, :-1]))
    F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1)).backward()
    opt.step()


def measure_step_seconds(model: nn.Module, batch: torch.Tensor, trainable: Mapping[str, Sequence[str]], *,
                         steps: int = 3, repeats: int = 3, warmup: int = 1) -> dict[str, list[float]]:
    """Seconds per optimiser step (forward, backward, the kit's AdamW as the runs use it) for each named trainable set.

    ``trainable``: ``{label: parameter names}``; ``batch``: token ids ``(B, T+1)``. Works on a deep
    copy of ``model``. Each repeat times ``steps`` steps of every set, the sets in a rotated order, so
    slow drifts of a shared machine fall on all sets alike. Returns ``{label: [seconds per step, one
    per repeat]}``.
    """
    steps, repeats = check_int("steps", steps, minimum=1), check_int("repeats", repeats, minimum=1)
    if not trainable:
        raise AnatomyKitError("trainable is empty; give at least one {label: parameter names}")
    net = copy.deepcopy(model).train()
    named = dict(net.named_parameters())
    opts = {}
    for label, names in trainable.items():
        unknown = sorted(set(names) - set(named))
        if unknown or not names:
            raise AnatomyKitError(f"trainable set {label!r} names unknown or no parameters: {unknown[:3]}")
        opts[label] = (set(names), make_optimizer({n: named[n] for n in names}, 1e-3, (0.9, 0.95), 0.1, batch.device))
    labels, out = list(trainable), {label: [] for label in trainable}
    for r in range(repeats + check_int("warmup", warmup, minimum=0)):
        for label in labels[r % len(labels):] + labels[: r % len(labels)]:
            chosen, opt = opts[label]
            for n, p in named.items():
                p.requires_grad_(n in chosen)
            sync = torch.cuda.synchronize if batch.is_cuda else (lambda: None)
            sync()
            t0 = time.perf_counter()
            for _ in range(steps):
                _one_step(net, opt, batch)
            sync()   # CUDA runs asynchronously: wait for the steps before reading the clock
            if r >= warmup:
                out[label].append((time.perf_counter() - t0) / steps)
    return out
