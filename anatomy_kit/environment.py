"""Where a number was computed: the facts that decide whether two runs agree bit for bit.

Two runs on the same CPU kernel path (PyTorch's SIMD dispatch: ``DEFAULT``, ``AVX2``, ``AVX512``, …),
with the same thread count and the same torch/transformers versions, give identical numbers on the
CPU. Another kernel path adds float32 sums in another order, which changes trained losses in their
last digits (the book's page on running says what that means for verdicts near their thresholds).
Every chapter's metrics file and the report record :func:`run_environment`; CI runs the unit tests
under a second path (:func:`other_kernel_path`) so a test that holds on one path only fails there.

Introduced with the book's machinery (every chapter records it).
"""

from __future__ import annotations

import platform

__all__ = ["run_environment", "kernel_path", "other_kernel_path", "KERNEL_PATHS"]

#: The values ``ATEN_CPU_CAPABILITY`` accepts on x86-64 (PyTorch's names, lower case).
KERNEL_PATHS = ("default", "avx2", "avx512")


def kernel_path() -> str:
    """The CPU kernel path PyTorch dispatches to in this process (``torch.backends.cpu.get_cpu_capability()``)."""
    import torch

    return str(torch.backends.cpu.get_cpu_capability())


def other_kernel_path(current: str | None = None) -> str | None:
    """A second path this CPU can run, for CI: ``avx2`` on an AVX-512 machine, ``default`` on an AVX2
    one; ``None`` where only the plain path exists (or on a CPU whose paths are not x86-64's)."""
    current = (current or kernel_path()).lower()
    return {"avx512": "avx2", "avx2": "default"}.get(current)


def run_environment() -> dict:
    """JSON-ready facts about this process: Python, torch, transformers, kernel path, threads, CUDA."""
    import torch
    import transformers

    env = {"python": platform.python_version(), "torch": torch.__version__,
           "transformers": transformers.__version__, "cpu_capability": kernel_path(),
           "threads": torch.get_num_threads(), "machine": platform.machine(),
           "cuda": torch.cuda.is_available()}
    if env["cuda"]:
        env["cuda_device"] = torch.cuda.get_device_name()
    return env
