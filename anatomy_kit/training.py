"""Deterministic, resumable training of :class:`~anatomy_kit.lm.PerLayerWidthLM`, and paired statistics.

Introduced in chapter 5 (*The width solver*).

- :func:`train` — AdamW, linear warm-up then cosine decay, periodic evaluation, atomic
  checkpoints (model, optimiser, scheduler, RNG states, step, data position) and exact resume,
  a tqdm progress bar. On CPU two runs with the same seed are bit-identical, and a run stopped
  after any checkpoint and resumed reaches the same final loss.
- :func:`paired_bootstrap_ci` and :func:`paired_deltas` — schedules compared with the uniform
  baseline seed by seed (the same seed gives the same data order and, for equal shapes, the
  same initialisation draw), with percentile bootstrap confidence intervals.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import os
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch
import torch.nn.functional as F

from .lm import LMConfig, PerLayerWidthLM
from .validate import AnatomyKitError, check_choice, check_finite, check_int, check_positive

__all__ = ["TrainConfig", "TrainResult", "train", "train_many", "load_trained", "bpe_tokenizer", "lr_at", "batch_indices", "evaluate",
           "paired_bootstrap_ci", "PairedDelta", "paired_deltas", "format_delta_table"]

CHECKPOINT_NAME = "checkpoint.pt"


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
    checkpoint); ``wall_s``: the whole call.
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
    model: PerLayerWidthLM | None = field(default=None, repr=False)


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Learning rate for optimiser step ``step`` (0-based): linear warm-up, then cosine decay."""
    if cfg.warmup and step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    span = max(1, cfg.steps - cfg.warmup)
    progress = min(1.0, (step - cfg.warmup) / span)
    floor = cfg.min_lr_ratio * cfg.lr
    return floor + (cfg.lr - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


@functools.lru_cache(maxsize=4)
def _epoch_perm(n: int, seed: int, epoch: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed * 1_000_003 + epoch + 1)
    return torch.randperm(n, generator=g)


def batch_indices(position: int, batch_size: int, n: int, seed: int) -> torch.Tensor:
    """Rows of the training blocks for the batch starting at data ``position``.

    The data order is an endless stream of seeded per-epoch permutations; a batch takes the
    next ``batch_size`` entries, crossing epochs when needed. The order depends only on
    ``(seed, position)``, so a resumed run continues the same sequence.
    """
    out = []
    while len(out) < batch_size:
        epoch, offset = divmod(position, n)
        take = min(batch_size - len(out), n - offset)
        out.extend(_epoch_perm(n, seed, epoch)[offset:offset + take].tolist())
        position += take
    return torch.tensor(out, dtype=torch.long)


def _check_blocks(name: str, blocks: Any, vocab: int, max_len: int) -> Any:
    """A (N, T+1) integer torch tensor, or a numpy array / memmap (read a batch at a time)."""
    is_np = isinstance(blocks, np.ndarray)
    ok_dtype = (np.issubdtype(blocks.dtype, np.integer) if is_np else
                isinstance(blocks, torch.Tensor) and blocks.dtype in (torch.int64, torch.int32, torch.int16, torch.uint8))
    if not (is_np or isinstance(blocks, torch.Tensor)) or not ok_dtype:
        raise AnatomyKitError(f"{name} must be an integer torch tensor (or numpy array) of shape (N, T+1); got "
                              f"{type(blocks).__name__}" + (f" of dtype {blocks.dtype}" if hasattr(blocks, "dtype") else ""))
    if blocks.ndim != 2 or blocks.shape[0] < 1 or blocks.shape[1] < 2:
        raise AnatomyKitError(f"{name} must have shape (N>=1, T+1>=2); got {tuple(blocks.shape)}")
    if blocks.shape[1] - 1 > max_len:
        raise AnatomyKitError(f"{name} blocks hold {blocks.shape[1] - 1} inputs per row but max_seq_len={max_len}")
    lo, hi = None, None
    rows = max(1, 10_000_000 // blocks.shape[1])  # chunked, so a memmap is scanned without loading it
    for start in range(0, blocks.shape[0], rows):
        chunk = blocks[start:start + rows]
        c_lo, c_hi = int(chunk.min()), int(chunk.max())
        lo = c_lo if lo is None else min(lo, c_lo)
        hi = c_hi if hi is None else max(hi, c_hi)
    if lo < 0 or hi >= vocab:
        raise AnatomyKitError(f"{name} holds token ids in [{lo}, {hi}] but vocab_size={vocab}")
    return blocks if is_np else blocks.long()


def _rows(blocks: Any, rows: torch.Tensor) -> torch.Tensor:
    if isinstance(blocks, np.ndarray):
        return torch.from_numpy(np.asarray(blocks[rows.numpy()], dtype=np.int64))
    return blocks[rows]


@torch.no_grad()
def evaluate(model: PerLayerWidthLM, blocks: torch.Tensor, batch_size: int, max_batches: int | None = None,
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
        logits = model(chunk[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), chunk[:, 1:].reshape(-1), reduction="sum")
        total += float(loss)
        count += chunk[:, 1:].numel()
    model.train(was_training)
    return total / count


def _make_optimizer(model: PerLayerWidthLM, cfg: TrainConfig) -> torch.optim.AdamW:
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    # foreach=False: the single-tensor path is bit-reproducible and, for small models on CPU, as fast.
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=tuple(cfg.betas), foreach=False)


def _rng_state() -> dict:
    return {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}


def _set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])


def _save_checkpoint(path: Path, payload: dict) -> None:
    """Atomic write: a temporary file in the same folder, then ``os.replace``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    torch.save(payload, tmp)
    os.replace(tmp, path)


def train(model_config: LMConfig, train_blocks: torch.Tensor, eval_blocks: torch.Tensor,
          config: TrainConfig) -> TrainResult:
    """Train a :class:`PerLayerWidthLM` from scratch, or resume from ``config.checkpoint_dir`` (chapter 5).

    ``train_blocks``/``eval_blocks``: integer tensors ``(N, T+1)`` (or numpy arrays / memmaps, read a
    batch at a time); inputs are ``[:, :-1]``, targets ``[:, 1:]`` (a ``(N, T)`` tensor trains on
    ``T−1`` positions). The model is
    initialised from ``torch.manual_seed(config.seed)``; the data order from
    :func:`batch_indices`. If ``checkpoint_dir`` holds a checkpoint written with the same model
    and training settings, training continues from it.
    """
    t_call = time.perf_counter()
    cfg = config.validate()
    model_config.validate()
    train_blocks = _check_blocks("train_blocks", train_blocks, model_config.vocab_size, model_config.max_seq_len)
    eval_blocks = _check_blocks("eval_blocks", eval_blocks, model_config.vocab_size, model_config.max_seq_len)
    device = torch.device(cfg.device)

    torch.manual_seed(cfg.seed)
    model = PerLayerWidthLM(model_config).to(device)
    model.train()
    opt = _make_optimizer(model, cfg)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_at(s, cfg) / cfg.lr)

    ckpt_every = cfg.checkpoint_every or cfg.eval_every or cfg.steps
    ckpt_path = Path(cfg.checkpoint_dir) / CHECKPOINT_NAME if cfg.checkpoint_dir is not None else None
    identity = {"model": model_config.to_dict(), "train": cfg.fingerprint(),
                "train_blocks": list(train_blocks.shape), "eval_blocks": list(eval_blocks.shape)}
    step, position = 0, 0
    loss_curve: list[tuple[int, float]] = []
    eval_curve: list[tuple[int, float]] = []
    resumed_from = 0
    if ckpt_path is not None and ckpt_path.exists():
        state = torch.load(ckpt_path, map_location=device, weights_only=False)
        if json.dumps(state["identity"], sort_keys=True) != json.dumps(identity, sort_keys=True):
            raise AnatomyKitError(
                f"checkpoint {ckpt_path} was written by a different run (model, settings or data shapes differ); "
                "use another checkpoint_dir or delete it")
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        _set_rng_state(state["rng"])
        step, position = state["step"], state["data_position"]
        loss_curve, eval_curve = state["loss_curve"], state["eval_curve"]
        resumed_from = step

    end = cfg.steps if cfg.stop_after is None else min(cfg.steps, cfg.stop_after)
    n, bs = train_blocks.shape[0], cfg.batch_size
    tokens_per_batch = bs * cfg.grad_accum * (train_blocks.shape[1] - 1)
    step_time = 0.0
    steps_this_call = 0
    bar = None
    if cfg.progress and end > step:
        from tqdm.auto import tqdm
        bar = tqdm(total=cfg.steps, initial=step, desc=cfg.desc, leave=False, mininterval=1.0)

    while step < end:
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss_value = 0.0
        for _ in range(cfg.grad_accum):
            batch = _rows(train_blocks, batch_indices(position, bs, n, cfg.seed)).to(device)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=cfg.precision == "bf16"):
                _, loss = model(batch[:, :-1], batch[:, 1:])
            (loss / cfg.grad_accum if cfg.grad_accum > 1 else loss).backward()
            loss_value += float(loss.detach()) / cfg.grad_accum
            position += bs
        if cfg.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip, foreach=False)
        opt.step()
        sched.step()
        step_time += time.perf_counter() - t0
        steps_this_call += 1
        step += 1
        if not math.isfinite(loss_value):
            raise AnatomyKitError(f"training loss became {loss_value} at step {step}; lower lr={cfg.lr}")
        loss_curve.append((step, loss_value))
        if bar is not None:
            bar.update(1)
            if step % 10 == 0:
                bar.set_postfix(loss=f"{loss_value:.3f}", refresh=False)
        if cfg.eval_every and step % cfg.eval_every == 0 and step < cfg.steps:
            eval_curve.append((step, evaluate(model, eval_blocks, bs, cfg.eval_batches, device.type)))
        if ckpt_path is not None and (step % ckpt_every == 0 or step == end):
            _save_checkpoint(ckpt_path, {
                "identity": identity, "model": model.state_dict(), "optimizer": opt.state_dict(),
                "scheduler": sched.state_dict(), "rng": _rng_state(), "step": step,
                "data_position": position, "loss_curve": loss_curve, "eval_curve": eval_curve,
            })
    if bar is not None:
        bar.close()

    completed = step >= cfg.steps
    final = float("nan")
    if completed:
        final = evaluate(model, eval_blocks, bs, cfg.eval_batches, device.type)
        if not eval_curve or eval_curve[-1][0] != step:
            eval_curve = eval_curve + [(step, final)]
    tps = steps_this_call * tokens_per_batch / step_time if step_time > 0 else float("nan")
    return TrainResult(loss_curve=list(loss_curve), eval_curve=list(eval_curve), final_eval_loss=final,
                       tokens_per_s=tps, steps_done=step, completed=completed, resumed_from=resumed_from,
                       n_params=model.param_count(), wall_s=time.perf_counter() - t_call, model=model)


def load_trained(model_config: LMConfig, checkpoint_dir: str | os.PathLike, device: str = "cpu") -> PerLayerWidthLM:
    """The model saved by :func:`train` in ``checkpoint_dir`` (chapter 5), in eval mode."""
    path = Path(checkpoint_dir) / CHECKPOINT_NAME
    if not path.exists():
        raise AnatomyKitError(f"no checkpoint at {path}; train with checkpoint_dir={str(checkpoint_dir)!r} first")
    state = torch.load(path, map_location=device, weights_only=False)
    if state["identity"]["model"] != model_config.to_dict():
        raise AnatomyKitError(f"checkpoint {path} holds another model configuration: {state['identity']['model']}")
    model = PerLayerWidthLM(model_config).to(device)
    model.load_state_dict(state["model"])
    return model.eval()


def _train_worker(args: tuple) -> TrainResult:
    model_config, train_blocks, eval_blocks, config, threads = args
    torch.set_num_threads(threads)
    result = train(model_config, train_blocks, eval_blocks, config)
    result.model = None  # results travel back between processes; the weights stay in the checkpoint
    return result


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def train_many(jobs: list[tuple[LMConfig, TrainConfig]], train_blocks: torch.Tensor, eval_blocks: torch.Tensor,
               *, processes: int | None = None, threads_per_process: int = 1,
               verbose: bool = True) -> list[TrainResult]:
    """Run independent :func:`train` calls side by side in worker processes (chapter 5).

    Small models use CPU cores better as several one-thread runs than as one run with several
    threads (each step is too short to amortise the threads' synchronisation). Every worker
    sets ``torch.set_num_threads(threads_per_process)``; results come back in job order with
    ``model=None`` (use ``checkpoint_dir`` to keep the weights). ``processes=1`` runs in this
    process, handy for debugging. ``verbose`` prints a line as each run finishes. A run's numbers depend only on
    its configuration and the thread count, not on which process ran it.
    """
    if not jobs:
        return []
    processes = check_int("processes", processes if processes is not None else _cpu_count(), minimum=1)
    threads = check_int("threads_per_process", threads_per_process, minimum=1)
    if processes == 1:
        before = torch.get_num_threads()
        try:
            out = []
            for m, c in jobs:
                out.append(_train_worker((m, train_blocks, eval_blocks, c, threads)))
                if verbose:
                    r = out[-1]
                    print(f"[{len(out)}/{len(jobs)}] {c.desc}: eval loss {r.final_eval_loss:.4f}, "
                          f"{r.tokens_per_s:,.0f} tokens/s, {r.wall_s:.1f} s", flush=True)
            return out
        finally:
            torch.set_num_threads(before)
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # "spawn": a fresh interpreter per worker; forking a process whose OpenMP threads have run can hang.
    with ProcessPoolExecutor(max_workers=min(processes, len(jobs)), mp_context=mp.get_context("spawn")) as pool:
        futures = {pool.submit(_train_worker, (m, train_blocks, eval_blocks, c, threads)): i
                   for i, (m, c) in enumerate(jobs)}
        results: list[TrainResult | None] = [None] * len(jobs)
        for fut in as_completed(futures):
            i = futures[fut]
            results[i] = fut.result()
            if verbose:
                r = results[i]
                print(f"[{sum(x is not None for x in results)}/{len(jobs)}] {jobs[i][1].desc}: "
                      f"eval loss {r.final_eval_loss:.4f}, {r.tokens_per_s:,.0f} tokens/s, {r.wall_s:.1f} s", flush=True)
        return results  # type: ignore[return-value]


def bpe_tokenizer(corpus: Any, vocab_size: int, *, eval_percent: int = 15):
    """A byte-level BPE tokenizer trained on the *train* documents of ``corpus`` (chapter 5).

    Small models trained from scratch on CPU cannot afford a 49k or 50k vocabulary (the output
    layer would dominate); a 1–2k BPE vocabulary keeps real English sub-words. ``corpus`` is a
    ``datasets.Dataset`` with ``id`` and ``text`` (:func:`anatomy_kit.data.load_corpus`); documents
    that :func:`anatomy_kit.data.token_blocks` puts in the eval split (same hash, same
    ``eval_percent``) are left out, so the tokenizer never sees eval text. Returns a
    ``PreTrainedTokenizerFast`` whose EOS token is ``<eos>`` (id 0). Deterministic.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from .data import is_eval_document

    vocab_size = check_int("vocab_size", vocab_size, minimum=257)
    texts = [t for i, t in zip(corpus["id"], corpus["text"]) if not is_eval_document(str(i), eval_percent)]
    if not texts:
        raise AnatomyKitError("the corpus has no train documents to fit a tokenizer on")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<eos>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", pad_token="<eos>")


# ---------------------------------------------------------------------------------------------
# Paired statistics
# ---------------------------------------------------------------------------------------------

def paired_bootstrap_ci(deltas: Any, *, n_resamples: int = 10_000, confidence: float = 0.95,
                        seed: int = 0) -> tuple[float, float, float]:
    """Mean of paired differences and its percentile bootstrap CI: ``(mean, low, high)`` (chapter 5).

    Resamples the *pairs* (seeds) with replacement and takes the ``(1±confidence)/2`` quantiles
    (``numpy.quantile``, linear) of the resampled means. When the number of distinct resamples
    ``n**n`` is at most ``n_resamples`` (n ≤ 5 seeds at the default), the bootstrap distribution
    is enumerated exactly instead of sampled, so the CI is deterministic and exact. With 3–5
    pairs the percentile bootstrap is known to under-cover: read the interval as descriptive.
    """
    d = np.asarray(deltas, dtype=float).ravel()
    if d.size == 0:
        raise AnatomyKitError("deltas is empty; need at least one paired difference")
    check_finite("deltas", d)
    n_resamples = check_int("n_resamples", n_resamples, minimum=1)
    if not 0 < float(confidence) < 1:
        raise AnatomyKitError(f"confidence={confidence!r} must lie strictly between 0 and 1 (e.g. 0.95)")
    n = d.size
    if n ** n <= n_resamples:
        idx = np.array(list(itertools.product(range(n), repeat=n)))  # every resample, equiprobable
    else:
        rng = np.random.default_rng(seed)
        idx = rng.integers(0, n, size=(n_resamples, n))
    means = d[idx].mean(axis=1)
    alpha = (1.0 - float(confidence)) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return float(d.mean()), float(low), float(high)


@dataclass(frozen=True)
class PairedDelta:
    """One row of :func:`paired_deltas`: schedule − baseline final loss over shared seeds."""

    schedule: str
    mean_loss: float
    sd_loss: float
    mean_delta: float
    ci_low: float
    ci_high: float
    n_seeds: int

    def as_dict(self) -> dict:
        return asdict(self)


def paired_deltas(results: Mapping[str, Mapping[Any, float]], baseline: str = "uniform", *,
                  n_resamples: int = 10_000, confidence: float = 0.95, seed: int = 0) -> list[PairedDelta]:
    """Per schedule: mean loss, mean paired delta vs ``baseline`` and its bootstrap CI (chapter 5).

    ``results[schedule][seed] = final loss``. Each schedule is paired with the baseline on the
    seeds both have (at least one is required). The baseline's own row has delta 0.
    """
    if baseline not in results:
        raise AnatomyKitError(f"baseline={baseline!r} is not among the schedules {sorted(results)!r}")
    base = results[baseline]
    rows = []
    for name, by_seed in results.items():
        seeds = sorted(set(by_seed) & set(base), key=str)
        if not seeds:
            raise AnatomyKitError(f"schedule {name!r} shares no seed with baseline {baseline!r} "
                                  f"(seeds {sorted(by_seed, key=str)} vs {sorted(base, key=str)})")
        losses = np.array([by_seed[s] for s in seeds], dtype=float)
        deltas = losses - np.array([base[s] for s in seeds], dtype=float)
        mean, lo, hi = paired_bootstrap_ci(deltas, n_resamples=n_resamples, confidence=confidence, seed=seed)
        all_losses = np.array(list(by_seed.values()), dtype=float)
        sd = float(all_losses.std(ddof=1)) if all_losses.size > 1 else float("nan")
        rows.append(PairedDelta(schedule=name, mean_loss=float(all_losses.mean()), sd_loss=sd, mean_delta=mean,
                                ci_low=lo, ci_high=hi, n_seeds=len(seeds)))
    return rows


def format_delta_table(rows: list[PairedDelta], confidence: float = 0.95) -> str:
    """A plain-text table of :func:`paired_deltas` rows (chapter 5)."""
    pct = f"{100 * confidence:g}% CI"
    head = f"{'schedule':<16} {'val loss':>16} {'Δ vs base':>10} {pct:>22} {'seeds':>5}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r.schedule:<16} {r.mean_loss:>8.4f} ± {r.sd_loss:<6.4f} {r.mean_delta:>+10.4f} "
                     f"{'[' + format(r.ci_low, '+.4f') + ', ' + format(r.ci_high, '+.4f') + ']':>22} {r.n_seeds:>5}")
    return "\n".join(lines)
