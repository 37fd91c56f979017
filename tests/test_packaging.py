"""The kit installs as a wheel (a JupyterHub user's `pip install git+…`), and its layout stays as documented."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest

from conftest import ROOT

KIT = ROOT / "anatomy_kit"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
#: Modules that are data tables, exempt from the size rules (none today).
DATA_TABLES: set[str] = set()


def _subpackages() -> set[str]:
    """The kit's own subpackages (the link to the top-level data_manifest/ is not one)."""
    return {"anatomy_kit"} | {f"anatomy_kit.{p.parent.name}" for p in KIT.glob("*/__init__.py")
                              if not p.parent.is_symlink()}


def test_pyproject_lists_every_subpackage_and_the_manifest():
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert set(tool["packages"]) == _subpackages() | {"anatomy_kit.data_manifest", "anatomy_kit.data_manifest.registry"}
    # the manifest is installed through a link, so the layout is "simple" (one root, no remapping)
    assert tool["package-dir"] == {"": "."}
    link = KIT / "data_manifest"
    assert link.is_symlink() and link.resolve() == (ROOT / "data_manifest").resolve()


#: A warning category in a build's output (``BuildBackendWarning``, ``SetuptoolsDeprecationWarning``, …);
#: pip's own notices are upper-case ``WARNING:`` lines and do not match.
BACKEND_WARNING = re.compile(r"\b[A-Z][A-Za-z]*Warning\b")


def _pip_quietly(*args: str) -> subprocess.CompletedProcess:
    """Run pip (building in its isolated environment with the newest backend ``[build-system]`` allows)
    and fail on any warning from the build backend: a deprecation shows up the day it appears."""
    out = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    warned = [line for line in (out.stdout + out.stderr).splitlines() if BACKEND_WARNING.search(line)]
    assert not warned, "the build backend warned:\n" + "\n".join(warned)
    return out


@pytest.mark.whole_run
def test_editable_install_prints_no_build_backend_warning(tmp_path):
    """The README's (and conda's) ``pip install -e .`` into a scratch venv, without dependencies."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    _pip_quietly("--python", str(venv / "bin" / "python"), "install", "--no-deps", "-e", str(ROOT))
    pth = "".join(p.read_text() for p in (venv / "lib").rglob("__editable__*.pth"))
    assert str(ROOT) in pth, f"the editable install should put the checkout on sys.path, got {pth!r}"


def test_readme_and_package_docstring_name_every_subpackage():
    import anatomy_kit

    readme = (ROOT / "README.md").read_text()
    for name in sorted(_subpackages() - {"anatomy_kit"}):
        short = name.split(".")[1]
        assert f":mod:`{name}`" in anatomy_kit.__doc__, f"the package docstring does not list {name}"
        assert f"`{short}/`" in readme, f"the README's layout table does not list {short}/"


def _functions(tree):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


@pytest.mark.parametrize("path", sorted(KIT.rglob("*.py")), ids=lambda p: str(p.relative_to(KIT)))
def test_modules_and_functions_stay_small(path):
    rel = str(path.relative_to(KIT))
    if rel in DATA_TABLES:
        pytest.skip("a data table")
    src = path.read_text()
    assert len(src.splitlines()) <= MAX_MODULE_LINES, f"{rel} has {len(src.splitlines())} lines"
    long = [f"{f.name} ({f.end_lineno - f.lineno + 1} lines)" for f in _functions(ast.parse(src))
            if f.end_lineno - f.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, f"{rel}: functions over {MAX_FUNCTION_LINES} lines: {long}"


def test_subpackages_say_what_they_hold():
    for init in KIT.glob("*/__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and len(doc) > 40, f"{init.relative_to(ROOT)} needs a docstring saying what it holds"


@pytest.mark.whole_run
def test_wheel_installs_and_runs_outside_the_repository(tmp_path):
    """Build the wheel, install it into a scratch venv, and from elsewhere load the manifest and run the CLI."""
    dist = tmp_path / "dist"
    _pip_quietly("wheel", "--no-deps", "-w", str(dist), str(ROOT))
    wheel = next(dist.glob("anatomy_kit-*.whl"))
    with zipfile.ZipFile(wheel) as z:
        meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
        assert "License-Expression: Apache-2.0" in meta and any(n.endswith("licenses/LICENSE") for n in z.namelist())
        missing = [p for p in sorted(_subpackages()) if f"{p.replace('.', '/')}/__init__.py" not in z.namelist()]
        assert not missing, f"the wheel lacks the subpackages {missing}"
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", str(wheel)],
                   check=True, capture_output=True, text=True)
    # dependencies come from this environment's site-packages; the kit itself only from the wheel
    env = {**os.environ, "PYTHONPATH": sysconfig.get_paths()["purelib"], "PYTHONNOUSERSITE": "1"}
    env.pop("ANATOMY_KIT_MANIFEST", None)
    env.pop("ANATOMY_KIT_ROOT", None)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    code = ("import anatomy_kit, anatomy_kit.manifest as m; print(anatomy_kit.__file__); print(m.manifest_dir()); "
            "print(m.references()['p1.l11_ablation']['value']); "
            "from anatomy_kit.verdicts.registry import rule_registry; print(len(rule_registry().entries))")
    out = subprocess.run([str(py), "-c", code], cwd=outside, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    kit_file, manifest, value, n_registered = out.stdout.split()
    assert int(n_registered) > 0, "the wheel lacks the rule registry (data_manifest/registry/)"
    assert Path(kit_file).is_relative_to(venv) and Path(manifest).is_relative_to(venv), out.stdout
    assert value == "63419"
    cli = subprocess.run([str(py), "-m", "anatomy_kit", "--help"], cwd=outside, env=env, capture_output=True, text=True)
    assert cli.returncode == 0 and "reproduce" in cli.stdout, cli.stderr
    # the chapters are not in the wheel: reproducing from outside a checkout is a named error
    rep = subprocess.run([str(py), "-m", "anatomy_kit", "reproduce", "--chapter", "x"], cwd=outside, env=env,
                         capture_output=True, text=True)
    assert rep.returncode != 0 and "chapters.yaml" in rep.stderr, rep.stderr
