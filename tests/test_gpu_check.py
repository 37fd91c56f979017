"""benchmarks/gpu_check.py runs on a CPU at toy sizes (the GPU sizes need a GPU) and writes its JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import ROOT


def test_gpu_check_runs_at_toy_sizes_and_writes_its_json(tmp_path):
    out = tmp_path / "check.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--toy", "--out", str(out)],
                          capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    for key in ("date", "device", "torch", "cuda", "python", "toy", "map", "train", "torchrun", "total_s"):
        assert key in doc, key
    assert doc["toy"] is True and doc["device"] == "cpu" and doc["date"][:2] == "20"
    assert doc["map"]["layers"] == 4 and doc["map"]["tokens"] == 64 and doc["map"]["baseline_ppl"] > 1
    t = doc["train"]
    assert t["completed"] and t["steps_done"] == 8 and t["tokens_per_s"] > 0 and t["flops_per_s"] > 0
    assert t["mfu"] is None                                   # a CPU has no peak in the table
    assert doc["torchrun"]["ok"] and doc["torchrun"]["world_size"] == 1
