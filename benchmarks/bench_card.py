"""Time per stage and peak memory of the layer report card on the embedded SmolLM2, and a GPU estimate for bigger models.

    python benchmarks/bench_card.py [--mode both|full|quick] [--threads 2] [--tokens N] [--json out.json]
                                    [--keep FOLDER]

Each mode runs in a fresh process (so its peak resident memory is its own) with a fresh cache and no
progress bars: ``full`` is ``python -m anatomy_kit card embedded`` with the default settings, ``quick``
the same with ``--quick``. Recorded per stage: wall time and this process's CPU time (on a machine
shared with other work the wall time mostly measures the others; with ``--threads 1`` the CPU time is
the cleaner number, and two idle cores run the card in about CPU time / 1.8); the whole run's wall and
CPU time; peak RSS (``ru_maxrss``).

Targets (issue 19): whole card ≤ 10 min and ≤ 3 GB peak RSS on 2 CPU cores; ``--quick`` ≤ 60 s.

GPU estimate: the card's FLOP model (:mod:`anatomy_kit.card.cost`) counts the layer and head passes of
every stage exactly for the measured card, and predicts them for SmolLM2-1.7B (24 layers, d = 2048,
vocabulary 49,152, FFN 8,192; its config.json) and Llama-3.1-8B (:data:`anatomy_kit.lm.estimates.HUB_SHAPES`)
with the same settings; FLOPs divided by the assumed float32 inference throughput of one H100-class GPU
(:data:`anatomy_kit.lm.estimates.ASSUMED_FLOPS`, 50 % of the float32 peak; the card runs in float32
by default) give the time. An estimate, not a measurement: small batches reach less of the peak.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

FULL_S, QUICK_S, RSS_MB = 600, 60, 3 * 1024

def child(mode: str, threads: int, tokens: int | None, keep: str | None = None) -> dict:
    """One card in this process; returns its measurements."""
    import torch

    from anatomy_kit.card import CardSettings, build_card
    from anatomy_kit.card.cache import peak_rss_mb
    from anatomy_kit.card.cost import card_flops, card_passes
    from anatomy_kit.lm.estimates import HUB_SHAPES

    torch.set_num_threads(threads)
    settings = CardSettings(quick=mode == "quick", **({"tokens": tokens} if tokens else {}))
    wall, cpu = time.perf_counter(), time.process_time()
    with tempfile.TemporaryDirectory() as scratch:
        cache = os.path.join(keep, f"cache-{mode}") if keep else scratch     # kept: a later card reuses it
        shutil.rmtree(cache, ignore_errors=True)                               # always measured from empty
        card = build_card("embedded", settings=settings, device="cpu", cache_dir=cache, progress=False)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if keep:
        card.save_json(os.path.join(keep, f"card-{mode}.json"))
    passes = card_passes(card.doc)
    flops = card_flops(passes, HUB_SHAPES["HuggingFaceTB/SmolLM2-135M"], card.doc["text"]["block_size"])
    return {"mode": mode, "threads": threads, "settings": card.doc["settings"], "n_layers": card.n_layers,
            "eval_tokens": card.doc["text"]["eval_tokens"], "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
            "peak_rss_mb": round(peak_rss_mb(), 0), "stages": card.doc["provenance"]["timings"],
            "flops": {k: float(v) for k, v in flops.items()}}


def gpu_estimates(settings: dict) -> dict:
    """Seconds on one GPU, per model, from the planned passes of the same settings (module docstring)."""
    from anatomy_kit.lm.estimates import ASSUMED_FLOPS, HUB_SHAPES
    from anatomy_kit.card import CardSettings
    from anatomy_kit.card.cost import card_flops, planned_passes

    s = CardSettings(**{**settings, "max_prune": None})
    shapes = {"SmolLM2-1.7B": HUB_SHAPES["HuggingFaceTB/SmolLM2-1.7B"],          # tied head
              "Llama-3.1-8B": HUB_SHAPES["meta-llama/Llama-3.1-8B"]}               # untied head
    out = {}
    for name, shape in shapes.items():
        flops = card_flops(planned_passes(shape.n_layers, s), shape, s.block_size)
        total = sum(flops.values())
        out[name] = {"tflop": round(total / 1e12, 1), "seconds": round(total / ASSUMED_FLOPS["eval-fp32"], 1),
                     "weights_gb_fp32": round(4 * shape.params / 1e9, 1),
                     "stages_s": {k: round(v / ASSUMED_FLOPS["eval-fp32"], 1) for k, v in flops.items()}}
    return out


def report(results: list[dict]) -> str:
    lines = []
    for r in results:
        target = FULL_S if r["mode"] == "full" else QUICK_S
        lines.append(f"== {r['mode']} card, embedded SmolLM2-135M ({r['n_layers']} layers), {r['eval_tokens']} evaluation "
                     f"tokens, K = {r['settings']['max_prune']}, {r['threads']} thread(s)")
        for stage, t in r["stages"].items():
            lines.append(f"   {stage:<30s} wall {t['wall_s']:7.1f} s   CPU {t['cpu_s']:7.1f} s")
        lines.append(f"   {'total':<30s} wall {r['wall_s']:7.1f} s   CPU {r['cpu_s']:7.1f} s   (target ≤ {target} s on "
                     f"2 cores: CPU/1.8 = {r['cpu_s'] / 1.8:.0f} s); peak RSS {r['peak_rss_mb']:.0f} MB "
                     f"(target ≤ {RSS_MB} MB)")
        if r["mode"] == "full":
            for name, e in gpu_estimates(r["settings"]).items():
                lines.append(f"   GPU estimate, {name}: {e['tflop']} TFLOP → {e['seconds']} s on one H100-class GPU "
                             f"in float32 ({e['weights_gb_fp32']} GB of weights)")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=("both", "full", "quick"), default="both")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=None, help="evaluation tokens (default: the card's default)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--keep", default=None, help="a folder to keep each measured card in (card-<mode>.json) and "
                                                  "its cache (cache-<mode>/, which `card --cache` reuses)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.threads, args.tokens, args.keep)))
        return
    results = []
    for mode in (("quick", "full") if args.mode == "both" else (args.mode,)):
        cmd = [sys.executable, __file__, "--child", mode, "--threads", str(args.threads)]
        cmd += ["--tokens", str(args.tokens)] if args.tokens else []
        cmd += ["--keep", args.keep] if args.keep else []
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode:
            sys.exit(f"{mode} card failed:\n{proc.stderr[-3000:]}")
        results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    for r in results:
        if r["mode"] == "full":
            r["gpu_estimates"] = gpu_estimates(r["settings"])
    print(report(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
