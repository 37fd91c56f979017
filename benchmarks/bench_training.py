"""Throughput of :func:`anatomy_kit.lm.train` against a bare PyTorch loop (chapter 5).

Same uniform-width model, same batch shape, same AdamW settings. The bare loop is a plain
``for`` loop (forward, loss, backward, AdamW step) with no learning-rate schedule, evaluation,
checkpoints, gradient clipping or progress bar. ``train`` runs with all of its machinery on:
warm-up + cosine schedule, gradient clipping, tqdm, evaluation and an atomic checkpoint every
``--steps // 2`` steps. Its tokens/s counts optimiser-step time (as ``TrainResult.tokens_per_s``
does); the end-to-end figure also charges model construction, evaluation and checkpoints.
Runs alternate (bare, train, bare, train, ...) after an untimed warm-up, so load from other
processes hits both sides alike; the best of ``--repeats`` (least disturbed by other processes)
and the median are reported. Target: train/bare >= 0.9.

    python benchmarks/bench_training.py [--steps 30] [--repeats 5] [--threads 1]

Both loops run with the same thread count; with two threads on a machine that other jobs share,
timings vary several-fold from run to run, which is why the default is one thread.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from anatomy_kit.lm import LMConfig, PerLayerWidthLM, build_lm  # noqa: E402
from anatomy_kit.lm.train import TrainConfig, train  # noqa: E402


def bare_loop(mcfg: LMConfig, blocks: torch.Tensor, steps: int, batch_size: int, lr: float, seed: int) -> float:
    """Tokens per second of a plain training loop."""
    torch.manual_seed(seed)
    model = PerLayerWidthLM(mcfg)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1, foreach=False)
    g = torch.Generator().manual_seed(seed)
    t0 = time.perf_counter()
    for _ in range(steps):
        batch = blocks[torch.randint(0, blocks.shape[0], (batch_size,), generator=g)]
        _, loss = model(batch[:, :-1], batch[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    elapsed = time.perf_counter() - t0
    return steps * batch_size * (blocks.shape[1] - 1) / elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (default 1: stable numbers on a shared 2-core machine; 0 = torch's choice)")
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--width", type=int, default=384)
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--batch", type=int, default=16)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    mcfg = LMConfig(vocab_size=args.vocab, n_layers=args.layers, d_model=args.d_model, n_heads=4,
                    ffn_widths=[args.width] * args.layers, max_seq_len=args.seq)
    g = torch.Generator().manual_seed(0)
    blocks = torch.randint(0, args.vocab, (512, args.seq + 1), generator=g)
    eval_blocks = blocks[:32]
    bare_loop(mcfg, blocks, 3, args.batch, 1e-3, seed=0)  # warm-up: allocator, kernels, imports
    bare, loop, e2e = [], [], []
    for r in range(args.repeats):
        bare.append(bare_loop(mcfg, blocks, args.steps, args.batch, 1e-3, seed=r))
        with tempfile.TemporaryDirectory() as tmp:
            tc = TrainConfig(steps=args.steps, batch_size=args.batch, lr=1e-3, warmup=args.steps // 10,
                             eval_every=args.steps // 2, checkpoint_dir=tmp, seed=r, progress=True,
                             desc="bench")
            res = train(build_lm(mcfg, tc.seed), blocks, eval_blocks, tc)
        loop.append(res.tokens_per_s)
        e2e.append(args.steps * args.batch * args.seq / res.wall_s)
        print(f"repeat {r + 1}/{args.repeats}: bare {bare[-1]:.0f} tok/s, train {loop[-1]:.0f} tok/s", flush=True)

    n_params = PerLayerWidthLM(mcfg).param_count()
    print(f"model: {args.layers} layers, d_model {args.d_model}, FFN width {args.width}, vocab {args.vocab}, "
          f"{n_params / 1e6:.2f}M params; batch {args.batch} x {args.seq} tokens; {args.steps} steps; "
          f"threads {torch.get_num_threads()}; {args.repeats} alternating repeats")
    b_best, b_med = max(bare), statistics.median(bare)
    print(f"{'loop':<34} {'best tok/s':>10} {'ratio':>7} {'median tok/s':>13} {'ratio':>7}")
    for name, xs in (("bare for-loop", bare), ("train() (optimiser steps)", loop),
                     ("train() end-to-end (+eval, ckpt)", e2e)):
        print(f"{name:<34} {max(xs):>10.0f} {max(xs) / b_best:>7.3f} {statistics.median(xs):>13.0f} "
              f"{statistics.median(xs) / b_med:>7.3f}")
    ratio = max(loop) / b_best
    print(f"target train/bare >= 0.9 (best of {args.repeats}): {'MET' if ratio >= 0.9 else 'NOT MET'} ({ratio:.3f})")


if __name__ == "__main__":
    main()
