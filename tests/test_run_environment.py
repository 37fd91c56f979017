"""Run metadata: the kernel path, threads and versions that say whether two runs agree bit for bit."""

import json
import os
import subprocess
import sys

import pytest

from anatomy_kit.book import resolve_run
from anatomy_kit.environment import KERNEL_PATHS, kernel_path, other_kernel_path, run_environment


def test_other_kernel_path_steps_down_one_level():
    assert other_kernel_path("AVX512") == "avx2"
    assert other_kernel_path("AVX2") == "default"
    assert other_kernel_path("DEFAULT") is None
    assert other_kernel_path() in (None, *KERNEL_PATHS)


@pytest.mark.parametrize("path", ["default", "avx2"])
def test_the_recorded_kernel_path_follows_aten_cpu_capability(path):
    """What the metadata records is what PyTorch dispatches to, including a path CI forces."""
    if path != "default" and other_kernel_path() is None:
        pytest.skip("this CPU runs only the plain path")
    env = {**os.environ, "ATEN_CPU_CAPABILITY": path}
    out = subprocess.run([sys.executable, "-c", "from anatomy_kit.environment import kernel_path; print(kernel_path())"],
                         env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip().lower() == path


def test_metrics_record_the_environment(tmp_path):
    run = resolve_run("chx", scale="smoke", device="cpu", build_dir=tmp_path,
                      defaults={"smoke": {"model": "embedded", "corpus": "python-docs", "n": 1}})
    doc = json.loads(run.save_metrics({"x": 1.0}, []).read_text())
    env = doc["environment"]
    assert env["cpu_capability"] == kernel_path() == run_environment()["cpu_capability"]
    assert {"python", "torch", "transformers", "threads"} <= set(env) and env["threads"] >= 1
