"""Running a growth schedule: one :func:`anatomy_kit.lm.train` call per phase (chapter 3).

:func:`run_schedule` walks the phases of a :class:`~anatomy_kit.phased_training.phases.GrowthSchedule`:

1. at the start of the first phase every anti-layer is re-initialised (a fresh draw of the model's
   own initialisation, seeded) and its matrices are multiplied by ``anti_scale`` (α);
2. at the start of every phase its entering layers become clones of their sources plus relative
   noise (:func:`anatomy_kit.hf.surgery.clone_layer`, seeded by ``(init_seed, layer)``);
3. the phase trains with ``trainable`` = its layers (and the interface, embedding and final norm,
   if the phase says so); everything else is frozen bit for bit. Each phase has its own
   optimiser (fresh AdamW moments), warm-up and cosine decay, and its own checkpoint folder
   ``<checkpoint_dir>/<index>-<name>``; the data stream continues across phases
   (``TrainConfig.data_start``), so phase *p* reads the batches a single run reads at those steps.

A run killed in the middle of a phase resumes exactly: the finished phases reload from their
checkpoints, the entry operations are deterministic, and the interrupted phase continues from its
last checkpoint. Optimiser-step time is recorded per phase in ``timing.json`` (evaluation and
checkpoint writes excluded), so a resumed run still knows what its finished phases cost.
"""

from __future__ import annotations

import hashlib
import math
import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..hf.layers import decoder_layers
from ..hf.surgery import clone_layer, layer_parameter_names
from ..jsonio import read_json, write_json
from ..lm.model import LMConfig, build_lm
from ..lm.pool import run_in_pool
from ..lm.train import TrainConfig, TrainResult, train
from ..progress import progress_line
from ..validate import AnatomyKitError, check_int, check_positive
from .phases import GrowthSchedule, Phase

__all__ = ["PhaseRecord", "GrowthResult", "GrowthJob", "interface_names", "trainable_names", "reinitialise_layer",
           "enter_phase", "phase_dir", "run_schedule", "run_many", "final_checkpoint", "prune_checkpoints"]

TIMING = "timing.json"


@dataclass
class PhaseRecord:
    """One phase as it ran: curves use *global* steps; ``step_seconds`` is the mean optimiser-step time."""

    name: str
    start: int
    stop: int
    layers: list[int]
    final_eval_loss: float
    step_seconds: float
    completed: bool
    loss_curve: list = field(default_factory=list)
    eval_curve: list = field(default_factory=list)


@dataclass
class GrowthResult:
    """A whole schedule's run (chapter 3): per-phase records, joined curves, the final eval loss."""

    label: str
    seed: int
    phases: list[PhaseRecord]
    completed: bool
    n_params: int
    schedule: dict

    @property
    def final_eval_loss(self) -> float:
        return self.phases[-1].final_eval_loss if self.completed else float("nan")

    @property
    def eval_curve(self) -> list[tuple[int, float]]:
        return [tuple(p) for ph in self.phases for p in ph.eval_curve]

    @property
    def loss_curve(self) -> list[tuple[int, float]]:
        return [tuple(p) for ph in self.phases for p in ph.loss_curve]

    def train_seconds(self) -> float:
        """Optimiser-step seconds of the whole schedule: Σ over phases of steps × mean step time."""
        return float(sum((ph.stop - ph.start) * ph.step_seconds for ph in self.phases))

    def to_dict(self) -> dict:
        return asdict(self) | {"final_eval_loss": self.final_eval_loss, "train_seconds": self.train_seconds()}

    @classmethod
    def from_dict(cls, d: dict) -> "GrowthResult":
        phases = [PhaseRecord(**{k: v for k, v in p.items() if k in PhaseRecord.__dataclass_fields__})
                  for p in d["phases"]]
        return cls(d["label"], d["seed"], phases, d["completed"], d["n_params"], d["schedule"])


def interface_names(model: nn.Module) -> list[str]:
    """Parameters outside every decoder layer (embedding / LM head, final norm)."""
    inside = {full for l in range(len(decoder_layers(model))) for full in layer_parameter_names(model, l).values()}
    return [n for n, _ in model.named_parameters() if n not in inside]


def trainable_names(model: nn.Module, phase: Phase) -> list[str]:
    """The parameter names that train in ``phase``: its layers' parameters, plus the interface if it trains."""
    names = [full for l in phase.layers for full in layer_parameter_names(model, l).values()]
    return names + (interface_names(model) if phase.interface else [])


def _seed_for(seed: int, what: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}:{what}".encode()).digest()[:4], "little")


@torch.no_grad()
def reinitialise_layer(model: nn.Module, layer: int, *, seed: int, scale: float = 1.0) -> None:
    """Overwrite ``layer`` with a fresh draw of the model's initialisation times ``scale`` (matrices only).

    The draw is :func:`~anatomy_kit.lm.model.build_lm` of ``model.config`` with a seed derived from
    ``(seed, layer)``; norm gains come back at 1 and are not scaled. Needs a kit LM (``model.config``
    an :class:`~anatomy_kit.lm.model.LMConfig`).
    """
    if not isinstance(getattr(model, "config", None), LMConfig):
        raise AnatomyKitError(f"reinitialise_layer needs a kit LM (PerLayerWidthLM); got {type(model).__name__}")
    check_positive("scale", scale)
    fresh = dict(build_lm(model.config, _seed_for(check_int("seed", seed, minimum=0), f"anti:{layer}"))
                 .named_parameters())
    params = dict(model.named_parameters())
    for name in layer_parameter_names(model, layer).values():
        value = fresh[name].detach().to(params[name].device, params[name].dtype)
        params[name].copy_(value * scale if value.ndim >= 2 else value)


def enter_phase(model: nn.Module, schedule: GrowthSchedule, index: int, *, seed: int) -> None:
    """The operations at the start of phase ``index``: anti-layers (first phase only), then clones."""
    check_int("index", index, minimum=0, maximum=schedule.n_phases - 1)
    if len(decoder_layers(model)) != schedule.n_layers:
        raise AnatomyKitError(f"the model has {len(decoder_layers(model))} layers; the schedule is for "
                              f"{schedule.n_layers}")
    if index == 0:
        for layer in schedule.anti_layers:
            reinitialise_layer(model, layer, seed=seed, scale=schedule.anti_scale)
    for layer, source in schedule.phases[index].enter:
        clone_layer(model, source, layer, noise_std=schedule.clone_noise, seed=seed)


def phase_dir(checkpoint_dir: str | os.PathLike, schedule: GrowthSchedule, index: int) -> Path:
    """``<checkpoint_dir>/<index>-<phase name>``: where phase ``index`` checkpoints."""
    return Path(checkpoint_dir) / f"{index}-{schedule.phases[index].name}"


def final_checkpoint(checkpoint_dir: str | os.PathLike, schedule: GrowthSchedule) -> Path:
    """The checkpoint folder holding the weights after the last phase (for :func:`anatomy_kit.lm.load_trained`)."""
    return phase_dir(checkpoint_dir, schedule, schedule.n_phases - 1)


def prune_checkpoints(checkpoint_dir: str | os.PathLike, schedule: GrowthSchedule) -> None:
    """Delete the checkpoints of every phase but the last (a finished run needs only its final weights).

    A later run of the same schedule then retrains those phases and finds the last one finished.
    """
    import shutil

    for i in range(schedule.n_phases - 1):
        shutil.rmtree(phase_dir(checkpoint_dir, schedule, i), ignore_errors=True)


def _phase_config(base: TrainConfig, ph: Phase, folder: Path, warmup_fraction: float,
                  stop_after: int | None) -> TrainConfig:
    local_stop = None if stop_after is None or stop_after >= ph.stop else stop_after - ph.start
    return replace(base, steps=ph.steps, lr=ph.lr, warmup=min(ph.steps, round(warmup_fraction * ph.steps)),
                   data_start=ph.start * base.batch_size * base.grad_accum, checkpoint_dir=str(folder),
                   stop_after=local_stop, desc=f"{ph.name}")


def _timed(folder: Path, result: TrainResult, cfg: TrainConfig, tokens_per_step: int) -> float:
    """Mean step seconds of this phase over every call that ran steps in it (kept in ``timing.json``)."""
    path = folder / TIMING
    doc = read_json(path, what="phase timing") if path.exists() else {"seconds": 0.0, "steps": 0}
    ran = result.steps_done - result.resumed_from
    if ran > 0 and math.isfinite(result.tokens_per_s) and result.tokens_per_s > 0:
        if doc.get("last_step", 0) < result.steps_done:
            doc = {"seconds": doc["seconds"] + ran * tokens_per_step / result.tokens_per_s,
                   "steps": doc["steps"] + ran, "last_step": result.steps_done}
            write_json(path, doc)
    return doc["seconds"] / doc["steps"] if doc["steps"] else float("nan")


def run_schedule(model: nn.Module, schedule: GrowthSchedule, train_blocks: Any, eval_blocks: Any,
                 base: TrainConfig, *, checkpoint_dir: str | os.PathLike, warmup_fraction: float = 0.1,
                 init_seed: int | None = None, stop_after: int | None = None) -> GrowthResult:
    """Train ``model`` in place through every phase of ``schedule`` (chapter 3; module docstring).

    ``base`` gives batch size, seed (data order), weight decay, evaluation and device; each phase
    sets its own steps, learning rate, warm-up (``warmup_fraction`` of its steps) and data start.
    ``init_seed`` (default ``base.seed``) seeds the anti-layer draws and the clone noise.
    ``stop_after`` stops after that many *global* steps (a deliberate kill; rerun to resume).
    """
    seed = base.seed if init_seed is None else check_int("init_seed", init_seed, minimum=0)
    if not 0 <= float(warmup_fraction) <= 1:
        raise AnatomyKitError(f"warmup_fraction={warmup_fraction!r} must lie in [0, 1]")
    if stop_after is not None:
        check_int("stop_after", stop_after, minimum=1)
    tokens_per_step = base.batch_size * base.grad_accum * (train_blocks.shape[1] - 1)
    records, completed = [], True
    for i, ph in enumerate(schedule.phases):
        if stop_after is not None and stop_after <= ph.start:
            completed = False
            break
        enter_phase(model, schedule, i, seed=seed)
        folder = phase_dir(checkpoint_dir, schedule, i)
        cfg = _phase_config(base, ph, folder, warmup_fraction, stop_after)
        r = train(model, train_blocks, eval_blocks, cfg, trainable=trainable_names(model, ph))
        records.append(PhaseRecord(ph.name, ph.start, ph.stop, list(ph.layers), r.final_eval_loss,
                                   _timed(folder, r, cfg, tokens_per_step), r.completed,
                                   [(ph.start + s, v) for s, v in r.loss_curve],
                                   [(ph.start + s, v) for s, v in r.eval_curve]))
        if not r.completed:
            completed = False
            break
    return GrowthResult(schedule.label, seed, records, completed, sum(p.numel() for p in model.parameters()),
                        schedule.to_dict())


@dataclass(frozen=True)
class GrowthJob:
    """One run for :func:`run_many`: a fresh ``build_lm(config, model_seed)`` trained by ``schedule``."""

    config: LMConfig
    schedule: GrowthSchedule
    train: TrainConfig
    checkpoint_dir: str
    model_seed: int = 0
    warmup_fraction: float = 0.1


def _worker(args: tuple) -> GrowthResult:
    job, train_blocks, eval_blocks, threads = args
    torch.set_num_threads(threads)
    model = build_lm(job.config, job.model_seed)
    return run_schedule(model, job.schedule, train_blocks, eval_blocks, job.train, checkpoint_dir=job.checkpoint_dir,
                        warmup_fraction=job.warmup_fraction, init_seed=job.model_seed)


def run_many(jobs: list[GrowthJob], train_blocks: Any, eval_blocks: Any, *, processes: int = 1,
             threads_per_process: int = 1, verbose: bool = True) -> list[GrowthResult]:
    """Run independent schedules side by side in worker processes; results in job order (chapter 3).

    As :func:`anatomy_kit.lm.train_many`: ``processes=1`` runs here; otherwise fresh ("spawn")
    interpreters with ``threads_per_process`` torch threads each
    (:func:`anatomy_kit.lm.pool.run_in_pool`). Weights stay in the checkpoints.
    """
    if not all(isinstance(j, GrowthJob) for j in jobs):
        raise AnatomyKitError("run_many takes a list of GrowthJob")
    processes = check_int("processes", processes, minimum=1)
    threads = check_int("threads_per_process", threads_per_process, minimum=1)
    args = [(j, train_blocks, eval_blocks, threads) for j in jobs]

    def say(k: int, r: GrowthResult) -> None:
        if verbose:
            progress_line(f"[{k}/{len(jobs)}] {r.label}, seed {r.seed}: eval loss {r.final_eval_loss:.4f}, "
                          f"{r.train_seconds():.1f} s of optimiser steps")

    if processes == 1 or len(jobs) <= 1:
        before, out = torch.get_num_threads(), []
        try:
            for a in args:
                out.append(_worker(a))
                say(len(out), out[-1])
        finally:
            torch.set_num_threads(before)
        return out
    results: list[GrowthResult | None] = [None] * len(jobs)

    def done(i: int, result: GrowthResult) -> None:
        results[i] = result
        say(sum(r is not None for r in results), result)

    run_in_pool(_worker, args, processes, done)
    return results  # type: ignore[return-value]
