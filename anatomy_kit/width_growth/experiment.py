"""Chapter 6's grid: train small → grow → continue, per condition and paired seed, and a multi-stage chain.

Chapter 6, *Growing the residual stream*. :func:`grid_jobs` lists every training run of a
:class:`~anatomy_kit.width_growth.recipe.GrowthRecipe` as a :class:`GrowthJob` (a builder, a
``TrainConfig``, the runs it starts from); :func:`run_jobs` trains them in one
:func:`anatomy_kit.lm.train_many` call (runs side by side in worker processes), each run as soon as
the runs it starts from have finished, every run into its own checkpoint folder under ``root``, so
a rerun resumes and a finished grid only collects. The key arms (``recipe.key_arms``) may train on
more seeds than the others (``key_seeds``, :func:`arm_seeds`). Runs of one seed share the small
model and read one token stream: the small run reads positions ``0 … steps_small``, its grown
continuations go on from there (``data_start``), and the cold start reads the whole stream from 0,
so grown and cold runs see the same tokens.

Sharding (``$ANATOMY_KIT_SHARD=i/n``, :mod:`anatomy_kit.lm.shards`) is by seed: shard ``i`` trains
whole chains (small model, its continuations, its cold start, its multi-stage chain) of the seeds
at positions ``k`` with ``k mod n == i``, since a continuation needs its small model's checkpoint.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from anatomy_kit.width_growth.recipe import CONDITIONS, GrowthRecipe, param_count
from anatomy_kit.width_growth.starts import START_FILE, fresh_model, grown_model
from anatomy_kit.lm.batches import batch_indices, rows_of
from anatomy_kit.lm.pool import train_many
from anatomy_kit.lm.shards import current_shard
from anatomy_kit.lm.speed import training_precision
from anatomy_kit.lm.train import TrainConfig, TrainResult
from anatomy_kit.validate import AnatomyKitError, check_int

__all__ = ["GrowthJob", "GridPaths", "arm_seeds", "grid_jobs", "waves", "run_jobs", "stage_name", "cold_name"]


@dataclass(frozen=True)
class GrowthJob:
    """One training run: ``build()`` makes its starting model; ``after``: runs it starts from."""

    name: str
    chain: int                 # the seed's position: shards split by it
    seed: int
    build: Callable[[], Any]
    config: TrainConfig
    after: tuple[str, ...] = ()
    cost: float = 0.0          # parameters × steps, to start long runs first


@dataclass(frozen=True)
class GridPaths:
    """Checkpoint folders: ``root/<run name>``; a grown run's start file lies inside its folder."""

    root: Path

    def run(self, name: str) -> Path:
        return Path(self.root) / name

    def start(self, name: str) -> Path:
        return self.run(name) / START_FILE


def small_name(recipe: GrowthRecipe, seed: int) -> str:
    return f"small-d{recipe.d_small}-seed{seed}"


def grown_name(condition: str, seed: int) -> str:
    return f"{CONDITIONS[condition].slug}-seed{seed}"


def cold_name(width: int, steps: int, seed: int) -> str:
    return f"cold-d{width}-{steps}steps-seed{seed}"


def stage_name(condition: str | None, stage: int, width: int, seed: int) -> str:
    """Multi-stage run names; stage 0 (trained from scratch) is shared by the conditions."""
    if stage == 0:
        return f"ms-stage0-d{width}-seed{seed}"
    return f"ms-{CONDITIONS[condition].slug}-stage{stage}-d{width}-seed{seed}"


def train_config(recipe: GrowthRecipe, steps: int, seed: int, folder: Path, device: str, *, data_start: int = 0,
                 desc: str = "") -> TrainConfig:
    """The AdamW recipe of every run (fresh warm-up and cosine per run); ``data_start`` in steps."""
    rows = recipe.batch_size * recipe.grad_accum
    return TrainConfig(steps=steps, batch_size=recipe.batch_size, grad_accum=recipe.grad_accum, lr=recipe.lr,
                       warmup=min(recipe.warmup_steps, steps), weight_decay=recipe.weight_decay,
                       eval_every=recipe.eval_every, eval_batches=recipe.eval_batches, seed=seed,
                       checkpoint_dir=str(folder), device=str(device), data_start=data_start * rows,
                       precision=training_precision(recipe.precision, device), progress=False, desc=desc)


def learn_batches(recipe: GrowthRecipe, train_blocks, seed: int, start_step: int) -> list:
    """The first ``learn_steps`` batches of a continuation's token stream (LRIO / SRIO-LO learn on them)."""
    rows = recipe.batch_size
    n = train_blocks.shape[0]
    return [rows_of(train_blocks, batch_indices((start_step * recipe.grad_accum + i) * rows, rows, n, seed)).long()
            for i in range(recipe.learn_steps)]


def _grow_job(recipe: GrowthRecipe, paths: GridPaths, name: str, source: str, source_cfg, new_d: int,
              condition: str, seed: int, chain: int, steps: int, start_step: int, gate_tokens: int, device: str,
              train_blocks) -> GrowthJob:
    cond = CONDITIONS[condition]
    batches = learn_batches(recipe, train_blocks, seed, start_step) if cond.operator in ("srio-lo", "lrio") else None
    build = functools.partial(grown_model, source_cfg, str(paths.run(source)), new_d, condition,
                              str(paths.start(name)), gate_tokens=gate_tokens, batches=batches,
                              learn_steps=recipe.learn_steps, learn_lr=recipe.learn_lr,
                              learn_lr_angle=recipe.learn_lr_angle, seed=seed, device=str(device))
    cfg = train_config(recipe, steps, seed, paths.run(name), device, data_start=start_step, desc=name)
    return GrowthJob(name, chain, seed, build, cfg, (source,), param_count(recipe.config(new_d)) * steps)


def _fresh_job(recipe, paths, name, width, steps, seed, chain, device) -> GrowthJob:
    build = functools.partial(fresh_model, recipe.config(width), seed)
    cfg = train_config(recipe, steps, seed, paths.run(name), device, desc=name)
    return GrowthJob(name, chain, seed, build, cfg, (), param_count(recipe.config(width)) * steps)


def arm_seeds(recipe: GrowthRecipe, seeds: list[int], key_seeds: list[int] | None = None) -> dict[str, list[int]]:
    """``{"small" or condition: [seeds]}``: every condition trains on ``seeds``, the recipe's key arms
    (``recipe.key_arms``) and the small models they grow from on ``key_seeds`` (default: ``seeds``),
    which must hold every seed of ``seeds`` (chapter 6: 6 paired seeds for the key comparison)."""
    if not seeds or len(set(seeds)) != len(seeds):
        raise AnatomyKitError(f"seeds={seeds!r} must be a non-empty list of distinct seeds")
    key = list(seeds if key_seeds is None else key_seeds)
    if len(set(key)) != len(key) or not set(seeds) <= set(key):
        raise AnatomyKitError(f"key_seeds={key_seeds!r} must be distinct and hold every seed of seeds={seeds!r}")
    out = {"small": key}
    out.update({c: list(key if c in recipe.key_arms else seeds) for c in recipe.conditions})
    return out


def grid_jobs(recipe: GrowthRecipe, seeds: list[int], paths: GridPaths, train_blocks, *, device: str = "cpu",
              ms_seeds: list[int] | None = None, key_seeds: list[int] | None = None) -> list[GrowthJob]:
    """Every run of the grid: each condition on ``seeds``, the key arms on ``key_seeds`` too
    (:func:`arm_seeds`), multi-stage for ``ms_seeds`` (among ``seeds``); names unique."""
    recipe = recipe.validate()
    by_arm = arm_seeds(recipe, seeds, key_seeds)
    ms_seeds = list(ms_seeds or [])
    if ms_seeds and (not recipe.ms_widths or not set(ms_seeds) <= set(seeds)):
        raise AnatomyKitError(f"ms_seeds={ms_seeds!r} need recipe.ms_widths and must be among seeds={seeds!r}")
    jobs: dict[str, GrowthJob] = {}
    total = recipe.steps_small + recipe.steps_grown
    for chain, s in enumerate(by_arm["small"]):
        small = small_name(recipe, s)
        jobs[small] = _fresh_job(recipe, paths, small, recipe.d_small, recipe.steps_small, s, chain, device)
        for c in (c for c in recipe.conditions if s in by_arm[c]):
            if c == "cold":
                name = cold_name(recipe.d_large, total, s)
                jobs[name] = _fresh_job(recipe, paths, name, recipe.d_large, total, s, chain, device)
                continue
            name = grown_name(c, s)
            jobs[name] = _grow_job(recipe, paths, name, small, recipe.config(recipe.d_small), recipe.d_large, c,
                                   s, chain, recipe.steps_grown, recipe.steps_small, recipe.gate_tokens, device,
                                   train_blocks)
        if s in ms_seeds:
            for job in _multistage_jobs(recipe, paths, s, chain, device, train_blocks):
                jobs.setdefault(job.name, job)
    return list(jobs.values())


def _multistage_jobs(recipe: GrowthRecipe, paths: GridPaths, seed: int, chain: int, device: str,
                     train_blocks) -> list[GrowthJob]:
    widths, steps = recipe.ms_widths, recipe.multistage_steps()
    first = stage_name(None, 0, widths[0], seed)
    out = [_fresh_job(recipe, paths, first, widths[0], steps[0], seed, chain, device),
           _fresh_job(recipe, paths, cold_name(widths[-1], sum(steps), seed), widths[-1], sum(steps), seed, chain,
                      device)]
    for op in recipe.ms_operators:
        source, source_cfg, done = first, recipe.config(widths[0]), steps[0]
        for j in range(1, len(widths)):
            name = stage_name(op, j, widths[j], seed)
            out.append(_grow_job(recipe, paths, name, source, source_cfg, widths[j], op, seed, chain, steps[j],
                                 done, recipe.stage_gate_tokens(steps[j]), device, train_blocks))
            source, source_cfg, done = name, str(paths.start(name)), done + steps[j]
    return out


def waves(jobs: list[GrowthJob]) -> list[list[GrowthJob]]:
    """Jobs in dependency levels (a job runs in the wave after its last source), longest first."""
    level: dict[str, int] = {}
    by_name = {j.name: j for j in jobs}
    for job in jobs:
        missing = [a for a in job.after if a not in by_name]
        if missing:
            raise AnatomyKitError(f"job {job.name!r} starts from {missing}, which are not in the job list")

    def depth(name: str) -> int:
        if name not in level:
            level[name] = 1 + max((depth(a) for a in by_name[name].after), default=-1)
        return level[name]

    n = 1 + max(depth(j.name) for j in jobs) if jobs else 0
    return [sorted((j for j in jobs if level[j.name] == k), key=lambda j: -j.cost) for k in range(n)]


def _critical_first(jobs: list[GrowthJob]) -> list[GrowthJob]:
    """Jobs by the cost of the longest chain they start (their own cost plus their longest chain of
    dependants), longest first: the chains that would finish last start first."""
    after = {j.name: [k for k in jobs if j.name in k.after] for j in jobs}
    chain: dict[str, float] = {}

    def rank(job: GrowthJob) -> float:
        if job.name not in chain:
            chain[job.name] = job.cost + max((rank(k) for k in after[job.name]), default=0.0)
        return chain[job.name]

    return sorted(jobs, key=lambda j: -rank(j))


def run_jobs(jobs: list[GrowthJob], train_blocks, eval_blocks, *, processes: int = 1, shard: str | None = None,
             verbose: bool = True) -> dict[str, TrainResult]:
    """Train ``jobs`` with :func:`~anatomy_kit.lm.train_many`, each as soon as its sources have finished
    (the longest chains first, :func:`waves` checking that every source is there); results by run name.

    Under a shard (``shard`` or ``$ANATOMY_KIT_SHARD``) only this shard's chains train and only
    their results are returned; an unsharded call over the same folders collects everything.
    """
    check_int("processes", processes, minimum=1)
    part = current_shard(shard)
    mine = [j for j in jobs if part is None or part.owns(j.chain)]
    if part is not None and verbose:
        print(f"shard {part}: {len(mine)} of {len(jobs)} runs (whole seed chains)", flush=True)
    waves(mine)                                   # refuses a job whose source is not in the list
    order = _critical_first(mine)
    position = {j.name: i for i, j in enumerate(order)}
    results = train_many([(j.build, j.config) for j in order], train_blocks, eval_blocks, processes=processes,
                         verbose=verbose, shard="", after=[tuple(position[a] for a in j.after) for j in order])
    return {j.name: r for j, r in zip(order, results)}
