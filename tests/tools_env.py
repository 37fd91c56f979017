"""The real clients of the card's exports, mergekit and lm-eval, in a virtual environment of their own.

The card writes a mergekit passthrough config and an lm-evaluation-harness task; ``tests/test_card_tools.py``
runs both tools on them as a user would, from the command line. Their dependencies (lm-eval's metrics
packages, mergekit's) are not the kit's, so they live in their own environment, pinned by
``requirements/tools.txt`` (every package, resolved under the project's lock so that what both use,
transformers included, is the same version; torch is the local CPU wheel ``2.13.0+cpu``, a version no
index but the local one holds, so a CUDA build can never be pulled in).

The environment is created once, under the user cache, in a folder named by a hash of the pins and
the Python version (``<cache>/anatomy_kit/tools-venv-<hash>``), and reused while the pins stay the
same; a half-made one (no ``.complete`` stamp) is removed and made again. Before installing, pip's
dry run is read: if it would install any torch but the CPU build, nothing is installed.

    python tests/tools_env.py        # create or reuse it; prints its bin folder and the time taken

``make test`` runs this first (target ``tools-env``), so the CI log shows what it cost.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PINS = ROOT / "requirements" / "tools.txt"
TOOLS = ("mergekit-yaml", "lm_eval")


def cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "anatomy_kit"


def venv_path(pins: Path = PINS) -> Path:
    """``<cache>/anatomy_kit/tools-venv-<12 hex of sha256(pins, Python version)>``."""
    h = hashlib.sha256(pins.read_bytes() + f"python{sys.version_info[0]}.{sys.version_info[1]}".encode())
    return cache_root() / f"tools-venv-{h.hexdigest()[:12]}"


def _run(args: list[str], **kwargs) -> subprocess.CompletedProcess:
    proc = subprocess.run(args, capture_output=True, text=True, **kwargs)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(args[:6])} … failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n"
                           f"{proc.stderr[-2000:]}")
    return proc


def planned_torch(python: Path, pins: Path = PINS) -> str | None:
    """The torch version pip would install from ``pins`` (its dry-run report), or ``None``."""
    report = json.loads(_run([str(python), "-m", "pip", "install", "--dry-run", "--quiet", "--no-deps",
                              "--report", "-", "-r", str(pins)]).stdout)
    return next((item["metadata"]["version"] for item in report["install"]
                 if item["metadata"]["name"].lower() == "torch"), None)


def ensure(pins: Path = PINS, log=print) -> Path:
    """The tools' ``bin`` folder: the cached environment, created first if it is missing (module docstring)."""
    folder = venv_path(pins)
    stamp, bin_dir = folder / ".complete", folder / "bin"
    if stamp.is_file() and all((bin_dir / t).exists() for t in TOOLS):
        return bin_dir
    shutil.rmtree(folder, ignore_errors=True)
    start = time.perf_counter()
    log(f"creating the tools' environment {folder} from {pins.name} (once; later runs reuse it)")
    _run([sys.executable, "-m", "venv", str(folder)])
    python = bin_dir / "python"
    try:
        torch_version = planned_torch(python, pins)
        if torch_version is None or not torch_version.endswith("+cpu"):
            raise RuntimeError(f"pip would install torch {torch_version!r} from {pins}, not the local CPU build "
                               "2.13.0+cpu: refusing to download a CUDA build")
        _run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "-r", str(pins)])
        _run([str(python), "-m", "pip", "check"])
        version = _run([str(python), "-c", "import torch; print(torch.__version__)"]).stdout.strip()
        if not version.endswith("+cpu"):
            raise RuntimeError(f"the tools' environment got torch {version}, not the CPU build")
    except Exception:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    stamp.write_text(pins.read_text())
    log(f"tools' environment ready in {time.perf_counter() - start:.0f} s")
    return bin_dir


def main() -> None:
    start = time.perf_counter()
    bin_dir = ensure()
    print(f"mergekit and lm-eval: {bin_dir} ({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
