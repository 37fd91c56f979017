"""GPU check: the one script to run when a GPU is lent. Offline, about 10 minutes on one GPU.

    python benchmarks/gpu_check.py             # on a CUDA machine: every check at its real size
    python benchmarks/gpu_check.py --toy       # anywhere (automatic without CUDA): the same code at toy sizes

Every check runs through the kit's own code paths, reports ``"ok"`` (true / false, or null with
``"skipped"`` and why) and never stops the others; the script prints ONE JSON (the date, the device,
the torch and CUDA versions, every check) on stdout, writes it to ``--out`` (default
``benchmarks/results/gpu_check-<date>-<device>.json``), and exits non-zero if a check failed.
Progress goes to stderr.

1. ``chapters``: every chapter's full path on the stand-ins (``tests/standins.py``: tiny random
   models saved under the real hub ids, the Python docs as the hub corpora), with ``device="cuda"``,
   at the sizes ``tests/test_full_path.py`` uses on the CPU: every branch a GPU takes in the
   chapters (models and batches on the device, growth on the device, bf16 where the recipe asks).
2. ``map``: chapter 1's neighbour-mean ablation map of the embedded SmolLM2 at full evaluation size.
3. ``train`` and ``train_compiled``: the 128M preset's decoder (12 × 768, FFN 2048, context 1024,
   vocabulary 50,304) in bf16 at the preset's micro-batch (32 × 1024 tokens), eager and through
   ``torch.compile``: tokens/s, FLOP/s and MFU after ``untimed_steps`` warm-up steps (compilation
   and allocator warm-up are not speed), and the peak of ``torch.cuda.max_memory_allocated``
   against :func:`anatomy_kit.lm.estimates.training_memory` (ok within ±25 %). Target: MFU ≥ 40 %.
4. ``resume``: a checkpoint written by a CPU run (float32) resumed on the device (bf16 where the
   GPU computes it natively): a run moves between machines.
5. ``ddp`` and ``fsdp``: with two or more GPUs, ``torchrun --nproc_per_node=<GPUs>`` (NCCL,
   ``WORLD_SIZE`` ≥ 2) trains one decoder with DistributedDataParallel and with FSDP; with one GPU
   they are skipped. ``--toy`` runs them with two CPU processes (gloo).

``--toy`` runs checks 2–5 at toy sizes on the CPU (a 4-layer map on 2 blocks of 32 tokens, the
``smoke`` decoder for 8 steps in float32, no compilation) and the chapters only if ``--chapters``
names some: ``tests/test_gpu_check.py`` runs it in CI, so the script cannot rot where there is no GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import math
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]

SIZES = {
    "gpu": dict(map_blocks=64, map_block_size=256, map_batch=16, map_layers=None, preset="128M", vocab=50304,
                steps=60, untimed=10, compiled_steps=60, compiled_untimed=20, batch_size=32, precision="bf16",
                dist_steps=8, chapters="all", chapter_jobs=3),
    "toy": dict(map_blocks=2, map_block_size=32, map_batch=2, map_layers=4, preset="smoke", vocab=49152, steps=8,
                untimed=2, compiled_steps=0, compiled_untimed=0, batch_size=4, precision="fp32", dist_steps=4,
                chapters="", chapter_jobs=1),
}
MEMORY_BAND = (0.75, 1.25)      # measured peak / estimate


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def check(name: str, fn, *args) -> dict:
    """Run one check; a failure is recorded (type, message, the end of the traceback), never raised."""
    start = time.perf_counter()
    try:
        out = fn(*args)
    except Exception as err:                                        # noqa: BLE001 - every failure is a finding
        out = {"ok": False, "error": f"{type(err).__name__}: {err}"[:2000],
               "traceback": traceback.format_exc()[-3000:]}
    out.setdefault("seconds", time.perf_counter() - start)
    state = "skipped" if out.get("ok") is None else ("ok" if out["ok"] else "FAILED")
    say(f"{name}: {state} in {out['seconds']:.0f} s" + (f" ({out['error']})" if "error" in out else ""))
    return out


def skipped(why: str) -> dict:
    return {"ok": None, "skipped": why}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# --- 1. every chapter's full path on the stand-ins ---------------------------------------------------------

def chapter_paths(device: torch.device, names: list[str], jobs: int, scratch: Path) -> dict:
    """Each chapter at ``scale="full"`` on the stand-ins, ``jobs`` at a time; one entry per chapter."""
    if not names:
        return skipped("no chapter named (--chapters)")
    sys.path.insert(0, str(ROOT / "tests"))
    import standins
    from test_full_path import FULL_PATH

    from anatomy_kit.book.chapters import chapter_manifest
    from anatomy_kit.book.runner import execute_chapter

    unknown = sorted(set(names) - set(FULL_PATH))
    if unknown:
        raise ValueError(f"chapters {unknown} have no full-path sizes; known: {sorted(FULL_PATH)}")
    with contextlib.redirect_stdout(sys.stderr):
        environ = standins.build(scratch / "standins")
    entries = {c["id"]: c for c in chapter_manifest(ROOT)}

    def one(chapter: str) -> dict:
        def run() -> dict:
            seconds = execute_chapter(entries[chapter], scale="full", device=device.type,
                                      build_dir=scratch / f"build-{chapter}", book_dir=None,
                                      params=FULL_PATH[chapter], root=ROOT, environ=environ)
            return {"ok": True, "seconds": seconds}
        return check(f"chapter {chapter}", run)

    with contextlib.redirect_stdout(sys.stderr), ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        results = dict(zip(names, pool.map(one, names)))
    return {"ok": all(r["ok"] for r in results.values()), "chapters": results}


# --- 2. chapter 1's map ---------------------------------------------------------------------------------

def check_map(device: torch.device, size: dict) -> dict:
    """Chapter 1's neighbour-mean ablation map of the embedded model."""
    from anatomy_kit import anatomy, data
    from anatomy_kit.hf import evaluation, models

    loaded = models.load_model("embedded", device=str(device))
    blocks = data.token_blocks(loaded.tokenizer, "python-docs", block_size=size["map_block_size"], n_train=0,
                               n_eval=size["map_blocks"])
    batches = evaluation.make_batches(blocks.eval, size["map_batch"], device=device)
    _sync(device)
    t = time.perf_counter()
    layers = None if size["map_layers"] is None else list(range(size["map_layers"]))
    amap = anatomy.ablation_map(loaded.model, batches, layers=layers, progress=False)
    _sync(device)
    ok = bool(math.isfinite(float(amap.baseline_ppl)) and torch.isfinite(torch.as_tensor(amap.delta_pct)).all())
    return {"ok": ok, "model": loaded.description, "layers": len(amap.layers), "tokens": int(blocks.eval.numel()),
            "seconds": time.perf_counter() - t, "baseline_ppl": float(amap.baseline_ppl),
            "max_delta_pct": float(amap.delta_pct.max())}


# --- 3. training speed and memory -------------------------------------------------------------------------

def model_config(size: dict):
    from anatomy_kit.lm import PRESETS, LMConfig

    P = PRESETS[size["preset"]]
    return LMConfig(vocab_size=size["vocab"], n_layers=P["n_layers"], d_model=P["d_model"], n_heads=P["n_heads"],
                    ffn_widths=[P["mean_width"]] * P["n_layers"], max_seq_len=P["block_size"])


def token_file(folder: Path):
    """The Python docs tokenised with SmolLM2's tokenizer into a token file (built once per run)."""
    from anatomy_kit import data
    from anatomy_kit.hf import models

    tok = models.load_model("embedded", device="cpu").tokenizer
    return data.build_token_file(data.load_corpus("python-docs"), tok, folder, corpus_name="python-docs",
                                 tokenizer_name="SmolLM2 (embedded)")


def check_training(device: torch.device, size: dict, tf, compile_model: bool) -> dict:
    """The preset's decoder for a few dozen steps: tokens/s, FLOP/s, MFU after warm-up, peak memory vs estimate."""
    from anatomy_kit.lm.estimates import lm_shape, training_memory
    from anatomy_kit.lm import TrainConfig, build_lm, train
    from anatomy_kit.lm.launch import result_summary
    from anatomy_kit.lm.speed import training_precision

    steps, untimed = ((size["compiled_steps"], size["compiled_untimed"]) if compile_model else
                      (size["steps"], size["untimed"]))
    if steps == 0:
        return skipped("torch.compile takes minutes on a CPU; the GPU run compiles")
    cfg = model_config(size)
    T, precision = cfg.max_seq_len, training_precision(size["precision"], device)
    train_w, eval_w = tf.windows("train", T), tf.windows("eval", T)
    config = TrainConfig(steps=steps, batch_size=size["batch_size"], lr=6e-4, warmup=min(10, steps // 4),
                         eval_batches=1, device=str(device), precision=precision, compile=compile_model,
                         untimed_steps=untimed, progress=False, desc=f"{size['preset']} check")
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    result = train(build_lm(cfg, seed=0), train_w, eval_w, config)
    out = result_summary(result)
    out.pop("loss_curve")
    first, last = result.loss_curve[0][1], result.loss_curve[-1][1]
    estimate = training_memory(lm_shape(cfg), T, size["batch_size"], precision=precision)
    out.update(preset=size["preset"], params=result.n_params, batch_tokens=size["batch_size"] * T,
               precision=precision, compile=compile_model, untimed_steps=untimed, first_loss=first, last_loss=last,
               estimated_memory_gib=estimate / 2**30, ok=bool(result.completed and last < first))
    if device.type == "cuda":
        peak = torch.cuda.max_memory_allocated(device)
        out["peak_memory_gib"] = peak / 2**30
        out["memory_over_estimate"] = peak / estimate
        if not compile_model:            # the estimate is eager PyTorch's; compiled kernels keep less
            out["memory_ok"] = MEMORY_BAND[0] <= peak / estimate <= MEMORY_BAND[1]
            out["ok"] = out["ok"] and out["memory_ok"]
    return out


# --- 4. a CPU checkpoint resumed on the device ----------------------------------------------------------

def check_resume(device: torch.device, size: dict, tf, scratch: Path) -> dict:
    """A small decoder trained on the CPU in float32 to step 4, then resumed on ``device`` (bf16 where native)."""
    from anatomy_kit.lm import LMConfig, TrainConfig, build_lm, train
    from anatomy_kit.lm.speed import training_precision

    cfg = LMConfig(vocab_size=size["vocab"], n_layers=2, d_model=64, n_heads=4, ffn_widths=[128, 128], max_seq_len=64)
    train_w, eval_w = tf.windows("train", 64), tf.windows("eval", 64)
    folder = scratch / "resume"
    base = dict(steps=8, batch_size=4, lr=3e-3, eval_batches=1, checkpoint_dir=str(folder), checkpoint_every=4,
                progress=False)
    cpu = train(build_lm(cfg, 0), train_w, eval_w, TrainConfig(**base, device="cpu", stop_after=4))
    precision = training_precision("bf16", device)
    there = train(build_lm(cfg, 0), train_w, eval_w, TrainConfig(**base, device=str(device), precision=precision))
    return {"ok": bool(cpu.steps_done == 4 and there.resumed_from == 4 and there.completed
                       and math.isfinite(there.final_eval_loss)),
            "resumed_on": there.device, "precision": precision, "final_eval_loss": there.final_eval_loss}


# --- 5. several processes: DDP and FSDP under torchrun ----------------------------------------------------

def check_torchrun(device: torch.device, size: dict, tf, scratch: Path, nproc: int, fsdp: bool) -> dict:
    """One decoder trained by ``nproc`` processes (``torchrun``; NCCL on GPUs, gloo on a CPU), DDP or FSDP."""
    if nproc < 2:
        return skipped(f"{nproc} GPU: DDP and FSDP need two or more (WORLD_SIZE >= 2)")
    from anatomy_kit.lm.speed import training_precision

    cfg = model_config({**size, "preset": "debug"})
    name = "fsdp" if fsdp else "ddp"
    spec = {"model": cfg.to_dict(), "seed": 0,
            "train": {"steps": size["dist_steps"], "batch_size": 4 * nproc, "lr": 3e-3, "eval_batches": 1,
                      "device": device.type, "precision": training_precision(size["precision"], device),
                      "fsdp": fsdp, "progress": False},
            "data": {"token_file": str(tf.folder), "block_size": cfg.max_seq_len, "verify": False}}
    (scratch / f"{name}.json").write_text(json.dumps(spec))
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_PORT")}
    if device.type == "cpu":
        env["OMP_NUM_THREADS"] = "1"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", "-m",
           "anatomy_kit.lm.launch", str(scratch / f"{name}.json"), str(scratch / f"{name}-out.json")]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    if proc.returncode:
        return {"ok": False, "error": f"torchrun exited with {proc.returncode}", "stderr": proc.stderr[-3000:]}
    got = json.loads((scratch / f"{name}-out.json").read_text())
    return {"ok": bool(got["completed"] and got["world_size"] == nproc and math.isfinite(got["final_eval_loss"])),
            "world_size": got["world_size"], "device": got["device"], "tokens_per_s": got["tokens_per_s"],
            "mfu": got["mfu"], "final_eval_loss": got["final_eval_loss"],
            "backend": "nccl" if device.type == "cuda" else "gloo"}


# --- the run -------------------------------------------------------------------------------------------------

def environment(device: torch.device) -> dict:
    from anatomy_kit.lm.speed import device_name, native_bf16

    return {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "device": device_name(device),
            "torch": torch.__version__, "cuda": torch.version.cuda, "python": platform.python_version(),
            "gpus": torch.cuda.device_count() if torch.cuda.is_available() else 0,
            "native_bf16": native_bf16(device), "cpu_threads": torch.get_num_threads()}


def chapter_list(arg: str | None, default: str) -> list[str]:
    value = default if arg is None else arg
    if value == "all":
        sys.path.insert(0, str(ROOT / "tests"))
        from test_full_path import FULL_PATH

        return sorted(FULL_PATH)
    return [c for c in value.split(",") if c]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--toy", action="store_true", help="toy sizes on the CPU (automatic without CUDA)")
    ap.add_argument("--chapters", default=None, help="comma-separated chapter ids, 'all', or '' for none "
                                                       "(default: all on a GPU, none with --toy)")
    ap.add_argument("--out", type=Path, default=None, help="the JSON to write")
    args = ap.parse_args(argv)
    toy = args.toy or not torch.cuda.is_available()
    device = torch.device("cpu" if toy else "cuda")
    size = SIZES["toy" if toy else "gpu"]
    nproc = 2 if toy else torch.cuda.device_count()
    start = time.perf_counter()
    doc = {**environment(device), "toy": toy, "sizes": size, "checks": {}}
    checks = doc["checks"]
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        tf = token_file(scratch / "tokens")
        checks["chapters"] = check("chapters", chapter_paths, device, chapter_list(args.chapters, size["chapters"]),
                                   size["chapter_jobs"], scratch)
        checks["map"] = check("map", check_map, device, size)
        checks["train"] = check("train", check_training, device, size, tf, False)
        checks["train_compiled"] = check("train_compiled", check_training, device, size, tf, True)
        checks["resume"] = check("resume", check_resume, device, size, tf, scratch)
        checks["ddp"] = check("ddp", check_torchrun, device, size, tf, scratch, nproc, False)
        checks["fsdp"] = check("fsdp", check_torchrun, device, size, tf, scratch, nproc, True)
    doc["ok"] = all(c.get("ok") is not False for c in checks.values())
    doc["total_s"] = time.perf_counter() - start
    slug = re.sub(r"[^A-Za-z0-9]+", "-", doc["device"]).strip("-").lower()
    name = f"gpu_check-{doc['date'][:10]}-{slug}{'-toy' if toy else ''}.json"
    out = args.out or ROOT / "benchmarks" / "results" / name
    out.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(doc, indent=1, default=str)
    out.write_text(text + "\n")
    print(text, flush=True)
    say(f"total {doc['total_s']:.0f} s; {'all checks passed' if doc['ok'] else 'SOME CHECKS FAILED'}; wrote {out}")
    return 0 if doc["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
