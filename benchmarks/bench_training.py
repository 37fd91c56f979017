"""Throughput of :func:`anatomy_kit.lm.train` on the chapters' smoke shapes, against the CPU's own matmul rate.

For each shape the script alternates three measurements on the same thread count, after an
untimed warm-up: a 1024 × 1024 float32 matmul (the core's sgemm rate, GFLOP/s), a plain PyTorch
loop (forward, loss, backward, AdamW step; no schedule, clipping, evaluation or checkpoints) and
``train()`` with all of its machinery on (warm-up + cosine schedule, gradient clipping,
evaluation and an atomic checkpoint every ``--steps // 2`` steps). ``train()``'s tokens/s counts
optimiser-step time (as ``TrainResult.tokens_per_s`` does); its FLOP/s is that times the
model's training FLOPs per token (:func:`anatomy_kit.lm.speed.flops_per_token`), and its share
of sgemm is that over the sgemm rate measured beside it in the same repeat (the median over
repeats; load from other processes slows both alike, roughly). The best of ``--repeats``
(least disturbed) and the median are reported, and train/bare (target >= 0.9). Beside them,
tokens per CPU-second of the whole ``train()`` call and its share of the sgemm rate per
CPU-second: waiting for a core costs no CPU time, so on a machine other jobs share these move
less than wall time (a busy sibling hyperthread still slows both).

Shapes (``--shapes``, default all), read from the chapters' smoke defaults:

- ``ch03``: chapter 3's decoder (:class:`~anatomy_kit.lm.model.PerLayerWidthLM`, 10 × 64, FFN 128);
- ``ch05``: chapter 5's uniform-width decoder of the ``smoke`` preset (6 × 64, FFN 192);
- ``ch06-small``, ``ch06-large``: chapter 6's GPT (:mod:`anatomy_kit.width_growth.gpt`) at the
  small and the grown width (4 × 64 and 4 × 96);
- ``custom``: a PerLayerWidthLM of ``--layers``, ``--d-model``, ``--width``, ``--vocab``, ``--seq``,
  ``--batch``.

    python benchmarks/bench_training.py [--shapes ch03 ch05] [--steps 30] [--repeats 5] [--threads 1]

With two threads on a machine that other jobs share, timings vary several-fold from run to run,
which is why the default is one thread (as the chapters train on a CPU: one thread per run).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from anatomy_kit.lm import LMConfig, PRESETS, build_lm  # noqa: E402
from anatomy_kit.lm.speed import flops_per_token  # noqa: E402
from anatomy_kit.lm.train import TrainConfig, logits_of, train  # noqa: E402
from anatomy_kit.width_growth.recipe import gpt_config  # noqa: E402
from anatomy_kit.width_growth.starts import fresh_model  # noqa: E402

SHAPES = ("ch03", "ch05", "ch06-small", "ch06-large", "custom")


@dataclass(frozen=True)
class Shape:
    """A model to build (seeded), its vocabulary and context, and the rows of one optimiser step."""

    name: str
    build: Callable[[int], torch.nn.Module]
    vocab: int
    seq: int
    batch: int
    describe: str


def chapter_shape(name: str, args: argparse.Namespace) -> Shape:
    """``name``'s model and batch from its chapter's smoke defaults (``custom``: from the flags)."""
    from chapter_defaults import scale_defaults

    if name == "custom":
        cfg = LMConfig(vocab_size=args.vocab, n_layers=args.layers, d_model=args.d_model, n_heads=4,
                       ffn_widths=[args.width] * args.layers, max_seq_len=args.seq)
        return Shape(name, lambda s: build_lm(cfg, s), args.vocab, args.seq, args.batch,
                     f"{args.layers} x {args.d_model}, FFN {args.width}")
    if name == "ch03":
        s = scale_defaults("ch03_growth_training", "smoke")
        cfg = LMConfig(vocab_size=s["vocab_size"], n_layers=s["n_layers"], d_model=s["d_model"], n_heads=s["n_heads"],
                       ffn_widths=[s["ffn_width"]] * s["n_layers"], max_seq_len=s["block_size"])
        return Shape(name, lambda seed: build_lm(cfg, seed), cfg.vocab_size, s["block_size"], s["batch_size"],
                     f"{cfg.n_layers} x {cfg.d_model}, FFN {s['ffn_width']}")
    if name == "ch05":
        p = PRESETS[scale_defaults("ch05_width_solver", "smoke")["preset"]]
        cfg = LMConfig(vocab_size=p["vocab_size"], n_layers=p["n_layers"], d_model=p["d_model"], n_heads=p["n_heads"],
                       ffn_widths=[p["mean_width"]] * p["n_layers"], max_seq_len=p["block_size"])
        return Shape(name, lambda seed: build_lm(cfg, seed), cfg.vocab_size, p["block_size"],
                     p["batch_size"] * p["grad_accum"], f"{cfg.n_layers} x {cfg.d_model}, FFN {p['mean_width']}")
    s = scale_defaults("ch06_width_growth", "smoke")
    width = s["d_small"] if name == "ch06-small" else s["d_large"]
    cfg = gpt_config(s["vocab_size"], s["n_layers"], width, s["head_dim"], s["block_size"])
    return Shape(name, lambda seed: fresh_model(cfg, seed), cfg.vocab_size, s["block_size"],
                 s["batch_size"] * s["grad_accum"], f"GPT {cfg.n_layers} x {width}, FFN {cfg.ff_width}")


def sgemm_rate(n: int = 1024, calls: int = 8) -> tuple[float, float]:
    """(FLOP/s, FLOP per CPU-second) of an ``n × n`` float32 matmul on this thread count (the best of ``calls``)."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best, best_cpu = float("inf"), float("inf")
    for _ in range(calls):
        t0, c0 = time.perf_counter(), time.process_time()
        a @ b
        best, best_cpu = min(best, time.perf_counter() - t0), min(best_cpu, time.process_time() - c0)
    return 2.0 * n ** 3 / best, 2.0 * n ** 3 / best_cpu


def bare_loop(shape: Shape, blocks: torch.Tensor, steps: int, seed: int) -> float:
    """Tokens per second of a plain training loop (PyTorch's default AdamW)."""
    model = shape.build(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    g = torch.Generator().manual_seed(seed)
    t0 = time.perf_counter()
    for _ in range(steps):
        batch = blocks[torch.randint(0, blocks.shape[0], (shape.batch,), generator=g)]
        logits = logits_of(model(batch[:, :-1]))
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return steps * shape.batch * shape.seq / (time.perf_counter() - t0)


def measure(shape: Shape, steps: int, repeats: int) -> dict:
    """Alternating sgemm, bare-loop and ``train()`` measurements of one shape; see the module docstring."""
    g = torch.Generator().manual_seed(0)
    blocks = torch.randint(0, shape.vocab, (512, shape.seq + 1), generator=g)
    eval_blocks = blocks[:32]
    bare_loop(shape, blocks, 3, seed=0)  # warm-up: allocator, kernels, imports
    out = {"sgemm": [], "sgemm_cpu": [], "bare": [], "train": [], "train_cpu": []}
    for r in range(repeats):
        rate, rate_cpu = sgemm_rate()
        out["sgemm"].append(rate)
        out["sgemm_cpu"].append(rate_cpu)
        out["bare"].append(bare_loop(shape, blocks, steps, seed=r))
        with tempfile.TemporaryDirectory() as tmp:
            tc = TrainConfig(steps=steps, batch_size=shape.batch, lr=1e-3, warmup=steps // 10,
                             eval_every=steps // 2, checkpoint_dir=tmp, seed=r, progress=False, desc="bench",
                             untimed_steps=2)
            c0 = time.process_time()
            res = train(shape.build(r), blocks, eval_blocks, tc)
            cpu = time.process_time() - c0
        out["train"].append(res.tokens_per_s)
        out["train_cpu"].append(steps * shape.batch * shape.seq / cpu)
        print(f"  {shape.name} repeat {r + 1}/{repeats}: sgemm {rate / 1e9:.0f} GFLOP/s, bare "
              f"{out['bare'][-1]:.0f} tok/s, train {out['train'][-1]:.0f} tok/s, "
              f"{out['train_cpu'][-1]:.0f} tok per CPU-s", flush=True)
    model = shape.build(0)
    out["flops_per_token"] = flops_per_token(model, shape.seq)
    out["n_params"] = sum(p.numel() for p in model.parameters())
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="+", choices=SHAPES, default=list(SHAPES[:-1]))
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (default 1: stable numbers on a shared 2-core machine; 0 = torch's choice)")
    ap.add_argument("--d-model", type=int, default=128, help="custom shape only")
    ap.add_argument("--layers", type=int, default=4, help="custom shape only")
    ap.add_argument("--width", type=int, default=384, help="custom shape only")
    ap.add_argument("--vocab", type=int, default=2048, help="custom shape only")
    ap.add_argument("--seq", type=int, default=64, help="custom shape only")
    ap.add_argument("--batch", type=int, default=16, help="custom shape only")
    args = ap.parse_args()
    if args.steps < 4 or args.repeats < 1:
        ap.error(f"--steps={args.steps} must be >= 4 and --repeats={args.repeats} >= 1")
    if args.threads:
        torch.set_num_threads(args.threads)

    rows = {}
    for name in args.shapes:
        shape = chapter_shape(name, args)
        rows[name] = (shape, measure(shape, args.steps, args.repeats))
    print(f"\ntorch {torch.__version__}, {torch.get_num_threads()} thread(s), {args.steps} steps, "
          f"{args.repeats} alternating repeats. % sgemm: train()'s FLOP/s over the sgemm rate of the same repeat "
          "(median over repeats); CPU-s: the whole train() call (steps, evaluation, checkpoints) and the sgemm "
          "per CPU-second of this process, steadier than wall time on a machine other jobs share")
    head = (f"{'shape':<11} {'model':<22} {'params':>8} {'tok/step':>8} {'sgemm GF/s':>10} {'train tok/s':>11} "
            f"{'median':>7} {'% sgemm':>8} {'tok/CPU-s':>9} {'% sgemm':>8} {'bare tok/s':>10} {'train/bare':>10}")
    print(head)
    for name, (shape, m) in rows.items():
        fpt = m["flops_per_token"]
        share = statistics.median(t * fpt / s for t, s in zip(m["train"], m["sgemm"]))
        share_cpu = statistics.median(t * fpt / s for t, s in zip(m["train_cpu"], m["sgemm_cpu"]))
        print(f"{name:<11} {shape.describe:<22} {m['n_params'] / 1e6:>7.2f}M {shape.batch * shape.seq:>8} "
              f"{max(m['sgemm']) / 1e9:>10.0f} {max(m['train']):>11.0f} {statistics.median(m['train']):>7.0f} "
              f"{100 * share:>7.1f}% {max(m['train_cpu']):>9.0f} {100 * share_cpu:>7.1f}% {max(m['bare']):>10.0f} "
              f"{max(m['train']) / max(m['bare']):>10.3f}")


if __name__ == "__main__":
    main()
