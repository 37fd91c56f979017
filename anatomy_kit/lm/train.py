"""Resumable training of any causal LM the kit builds or grows, deterministic on a CPU (chapters 3, 5 and 6).

:func:`train` takes a *model* — a :class:`~anatomy_kit.lm.model.PerLayerWidthLM`, a grown or
cloned model, a partly frozen one — its token blocks and a :class:`TrainConfig`:

- AdamW, linear warm-up then cosine decay, gradient clipping, periodic evaluation;
- ``trainable`` chooses which parameters get gradients; the others are frozen for the call
  (``requires_grad`` off, not in the optimiser), so they do not change, bit for bit;
- atomic checkpoints without pickle (:mod:`.checkpoint`: model, optimiser, scheduler, RNG
  states, step, data position) and exact resume; a checkpoint is only resumed by the same run
  (same starting weights, settings, trainable set and data shapes);
- on CPU two runs with the same seed are bit-identical, and a run stopped after any checkpoint
  and resumed reaches the same final loss; on a GPU two runs agree only to rounding (CUDA's
  atomic additions in ``index_add``/embedding and attention backward sum in a varying order);
- a checkpoint's identity leaves out what the machine decides (device, precision, how the
  step's rows are split into micro-batches): a grid trained on GPUs is collected on a CPU, and a
  run started on a CPU continues on a GPU (``checkpoint.json`` records what each write used);
- on CUDA: TF32 matmuls, fused AdamW, bf16 autocast (``precision="bf16"``, refused where bf16 is
  only emulated: :func:`.speed.training_precision`), optional ``torch.compile`` and activation
  checkpointing (:mod:`.speed`), pinned non-blocking batch copies and no host sync inside a step
  (:mod:`.step`); the result reports tokens/s, achieved FLOP/s and MFU against the device's peak;
- under ``torchrun``: DistributedDataParallel (or FSDP) with the same global batch as one process
  (:mod:`.distributed`).

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
from torch import nn

from ..hf.surgery import requires_grad_only
from ..progress import progress_bar, progress_enabled
from ..validate import AnatomyKitError, check_choice, check_int, check_positive
from . import distributed as dist_
from .batches import batch_indices, check_blocks
from .loss import evaluate, logits_of
from .checkpoint import (has_checkpoint, identity_differences, load_checkpoint, load_trained, model_tensors,
                         save_checkpoint, set_rng_state, state_digest)
from .speed import (activation_checkpointing, device_name, fast_matmuls, flops_per_token, make_optimizer,
                    native_bf16, utilisation)
from .step import FLUSH_EVERY, Progress as _Progress, Session as _Session, flush_losses, optimiser_step

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
    (``None``: every eval block). ``data_start`` is the data position of the first step, so a
    later phase of a phased run (chapter 3) reads the batches a single run would read there.

    Speed (none of these enters a checkpoint's identity): ``tf32`` allows TF32 matmuls on CUDA;
    ``compile`` runs the training step's forward through ``torch.compile``;
    ``activation_checkpointing`` recomputes layer activations in the backward pass (same numbers,
    less memory); ``fsdp`` shards the model over the processes of a ``torchrun`` launch instead of
    replicating it (DistributedDataParallel); ``untimed_steps``: the first steps of a call that
    tokens/s, FLOP/s and MFU leave out (compilation, allocator and kernel warm-up). Nor do
    ``precision`` or the split of a step's rows into ``batch_size × grad_accum`` (their product
    is the identity), which the device decides (:func:`anatomy_kit.lm.estimates.choose_micro_batch`).
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
    data_start: int = 0
    tf32: bool = True
    compile: bool = False
    activation_checkpointing: bool = False
    fsdp: bool = False
    untimed_steps: int = 0

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
        check_int("data_start", self.data_start, minimum=0)
        check_int("untimed_steps", self.untimed_steps, minimum=0)
        for flag in ("tf32", "compile", "activation_checkpointing", "fsdp"):
            if not isinstance(getattr(self, flag), bool):
                raise AnatomyKitError(f"{flag}={getattr(self, flag)!r} must be True or False")
        return self

    def fingerprint(self) -> dict:
        """The run's settings as a checkpoint records them (:func:`.checkpoint.identity_differences`
        compares them without ``precision`` and with ``batch_size × grad_accum`` as one number)."""
        keys = ("steps", "batch_size", "lr", "warmup", "weight_decay", "seed", "min_lr_ratio", "betas", "grad_clip",
                "grad_accum", "precision")
        d = asdict(self)
        keys += ("data_start",) if self.data_start else ()   # absent when 0: older checkpoints still resume
        return {k: (list(d[k]) if isinstance(d[k], tuple) else d[k]) for k in keys}


@dataclass
class TrainResult:
    """What :func:`train` returns (chapter 5).

    ``loss_curve``: ``(step, train loss)`` per step; ``eval_curve``: ``(step, eval loss)``;
    ``final_eval_loss``: the eval loss after the last step (``nan`` if stopped early);
    ``tokens_per_s``: training tokens per second of optimiser-step time in this call, after its
    first ``untimed_steps`` steps (evaluation and checkpoint writes excluded; ``nan`` if the call
    timed no step, e.g. because it found the run finished in its checkpoint); ``wall_s``: the
    whole call; ``n_params``: every parameter of the model (tied ones once); ``trainable``: the
    names of those that received gradients. ``flops_per_s``: the
    model's training FLOPs per second of step time (:func:`.speed.flops_per_token`); ``mfu``: that
    over the dense peak of the devices used (``None`` on a CPU or an unknown GPU); ``device``: the
    device's name; ``world_size``: processes that trained together.
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
    flops_per_s: float = float("nan")
    mfu: float | None = None
    device: str = "cpu"
    world_size: int = 1


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Learning rate for optimiser step ``step`` (0-based): linear warm-up, then cosine decay."""
    if cfg.warmup and step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    span = max(1, cfg.steps - cfg.warmup)
    progress = min(1.0, (step - cfg.warmup) / span)
    floor = cfg.min_lr_ratio * cfg.lr
    return floor + (cfg.lr - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


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


def _start(model: nn.Module, cfg: TrainConfig, device: torch.device, ctx: dist_.Distributed, trainable,
           identity: dict) -> _Session:
    """Wrap the model for this launch, build optimiser and schedule (after FSDP has sharded the weights)."""
    step_model = dist_.wrap(model, ctx, device)
    params = select_parameters(model, trainable)
    opt = make_optimizer(params, cfg.lr, cfg.betas, cfg.weight_decay, device)
    names = [n for n, p in params.items() if p.ndim >= 2] + [n for n, p in params.items() if p.ndim < 2]
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_at(s, cfg) / cfg.lr)
    if cfg.compile:
        step_model = torch.compile(step_model)
    return _Session(model, step_model, opt, sched, params, names, cfg, device, ctx, identity)


def _resume(run: _Session) -> _Progress:
    ckpt_dir = run.cfg.checkpoint_dir
    if not has_checkpoint(ckpt_dir):
        return _Progress(position=run.cfg.data_start)
    doc, tensors = load_checkpoint(ckpt_dir)
    differ = identity_differences(doc["identity"], run.identity)
    if differ:
        raise AnatomyKitError(f"checkpoint in {ckpt_dir} was written by a different run ({', '.join(differ)} "
                              "differ); use another checkpoint_dir or delete it")
    dist_.load_full_states(run.model, run.opt, model_tensors(tensors), doc["optimizer_state"], run.ctx, run.names)
    run.sched.load_state_dict(doc["scheduler"])
    set_rng_state(tensors, doc["rng"], run.device)
    return _Progress(doc["step"], doc["data_position"], doc["loss_curve"], doc["eval_curve"], doc["step"])


def train(model: nn.Module, train_blocks: Any, eval_blocks: Any, config: TrainConfig, *,
          trainable: Callable[[str], bool] | Iterable[str] | None = None) -> TrainResult:
    """Train ``model`` in place on ``train_blocks`` and evaluate on ``eval_blocks`` (chapters 3, 5, 6).

    ``train_blocks``/``eval_blocks``: integer tensors ``(N, T+1)`` (or numpy arrays / memmaps such as
    :meth:`anatomy_kit.data.TokenFile.windows`, read a batch at a time); inputs are ``[:, :-1]``,
    targets ``[:, 1:]``. The data order comes from :func:`batch_indices` (seeded by ``config.seed``);
    the weights are whatever ``model`` holds (build it with :func:`anatomy_kit.lm.model.build_lm` for
    a seeded fresh model). ``trainable`` freezes the rest (:func:`select_parameters`). If
    ``config.checkpoint_dir`` holds a checkpoint of this same run, training continues from it.
    Under ``torchrun`` the ranks share each step's rows (:mod:`.distributed`). The model is
    returned in ``result.model``.
    """
    t_call = time.perf_counter()
    cfg = config.validate()
    vocab, max_len = _limits(model)
    train_blocks = check_blocks("train_blocks", train_blocks, vocab, max_len)
    eval_blocks = check_blocks("eval_blocks", eval_blocks, vocab, max_len)
    ctx, device = dist_.join(cfg.device, cfg.fsdp)
    if cfg.precision == "bf16" and device.type == "cuda" and not native_bf16(device):
        raise AnatomyKitError(f"precision='bf16' on {device_name(device)}, which only emulates bf16 (compute "
                              "capability below 8.0); use precision='fp32' (speed.training_precision chooses it)")
    if not (ctx.active and ctx.fsdp):
        model.to(device)         # FSDP shards first (dist_.wrap) and moves only this rank's shard
    chosen = select_parameters(model, trainable)
    identity = {"start": state_digest(model), "train": cfg.fingerprint(), "trainable": list(chosen),
                "train_blocks": list(train_blocks.shape), "eval_blocks": list(eval_blocks.shape)}
    with requires_grad_only(model, list(chosen.values())), fast_matmuls(device, cfg.tf32), \
            activation_checkpointing(model, cfg.activation_checkpointing):
        model.train()
        run = _start(model, cfg, device, ctx, trainable, identity)
        prog = _resume(run)
        steps_now, step_time = _train_loop(run, train_blocks, eval_blocks, prog)
        final = float("nan")
        if prog.step >= cfg.steps:
            final = evaluate(run.step_model, eval_blocks, cfg.batch_size, cfg.eval_batches, str(device))
            if not prog.eval_curve or prog.eval_curve[-1][0] != prog.step:
                prog.eval_curve = prog.eval_curve + [(prog.step, final)]
    return _result(run, prog, final, steps_now, step_time, train_blocks.shape[1] - 1, time.perf_counter() - t_call)


def _due(cfg: TrainConfig, prog: _Progress, end: int, ckpt_every: int, timed_from: int) -> tuple[bool, bool, bool]:
    """(evaluate, checkpoint, read the losses) after the step just done."""
    evaluate_now = bool(cfg.eval_every) and prog.step % cfg.eval_every == 0 and prog.step < cfg.steps
    save_now = cfg.checkpoint_dir is not None and (prog.step % ckpt_every == 0 or prog.step == end)
    read_now = evaluate_now or save_now or prog.step % FLUSH_EVERY == 0 or prog.step in (end, timed_from)
    return evaluate_now, save_now, read_now


def _result(run: _Session, prog: _Progress, final: float, steps_now: int, step_time: float, seq_len: int,
            wall_s: float) -> TrainResult:
    cfg = run.cfg
    tokens = steps_now * cfg.batch_size * cfg.grad_accum * seq_len
    tokens_per_s = tokens / step_time if step_time > 0 else float("nan")
    flops_per_s = tokens_per_s * flops_per_token(run.model, seq_len)
    precision = "bf16" if cfg.precision == "bf16" else ("tf32" if cfg.tf32 else "fp32")
    return TrainResult(loss_curve=list(prog.loss_curve), eval_curve=list(prog.eval_curve), final_eval_loss=final,
                       tokens_per_s=tokens_per_s, steps_done=prog.step, completed=prog.step >= cfg.steps,
                       resumed_from=prog.resumed_from, n_params=sum(p.numel() for p in run.model.parameters()),
                       wall_s=wall_s, model=run.model, trainable=list(run.params), flops_per_s=flops_per_s,
                       mfu=utilisation(flops_per_s, run.device, precision, run.ctx.world_size),
                       device=device_name(run.device), world_size=run.ctx.world_size)


def _train_loop(run: _Session, train_blocks, eval_blocks, prog: _Progress) -> tuple[int, float]:
    """Steps until ``cfg.steps`` (or ``stop_after``); evaluates and checkpoints on schedule.

    Returns (timed steps, their seconds). Step time is measured between host syncs (the loss
    reads of :func:`.step.flush_losses`), so queued GPU work is counted where it ran, never in an
    evaluation; the first ``untimed_steps`` steps of the call are left out.
    """
    cfg = run.cfg
    end = cfg.steps if cfg.stop_after is None else min(cfg.steps, cfg.stop_after)
    ckpt_every = cfg.checkpoint_every or cfg.eval_every or cfg.steps
    timed_from = prog.step + cfg.untimed_steps
    bar = None
    if run.ctx.is_main and progress_enabled(cfg.progress) and end > prog.step:
        bar = progress_bar(total=cfg.steps, initial=prog.step, desc=cfg.desc, mininterval=1.0)
    timed_steps, step_time = 0, 0.0
    while prog.step < end:
        t0 = time.perf_counter()
        optimiser_step(run, train_blocks, prog)
        evaluate_now, save_now, read_now = _due(cfg, prog, end, ckpt_every, timed_from)
        if read_now:
            flush_losses(run, prog)              # waits for the queued steps: they are timed here
        if prog.step > timed_from:
            timed_steps += 1
            step_time += time.perf_counter() - t0
        if bar is not None:
            bar.update(1)
            if read_now and prog.loss_curve:
                bar.set_postfix(loss=f"{prog.loss_curve[-1][1]:.3f}", refresh=False)
        if evaluate_now:
            prog.eval_curve.append((prog.step, evaluate(run.step_model, eval_blocks, cfg.batch_size, cfg.eval_batches,
                                                        str(run.device))))
        if save_now:
            _save(run, prog)
    if bar is not None:
        bar.close()
    return timed_steps, step_time


def _save(run: _Session, prog: _Progress) -> None:
    """Rank 0 writes the checkpoint (FSDP: after every rank helped gather the full state); the others wait."""
    model_state, opt_state = dist_.full_states(run.model, run.opt, run.ctx, run.names)
    if run.ctx.is_main:
        save_checkpoint(run.cfg.checkpoint_dir, model_state=model_state, optimizer_state=opt_state,
                        scheduler=run.sched, identity=run.identity, step=prog.step, data_position=prog.position,
                        loss_curve=prog.loss_curve, eval_curve=prog.eval_curve, device=run.device,
                        written_with={"device": device_name(run.device), "precision": run.cfg.precision,
                                      "batch_size": run.cfg.batch_size, "grad_accum": run.cfg.grad_accum,
                                      "world_size": run.ctx.world_size})
    dist_.barrier(run.ctx)
