"""Independent training runs side by side in worker processes, or one shard of them (chapters 3, 5 and 6)."""

from __future__ import annotations

import functools
import os
from typing import Any, Callable

import torch
from torch import nn

from ..progress import progress_line
from ..validate import AnatomyKitError, check_int
from .model import LMConfig, build_lm
from .shards import Shard, current_shard
from .train import TrainConfig, TrainResult, train

__all__ = ["train_many", "as_job", "run_in_pool"]


def _ready(waiting: list[int], after: list[frozenset[int]], finished: set[int]) -> list[int]:
    """The waiting jobs whose sources have all finished, in list order."""
    return [i for i in waiting if after[i] <= finished]


def _check_after(after: list | None, n: int) -> list[frozenset[int]]:
    """``after`` as one set of indices per job (none: no job waits); refuses a bad index or a cycle."""
    if after is None:
        return [frozenset()] * n
    if len(after) != n:
        raise AnatomyKitError(f"after has {len(after)} entries for {n} jobs; give one tuple of job indices per job")
    sets = []
    for i, a in enumerate(after):
        bad = [j for j in a if not isinstance(j, int) or not 0 <= j < n or j == i]
        if bad:
            raise AnatomyKitError(f"after[{i}] names {bad}: give indices of other jobs, in [0, {n})")
        sets.append(frozenset(a))
    waiting, finished = list(range(n)), set()
    while waiting:
        ready = _ready(waiting, sets, finished)
        if not ready:
            raise AnatomyKitError(f"jobs {waiting[:8]} wait for each other in a cycle (after)")
        finished.update(ready)
        waiting = [i for i in waiting if i not in finished]
    return sets


def run_in_pool(fn: Callable, args: list, processes: int, on_result: Callable[[int, Any], None],
                after: list | None = None) -> None:
    """``fn(a)`` for every ``a`` of ``args`` in up to ``processes`` fresh ("spawn") worker interpreters, calling
    ``on_result(i, result)`` as each finishes (in the order they finish).

    ``after[i]``: the indices of the jobs that must finish before job ``i`` starts (default: none).
    The workers get at most ``processes`` jobs at a time, the first ready one in list order next,
    so the order of ``args`` is the priority. An error is raised once the running jobs are done.
    """
    import multiprocessing as mp
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    processes = check_int("processes", processes, minimum=1)
    sets = _check_after(after, len(args))
    if not args:
        return
    waiting, finished, running = list(range(len(args))), set(), {}
    # "spawn": a fresh interpreter per worker; forking a process whose OpenMP threads have run can hang.
    with ProcessPoolExecutor(max_workers=min(processes, len(args)), mp_context=mp.get_context("spawn")) as pool:
        while waiting or running:
            for i in _ready(waiting, sets, finished)[: processes - len(running)]:
                waiting.remove(i)
                running[pool.submit(fn, args[i])] = i
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in done:
                i = running.pop(fut)
                on_result(i, fut.result())
                finished.add(i)


def _train_worker(args: tuple) -> TrainResult:
    build, train_blocks, eval_blocks, config, threads, trainable = args
    if torch.device(config.device).type == "cpu":   # a GPU run keeps the process's threads (data, growth, setup)
        torch.set_num_threads(threads)
    result = train(build(), train_blocks, eval_blocks, config, trainable=trainable)
    result.model = None  # results travel back between processes; the weights stay in the checkpoint
    return result


def as_job(job: tuple) -> tuple[Callable[[], nn.Module], TrainConfig, Any]:
    """``(builder, config[, trainable])``; an :class:`LMConfig` as builder means ``build_lm(cfg, config.seed)``."""
    if not isinstance(job, tuple) or len(job) not in (2, 3) or not isinstance(job[1], TrainConfig):
        raise AnatomyKitError(f"a job is (builder or LMConfig, TrainConfig[, trainable]); got {job!r:.120}")
    build, config = job[0], job[1]
    trainable = job[2] if len(job) == 3 else None
    if isinstance(build, LMConfig):
        build = functools.partial(build_lm, build, config.seed)
    if not callable(build):
        raise AnatomyKitError(f"the first element of a job must build the model (a callable or an LMConfig), "
                              f"got {type(build).__name__}")
    return build, config, trainable


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def train_many(jobs: list[tuple], train_blocks: torch.Tensor, eval_blocks: torch.Tensor,
               *, processes: int | None = None, threads_per_process: int = 1,
               verbose: bool = True, shard: str | Shard | None = None,
               after: list[tuple[int, ...]] | None = None) -> list[TrainResult | None]:
    """Run independent :func:`~anatomy_kit.lm.train.train` calls side by side in worker processes (chapter 5).

    Each job is ``(builder, TrainConfig[, trainable])`` (see :func:`as_job`): the builder makes the
    model inside the worker (an :class:`LMConfig` stands for a seeded fresh :class:`PerLayerWidthLM`),
    so only configurations travel between processes and builders must be picklable
    (module-level functions or ``functools.partial`` of them).

    Small models use CPU cores better as several one-thread runs than as one run with several
    threads (each step is too short to amortise the threads' synchronisation). Every worker
    training on the CPU sets ``torch.set_num_threads(threads_per_process)``; results come back in job order with
    ``model=None`` (use ``checkpoint_dir`` to keep the weights). ``processes=1`` runs in this
    process, handy for debugging (and forced under ``torchrun``, where every rank runs every job
    together). ``verbose`` prints a line as each run finishes. A run's numbers depend only on
    its configuration and the thread count, not on which process ran it.

    ``shard`` (``"i/n"``, default ``$ANATOMY_KIT_SHARD``; :mod:`.shards`) runs only the jobs at
    positions ``k`` with ``k mod n == i`` and returns ``None`` in the other places: one machine's
    share of a grid whose jobs checkpoint into a shared folder.

    ``after[k]``: the positions of the jobs that must finish before job ``k`` starts (a run that
    starts from another's checkpoint: chapter 6's grown models); a job starts as soon as its own
    sources have finished, earlier positions first (:func:`run_in_pool`). A shard must hold every
    source of its jobs.
    """
    if not jobs:
        return []
    jobs = [as_job(j) for j in jobs]
    part = current_shard(shard)
    mine = part.positions(len(jobs)) if part is not None else list(range(len(jobs)))
    processes = check_int("processes", processes if processes is not None else _cpu_count(), minimum=1)
    threads = check_int("threads_per_process", threads_per_process, minimum=1)
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        processes = 1
    if part is not None and verbose:
        print(f"shard {part}: {len(mine)} of {len(jobs)} runs (positions {mine[:8]}{'…' if len(mine) > 8 else ''})",
              flush=True)
    work = [(k, (jobs[k][0], train_blocks, eval_blocks, jobs[k][1], threads, jobs[k][2])) for k in mine]
    work_after = _local_after(_check_after(after, len(jobs)), mine, part)
    results: list[TrainResult | None] = [None] * len(jobs)

    def done(i: int, result: TrainResult) -> None:
        k = work[i][0]
        results[k] = result
        _report(verbose, results, k, jobs, len(work))

    if processes == 1 or len(work) <= 1:
        _run_here(_train_worker, [args for _, args in work], done, work_after)
    else:
        run_in_pool(_train_worker, [args for _, args in work], processes, done, after=work_after)
    return results


def _local_after(sources: list[frozenset[int]], mine: list[int], part) -> list[tuple[int, ...]]:
    """``after`` in the positions of ``mine`` (this shard's jobs); refuses a source that another shard runs."""
    index = {k: i for i, k in enumerate(mine)}
    outside = sorted((k, j) for k in mine for j in sources[k] if j not in index)
    if outside:
        raise AnatomyKitError(f"job {outside[0][0]} starts after job {outside[0][1]}, which shard {part} does not "
                              "run; shard a grid so that each shard holds whole chains")
    return [tuple(index[j] for j in sources[k]) for k in mine]


def _run_here(fn: Callable, args: list, on_result: Callable[[int, Any], None], after: list) -> None:
    """:func:`run_in_pool` in this process, one job at a time (the torch thread count restored afterwards)."""
    before = torch.get_num_threads()
    sets, waiting, finished = _check_after(after, len(args)), list(range(len(args))), set()
    try:
        while waiting:
            i = _ready(waiting, sets, finished)[0]
            waiting.remove(i)
            on_result(i, fn(args[i]))
            finished.add(i)
    finally:
        torch.set_num_threads(before)


def _report(verbose: bool, results: list, k: int, jobs: list, n_work: int) -> None:
    if verbose:
        r = results[k]
        progress_line(f"[{sum(x is not None for x in results)}/{n_work}] {jobs[k][1].desc}: eval loss "
                      f"{r.final_eval_loss:.4f}, {r.tokens_per_s:,.0f} tokens/s, {r.wall_s:.1f} s")
