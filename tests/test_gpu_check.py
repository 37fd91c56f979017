"""benchmarks/gpu_check.py runs on a CPU at toy sizes (the GPU sizes need a GPU), prints one JSON and writes it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT

CHECKS = {"chapters", "map", "train", "train_compiled", "resume", "ddp", "fsdp", "split_card"}


@pytest.fixture(scope="module")
def gpu_check():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import gpu_check as module
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return module


@pytest.mark.whole_run
def test_gpu_check_runs_at_toy_sizes_and_prints_one_json(tmp_path):
    out = tmp_path / "check.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--toy", "--out", str(out)],
                          capture_output=True, text=True, env=env, timeout=900, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads(proc.stdout)                      # stdout is ONE JSON, nothing else
    assert doc == json.loads(out.read_text())
    for name in CHECKS:                                # one line per check on stderr
        assert sum(line.startswith(f"{name}: ") for line in proc.stderr.splitlines()) == 1, name
    for key in ("date", "device", "torch", "cuda", "python", "gpus", "native_bf16", "toy", "checks", "ok", "total_s",
                "planned_compute_s", "modules"):
        assert key in doc, key
    assert doc["toy"] is True and doc["device"] == "cpu" and doc["date"][:2] == "20" and doc["ok"] is True
    checks = doc["checks"]
    assert set(checks) == CHECKS and all(c["ok"] in (True, None) for c in checks.values())
    assert checks["chapters"]["ok"] is None and checks["train_compiled"]["ok"] is None   # toy: neither
    assert checks["split_card"]["skipped"].startswith("0 GPU")
    assert checks["map"]["layers"] == 4 and checks["map"]["tokens"] == 64 and checks["map"]["baseline_ppl"] > 1
    t = checks["train"]
    assert t["ok"] and t["completed"] and t["steps_done"] == 8 and t["untimed_steps"] == 2
    assert t["tokens_per_s"] > 0 and t["flops_per_s"] > 0 and t["mfu"] is None             # a CPU has no peak
    assert t["estimated_memory_gib"] > 0 and "peak_memory_gib" not in t                    # measured on CUDA only
    assert checks["resume"]["ok"] and checks["resume"]["resumed_on"] == "cpu"
    for name in ("ddp", "fsdp"):                       # WORLD_SIZE = 2: a process group, really distributed
        assert checks[name]["ok"] and checks[name]["world_size"] == 2 and checks[name]["backend"] == "gloo"
        assert checks[name]["checkpoint"] is True


def test_a_failing_check_is_recorded_and_the_others_still_run(gpu_check):
    failed = gpu_check.check("broken", lambda: 1 / 0)
    assert failed["ok"] is False and failed["error"].startswith("ZeroDivisionError") and "traceback" in failed
    assert gpu_check.check("nothing", gpu_check.chapter_paths, None, [], 1, None)["ok"] is None
    assert gpu_check.check_split_card(None, None, 1)["skipped"].startswith("1 GPU")


def test_the_json_is_written_check_by_check_and_a_spent_budget_skips_the_rest(gpu_check, tmp_path):
    out = tmp_path / "check.json"
    assert gpu_check.main(["--toy", "--part", "training", "--budget-s", "0.001", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert list(doc["checks"]) == list(gpu_check.PARTS["training"]) and doc["part"] == "training"
    assert all("budget was spent" in c["skipped"] for c in doc["checks"].values())


def test_the_report_is_the_one_place_that_assembles_the_json(gpu_check, monkeypatch, tmp_path):
    monkeypatch.setattr(gpu_check, "report", lambda doc: {**doc, "added": 1})
    out = tmp_path / "check.json"
    gpu_check.main(["--toy", "--part", "chapters", "--out", str(out)])
    assert json.loads(out.read_text())["added"] == 1


def test_the_chapter_check_runs_each_named_chapter_on_the_device(gpu_check, monkeypatch, tmp_path):
    """The glue around the runner (stand-ins, full-path sizes, device, failures per chapter), without the chapters."""
    import torch

    import standins
    from anatomy_kit.book import runner
    from test_full_path import FULL_PATH

    calls = []

    def execute(entry, *, scale, device, params, environ, **kw):
        calls.append((entry["id"], scale, device, params, environ))
        if entry["id"] == "ch02_anatomy_weights":
            raise runner.ChapterFailed("cell 7 raised RuntimeError: expected all tensors on one device")
        return 1.0

    monkeypatch.setattr(standins, "build", lambda root, corpora: {"HF_HUB_OFFLINE": "1"})
    monkeypatch.setattr(runner, "execute_chapter", execute)
    got = gpu_check.chapter_paths(torch.device("cuda"), ["ch01_ablation_map", "ch02_anatomy_weights"], 2, tmp_path)
    assert sorted(c[:3] for c in calls) == [("ch01_ablation_map", "full", "cuda"), ("ch02_anatomy_weights", "full", "cuda")]
    assert all(c[3] == FULL_PATH[c[0]] and c[4] == {"HF_HUB_OFFLINE": "1"} for c in calls)
    assert got["ok"] is False and got["chapters"]["ch01_ablation_map"]["ok"] is True
    assert "expected all tensors on one device" in got["chapters"]["ch02_anatomy_weights"]["error"]
    assert gpu_check.chapter_list("all", "") == sorted(FULL_PATH)
