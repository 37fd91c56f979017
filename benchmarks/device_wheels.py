"""The wheels a lent GPU machine lacks for ``benchmarks/gpu_check.py``, downloaded here (see ``device_wheels.sh``).

The lent machine (Python 3.12, manylinux x86-64, no internet) has PyTorch, transformers,
accelerate, safetensors, tokenizers, NumPy, SciPy, matplotlib and pytest: :data:`ON_THE_MACHINE`.
What the check imports beyond them (:data:`NEEDED`: running chapters through papermill, their
tables, the card's schema, persistent homology; :data:`OPTIONAL`: POT for Gromov–Wasserstein) is
resolved to the dependency closure *minus* what the machine's packages already bring, read from
this environment's installed metadata (pinned to the versions installed here), with the markers
evaluated for the target Python on Linux. :data:`ALWAYS` are carried even though this environment's
machine packages bring them, because older releases of those packages do not (papermill's ``click``
came through huggingface-hub's CLI here) or because the check would otherwise only assume them.
Each wheel is downloaded with ``--no-deps`` for that platform; the total is printed and must stay
under ``--limit-mib``. An optional package that would cross the limit is left out and named (the
check then skips what needs it and says so). A requirement that is not installed here, so cannot be
pinned, is an error naming it, unless :data:`NOT_IMPORTED` says why the check never needs it.

``manifest.json`` beside the wheels names them, their total, what was left out, and what the carried
wheels require of the machine's own packages (pandas: NumPy ≥ 2.0.2): ``gpu_check.py`` compares
that with the machine and says what does not hold. A folder whose manifest already lists the same
pins for the same Python is kept as it is (nothing is downloaded again; ``--force`` does).

``datasets`` (with pyarrow, about 40 MiB) is never included: the kit reads the offline Python-docs
corpus without it, and the check's chapters read that corpus when ``datasets`` is missing.

    python benchmarks/device_wheels.py [--dest benchmarks/wheels] [--limit-mib 48] [--python-version 3.12]
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import re
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
#: Carried although this environment's machine packages bring them: small, and older releases of those
#: packages do not (click: papermill imports it, here it came with huggingface-hub's typer CLI; rich's
#: markdown-it-py; pygments: IPython's, here through pytest >= 8.4; tzdata: python-dateutil 4's, here
#: through pydantic), or the check would only assume them (pyyaml, psutil, tqdm and idna come with
#: transformers, accelerate and requests in every release).
ALWAYS = ("markdown-it-py", "mdurl", "python-dateutil", "tzdata", "click", "pygments", "pyyaml", "psutil", "tqdm",
          "idna")
OPTIONAL = ("pot",)                          # about 31 MiB: in only if the total stays under the limit
NEVER = {"cython"}                           # ripser's build dependency, not needed to run it
#: Requirements declared for the target Python that the check never imports (so none is pinned for them).
NOT_IMPORTED = {"aiohttp": "papermill declares it for Python 3.12 only and never imports it"}
FORMAT = "anatomy_kit.device_wheels/2"


def markers(python: str) -> dict[str, str]:
    """Environment markers of CPython ``python`` (``"3.12"``) on Linux x86-64."""
    return {"python_version": python, "python_full_version": f"{python}.0", "sys_platform": "linux",
            "platform_system": "Linux", "platform_machine": "x86_64", "implementation_name": "cpython",
            "platform_python_implementation": "CPython", "os_name": "posix", "extra": ""}


def platform_args(python: str) -> list[str]:
    abi = "cp" + python.replace(".", "")
    return ["--python-version", python, "--implementation", "cp", "--abi", abi, "--abi", "abi3", "--abi", "none",
            "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_17_x86_64",
            "--platform", "manylinux_2_28_x86_64", "--platform", "any"]


def closure(roots, python: str = "3.12") -> dict[str, str | None]:
    """``{name: installed version or None}`` of ``roots`` and everything they require (``python``'s markers)."""
    env = markers(python)
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
            if req.marker is None or req.marker.evaluate(env):
                todo.append(req.name)
    return seen


def machine_set(python: str = "3.12") -> set[str]:
    """What the lent machine is taken to have: :data:`ON_THE_MACHINE` and what they require here, less :data:`ALWAYS`."""
    return set(closure(ON_THE_MACHINE, python)) - {canonicalize_name(n) for n in ALWAYS}


def missing(roots, python: str = "3.12") -> dict[str, str]:
    """The pinned packages of ``roots``' closure that the machine does not bring (:func:`machine_set`).

    A package of the closure that is not installed here cannot be pinned: an error naming it, unless
    :data:`NOT_IMPORTED` explains it away."""
    there = machine_set(python)
    wanted = {k: v for k, v in sorted(closure(roots, python).items()) if k not in there and k not in NEVER}
    unpinned = sorted(k for k, v in wanted.items() if v is None and k not in NOT_IMPORTED)
    if unpinned:
        raise SystemExit(f"{', '.join(unpinned)}: required (for Python {python}) by what the check needs but not "
                         f"installed in this environment, so no version can be pinned; install it here (or, if the "
                         "check never imports it, add it to NOT_IMPORTED with the reason)")
    return {k: v for k, v in wanted.items() if v}


def machine_requirements(pins: dict[str, str], python: str = "3.12") -> dict[str, list[str]]:
    """What the carried packages require of packages they do not carry (the machine's): ``{name: [spec (by)]}``."""
    env = markers(python)
    out: dict[str, list[str]] = {}
    for name in sorted(pins):
        for text in md.distribution(name).requires or []:
            req = Requirement(text)
            target = canonicalize_name(req.name)
            if ((req.marker is None or req.marker.evaluate(env)) and target not in pins and str(req.specifier)
                    and target not in NOT_IMPORTED):
                out.setdefault(target, []).append(f"{req.specifier} ({name})")
    return out


def download(pins: dict[str, str], dest: Path, python: str) -> list[Path]:
    before = set(dest.glob("*.whl"))
    if not pins:
        return []
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", *platform_args(python),
           "--dest", str(dest), "--quiet", "--disable-pip-version-check", *[f"{k}=={v}" for k, v in pins.items()]]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"pip download failed:\n{proc.stderr[-3000:]}")
    return sorted(set(dest.glob("*.whl")) - before)


def mib(paths) -> float:
    return sum(p.stat().st_size for p in paths) / 2**20


def _up_to_date(dest: Path, pins: dict, python: str, limit: float) -> dict | None:
    path = dest / "manifest.json"
    if not path.exists():
        return None
    old = json.loads(path.read_text())
    same = (old.get("format") == FORMAT and old.get("python") == python and old.get("limit_mib") == limit
            and old.get("requested") == pins)
    if same and all((dest / w).exists() for w in old["wheels"]):
        return old
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dest", type=Path, default=ROOT / "benchmarks" / "wheels")
    ap.add_argument("--limit-mib", type=float, default=48.0)
    ap.add_argument("--python-version", default="3.12", help="the target CPython, X.Y (default 3.12: the lent machine's)")
    ap.add_argument("--force", action="store_true", help="download again even if the folder is up to date")
    args = ap.parse_args(argv)
    if not re.fullmatch(r"3\.\d{1,2}", args.python_version):
        ap.error(f"--python-version {args.python_version!r}: give a CPython version like 3.12")
    if not args.limit_mib > 0:
        ap.error(f"--limit-mib {args.limit_mib}: must be positive")
    python = args.python_version
    args.dest.mkdir(parents=True, exist_ok=True)
    needed = missing(NEEDED + ALWAYS, python)
    optional = {name: {k: v for k, v in missing(NEEDED + ALWAYS + (name,), python).items() if k not in needed}
                for name in OPTIONAL}
    requested = {"needed": needed, "optional": optional}
    manifest = None if args.force else _up_to_date(args.dest, requested, python, args.limit_mib)
    if manifest is None:
        for old in args.dest.glob("*.whl"):
            old.unlink()
        wheels = download(needed, args.dest, python)
        left_out = []
        for name, extra in optional.items():
            got = download(extra, args.dest, python)
            if mib(wheels + got) > args.limit_mib:
                left_out.append(f"{name} ({mib(got):.1f} MiB would make {mib(wheels + got):.1f} MiB)")
                for p in got:
                    p.unlink()
            else:
                wheels += got
        carried = {**needed, **{k: v for n, e in optional.items() if not any(n in x for x in left_out)
                                for k, v in e.items()}}
        manifest = {"format": FORMAT, "wheels": sorted(p.name for p in wheels), "total_mib": round(mib(wheels), 2),
                    "limit_mib": args.limit_mib, "left_out": left_out, "python": python,
                    "platform": "manylinux x86-64", "requested": requested,
                    "machine_requirements": machine_requirements(carried, python)}
        (args.dest / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    else:
        print(f"{args.dest} is up to date (same pins for Python {python}); nothing downloaded")
    for name in manifest["wheels"]:
        print(f"{(args.dest / name).stat().st_size / 2**20:7.2f} MiB  {name}")
    print(f"total {manifest['total_mib']:.2f} MiB in {len(manifest['wheels'])} wheels (limit {args.limit_mib:g} MiB)"
          + (f"; left out: {', '.join(manifest['left_out'])}" if manifest["left_out"] else ""))
    needs = "; ".join(f"{k} {', '.join(v)}" for k, v in manifest["machine_requirements"].items())
    print(f"the carried wheels need of the machine's packages: {needs or 'nothing'}")
    if manifest["total_mib"] > args.limit_mib:
        print("the needed wheels alone exceed the limit", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
