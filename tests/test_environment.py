"""environment.yml (conda, GPU JupyterHub): CUDA PyTorch from conda-forge, the rest pinned as requirements/lock.txt pins it."""

import re
import tomllib

import yaml
from packaging.requirements import Requirement
from packaging.version import Version

from conftest import ROOT

DEPRECATED_CHANNELS = {"pytorch", "nvidia", "defaults", "anaconda"}


def _name(req: str) -> str:
    return re.split(r"[<>=!\[ ;]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _requirements() -> list[str]:
    project = _project()
    return project["dependencies"] + [r for extra in project["optional-dependencies"].values() for r in extra]


def _lock() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements" / "lock.txt").read_text().splitlines():
        if "==" in line and not line.lstrip().startswith("#"):
            name, version = line.split("==", 1)
            pins[_name(name)] = version.strip()
    return pins


def _env() -> tuple[dict, list[str], list[str]]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    pip = [r for d in env["dependencies"] if isinstance(d, dict) for r in d["pip"]]
    return env, conda, pip


def test_no_deprecated_channel_and_pytorch_is_conda_forges_cuda_build():
    env, conda, _ = _env()
    assert env["channels"][0] == "conda-forge"
    assert not DEPRECATED_CHANNELS & set(env["channels"]), env["channels"]
    names = {_name(d.split("::")[-1]) for d in conda}
    assert "pytorch-cuda" not in names and not any("::" in d for d in conda), conda
    torch_spec = next(d for d in conda if _name(d) == "pytorch-gpu")
    cuda = next(d for d in conda if _name(d) == "cuda-version")
    assert re.search(r"\d", cuda), "cuda-version must say which CUDA runtime to take"
    torch_req = next(r for r in _project()["dependencies"] if _name(r) == "torch")
    assert torch_spec.replace(" ", "") == "pytorch-gpu" + torch_req[len("torch"):], (torch_spec, torch_req)


def test_every_dependency_appears_pinned_as_the_lock_pins_it():
    _, _, pip = _env()
    pins = {_name(r): r for r in pip if not r.startswith("-")}
    lock = _lock()
    for req in _requirements():
        name = _name(req)
        if name == "torch":
            continue                                  # from conda (checked above); the lock leaves torch out
        assert name in pins, f"{name} (pyproject) is missing from environment.yml"
        assert name in lock, f"{name} is missing from requirements/lock.txt"
        assert pins[name].replace(" ", "").lower() == f"{name}=={lock[name]}".lower(), (pins[name], lock[name])
        assert Version(lock[name]) in Requirement(req).specifier, f"the lock's {name}=={lock[name]} violates {req}"
    assert set(pins) <= {_name(r) for r in _requirements()}, "environment.yml lists packages pyproject does not"


def test_the_pip_section_installs_the_kit_under_the_lock_and_the_kernel_is_registered():
    _, _, pip = _env()
    assert "-c requirements/lock.txt" in pip            # transitive dependencies at the lock's versions too
    assert any(r.startswith("-e .[") and "book" in r and "test" in r for r in pip)
    text = (ROOT / "environment.yml").read_text()
    assert "python -m ipykernel install --user --name transformer-anatomy" in text


def test_lock_pins_every_dependency_but_torch():
    lock = _lock()
    for req in _requirements():
        name = _name(req)
        if name != "torch":
            assert name in lock, f"{name} is missing from requirements/lock.txt"
