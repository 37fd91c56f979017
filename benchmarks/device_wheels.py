"""The wheels a lent GPU machine lacks for ``benchmarks/gpu_check.py``, downloaded here (see ``device_wheels.sh``).

The lent machine (Python 3.12, manylinux x86-64, no internet) has PyTorch, transformers,
accelerate, safetensors, tokenizers, NumPy, SciPy, matplotlib and pytest: :data:`ON_THE_MACHINE`.
What the check imports beyond them (:data:`NEEDED`: running chapters through papermill, their
tables, the card's schema, persistent homology; :data:`OPTIONAL`: POT for Gromov–Wasserstein) is
resolved to the dependency closure *minus* what the machine's packages already bring, read from
this environment's installed metadata (pinned to the versions installed here), with the markers
evaluated for Python 3.12 on Linux. Each wheel is downloaded with ``--no-deps`` for that
platform; the total is printed and must stay under ``--limit-mib``. An optional package that would
cross the limit is left out and named (the check then skips what needs it and says so).

``datasets`` (with pyarrow, about 40 MiB) is never included: the check's chapters read the
Python docs instead of the hub corpora when ``datasets`` is missing.

    python benchmarks/device_wheels.py [--dest benchmarks/wheels] [--limit-mib 48]
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import subprocess
import sys
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
ON_THE_MACHINE = ("torch", "transformers", "accelerate", "safetensors", "tokenizers", "numpy", "scipy",
                  "matplotlib", "pytest")
NEEDED = ("papermill", "nbclient", "nbformat", "ipykernel", "jupytext", "pandas", "jsonschema", "ripser",
          "pyyaml", "psutil", "requests")
#: Small pure-Python dependencies of the needed ones that this environment gets through the machine's
#: packages (rich, dateutil) but an older transformers or matplotlib may not bring: always included.
ALWAYS = ("markdown-it-py", "mdurl", "python-dateutil", "six")
OPTIONAL = ("pot",)                          # about 31 MiB: in only if the total stays under the limit
NEVER = {"cython"}                           # ripser's build dependency, not needed to run it
MARKERS = {"python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux",
           "platform_system": "Linux", "platform_machine": "x86_64", "implementation_name": "cpython",
           "platform_python_implementation": "CPython", "os_name": "posix", "extra": ""}
PLATFORM = ["--python-version", "3.12", "--implementation", "cp", "--abi", "cp312", "--abi", "abi3",
            "--abi", "none", "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_17_x86_64",
            "--platform", "manylinux_2_28_x86_64", "--platform", "any"]


def closure(roots) -> dict[str, str | None]:
    """``{name: installed version or None}`` of ``roots`` and everything they require (Python 3.12 markers)."""
    seen: dict[str, str | None] = {}
    todo = list(roots)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            seen[name] = None
            continue
        seen[name] = dist.version
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate(MARKERS):
                todo.append(req.name)
    return seen


def missing(roots) -> dict[str, str]:
    """The pinned packages of ``roots``' closure that the machine's packages do not bring."""
    there = set(closure(ON_THE_MACHINE)) - set(ALWAYS)
    return {k: v for k, v in sorted(closure(roots).items()) if k not in there and k not in NEVER and v}


def download(pins: dict[str, str], dest: Path) -> list[Path]:
    before = set(dest.glob("*.whl"))
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", *PLATFORM,
           "--dest", str(dest), "--quiet", "--disable-pip-version-check", *[f"{k}=={v}" for k, v in pins.items()]]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"pip download failed:\n{proc.stderr[-3000:]}")
    return sorted(set(dest.glob("*.whl")) - before)


def mib(paths) -> float:
    return sum(p.stat().st_size for p in paths) / 2**20


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dest", type=Path, default=ROOT / "benchmarks" / "wheels")
    ap.add_argument("--limit-mib", type=float, default=48.0)
    args = ap.parse_args(argv)
    args.dest.mkdir(parents=True, exist_ok=True)
    for old in args.dest.glob("*.whl"):
        old.unlink()
    needed = missing(NEEDED + ALWAYS)
    wheels = download(needed, args.dest)
    left_out = []
    for name in OPTIONAL:
        extra = {k: v for k, v in missing(NEEDED + ALWAYS + (name,)).items() if k not in needed}
        got = download(extra, args.dest)
        if mib(wheels + got) > args.limit_mib:
            left_out.append(f"{name} ({mib(got):.1f} MiB would make {mib(wheels + got):.1f} MiB)")
            for p in got:
                p.unlink()
        else:
            wheels += got
    manifest = {"wheels": sorted(p.name for p in wheels), "total_mib": round(mib(wheels), 2),
                "limit_mib": args.limit_mib, "left_out": left_out, "python": "3.12", "platform": "manylinux x86-64"}
    (args.dest / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    for p in sorted(wheels):
        print(f"{p.stat().st_size / 2**20:7.2f} MiB  {p.name}")
    print(f"total {manifest['total_mib']:.2f} MiB in {len(wheels)} wheels (limit {args.limit_mib:g} MiB)"
          + (f"; left out: {', '.join(left_out)}" if left_out else ""))
    if manifest["total_mib"] > args.limit_mib:
        print("the needed wheels alone exceed the limit", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
