"""The tests' mutation score, module by module (``make mutants``; not part of CI: it takes minutes a module).

For each module, ``mutmut`` (PyPI) mutates that module alone and runs only the tests that exercise it, in a
scratch copy of the project (the project's own ``pyproject.toml`` is never edited). What it prints per module:
mutants killed, survived, without a covering test, timed out; then every survivor by name, to be killed with a
test that checks behaviour against an independent computation, or judged equivalent in :data:`EQUIVALENT`
(one line of why each).

    python benchmarks/mutants.py                       # every module in MODULES
    python benchmarks/mutants.py anatomy_kit/verdicts/multiplicity.py
    python benchmarks/mutants.py --show                # also each survivor's diff

Run it from the project root in the project's environment (``mutmut`` installed: ``make mutants`` installs it).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: module -> the tests that exercise it (kept small: each mutant reruns them)
MODULES = {
    "anatomy_kit/verdicts/multiplicity.py": ["tests/test_multiplicity.py"],
    "anatomy_kit/verdicts/combine.py": ["tests/test_rule_wrappers.py", "tests/test_rule_combination.py",
                                        "tests/test_claims.py", "tests/test_rule_summary.py",
                                        "tests/test_rule_attainable_p.py", "tests/test_multiplicity.py"],
    "anatomy_kit/book/power_spread.py": ["tests/test_power_spread.py", "tests/test_power.py",
                                         "tests/test_power_table.py"],
    "anatomy_kit/book/power_rules.py": ["tests/test_power_rules.py", "tests/test_power_table.py",
                                        "tests/test_power.py"],
}

#: survivors judged equivalent: mutant name -> why no test can tell it from the original
EQUIVALENT = {
    "anatomy_kit.verdicts.multiplicity.x_holm_adjusted__mutmut_21":
        "the output list's initial values (0.0 → 1.0) are each overwritten before it is returned",
    "anatomy_kit.verdicts.multiplicity.x_family__mutmut_4":
        "split('.') and split('.', 1) have the same first element",
    "anatomy_kit.verdicts.multiplicity.x_family__mutmut_8":
        "split('.', 2) and split('.', 1) have the same first element",
    "anatomy_kit.verdicts.multiplicity.x__get__mutmut_4": "every caller of _get leaves its default at None",
    "anatomy_kit.verdicts.multiplicity.x__get__mutmut_6": "every caller of _get leaves its default at None",
    "anatomy_kit.verdicts.multiplicity.x__get__mutmut_9": "every caller of _get leaves its default at None",
    "anatomy_kit.verdicts.multiplicity.x__get__mutmut_12": "every caller of _get leaves its default at None",
    "anatomy_kit.verdicts.multiplicity.x_holm_by_family__mutmut_157":
        "a part's adjusted p (x[3]) is None exactly when its p (x[2]) is None",
    "anatomy_kit.book.power_spread.x_scale_of__mutmut_21":
        "the placeholder for a missing end (0.0 → 1.0) is never read: asymmetry needs both ends",
    "anatomy_kit.book.power_spread.x_scale_of__mutmut_41":
        "without both ends every scale gets the same constant (0.0 → 1.0), so the first scale still wins the tie",
    "anatomy_kit.book.power_spread.x_scale_of__mutmut_44":
        "< and <= against best − 1e-9 differ only at exactly that value",
}

STATUS = {"killed": "killed", "survived": "survived", "no tests": "no tests", "timeout": "timeout",
          "suspicious": "suspicious", "skipped": "skipped", "segfault": "killed"}


def _config(module: str, tests: list[str]) -> str:
    return ("\n[tool.mutmut]\n"
            'source_paths = ["anatomy_kit/"]\n'
            f'only_mutate = ["{module}"]\n'
            f"pytest_add_cli_args_test_selection = {tests!r}\n".replace("'", '"')
            + 'also_copy = ["data_manifest", "tests", "notebooks", "book", "benchmarks"]\n')


def score(module: str, tests: list[str], show: bool = False, children: int = 2) -> dict:
    """Run mutmut on ``module`` with ``tests`` in a scratch copy; return ``{status: [mutant names]}``."""
    if not (ROOT / module).is_file():
        raise SystemExit(f"module {module!r} is not a file of the project; known: {sorted(MODULES)}")
    missing = [t for t in tests if not (ROOT / t).exists()]
    if missing:
        raise SystemExit(f"tests {missing} do not exist")
    with tempfile.TemporaryDirectory(prefix="mutants-") as tmp:
        work = Path(tmp)
        for name in ("anatomy_kit", "tests", "data_manifest", "notebooks", "book", "benchmarks"):
            shutil.copytree(ROOT / name, work / name, ignore=shutil.ignore_patterns("_build", "__pycache__"))
        (work / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text() + _config(module, tests))
        mutmut = [sys.executable, "-m", "mutmut"]
        subprocess.run([*mutmut, "run", "--max-children", str(children)], cwd=work, check=True,
                       stdout=subprocess.DEVNULL)
        out = subprocess.run([*mutmut, "results", "--all", "true"], cwd=work, check=True, capture_output=True,
                             text=True).stdout
        found: dict[str, list[str]] = {}
        for line in out.splitlines():
            m = re.match(r"\s*(\S+): (.+)$", line)
            if m:
                found.setdefault(STATUS.get(m.group(2).strip(), m.group(2).strip()), []).append(m.group(1))
        if show:
            for name in found.get("survived", []):
                diff = subprocess.run([*mutmut, "show", name], cwd=work, capture_output=True, text=True).stdout
                print("\n".join(x for x in diff.splitlines() if x.startswith(("-", "+")) and not
                                x.startswith(("---", "+++"))), "\n")
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("modules", nargs="*", help=f"modules to mutate (default: {', '.join(MODULES)})")
    ap.add_argument("--tests", nargs="*", default=None, help="the tests to run (default: the module's in MODULES)")
    ap.add_argument("--show", action="store_true", help="print each survivor's diff")
    ap.add_argument("--children", type=int, default=2, help="mutants run at once (default 2)")
    args = ap.parse_args(argv)
    if args.children < 1:
        ap.error(f"--children={args.children} must be at least 1")
    modules = args.modules or list(MODULES)
    unknown = [m for m in modules if m not in MODULES and args.tests is None]
    if unknown:
        ap.error(f"no tests known for {unknown}: give --tests, or add them to MODULES")
    print("| module | mutants | killed | survived (equivalent) | no tests | timeouts | killed of non-equivalent |")
    print("|---|---|---|---|---|---|---|")
    ok = True
    for module in modules:
        found = score(module, args.tests or MODULES[module], args.show, args.children)
        survived = found.get("survived", [])
        equivalent = [s for s in survived if s in EQUIVALENT]
        killed, alive = len(found.get("killed", [])), len(survived) - len(equivalent)
        untested, timeouts = len(found.get("no tests", [])), len(found.get("timeout", []))
        total = sum(map(len, found.values()))
        share = killed / max(1, killed + alive + untested)
        ok &= share >= 0.9
        print(f"| {module} | {total} | {killed} | {len(survived)} ({len(equivalent)}) | {untested} | {timeouts} | "
              f"{share:.0%} |")
        for name in survived:
            print(f"  survived: {name}" + (f" (equivalent: {EQUIVALENT[name]})" if name in EQUIVALENT else ""))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
