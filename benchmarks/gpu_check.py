"""GPU check: what to run when a GPU is lent. Offline, no GGUF; two commands of at most 8 minutes each.

    python benchmarks/gpu_check.py --part chapters --out chapters.json   # every chapter's full path on the GPU
    python benchmarks/gpu_check.py --part training --out training.json   # map, training, compile, resume, DDP/FSDP
    python benchmarks/gpu_check.py --toy                                 # anywhere: both parts at toy sizes
    python benchmarks/gpu_check.py --device-guard --part training        # on a CPU, as on a GPU (the rehearsal)

The wheels a bare GPU machine lacks come from ``benchmarks/device_wheels.sh`` (README, "Checking a
GPU first"); ``benchmarks/rehearse.py`` recreates such a machine on a CPU and runs both commands
there (CI does, at toy size). Every check runs through the kit's own code paths and never stops
the others; each prints ONE line on stderr (``name: ok`` / ``name: FAILED (the exception)`` /
``name: skipped (why)``), and the JSON (the date, the device, the versions, what the carried wheels
need of the machine's packages, every check so far: :func:`report`) is written at the start and
rewritten after every check and every chapter, so a command cut off by a time limit keeps what
finished. ``--budget-s`` skips the checks and chapters that would start after it. The last JSON is
also printed on stdout; the exit status is non-zero if a check failed.

Models are *stand-ins*: SmolLM2-135M's real shape and tokenizer (``tests/standin_files/smollm2``)
with random weights, and ``tests/standins.py``'s tiny models under the real hub ids.

``chapters``: every chapter's full path on the stand-ins with ``device="cuda"`` at the sizes
``tests/test_full_path.py`` uses, ``chapter_jobs`` at a time, each chapter in a process of its own
(papermill changes its process's working directory) with its own limit (``--chapter-timeout-s``),
after which it is stopped and its entry says so. Without ``datasets`` the chapters read the Python
docs instead of the hub corpora; without POT the chapter that computes optimal Gromov–Wasserstein
couplings (:data:`NEEDS_POT`) is skipped, and the check says so.

``training``:

1. ``map``: chapter 1's neighbour-mean ablation map of the SmolLM2-shaped model at full evaluation size;
2. ``train`` and ``train_compiled``: the 128M preset's decoder (12 × 768, FFN 2048, context 1024,
   vocabulary 50,304) in bf16 at the preset's micro-batch (32 × 1024 tokens), eager and through
   ``torch.compile``: tokens/s, FLOP/s and MFU after ``untimed_steps`` warm-up steps, and the
   peak of ``torch.cuda.max_memory_allocated`` against :func:`anatomy_kit.lm.estimates.training_memory`
   (ok within ±25 %). Target: MFU ≥ 40 %;
3. ``resume``: a checkpoint written by a CPU run (float32) resumed on the device (bf16 where native);
4. ``card_heal``: ``python -m anatomy_kit card`` with ``--heal`` on the SmolLM2-shaped model (``--toy``: 4
   layers 64 wide), the card's default sizes on a GPU: the card, its measured pruning and the healing
   fine-tune on the device (its work signal's GW needs no POT);
5. ``ddp`` and ``fsdp``: ``torchrun`` with one process per GPU — one GPU included: a process group
   over NCCL, one wrapped (DDP) or sharded (FSDP) training step, one checkpoint. ``--toy``: two CPU
   processes over gloo;
6. ``split_card``: with two or more GPUs, the card's signals and the head's NLL on the
   SmolLM2-shaped model split by ``device_map`` (layers 0–14 on the first GPU, the rest on the
   second); skipped with one.

The token file the training checks read (the Python docs through SmolLM2's tokenizer) is built by
the first check that needs it, so a failure there is that check's entry, not a command without JSON.

``--toy`` runs both parts on the CPU at toy sizes (a 4-layer map on 2 blocks of 32 tokens, the
``smoke`` decoder for 8 steps in float32, no compilation, no chapter unless ``--chapters`` names
some). ``--device-guard`` (toy sizes) puts the CPU device guard (``tests/device_guard.py``) in for
the accelerator: the checks of this process run on the stand-in accelerator ``cpu:1`` and each
chapter's kernel installs the guard, so every device mix-up CUDA would raise is raised here;
``ddp`` and ``fsdp`` run in ``torchrun``'s worker processes on the host, unguarded.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import importlib.util
import json
import math
import os
import platform
import re
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))            # the stand-ins and the chapters' full-path sizes

SIZES = {
    "gpu": dict(map_blocks=64, map_block_size=256, map_batch=16, map_layers=None, preset="128M", vocab=50304,
                steps=60, untimed=10, compiled_steps=60, compiled_untimed=20, batch_size=32, precision="bf16",
                dist_steps=2, chapters="all", chapter_jobs=3, chapter_timeout_s=300.0, card_model={},
                card_args=["--heal", "2"]),
    "toy": dict(map_blocks=2, map_block_size=32, map_batch=2, map_layers=4, preset="smoke", vocab=49152, steps=8,
                untimed=2, compiled_steps=0, compiled_untimed=0, batch_size=4, precision="fp32", dist_steps=4,
                chapters="", chapter_jobs=2, chapter_timeout_s=300.0,
                card_model=dict(num_hidden_layers=4, hidden_size=64, intermediate_size=128, num_attention_heads=4,
                                num_key_value_heads=2, head_dim=16),
                card_args=["--heal", "1", "--tokens", "128", "--block-size", "32", "--batch-size", "2",
                           "--calibration-tokens", "64", "--random", "3", "--geometry-tokens", "24", "-K", "2"]),
}
MEMORY_BAND = (0.75, 1.25)      # measured peak / estimate
PARTS = {"chapters": ("chapters",),
         "training": ("map", "train", "train_compiled", "resume", "card_heal", "ddp", "fsdp", "split_card")}
#: Chapters whose path computes optimal Gromov–Wasserstein couplings (POT): chapter 4. The card's work signal
#: (card page, chapter 7) is the identity coupling's distortion, plain NumPy: both run without POT.
NEEDS_POT = ("ch04_geometric_work",)


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def one_line(text: str) -> str:
    return " ".join(str(text).split())


def check(name: str, fn, *args) -> dict:
    """Run one check; a failure is recorded (type, message, the end of the traceback), never raised."""
    start = time.perf_counter()
    try:
        out = fn(*args)
    except Exception as err:                                        # noqa: BLE001 - every failure is a finding
        out = {"ok": False, "error": f"{type(err).__name__}: {err}"[:2000],
               "traceback": traceback.format_exc()[-3000:]}
    out.setdefault("seconds", time.perf_counter() - start)
    if out.get("ok") is None:
        say(f"{name}: skipped ({one_line(out.get('skipped', ''))})")
    elif out["ok"]:
        say(f"{name}: ok in {out['seconds']:.0f} s")
    else:
        say(f"{name}: FAILED in {out['seconds']:.0f} s ({one_line(out.get('error', 'a result out of range'))[:300]})")
    return out


def skipped(why: str) -> dict:
    return {"ok": None, "skipped": why}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def has_module(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


# --- the SmolLM2-shaped stand-in ---------------------------------------------------------------------------

def smollm2_folder(scratch: Path) -> Path:
    """SmolLM2-135M's config and tokenizer in a folder (committed files; no GGUF, no download)."""
    import standins

    return standins.smollm2_folder(scratch / "smollm2")


def smollm2_model(folder: Path, device: torch.device, device_map: dict | None = None):
    """A LlamaForCausalLM of SmolLM2-135M's exact shape with random weights (seed 0), evaluation mode."""
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(folder)).eval()
    if device_map is not None:
        from accelerate import dispatch_model

        return dispatch_model(model, device_map=device_map)
    return model.to(device)


def token_file(folder: Path, tokenizer_folder: Path):
    """The Python docs tokenised with SmolLM2's tokenizer into a token file (built once per run)."""
    from transformers import AutoTokenizer

    from anatomy_kit import data

    tok = AutoTokenizer.from_pretrained(tokenizer_folder)
    return data.build_token_file(data.load_corpus("python-docs"), tok, folder, corpus_name="python-docs",
                                 tokenizer_name="SmolLM2 (committed stand-in files)")


# --- chapters: every chapter's full path on the stand-ins, one process each -----------------------------------

def chapter_paths(device: torch.device, names: list[str], jobs: int, scratch: Path, *, timeout_s: float = 300.0,
                  deadline: float | None = None, guard: bool = False, on_entry=None) -> dict:
    """Each chapter at ``scale="full"`` on the stand-ins in a process of its own, ``jobs`` at a time.

    One process per chapter (:func:`run_chapter_process`): papermill changes its process's working
    directory, so chapters never share one, and a chapter that hangs is killed at its own limit
    (``timeout_s``, or what is left before ``deadline``, a ``time.monotonic()`` value) without taking
    the others with it. Each chapter's entry is made when it ends and handed to ``on_entry(name,
    entry)`` (the caller rewrites its JSON there); a chapter that would start after ``deadline`` is
    skipped by name. ``guard``: the CPU device guard stands in for the accelerator in each kernel.
    """
    if not names:
        return skipped("no chapter named (--chapters)")
    import standins
    from test_full_path import FULL_PATH

    unknown = sorted(set(names) - set(FULL_PATH))
    if unknown:
        raise ValueError(f"chapters {unknown} have no full-path sizes; known: {sorted(FULL_PATH)}")
    hub_corpora = has_module("datasets")
    with contextlib.redirect_stdout(sys.stderr):
        environ = standins.build(scratch / "standins", corpora=hub_corpora)
    extra = {} if hub_corpora else {"corpus": "python-docs"}
    results: dict = {}
    lock = threading.Lock()

    def one(chapter: str) -> dict:
        if chapter in NEEDS_POT and not has_module("ot"):
            entry = check(f"chapter {chapter}", skipped, "POT is not installed (device_wheels.sh leaves it out when "
                          "it does not fit): Gromov-Wasserstein is not checked")
        elif deadline is not None and deadline - time.monotonic() < MIN_CHAPTER_S:
            entry = check(f"chapter {chapter}", skipped, "the budget was spent before it could start")
        else:
            limit = timeout_s if deadline is None else min(timeout_s, deadline - time.monotonic())
            spec = {"chapter": chapter, "device": device.type, "params": {**FULL_PATH[chapter], **extra},
                    "environ": environ, "build_dir": str(scratch / f"build-{chapter}"), "guard": guard}
            entry = check(f"chapter {chapter}", run_chapter_process, spec, scratch / f"chapter-{chapter}", limit)
        with lock:
            results[chapter] = entry
            if on_entry is not None:
                on_entry(chapter, entry)
        return entry

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        list(pool.map(one, names))
    results = {c: results[c] for c in names}
    ran = [c for c, r in results.items() if r["ok"] is not None]
    return {"ok": all(r["ok"] is not False for r in results.values()) and bool(ran), "chapters": results,
            "corpora": "hub stand-ins" if hub_corpora else "python-docs (datasets is not installed)",
            "ran": ran, "skipped_chapters": sorted(set(results) - set(ran)), "chapter_timeout_s": timeout_s}


#: A chapter that would get less than this before the deadline is not started.
MIN_CHAPTER_S = 30.0
#: The chapter processes running now. Each has a session of its own (so that its limit can stop its whole
#: group), which ``timeout``'s signal to this command's group does not reach: :func:`_stop` passes it on.
_RUNNING: set = set()
_RUNNING_LOCK = threading.Lock()


class Stopped(BaseException):
    """This command was told to stop (``timeout``'s SIGTERM, or Ctrl-C): it writes what finished and ends."""


def _stop(signum, frame) -> None:
    import signal

    with _RUNNING_LOCK:
        running = list(_RUNNING)
    for proc in running:                     # each chapter's process; its kernel follows its parent out
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
    raise Stopped(signal.Signals(signum).name)


def run_chapter_process(spec: dict, folder: Path, limit_s: float) -> dict:
    """Run one chapter in a child process (``gpu_check.py --chapter-spec``) and kill its process group
    (the kernel with it) once ``limit_s`` seconds have passed; the entry says which happened."""
    folder.mkdir(parents=True, exist_ok=True)
    spec = {**spec, "result": str(folder / "result.json")}
    (folder / "spec.json").write_text(json.dumps(spec))
    log = folder / "stderr.log"
    start = time.perf_counter()
    with open(log, "w") as err:
        proc = subprocess.Popen(chapter_command(folder / "spec.json"), stdout=err, stderr=subprocess.STDOUT,
                                cwd=ROOT, start_new_session=True)
        with _RUNNING_LOCK:
            _RUNNING.add(proc)
        try:
            rc = proc.wait(timeout=max(1.0, limit_s))
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            return {"ok": False, "timed_out": True, "limit_s": round(limit_s, 1),
                    "error": f"past its time: the chapter was still running after {limit_s:.0f} s and was stopped",
                    "log_tail": log.read_text(errors="replace")[-1500:]}
        finally:
            with _RUNNING_LOCK:
                _RUNNING.discard(proc)
    seconds = time.perf_counter() - start
    result = folder / "result.json"
    if not result.exists():
        return {"ok": False, "seconds": seconds, "error": f"the chapter's process exited with status {rc} and wrote no "
                f"result", "log_tail": log.read_text(errors="replace")[-3000:]}
    out = json.loads(result.read_text())
    out["process_seconds"] = seconds
    return out


def chapter_command(spec_path: Path) -> list[str]:
    """The command of one chapter's process: this script with ``--chapter-spec``."""
    return [sys.executable, str(Path(__file__).resolve()), "--chapter-spec", str(spec_path)]


def _kill_group(proc: subprocess.Popen) -> None:
    import signal

    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def chapter_child(spec_path: Path) -> int:
    """The child process of :func:`run_chapter_process`: execute one chapter, write its result JSON."""
    spec = json.loads(Path(spec_path).read_text())
    from anatomy_kit.book.chapters import chapter_manifest
    from anatomy_kit.book.runner import execute_chapter

    environ = dict(spec["environ"])
    if spec["guard"]:
        import device_guard

        environ.update(device_guard.kernel_startup(Path(spec["build_dir"]) / "ipython"))
    entry = next(c for c in chapter_manifest(ROOT) if c["id"] == spec["chapter"])

    def run() -> dict:
        seconds = execute_chapter(entry, scale="full", device=spec["device"], build_dir=Path(spec["build_dir"]),
                                  book_dir=None, params=spec["params"], root=ROOT, environ=environ)
        out = {"ok": True, "seconds": seconds}
        if spec["guard"]:
            import device_guard

            out["device_guard"] = (Path(spec["build_dir"]) / "ipython" / device_guard.STAMP).exists()
            out["ok"] = out["device_guard"]
            if not out["ok"]:
                out["error"] = "the device guard did not start in the chapter's kernel"
        return out

    with contextlib.redirect_stdout(sys.stderr):
        result = check(f"chapter {spec['chapter']} (process)", run)
    Path(spec["result"]).write_text(json.dumps(result, default=str))
    return 0


# --- training part ------------------------------------------------------------------------------------------

def check_map(device: torch.device, size: dict, folder: Path) -> dict:
    """Chapter 1's neighbour-mean ablation map of the SmolLM2-shaped model."""
    from transformers import AutoTokenizer

    from anatomy_kit import anatomy, data
    from anatomy_kit.hf import evaluation

    model = smollm2_model(folder, device)
    blocks = data.token_blocks(AutoTokenizer.from_pretrained(folder), "python-docs",
                               block_size=size["map_block_size"], n_train=0, n_eval=size["map_blocks"])
    batches = evaluation.make_batches(blocks.eval, size["map_batch"], device=device)
    _sync(device)
    t = time.perf_counter()
    layers = None if size["map_layers"] is None else list(range(size["map_layers"]))
    amap = anatomy.ablation_map(model, batches, layers=layers, progress=False)
    _sync(device)
    ok = bool(math.isfinite(float(amap.baseline_ppl)) and torch.isfinite(torch.as_tensor(amap.delta_pct)).all())
    return {"ok": ok, "model": "SmolLM2-135M shape, random weights", "layers": len(amap.layers),
            "tokens": int(blocks.eval.numel()), "seconds": time.perf_counter() - t,
            "baseline_ppl": float(amap.baseline_ppl), "max_delta_pct": float(amap.delta_pct.max())}


def model_config(size: dict):
    from anatomy_kit.lm import PRESETS, LMConfig

    P = PRESETS[size["preset"]]
    return LMConfig(vocab_size=size["vocab"], n_layers=P["n_layers"], d_model=P["d_model"], n_heads=P["n_heads"],
                    ffn_widths=[P["mean_width"]] * P["n_layers"], max_seq_len=P["block_size"])


def check_training(device: torch.device, size: dict, tf, compile_model: bool) -> dict:
    """The preset's decoder for a few dozen steps: tokens/s, FLOP/s, MFU after warm-up, peak memory vs estimate."""
    from anatomy_kit.lm import TrainConfig, build_lm, train
    from anatomy_kit.lm.estimates import lm_shape, training_memory
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


def check_card_heal(device: torch.device, size: dict, folder: Path, scratch: Path) -> dict:
    """The report card's command line with ``--heal`` on the device: a card of the SmolLM2-shaped model (toy: 4
    layers 64 wide, its vocabulary), its measured pruning, and the healing fine-tune of each recommended set."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from anatomy_kit.book.cli import main as kit

    config = AutoConfig.from_pretrained(folder)
    for key, value in size["card_model"].items():
        setattr(config, key, value)
    torch.manual_seed(0)
    model_dir, out = scratch / "card-model", scratch / "card"
    AutoModelForCausalLM.from_config(config).save_pretrained(model_dir)
    AutoTokenizer.from_pretrained(folder).save_pretrained(model_dir)
    cli_device = "cuda" if device.type == "cuda" else "cpu"          # under the device guard "cpu" is accelerator 1
    args = ["card", str(model_dir), "--corpus", "python-docs", *size["card_args"], "--device", cli_device,
            "--out", str(out)]
    with contextlib.redirect_stdout(sys.stderr):
        rc = kit(args)
    heal = out / "heal.json"
    by_k = json.loads(heal.read_text())["by_k"] if heal.exists() else {}
    shown = ["python", "-m", "anatomy_kit", "card", "MODEL", *args[2:-2], "--out", "OUT"]
    return {"ok": bool(rc == 0 and by_k), "command": " ".join(shown),
            "layers": config.num_hidden_layers, "exit_status": rc,
            "healed": {k: {"ppl_pruned": v["ppl_pruned"], "ppl_healed": v["ppl_healed"]} for k, v in by_k.items()}}


def check_torchrun(device: torch.device, size: dict, tf, scratch: Path, nproc: int, fsdp: bool) -> dict:
    """One decoder trained by ``nproc`` processes (``torchrun``; NCCL on GPUs, gloo on a CPU), DDP or FSDP,
    with one checkpoint at the end. One process is a process group too: the NCCL paths run on one GPU."""
    from anatomy_kit.lm.speed import training_precision

    cfg = model_config({**size, "preset": "debug"})
    name = "fsdp" if fsdp else "ddp"
    ckpt = scratch / f"{name}-checkpoint"
    spec = {"model": cfg.to_dict(), "seed": 0,
            "train": {"steps": size["dist_steps"], "batch_size": 4 * nproc, "lr": 3e-3, "eval_batches": 1,
                      "device": device.type, "precision": training_precision(size["precision"], device),
                      "fsdp": fsdp, "progress": False, "checkpoint_dir": str(ckpt),
                      "checkpoint_every": size["dist_steps"]},
            "data": {"token_file": str(tf.folder), "block_size": cfg.max_seq_len, "verify": False}}
    (scratch / f"{name}.json").write_text(json.dumps(spec))
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_PORT")}
    if device.type == "cpu":
        env["OMP_NUM_THREADS"] = "1"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", "-m",
           "anatomy_kit.lm.launch", str(scratch / f"{name}.json"), str(scratch / f"{name}-out.json")]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    if proc.returncode:
        return {"ok": False, "error": f"torchrun exited with {proc.returncode}", "stderr": proc.stderr[-3000:]}
    got = json.loads((scratch / f"{name}-out.json").read_text())
    backend = "nccl" if device.type == "cuda" else "gloo"
    return {"ok": bool(got["completed"] and got["world_size"] == nproc and got["backend"] == backend
                       and (ckpt / "checkpoint.json").exists() and math.isfinite(got["final_eval_loss"])),
            "world_size": got["world_size"], "device": got["device"], "backend": got["backend"],
            "checkpoint": (ckpt / "checkpoint.json").exists(), "tokens_per_s": got["tokens_per_s"],
            "mfu": got["mfu"], "final_eval_loss": got["final_eval_loss"]}


def check_split_card(device: torch.device, folder: Path, gpus: int) -> dict:
    """The card's signals and the head's NLL on the SmolLM2-shaped model split over two GPUs at layer 15."""
    if gpus < 2:
        return skipped(f"{gpus} GPU: a model split by device_map needs two (the CPU device guard tests it)")
    from anatomy_kit.card.signals import signal_pass
    from anatomy_kit.hf import evaluation

    whole = smollm2_model(folder, device)
    ids = torch.randint(3, 49152, (2, 128), generator=torch.Generator().manual_seed(0))
    ref = signal_pass(whole, ids.to(device), n_offsets=7).to_numpy()
    (batch,) = evaluation.make_batches(ids, 2, device=device)
    ppl = evaluation.perplexity(whole, [batch])
    del whole
    device_map = {"model.embed_tokens": 0, "model.rotary_emb": 0, "model.norm": 1, "lm_head": 0,
                  **{f"model.layers.{i}": 0 if i < 15 else 1 for i in range(30)}}
    split = smollm2_model(folder, device, device_map=device_map)
    got = signal_pass(split, ids.to("cuda:0"), n_offsets=7).to_numpy()
    (split_batch,) = evaluation.make_batches(ids, 2, device="cuda:0")
    split_ppl = evaluation.perplexity(split, [split_batch])
    gap = float(abs(got.cos - ref.cos).max())
    return {"ok": bool(gap < 1e-3 and abs(split_ppl - ppl) < 1e-3 * ppl), "max_cos_sum_gap": gap,
            "ppl": ppl, "split_ppl": split_ppl}


# --- the run -------------------------------------------------------------------------------------------------

def environment(device: torch.device) -> dict:
    from anatomy_kit.lm.speed import device_name, native_bf16

    return {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "device": device_name(device),
            "torch": torch.__version__, "cuda": torch.version.cuda, "python": platform.python_version(),
            "gpus": torch.cuda.device_count() if torch.cuda.is_available() else 0,
            "native_bf16": native_bf16(device), "cpu_threads": torch.get_num_threads(),
            "modules": {m: has_module(m) for m in ("papermill", "ipykernel", "pandas", "datasets", "ot", "ripser")}}


def machine_requirements(manifest: Path = ROOT / "benchmarks" / "wheels" / "manifest.json") -> dict | None:
    """What the carried wheels require of the machine's own packages (``device_wheels.py``'s manifest), against
    the versions installed here: ``{"needs": {...}, "unmet": ["numpy 1.26.4: pandas needs >=2.0.2", ...]}``;
    ``None`` without a manifest (a machine with internet installs the project instead)."""
    if not manifest.exists():
        return None
    import importlib.metadata as md

    from packaging.specifiers import SpecifierSet

    needs = json.loads(manifest.read_text()).get("machine_requirements", {})
    unmet = []
    for name, specs in needs.items():
        try:
            version = md.version(name)
        except md.PackageNotFoundError:
            unmet.append(f"{name} is not installed: {', '.join(specs)} need it")
            continue
        for spec in specs:
            wanted, _, by = spec.partition(" ")
            if not SpecifierSet(wanted).contains(version, prereleases=True):
                unmet.append(f"{name} {version}: {by.strip('()')} needs {wanted}")
    return {"needs": needs, "unmet": unmet}


def planned_compute_s(size: dict, device: torch.device) -> dict:
    """Compute time the training part needs by the FLOP model (:mod:`anatomy_kit.lm.estimates`).

    Training: 3 × the forward FLOPs per token × the steps' tokens at the assumed bf16 rate
    (``fp32`` on the CPU toy); the map: one forward pass of the SmolLM2 shape per layer over its
    tokens, at the assumed fp32 evaluation rate. Start-up, compilation and the chapters are not in it.
    """
    from anatomy_kit.lm.estimates import ASSUMED_FLOPS, HUB_SHAPES, forward_flops, lm_shape

    cfg = model_config(size)
    steps = size["steps"] + size["compiled_steps"]
    tokens = steps * size["batch_size"] * cfg.max_seq_len
    kind = "train-bf16" if size["precision"] == "bf16" else "train-fp32"
    train_s = 3 * forward_flops(lm_shape(cfg), tokens, cfg.max_seq_len) / ASSUMED_FLOPS[kind]
    smol = HUB_SHAPES["HuggingFaceTB/SmolLM2-135M"]
    n_layers = size["map_layers"] or smol.n_layers
    map_tokens = size["map_blocks"] * size["map_block_size"]
    map_s = n_layers * forward_flops(smol, map_tokens, size["map_block_size"]) / ASSUMED_FLOPS["eval-fp32"]
    return {"train_s": round(train_s, 1), "map_s": round(map_s, 2), "rate_source": "lm.estimates.ASSUMED_FLOPS"}


def report(doc: dict) -> dict:
    """The JSON this script writes and prints: the environment and every check so far.

    The one place that assembles it: whatever else the report should carry (for example a time
    estimate of the ``hour`` preset from the measured rates) is added here.
    """
    return doc


def write(doc: dict, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_text(json.dumps(report(doc), indent=1, default=str) + "\n")
    tmp.replace(out)                       # a reader (or a timeout) never sees half a file


def chapter_list(arg: str | None, default: str) -> list[str]:
    value = default if arg is None else arg
    if value == "all":
        from test_full_path import FULL_PATH

        return sorted(FULL_PATH)
    return [c for c in value.split(",") if c]


class Once:
    """A value built on first use, inside the first check that needs it: its failure is that check's
    (and the next one's), recorded in the JSON, never the command's."""

    def __init__(self, build):
        self.build, self.value, self.error = build, None, None

    def __call__(self):
        if self.error is not None:
            raise RuntimeError(f"needs what an earlier check failed to build: {self.error}")
        if self.value is None:
            try:
                self.value = self.build()
            except Exception as err:                                 # noqa: BLE001 - recorded by check()
                self.error = f"{type(err).__name__}: {err}"
                raise
        return self.value


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--toy", action="store_true", help="toy sizes on the CPU (automatic without CUDA)")
    ap.add_argument("--part", choices=("chapters", "training", "all"), default="all",
                    help="which command: the chapters, or the training checks (default: both)")
    ap.add_argument("--chapters", default=None, help="comma-separated chapter ids, 'all', or '' for none "
                                                       "(default: all on a GPU, none with --toy)")
    ap.add_argument("--budget-s", type=float, default=450.0,
                    help="skip the checks (and chapters) that would start after this many seconds (default 450)")
    ap.add_argument("--chapter-timeout-s", type=float, default=None,
                    help="each chapter's own limit, after which its process is stopped and its entry says so "
                         f"(default {SIZES['gpu']['chapter_timeout_s']:.0f} s)")
    ap.add_argument("--device-guard", action="store_true",
                    help="on a CPU, at toy sizes: the device guard (tests/device_guard.py) stands in for the "
                         "accelerator; what a GPU run places on the device is labelled so and every mix-up CUDA "
                         "would raise is raised (benchmarks/rehearse.py uses it)")
    ap.add_argument("--out", type=Path, default=None, help="the JSON to write (rewritten after every check)")
    ap.add_argument("--chapter-spec", type=Path, default=None, help=argparse.SUPPRESS)   # one chapter's process
    args = ap.parse_args(argv)
    if args.chapter_spec is not None:
        return chapter_child(args.chapter_spec)
    if not args.budget_s > 0:
        ap.error(f"--budget-s={args.budget_s} must be positive")
    if args.chapter_timeout_s is not None and not args.chapter_timeout_s > 0:
        ap.error(f"--chapter-timeout-s={args.chapter_timeout_s} must be positive")
    if args.device_guard and torch.cuda.is_available():
        ap.error("--device-guard stands in for a GPU on a CPU; this machine has CUDA: run without it")
    toy = args.toy or args.device_guard or not torch.cuda.is_available()
    device = torch.device("cpu", 1) if args.device_guard else torch.device("cpu" if toy else "cuda")
    size = SIZES["toy" if toy else "gpu"]
    chapter_timeout = args.chapter_timeout_s or size["chapter_timeout_s"]
    gpus = torch.cuda.device_count() if not toy else 0
    nproc = 2 if toy else gpus
    names = PARTS["chapters"] + PARTS["training"] if args.part == "all" else PARTS[args.part]
    start, deadline = time.perf_counter(), time.monotonic() + args.budget_s
    doc = {**environment(torch.device(device.type)), "toy": toy, "device_guard": args.device_guard,
           "part": args.part, "sizes": size, "budget_s": args.budget_s, "chapter_timeout_s": chapter_timeout,
           "planned_compute_s": planned_compute_s(size, device), "checks": {}}
    slug = re.sub(r"[^A-Za-z0-9]+", "-", doc["device"]).strip("-").lower()
    out = (args.out or ROOT / "benchmarks" / "results" / (
        f"gpu_check-{doc['date'][:10]}-{slug}-{args.part}{'-toy' if toy else ''}.json")).resolve()
    doc["machine_requirements"] = machine_requirements()
    for line in (doc["machine_requirements"] or {}).get("unmet", []):
        say(f"the carried wheels need what this machine lacks: {line}")
    write(doc, out)                        # the header at once: even a command stopped before its first check leaves it
    lock = threading.Lock()

    def chapter_done(chapter: str, entry: dict) -> None:
        with lock:
            doc["checks"].setdefault("chapters", {"ok": None, "running": True, "chapters": {}})["chapters"][chapter] = entry
            doc["total_s"] = time.perf_counter() - start
            write(doc, out)

    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        folder = Once(lambda: smollm2_folder(scratch))
        tf = Once(lambda: token_file(scratch / "tokens", folder()))
        plan = {"chapters": lambda: chapter_paths(device, chapter_list(args.chapters, size["chapters"]),
                                                  size["chapter_jobs"], scratch, timeout_s=chapter_timeout,
                                                  deadline=deadline, guard=args.device_guard, on_entry=chapter_done),
                "map": lambda: check_map(device, size, folder()),
                "train": lambda: check_training(device, size, tf(), False),
                "train_compiled": lambda: check_training(device, size, tf(), True),
                "resume": lambda: check_resume(device, size, tf(), scratch),
                "card_heal": lambda: check_card_heal(device, size, folder(), scratch),
                "ddp": lambda: check_torchrun(torch.device(device.type), size, tf(), scratch, nproc, False),
                "fsdp": lambda: check_torchrun(torch.device(device.type), size, tf(), scratch, nproc, True),
                "split_card": lambda: check_split_card(device, folder(), gpus)}
        guard = _device_guard() if args.device_guard else contextlib.nullcontext()
        with guard as watching, _stopping() as stopped:
            for name in names:
                if time.perf_counter() - start > args.budget_s:
                    entry = check(name, skipped, f"the {args.budget_s:.0f} s budget was spent")
                else:
                    entry = check(name, plan[name])
                with lock:
                    doc["checks"][name] = entry
                    doc["total_s"] = time.perf_counter() - start
                    if watching is not None:
                        doc["device_guard_ops"] = watching.n_ops     # ops the guard checked in this process
                    write(doc, out)
    doc["ok"] = all(c.get("ok") is not False for c in doc["checks"].values()) and not stopped
    doc["total_s"] = time.perf_counter() - start
    if stopped:
        doc["stopped"] = (f"{stopped[0]} after {doc['total_s']:.0f} s: the checks and chapters without an entry "
                          "did not finish")
        say(doc["stopped"])
    write(doc, out)
    print(json.dumps(report(doc), indent=1, default=str), flush=True)
    say(f"total {doc['total_s']:.0f} s; {'all checks passed' if doc['ok'] else 'SOME CHECKS FAILED'}; wrote {out}")
    return 0 if doc["ok"] else 1


@contextlib.contextmanager
def _stopping():
    """SIGTERM and SIGINT stop the checks (chapter processes included) and leave the ``with`` block; the
    list it yields then names the signal. Outside the main thread (a test's worker) nothing is installed."""
    import signal

    why: list[str] = []
    if threading.current_thread() is not threading.main_thread():
        yield why
        return
    before = {sig: signal.signal(sig, _stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield why
    except Stopped as err:
        why.append(str(err))
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def _device_guard():
    """The CPU device guard for the checks in this process (``tests/device_guard.py``): the stand-in
    accelerator ``cpu:1`` is the device. ``ddp`` and ``fsdp`` run in ``torchrun``'s worker processes on the
    host (gloo), unguarded: their collectives are C++, and FSDP2 on a CPU keeps its buffers on the host."""
    import device_guard

    return device_guard.guarded()


if __name__ == "__main__":
    raise SystemExit(main())
