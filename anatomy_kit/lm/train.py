"""Deterministic, resumable training of any causal LM the kit builds or grows (chapters 3, 5 and 6).

:func:`train` takes a *model* — a :class:`~anatomy_kit.lm.model.PerLayerWidthLM`, a grown or
cloned model, a partly frozen one — its token blocks and a :class:`TrainConfig`:

- AdamW, linear warm-up then cosine decay, gradient clipping, periodic evaluation;
- ``trainable`` chooses which parameters get gradients; the others are frozen for the call
  (``requires_grad`` off, not in the optimiser), so they do not change, bit for bit;
- atomic checkpoints without pickle (:mod:`.checkpoint`: model, optimiser, scheduler, RNG
  states, step, data position) and exact resume; a checkpoint is only resumed by the same run
  (same starting weights, settings, trainable set and data shapes);
- on CPU two runs with the same seed are bit-identical, and a run stopped after any checkpoint
  and resumed reaches the same final loss.

The model maps token ids ``(B, T)`` to logits ``(B, T, V)`` (a Hugging Face output with
``.logits`` is accepted too); the loop computes the next-token cross-entropy itself.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable

import torch
import torch.nn.functional as F
from torch import nn

from ..hf.surgery import requires_grad_only
from ..progress import progress_bar, progress_enabled
from ..validate import AnatomyKitError, check_choice, check_int, check_positive
from .batches import batch_indices, check_blocks, rows_of as _rows
from .checkpoint import has_checkpoint, load_checkpoint, model_tensors, save_checkpoint, set_rng_state, state_digest

__all__ = ["TrainConfig", "TrainResult", "train", "load_trained", "lr_at", "batch_indices", "evaluate",
           "check_blocks", "logits_of", "select_parameters"]


@dataclass
class TrainConfig:
    """Optimisation settings of :func:`train` (chapter 5).

    ``lr`` peaks after ``warmup`` steps and decays by a cosine to ``min_lr_ratio·lr`` at
    ``steps``. ``eval_every`` evaluates every k steps (0: only at the end). ``checkpoint_every``
    (default ``eval_every``, or ``steps`` if that is 0) writes ``checkpoint_dir/checkpoint.pt``.
    One optimiser step sees ``grad_accum`` micro-batches of ``batch_size`` blocks;
    ``precision="bf16"`` runs forward and backward under ``torch.autocast`` (GPU runs).
    ``stop_after`` ends the call after that many *total* steps (a deliberate interruption; a later
    call with the same ``checkpoint_dir`` resumes). ``eval_batches`` caps the evaluation
    (``None``: every eval block).
    """

    steps: int
    batch_size: int
    lr: float = 3e-3
    warmup: int = 0
    weight_decay: float = 0.1
    eval_every: int = 0
    seed: int = 0
    checkpoint_dir: str | os.PathLike | None = None
    device: str = "cpu"
    checkpoint_every: int | None = None
    min_lr_ratio: float = 0.1
    betas: tuple[float, float] = (0.9, 0.95)
    grad_clip: float | None = 1.0
    eval_batches: int | None = None
    stop_after: int | None = None
    progress: bool = True
    desc: str = "train"
    grad_accum: int = 1
    precision: str = "fp32"

    def validate(self) -> "TrainConfig":
        check_int("steps", self.steps, minimum=1)
        check_int("batch_size", self.batch_size, minimum=1)
        check_positive("lr", self.lr)
        check_int("warmup", self.warmup, minimum=0, maximum=self.steps)
        check_positive("weight_decay", self.weight_decay, allow_zero=True)
        check_int("eval_every", self.eval_every, minimum=0)
        check_int("seed", self.seed, minimum=0)
        if self.checkpoint_every is not None:
            check_int("checkpoint_every", self.checkpoint_every, minimum=1)
        if not 0 <= float(self.min_lr_ratio) <= 1:
            raise AnatomyKitError(f"min_lr_ratio={self.min_lr_ratio!r} must lie in [0, 1]")
        if self.grad_clip is not None:
            check_positive("grad_clip", self.grad_clip)
        if self.eval_batches is not None:
            check_int("eval_batches", self.eval_batches, minimum=1)
        if self.stop_after is not None:
            check_int("stop_after", self.stop_after, minimum=1)
        check_int("grad_accum", self.grad_accum, minimum=1)
        check_choice("precision", self.precision, ("fp32", "bf16"))
        return self

    def fingerprint(self) -> dict:
        """The settings that must match for a checkpoint to be resumed."""
        keys = ("steps", "batch_size", "lr", "warmup", "weight_decay", "seed", "min_lr_ratio", "betas", "grad_clip",
                "grad_accum", "precision")
        d = asdict(self)
        return {k: (list(d[k]) if isinstance(d[k], tuple) else d[k]) for k in keys}


@dataclass
class TrainResult:
    """What :func:`train` returns (chapter 5).

    ``loss_curve``: ``(step, train loss)`` per step; ``eval_curve``: ``(step, eval loss)``;
    ``final_eval_loss``: the eval loss after the last step (``nan`` if stopped early);
    ``tokens_per_s``: training tokens per second of optimiser-step time in this call
    (evaluation and checkpoint writes excluded; ``nan`` if the call found the run finished in its
    checkpoint); ``wall_s``: the whole call; ``n_params``: every parameter of the model (tied
    ones once); ``trainable``: the names of those that received gradients.
    """

    loss_curve: list[tuple[int, float]]
    eval_curve: list[tuple[int, float]]
    final_eval_loss: float
    tokens_per_s: float
    steps_done: int
    completed: bool
    resumed_from: int
    n_params: int
    wall_s: float
    model: nn.Module | None = field(default=None, repr=False)
    trainable: list[str] = field(default_factory=list)   # names of the parameters that trained


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Learning rate for optimiser step ``step`` (0-based): linear warm-up, then cosine decay."""
    if cfg.warmup and step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    span = max(1, cfg.steps - cfg.warmup)
    progress = min(1.0, (step - cfg.warmup) / span)
    floor = cfg.min_lr_ratio * cfg.lr
    return floor + (cfg.lr - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


@torch.no_grad()
def evaluate(model: nn.Module, blocks: torch.Tensor, batch_size: int, max_batches: int | None = None,
             device: str = "cpu") -> float:
    """Mean next-token cross-entropy of ``model`` on ``blocks`` ``(N, T+1)`` (chapter 5)."""
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    n_batches = math.ceil(blocks.shape[0] / batch_size)
    if max_batches is not None:
        n_batches = min(n_batches, max_batches)
    for b in range(n_batches):
        chunk = _rows(blocks, torch.arange(b * batch_size, min((b + 1) * batch_size, blocks.shape[0]))).to(device)
        logits = logits_of(model(chunk[:, :-1]))
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), chunk[:, 1:].reshape(-1), reduction="sum")
        total += float(loss)
        count += chunk[:, 1:].numel()
    model.train(was_training)
    return total / count


def logits_of(output: Any) -> torch.Tensor:
    """Logits ``(B, T, V)`` from a model's output: a tensor, a ``(logits, loss)`` pair or an object with ``.logits``."""
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, tuple) and output and isinstance(output[0], torch.Tensor):
        return output[0]
    if hasattr(output, "logits"):
        return output.logits
    raise AnatomyKitError(f"cannot find logits in a model output of type {type(output).__name__}")


def _limits(model: nn.Module) -> tuple[int, int]:
    """(vocabulary size, longest input) of a model, from its ``config``."""
    cfg = getattr(model, "config", None)
    vocab = getattr(cfg, "vocab_size", None)
    max_len = getattr(cfg, "max_seq_len", None) or getattr(cfg, "max_position_embeddings", None)
    if vocab is None or max_len is None:
        raise AnatomyKitError(f"{type(model).__name__} needs a .config with vocab_size and max_seq_len "
                              "(or max_position_embeddings) to be trained by anatomy_kit.lm.train")
    return int(vocab), int(max_len)


def select_parameters(model: nn.Module, trainable: Callable[[str], bool] | Iterable[str] | None = None
                      ) -> dict[str, nn.Parameter]:
    """The parameters ``train`` optimises, by name, in the model's order.

    ``trainable``: ``None`` (all), a predicate on parameter names, or an iterable of names (each
    must exist). Tied parameters appear once, under their first name.
    """
    named = dict(model.named_parameters())
    if trainable is None:
        return named
    if callable(trainable):
        chosen = {n: p for n, p in named.items() if trainable(n)}
    else:
        wanted = list(trainable)
        unknown = sorted(set(wanted) - set(named))
        if unknown:
            raise AnatomyKitError(f"trainable names parameter(s) {unknown[:5]} that {type(model).__name__} does not "
                                  f"have; its parameters are e.g. {list(named)[:4]}")
        chosen = {n: p for n, p in named.items() if n in set(wanted)}
    if not chosen:
        raise AnatomyKitError("trainable selects no parameter; at least one must train")
    return chosen


def _make_optimizer(params: dict[str, nn.Parameter], cfg: TrainConfig) -> torch.optim.AdamW:
    decay = [p for p in params.values() if p.ndim >= 2]
    no_decay = [p for p in params.values() if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    # foreach=False: the single-tensor path is bit-reproducible and, for small models on CPU, as fast.
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=tuple(cfg.betas), foreach=False)


@dataclass
class _Progress:
    """Where a run stands: optimiser steps done, data position, curves so far."""

    step: int = 0
    position: int = 0
    loss_curve: list = field(default_factory=list)
    eval_curve: list = field(default_factory=list)
    resumed_from: int = 0


def _resume(ckpt_dir, identity: dict, model: nn.Module, opt, sched) -> _Progress:
    if not has_checkpoint(ckpt_dir):
        return _Progress()
    doc, tensors = load_checkpoint(ckpt_dir)
    if json_key(doc["identity"]) != json_key(identity):
        raise AnatomyKitError(f"checkpoint in {ckpt_dir} was written by a different run (starting weights, settings, "
                              "trainable parameters or data shapes differ); use another checkpoint_dir or delete it")
    model.load_state_dict(model_tensors(tensors))
    opt.load_state_dict(doc["optimizer_state"])
    sched.load_state_dict(doc["scheduler"])
    set_rng_state(tensors, doc["rng"])
    return _Progress(doc["step"], doc["data_position"], doc["loss_curve"], doc["eval_curve"], doc["step"])


def json_key(obj: Any) -> str:
    import json

    return json.dumps(obj, sort_keys=True, default=str)


def _one_step(model, opt, sched, params, train_blocks, prog: _Progress, cfg: TrainConfig, device) -> float:
    """One optimiser step over ``grad_accum`` micro-batches; returns the mean train loss."""
    opt.zero_grad(set_to_none=True)
    loss_value = 0.0
    n, bs = train_blocks.shape[0], cfg.batch_size
    for _ in range(cfg.grad_accum):
        batch = _rows(train_blocks, batch_indices(prog.position, bs, n, cfg.seed)).to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=cfg.precision == "bf16"):
            logits = logits_of(model(batch[:, :-1]))
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))
        (loss / cfg.grad_accum if cfg.grad_accum > 1 else loss).backward()
        loss_value += float(loss.detach()) / cfg.grad_accum
        prog.position += bs
    if cfg.grad_clip is not None:
        torch.nn.utils.clip_grad_norm_(list(params.values()), cfg.grad_clip, foreach=False)
    opt.step()
    sched.step()
    prog.step += 1
    if not math.isfinite(loss_value):
        raise AnatomyKitError(f"training loss became {loss_value} at step {prog.step}; lower lr={cfg.lr}")
    return loss_value


def train(model: nn.Module, train_blocks: Any, eval_blocks: Any, config: TrainConfig, *,
          trainable: Callable[[str], bool] | Iterable[str] | None = None) -> TrainResult:
    """Train ``model`` in place on ``train_blocks`` and evaluate on ``eval_blocks`` (chapters 3, 5, 6).

    ``train_blocks``/``eval_blocks``: integer tensors ``(N, T+1)`` (or numpy arrays / memmaps, read a
    batch at a time); inputs are ``[:, :-1]``, targets ``[:, 1:]``. The data order comes from
    :func:`batch_indices` (seeded by ``config.seed``); the weights are whatever ``model`` holds (build
    it with :func:`anatomy_kit.lm.model.build_lm` for a seeded fresh model). ``trainable`` freezes
    the rest (:func:`select_parameters`). If ``config.checkpoint_dir`` holds a checkpoint of this
    same run, training continues from it. The model is returned in ``result.model``.
    """
    t_call = time.perf_counter()
    cfg = config.validate()
    vocab, max_len = _limits(model)
    train_blocks = check_blocks("train_blocks", train_blocks, vocab, max_len)
    eval_blocks = check_blocks("eval_blocks", eval_blocks, vocab, max_len)
    device = torch.device(cfg.device)
    model.to(device)
    params = select_parameters(model, trainable)
    identity = {"start": state_digest(model), "train": cfg.fingerprint(), "trainable": list(params),
                "train_blocks": list(train_blocks.shape), "eval_blocks": list(eval_blocks.shape)}
    with requires_grad_only(model, list(params.values())):
        model.train()
        opt = _make_optimizer(params, cfg)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_at(s, cfg) / cfg.lr)
        prog = _resume(cfg.checkpoint_dir, identity, model, opt, sched)
        steps_now, step_time = _train_loop(model, opt, sched, params, train_blocks, eval_blocks, prog, cfg, device,
                                           identity)
        final = float("nan")
        if prog.step >= cfg.steps:
            final = evaluate(model, eval_blocks, cfg.batch_size, cfg.eval_batches, device.type)
            if not prog.eval_curve or prog.eval_curve[-1][0] != prog.step:
                prog.eval_curve = prog.eval_curve + [(prog.step, final)]
    tokens = steps_now * cfg.batch_size * cfg.grad_accum * (train_blocks.shape[1] - 1)
    return TrainResult(loss_curve=list(prog.loss_curve), eval_curve=list(prog.eval_curve), final_eval_loss=final,
                       tokens_per_s=tokens / step_time if step_time > 0 else float("nan"), steps_done=prog.step,
                       completed=prog.step >= cfg.steps, resumed_from=prog.resumed_from,
                       n_params=sum(p.numel() for p in model.parameters()), wall_s=time.perf_counter() - t_call,
                       model=model, trainable=list(params))


def _train_loop(model, opt, sched, params, train_blocks, eval_blocks, prog: _Progress, cfg: TrainConfig, device,
                identity: dict) -> tuple[int, float]:
    """Steps until ``cfg.steps`` (or ``stop_after``); evaluates and checkpoints on schedule."""
    end = cfg.steps if cfg.stop_after is None else min(cfg.steps, cfg.stop_after)
    ckpt_every = cfg.checkpoint_every or cfg.eval_every or cfg.steps
    bar = None
    if progress_enabled(cfg.progress) and end > prog.step:
        bar = progress_bar(total=cfg.steps, initial=prog.step, desc=cfg.desc, mininterval=1.0)
    steps_now, step_time = 0, 0.0
    while prog.step < end:
        t0 = time.perf_counter()
        loss_value = _one_step(model, opt, sched, params, train_blocks, prog, cfg, device)
        step_time += time.perf_counter() - t0
        steps_now += 1
        prog.loss_curve.append((prog.step, loss_value))
        if bar is not None:
            bar.update(1)
            if prog.step % 10 == 0:
                bar.set_postfix(loss=f"{loss_value:.3f}", refresh=False)
        if cfg.eval_every and prog.step % cfg.eval_every == 0 and prog.step < cfg.steps:
            prog.eval_curve.append((prog.step, evaluate(model, eval_blocks, cfg.batch_size, cfg.eval_batches,
                                                        device.type)))
        if cfg.checkpoint_dir is not None and (prog.step % ckpt_every == 0 or prog.step == end):
            save_checkpoint(cfg.checkpoint_dir, model=model, optimizer=opt, scheduler=sched, identity=identity,
                            step=prog.step, data_position=prog.position, loss_curve=prog.loss_curve,
                            eval_curve=prog.eval_curve)
    if bar is not None:
        bar.close()
    return steps_now, step_time


def load_trained(model: nn.Module, checkpoint_dir: str | os.PathLike) -> nn.Module:
    """Load the weights :func:`train` saved in ``checkpoint_dir`` into ``model`` (same shapes); eval mode."""
    if not has_checkpoint(checkpoint_dir):
        raise AnatomyKitError(f"no checkpoint in {checkpoint_dir}; train with checkpoint_dir={str(checkpoint_dir)!r} first")
    _, tensors = load_checkpoint(checkpoint_dir)
    state = model_tensors(tensors)
    own = model.state_dict()
    bad = sorted(k for k in own if k not in state or tuple(state[k].shape) != tuple(own[k].shape))
    if bad:
        raise AnatomyKitError(f"checkpoint in {checkpoint_dir} holds another model: parameters {bad[:4]} are missing "
                              "or differ in shape")
    model.load_state_dict(state)
    return model.eval()
