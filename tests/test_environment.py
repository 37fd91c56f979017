"""environment.yml (conda, GPU JupyterHub) and pyproject.toml must list the same dependencies."""

import re
import tomllib

import yaml

from conftest import ROOT


def _name(req: str) -> str:
    return re.split(r"[<>=!\[ ;]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


def test_environment_yml_agrees_with_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    py = set(project["dependencies"]) | {r for extra in project["optional-dependencies"].values() for r in extra}
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = [r for d in env["dependencies"] if isinstance(d, dict) for r in d["pip"] if not r.startswith("-e")]
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    conda_names = {_name(d) for d in conda}
    py_names = {_name(r): r.replace(" ", "") for r in py}
    env_names = {_name(r): r.replace(" ", "") for r in pip}
    assert "pytorch" in conda_names                 # torch comes from conda on the GPU hub
    env_names["torch"] = "torch" + re.sub(r"^pytorch", "", next(d for d in conda if d.startswith("pytorch>")))
    assert env_names == py_names


def test_lock_pins_every_dependency_but_torch():
    lock = {_name(l): l for l in (ROOT / "requirements" / "lock.txt").read_text().splitlines() if "==" in l}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for req in project["dependencies"] + project["optional-dependencies"]["book"] + project["optional-dependencies"]["test"]:
        name = _name(req)
        if name != "torch":
            assert name in lock, f"{name} is missing from requirements/lock.txt"
