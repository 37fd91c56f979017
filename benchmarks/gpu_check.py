"""GPU check: does full scale run here, and how fast? One command, a few minutes, no internet.

    python benchmarks/gpu_check.py                 # on a CUDA machine: the real sizes below
    python benchmarks/gpu_check.py --toy           # anywhere (automatic without CUDA): the same code at toy sizes

Three checks, each through the kit's own code paths, and one JSON with the date, the device, the
torch and CUDA versions and the numbers (default ``benchmarks/results/gpu_check-<date>-<device>.json``):

1. **Chapter 1's map**: the neighbour-mean ablation map of the embedded SmolLM2 (every layer,
   prefix-cached) at chapter 1's full-scale evaluation size (64 blocks of 256 tokens): seconds, tokens.
2. **The 128M preset in bf16**: the preset's decoder (12 layers, d 768, FFN 2048, context 1024,
   vocabulary 50,304) trained for 300 steps of the preset's micro-batch (32 × 1024 tokens; the
   preset's 16-fold gradient accumulation is left out to keep the check short) on a token file of
   the Python docs (SmolLM2's tokenizer): tokens/s, achieved FLOP/s, MFU against the device's peak
   (:mod:`anatomy_kit.lm.speed`), peak memory. The target is MFU ≥ 40 %.
3. **torchrun with one process**: the same decoder for 30 steps launched by
   ``torchrun --standalone --nproc_per_node 1 -m anatomy_kit.lm.launch``: the distributed path
   (process group, DDP wrapper) runs.

``--toy`` runs all three at toy sizes (the map of the first 4 layers on 2 blocks of 32 tokens;
a 6-layer, d 64 decoder for 8 steps in float32) so that the script cannot rot where there is no GPU (tests/test_gpu_check.py).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from anatomy_kit import anatomy, data
from anatomy_kit.hf import evaluation, models
from anatomy_kit.jsonio import write_json
from anatomy_kit.lm import PRESETS, LMConfig, TrainConfig, build_lm, train
from anatomy_kit.lm.launch import result_summary

SIZES = {
    "gpu": dict(map_blocks=64, map_block_size=256, map_batch=16, map_layers=None, preset="128M", vocab=50304, steps=300,
                batch_size=32, precision="bf16", torchrun_steps=30),
    "toy": dict(map_blocks=2, map_block_size=32, map_batch=2, map_layers=4, preset="smoke", vocab=49152, steps=8,
                batch_size=4, precision="fp32", torchrun_steps=4),
}


def check_map(device: torch.device, size: dict) -> dict:
    """Chapter 1's neighbour-mean ablation map of the embedded model."""
    loaded = models.load_model("embedded", device=str(device))
    blocks = data.token_blocks(loaded.tokenizer, "python-docs", block_size=size["map_block_size"], n_train=0,
                               n_eval=size["map_blocks"])
    batches = evaluation.make_batches(blocks.eval, size["map_batch"], device=device)
    _sync(device)
    t = time.perf_counter()
    layers = None if size["map_layers"] is None else list(range(size["map_layers"]))
    amap = anatomy.ablation_map(loaded.model, batches, layers=layers, progress=False)
    _sync(device)
    seconds = time.perf_counter() - t
    return {"model": loaded.description, "layers": len(amap.layers), "tokens": int(blocks.eval.numel()),
            "seconds": seconds, "baseline_ppl": float(amap.baseline_ppl), "max_delta_pct": float(amap.delta_pct.max())}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def model_config(size: dict) -> LMConfig:
    P = PRESETS[size["preset"]]
    return LMConfig(vocab_size=size["vocab"], n_layers=P["n_layers"], d_model=P["d_model"], n_heads=P["n_heads"],
                    ffn_widths=[P["mean_width"]] * P["n_layers"], max_seq_len=P["block_size"])


def token_file(folder: Path) -> data.TokenFile:
    """The Python docs tokenised with SmolLM2's tokenizer into a token file (built once per run)."""
    tok = models.load_model("embedded", device="cpu").tokenizer
    return data.build_token_file(data.load_corpus("python-docs"), tok, folder, corpus_name="python-docs",
                                 tokenizer_name="SmolLM2 (embedded)")


def check_training(device: torch.device, size: dict, tf: data.TokenFile, compile_model: bool) -> dict:
    """A few hundred steps of the preset's decoder: tokens/s, FLOP/s, MFU, memory."""
    cfg = model_config(size)
    T = cfg.max_seq_len
    train_w, eval_w = tf.windows("train", T), tf.windows("eval", T)
    config = TrainConfig(steps=size["steps"], batch_size=size["batch_size"], lr=6e-4, warmup=min(30, size["steps"] // 4),
                         eval_batches=1, device=str(device), precision=size["precision"], compile=compile_model,
                         progress=False, desc=f"{size['preset']} check")
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    result = train(build_lm(cfg, seed=0), train_w, eval_w, config)
    out = result_summary(result)
    out.pop("loss_curve")
    out.update(preset=size["preset"], params=result.n_params, batch_tokens=size["batch_size"] * T,
               precision=size["precision"], compile=compile_model, first_loss=result.loss_curve[0][1],
               last_loss=result.loss_curve[-1][1], windows=int(train_w.shape[0]))
    if device.type == "cuda":
        out["peak_memory_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
    return out


def check_torchrun(device: torch.device, size: dict, tf: data.TokenFile, scratch: Path) -> dict:
    """The decoder for a few steps under ``torchrun --nproc_per_node 1`` (process group + DDP)."""
    cfg = model_config(size)
    spec = {"model": cfg.to_dict(), "seed": 0,
            "train": {"steps": size["torchrun_steps"], "batch_size": size["batch_size"], "lr": 6e-4,
                      "eval_batches": 1, "device": device.type, "precision": size["precision"], "progress": False},
            "data": {"token_file": str(tf.folder), "block_size": cfg.max_seq_len, "verify": False}}
    (scratch / "spec.json").write_text(json.dumps(spec))
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_PORT")}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1", "-m",
           "anatomy_kit.lm.launch", str(scratch / "spec.json"), str(scratch / "torchrun.json")]
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    seconds = time.perf_counter() - t
    if proc.returncode:
        return {"ok": False, "seconds": seconds, "error": proc.stderr[-2000:]}
    got = json.loads((scratch / "torchrun.json").read_text())
    return {"ok": bool(got["completed"]), "seconds": seconds, "world_size": got["world_size"],
            "device": got["device"], "tokens_per_s": got["tokens_per_s"], "mfu": got["mfu"],
            "final_eval_loss": got["final_eval_loss"]}


def environment(device: torch.device) -> dict:
    from anatomy_kit.lm.speed import device_name

    return {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "device": device_name(device),
            "torch": torch.__version__, "cuda": torch.version.cuda, "python": platform.python_version(),
            "gpus": torch.cuda.device_count() if torch.cuda.is_available() else 0, "cpu_threads": torch.get_num_threads()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--toy", action="store_true", help="toy sizes (automatic without CUDA)")
    ap.add_argument("--compile", action="store_true", help="train through torch.compile (GPU runs)")
    ap.add_argument("--out", type=Path, default=None, help="the JSON to write")
    args = ap.parse_args(argv)
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    toy = args.toy or not cuda
    size = SIZES["toy" if toy else "gpu"]
    start = time.perf_counter()
    doc = {**environment(device), "toy": toy, "sizes": size}
    with tempfile.TemporaryDirectory() as scratch:
        tf = token_file(Path(scratch) / "tokens")
        doc["map"] = check_map(device, size)
        print(f"map: {doc['map']['layers']} layers x {doc['map']['tokens']:,} tokens in {doc['map']['seconds']:.1f} s")
        doc["train"] = check_training(device, size, tf, args.compile)
        t = doc["train"]
        mfu = "n/a" if t["mfu"] is None else f"{100 * t['mfu']:.1f} %"
        print(f"train {t['preset']} ({t['params']:,} params, {t['precision']}): {t['tokens_per_s']:,.0f} tokens/s, "
              f"{t['flops_per_s'] / 1e12:.2f} TFLOP/s, MFU {mfu}")
        doc["torchrun"] = check_torchrun(device, size, tf, Path(scratch))
        print(f"torchrun (1 process): {'ok' if doc['torchrun']['ok'] else 'FAILED'} in {doc['torchrun']['seconds']:.0f} s")
    doc["total_s"] = time.perf_counter() - start
    slug = re.sub(r"[^A-Za-z0-9]+", "-", doc["device"]).strip("-").lower()
    out = args.out or Path(__file__).parent / "results" / f"gpu_check-{doc['date'][:10]}-{slug}{'-toy' if toy else ''}.json"
    write_json(out, doc)
    print(f"total {doc['total_s']:.0f} s; wrote {out}")
    return 0 if doc["torchrun"]["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
