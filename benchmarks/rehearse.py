"""A rehearsal of the lent GPU machine on this CPU: its software, its carried tree, its two commands.

The README's section "Checking a GPU first" says what a lent machine offers (Python with PyTorch,
transformers, accelerate, safetensors, tokenizers, NumPy, SciPy, matplotlib and pytest; no
internet; the working tree and at most 64 MiB carried; a limit per command) and what to run there.
This script recreates that here and runs it, so that anything the lent machine would fail on that a
CPU can show fails here first:

1. **The wheels.** ``device_wheels.py`` for Python 3.12 into ``benchmarks/wheels/`` (what is
   carried; kept when its manifest lists the same pins) and, when this interpreter is not 3.12, the
   same pins for this interpreter into ``$ANATOMY_KIT_CACHE/device-wheels-cpXY`` (what can be
   installed here), from PyPI through ``pip download``.
2. **The carried tree**: the files a copy of the working tree holds (``git ls-files --cached
   --others --exclude-standard``) plus ``benchmarks/wheels/``, measured against ``--limit-mib``
   (64), then copied into ``<work>/tree`` (nothing else of this checkout is visible there).
3. **The machine**: a virtual environment ``<work>/machine`` holding only the preinstalled
   distributions (:func:`device_wheels.machine_set`: the nine and what they require here, less
   what the wheels must bring) and pip, linked from this environment. Every other distribution
   (``datasets``, POT, the GGUF reader, the kit's own install, ...) cannot be imported there, in
   subprocesses and notebook kernels too. ``HOME`` is a fresh folder (no user site, no caches).
4. **The commands**, the README's code block as written (:func:`readme_commands`: the ``pip install
   --no-index --no-deps --target`` line, the ``export`` line, the two ``timeout N python
   benchmarks/gpu_check.py`` lines, each under its own ``timeout``), run by bash in the tree with
   the machine's ``python`` first on ``PATH``; the two ``gpu_check.py`` lines get ``--device-guard``
   (the CPU device guard stands in for the accelerator: :mod:`tests.device_guard`) and
   ``--chapters`` appended.
5. **The verdict** (:func:`causes`): each command must exit 0 within its ``timeout`` and leave its
   JSON with one entry per check of its part and one per chapter asked for; nothing may fail (a
   missing import, a device mix-up, a chapter past its time or that wrote no entry, a requirement the
   carried wheels place on the machine's packages that they do not meet). Each cause is named;
   ``<work>/rehearsal.json`` records what ran, the sizes and the times.

    python benchmarks/rehearse.py                                    # make rehearse: every chapter
    python benchmarks/rehearse.py --chapters ch01_ablation_map       # CI (tests/test_rehearsal.py)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import device_wheels  # noqa: E402

LIMIT_MIB = 64.0
WHEELS = Path("benchmarks/wheels")
#: ``--chapters all``: every chapter with full-path sizes (those needing POT are skipped there by name).
ALL = "all"


def say(message: str) -> None:
    print(f"[rehearse] {message}", file=sys.stderr, flush=True)


# --- 4. the README's commands --------------------------------------------------------------------------------

def readme_commands(readme: Path = ROOT / "README.md") -> list[str]:
    """The code block of the README that installs the carried wheels and runs the two ``gpu_check.py`` commands."""
    blocks = re.findall(r"```bash\n(.*?)```", readme.read_text(encoding="utf-8"), flags=re.S)
    found = [b for b in blocks if "--no-index" in b and "gpu_check.py" in b]
    if len(found) != 1:
        raise SystemExit(f"README.md: expected one bash block with the --no-index install and gpu_check.py, "
                         f"found {len(found)}")
    lines = [line.strip() for line in found[0].splitlines() if line.strip() and not line.strip().startswith("#")]
    parts = [line for line in lines if "gpu_check.py" in line]
    install = lines[0].split()
    if not (lines[0].startswith("python -m pip install ") and {"--no-index", "--no-deps", "--target"} <= set(install)
            and any(line.startswith("export PYTHONPATH=") for line in lines)
            and [(re.search(r"--part (\w+)", p) or [None, None])[1] for p in parts] == ["chapters", "training"]
            and all(re.match(r"timeout \d+ python benchmarks/gpu_check\.py ", p) for p in parts)):
        raise SystemExit(f"README.md's GPU commands are not the install, export and two timed gpu_check.py lines "
                         f"the rehearsal runs:\n" + "\n".join(lines))
    return lines


def timed_part(line: str) -> tuple[str, int, Path]:
    """``(part, timeout seconds, --out path)`` of a ``timeout N python benchmarks/gpu_check.py`` line."""
    words = shlex.split(line)
    return words[words.index("--part") + 1], int(words[1]), Path(words[words.index("--out") + 1])


# --- 5. the verdict ------------------------------------------------------------------------------------------

def _kind(error: str) -> str:
    if "DeviceMixError" in error:
        return "a device mix-up"
    if "ModuleNotFoundError" in error or "ImportError" in error:
        return "a missing import"
    return "a failure"


def _tail(text: str, n: int = 6) -> str:
    """The last ``n`` lines of a command's stderr that say something (progress bars left out)."""
    lines = [line.strip() for line in re.split(r"[\r\n]+", text)]
    said = [line for line in lines if line and "it/s]" not in line and "s/it]" not in line and "%|" not in line]
    return " | ".join(said[-n:])


def causes(part: str, rc: int | None, limit_s: int, doc: dict | None, chapters: list[str],
           checks: tuple[str, ...], stderr_tail: str = "") -> list[str]:
    """Why one command's run would fail on the lent machine (empty: it would not).

    ``rc``: its exit status (124: ``timeout`` stopped it); ``doc``: the JSON it left (``None``: none);
    ``chapters``: the chapters it was asked to run; ``checks``: the checks of its part.
    """
    out = []
    if rc == 124:
        out.append(f"{part}: the command ran past its `timeout {limit_s}` and was stopped")
    if doc is None:
        return out + [f"{part}: the command wrote no JSON (exit status {rc}): {_tail(stderr_tail)}"]
    for name in checks:
        entry = doc.get("checks", {}).get(name)
        if entry is None:
            out.append(f"{part}: check {name!r} wrote no entry")
        elif entry.get("ok") is False and (name != "chapters" or "error" in entry):   # chapters: raised before them
            out.append(f"{part}: {_kind(str(entry.get('error')))} in check {name!r}: {entry.get('error')}")
    if "chapters" in checks and chapters:
        got = (doc.get("checks", {}).get("chapters") or {}).get("chapters") or {}
        for chapter in chapters:
            entry = got.get(chapter)
            if entry is None:
                out.append(f"{part}: chapter {chapter} wrote no entry")
            elif entry.get("timed_out"):
                out.append(f"{part}: chapter {chapter} ran past its time ({entry.get('limit_s')} s) and was stopped")
            elif entry.get("ok") is False:
                out.append(f"{part}: {_kind(str(entry.get('error')))} in chapter {chapter}: {entry.get('error')}")
            elif entry.get("ok") is None and "budget" in str(entry.get("skipped")):
                out.append(f"{part}: chapter {chapter} never started: {entry.get('skipped')}")
            elif entry.get("ok") is True and entry.get("device_guard") is not True:
                out.append(f"{part}: chapter {chapter} ran without the device guard in its kernel")
    if doc.get("device_guard") is not True:
        out.append(f"{part}: the command ran without --device-guard")
    unmet = (doc.get("machine_requirements") or {}).get("unmet") or []
    if unmet:
        out.append(f"{part}: the carried wheels need of the machine's packages what they are not: {'; '.join(unmet)}")
    if rc not in (0, 124) and not out:
        out.append(f"{part}: the command exited with status {rc}: {_tail(stderr_tail)}")
    return out


def size_causes(sizes: dict, limit_mib: float) -> list[str]:
    """The carried tree over what a lent machine takes, named (empty when it fits)."""
    if sizes["carried_mib"] <= limit_mib:
        return []
    return [f"the carried tree is {sizes['carried_mib']:.1f} MiB (working tree {sizes['working_tree_mib']:.1f} + "
            f"wheels {sizes['wheels_mib']:.1f}), over the {limit_mib:g} MiB a lent machine takes"]


# --- 1-3. wheels, tree, machine ------------------------------------------------------------------------------

def wheels(python: str, dest: Path) -> dict:
    """``device_wheels.py`` for ``python`` into ``dest`` (kept when up to date); its manifest."""
    cmd = [sys.executable, str(ROOT / "benchmarks" / "device_wheels.py"), "--dest", str(dest),
           "--python-version", python]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"device_wheels.py for Python {python} failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    say(proc.stdout.strip().splitlines()[-2])
    return json.loads((dest / "manifest.json").read_text())


def working_tree_files(root: Path = ROOT) -> list[Path]:
    """What a copy of the working tree holds: tracked files and untracked ones git does not ignore."""
    proc = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                          capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"the rehearsal copies the working tree as git lists it; git ls-files failed: {proc.stderr}")
    return sorted({Path(p) for p in proc.stdout.split("\0") if p and (root / p).is_file()})


def mib(paths, root: Path = ROOT) -> float:
    return sum((root / p).stat().st_size for p in paths) / 2**20


def copy_tree(files: list[Path], wheel_dir: Path, wheel_names: list[str], dest: Path) -> None:
    shutil.rmtree(dest, ignore_errors=True)
    for rel in files:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dest / rel)
    (dest / WHEELS).mkdir(parents=True, exist_ok=True)
    for name in [*wheel_names, "manifest.json"]:
        shutil.copy2(wheel_dir / name, dest / WHEELS / name)


def _top_levels(dist) -> set[str]:
    """The entries of site-packages a distribution installed (packages, modules, its .dist-info)."""
    return {f.parts[0] for f in dist.files or [] if f.parts[0] not in ("..", "__pycache__")}


def build_machine(dest: Path, python: str) -> list[str]:
    """A virtual environment whose site-packages links only the machine's distributions (and pip) from this one."""
    import importlib.metadata as md

    from packaging.utils import canonicalize_name

    allowed = {n for n in device_wheels.machine_set(python) | {"pip"} if _installed(n)}
    shutil.rmtree(dest, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(dest)], check=True)
    site = next((dest / "lib").glob("python*/site-packages"))
    owners: dict[tuple[Path, str], set[str]] = {}
    for dist in md.distributions():
        name = canonicalize_name(dist.metadata["Name"] or "")
        base = Path(dist.locate_file(""))
        for entry in _top_levels(dist):
            owners.setdefault((base, entry), set()).add(name)
    linked = set()
    for (base, entry), names in sorted(owners.items()):
        mine = names & allowed
        if not mine or not (base / entry).exists():
            continue
        if names - allowed and (base / entry).is_dir():
            raise SystemExit(f"{base / entry} holds files of {sorted(mine)} and of {sorted(names - allowed)}: "
                             "the machine cannot link it whole")
        if not (site / entry).exists():
            (site / entry).symlink_to(base / entry)
        linked |= mine
    absent = sorted(allowed - linked)
    if absent:
        raise SystemExit(f"the machine's distributions {absent} have no files to link")
    return sorted(linked)


def _installed(name: str) -> bool:
    import importlib.metadata as md

    try:
        md.distribution(name)
        return True
    except md.PackageNotFoundError:
        return False


# --- the run -------------------------------------------------------------------------------------------------

def run_commands(lines: list[str], tree: Path, machine: Path, home: Path, extra: str, log) -> list[dict]:
    """The README's lines in ``tree``: the install, the export (evaluated by bash), each timed gpu_check line."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env.update(PATH=f"{machine / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}", HOME=str(home),
               PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1", PIP_CONFIG_FILE=os.devnull,
               XDG_CACHE_HOME=str(home / ".cache"), JUPYTER_PLATFORM_DIRS="1")
    env.pop("ANATOMY_KIT_CACHE", None)
    results = []
    for line in lines:
        if line.startswith("export "):
            proc = subprocess.run(["bash", "-c", f"{line}; env -0"], cwd=tree, env=env, capture_output=True, text=True)
            env = dict(item.split("=", 1) for item in proc.stdout.split("\0") if "=" in item)
            results.append({"command": line, "rc": proc.returncode})
            continue
        timed = "gpu_check.py" in line
        command = f"{line} {extra}" if timed else line
        say(f"$ {command}")
        start = time.perf_counter()
        proc = subprocess.run(["bash", "-c", command], cwd=tree, env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        log.write(f"$ {command}\n{proc.stderr}\n")
        log.flush()
        entry = {"command": command, "rc": proc.returncode, "seconds": round(seconds, 1),
                 "stderr_tail": proc.stderr[-3000:]}
        if timed:
            part, limit, out = timed_part(line)
            entry.update(part=part, timeout_s=limit, out=str(out))
        elif proc.returncode:
            raise SystemExit(f"`{command}` failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
        say(f"  exit {proc.returncode} in {seconds:.0f} s")
        results.append(entry)
    return results


def chapter_names(arg: str) -> list[str]:
    sys.path.insert(0, str(ROOT / "tests"))
    from test_full_path import FULL_PATH

    names = sorted(FULL_PATH) if arg == ALL else [c for c in arg.split(",") if c]
    unknown = sorted(set(names) - set(FULL_PATH))
    if unknown:
        raise SystemExit(f"--chapters: {unknown} are not chapters with full-path sizes; known: {sorted(FULL_PATH)}")
    return names


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chapters", default=ALL, help="comma-separated chapter ids for the chapters command, or 'all' "
                                                    "(default; those needing POT are skipped there by name)")
    ap.add_argument("--work", type=Path, default=ROOT / "build" / "rehearsal", help="scratch folder (default build/rehearsal)")
    ap.add_argument("--limit-mib", type=float, default=LIMIT_MIB, help="what a lent machine takes (default 64)")
    ap.add_argument("--chapter-timeout-s", type=float, default=None,
                    help="passed to gpu_check.py (default: its own, the GPU run's)")
    args = ap.parse_args(argv)
    if not args.limit_mib > 0:
        ap.error(f"--limit-mib {args.limit_mib}: must be positive")
    if args.chapter_timeout_s is not None and not args.chapter_timeout_s > 0:
        ap.error(f"--chapter-timeout-s {args.chapter_timeout_s}: must be positive")
    chapters = chapter_names(args.chapters)
    lines = readme_commands()
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    summary: dict = {"python": python, "chapters": chapters, "readme_commands": lines}

    carried = wheels("3.12", ROOT / WHEELS)                        # what is carried to the lent machine
    files = working_tree_files()
    sizes = {"working_tree_mib": round(mib(files), 2), "wheels_mib": carried["total_mib"],
             "wheels": len(carried["wheels"]), "left_out": carried["left_out"]}
    sizes["carried_mib"] = round(sizes["working_tree_mib"] + sizes["wheels_mib"], 2)
    summary["sizes"] = sizes
    say(f"carried: working tree {sizes['working_tree_mib']:.1f} MiB ({len(files)} files) + {WHEELS} "
        f"{sizes['wheels_mib']:.1f} MiB = {sizes['carried_mib']:.1f} MiB (limit {args.limit_mib:g} MiB)")
    found = size_causes(sizes, args.limit_mib)
    if python == "3.12":
        here = carried
        wheel_dir = ROOT / WHEELS
    else:                                                            # the same pins, installable by this interpreter
        from anatomy_kit.hf.models import cache_dir

        wheel_dir = cache_dir() / f"device-wheels-cp{python.replace('.', '')}"
        here = wheels(python, wheel_dir)
        if here["requested"] != carried["requested"]:
            found.append(f"the wheels for Python {python} are not the carried ones' pins")
        summary["wheels_installed_here"] = f"Python {python} builds of the same pins (the lent machine has 3.12)"
    tree, machine, home = work / "tree", work / "machine", work / "home"
    copy_tree(files, wheel_dir, here["wheels"], tree)
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    summary["machine_distributions"] = build_machine(machine, python)
    say(f"machine: {len(summary['machine_distributions'])} distributions linked into {machine}")
    extra = f"--device-guard --chapters {','.join(chapters)}"
    if args.chapter_timeout_s is not None:
        extra += f" --chapter-timeout-s {args.chapter_timeout_s:g}"
    with open(work / "commands.log", "w") as log:
        ran = run_commands(lines, tree, machine, home, extra, log)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import gpu_check

    for entry in ran:
        if "part" not in entry:
            continue
        path = tree / entry["out"]
        doc = json.loads(path.read_text()) if path.exists() else None
        if doc is not None:
            shutil.copy2(path, work / path.name)
        found += causes(entry["part"], entry["rc"], entry["timeout_s"], doc,
                        chapters if entry["part"] == "chapters" else [], gpu_check.PARTS[entry["part"]],
                        entry["stderr_tail"])
    summary.update(commands=ran, causes=found, ok=not found, total_s=round(time.perf_counter() - start, 1))
    (work / "rehearsal.json").write_text(json.dumps(summary, indent=1) + "\n")
    for cause in found:
        say(f"FAILS: {cause}")
    say(f"{'passed' if not found else 'FAILED'} in {summary['total_s']:.0f} s; {work / 'rehearsal.json'}")
    return 0 if not found else 1


if __name__ == "__main__":
    raise SystemExit(main())
