"""Read ``data_manifest/``: the models, corpora and reference numbers the book uses.

Every model and corpus has a source, a licence and a checksum; every paper number has its
source and how sure we are of it (the book's appendix on sources says what could be read).
Reference numbers are *compared against*, never used as outputs.

The folder lives at the top of the repository and is installed with the package as
``anatomy_kit.data_manifest`` (package data), so a wheel install finds it through
``importlib.resources``; ``$ANATOMY_KIT_MANIFEST`` points elsewhere.
"""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from .validate import AnatomyKitError

__all__ = ["manifest_dir", "registry_stamp", "model_entries", "corpus_entries", "references", "reference", "provenance",
           "rule_registry_docs",
           "LIMITED_BY"]

FILES = ("models", "corpora", "references")
#: The rule registry's folder inside the manifest: one file per chapter and ``freeze.yaml``.
REGISTRY = "registry"

#: What would most likely change our verdict on a claim, the ``limited_by`` field of every entry of
#: ``references.yaml``, in the order the book's verdict table groups them: more paired seeds or runs
#: at this scale; the base model (we measure the 4-bit instruct SmolLM2-135M); the paper-scale run;
#: the paper's own text (a SECONDARY or BRIEF source, or a definition we reconstructed). Used by
#: chapter 7 (*Synthesis*) through :mod:`anatomy_kit.synthesis.verdicts`.
LIMITED_BY = ("seeds", "base model", "full scale", "paper text")


def manifest_dir() -> Path:
    """``$ANATOMY_KIT_MANIFEST``, or the ``data_manifest`` package data installed with the kit."""
    env = os.environ.get("ANATOMY_KIT_MANIFEST")
    if env:
        path = Path(env)
    else:
        try:
            path = Path(str(resources.files("anatomy_kit.data_manifest")))
        except ModuleNotFoundError:
            path = Path(__file__).resolve().parents[1] / "data_manifest"
    if not all((path / f"{name}.yaml").is_file() for name in FILES) or not (path / REGISTRY).is_dir():
        raise AnatomyKitError(f"data manifest folder {path} lacks one of {[f + '.yaml' for f in FILES]} or the "
                              f"folder {REGISTRY}/; reinstall anatomy-kit or set ANATOMY_KIT_MANIFEST")
    return path


def _read(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return yaml.safe_load(f)
    except yaml.YAMLError as err:
        raise AnatomyKitError(f"{path} is not valid YAML: {err}") from None


@lru_cache(maxsize=None)
def _load(name: str) -> dict:
    path = manifest_dir() / f"{name}.yaml"
    doc = _read(path)
    if not isinstance(doc, dict) or name not in doc:
        raise AnatomyKitError(f"{path} must hold a mapping under the key {name!r}")
    return doc


def model_entries() -> dict:
    """Model entries by key (``embedded``, hub ids)."""
    return _load("models")["models"]


def corpus_entries() -> dict:
    """Corpus entries by name (``python-docs``, ``fineweb-edu``, ...)."""
    return _load("corpora")["corpora"]


def references() -> dict:
    """Paper reference numbers by claim id (``p1.baseline_ppl``, ...)."""
    return _load("references")["references"]


def provenance() -> dict[str, str]:
    """``{family: one sentence}``: what could be read of each paper's source (``references.yaml``'s ``provenance``)."""
    return dict(_load("references").get("provenance") or {})


def reference(claim_id: str) -> dict:
    """One reference entry; an unknown id is an error that names the file to add it to."""
    refs = references()
    if claim_id not in refs:
        raise AnatomyKitError(f"claim id {claim_id!r} is not in data_manifest/references.yaml; add an entry with "
                              "claim, value, unit and source first")
    return refs[claim_id]


@lru_cache(maxsize=None)
def rule_registry_docs() -> tuple[list, dict | None]:
    """``(chapter files, freeze.yaml)`` of the rule registry, parsed: every ``registry/<chapter>.yaml`` in name
    order, and ``registry/freeze.yaml`` (``None`` when absent). Read it through
    :func:`anatomy_kit.verdicts.registry.rule_registry`, which checks every fingerprint and the freeze."""
    folder = manifest_dir() / REGISTRY
    chapters = [_read(p) for p in sorted(folder.glob("*.yaml")) if p.name != "freeze.yaml"]
    freeze = folder / "freeze.yaml"
    return chapters, (_read(freeze) if freeze.is_file() else None)


def registry_stamp() -> dict[str, Any]:
    """What a build records of the registry it ran under, so a reader can check it against the freeze commit:
    ``frozen`` (the freeze's date, ``None`` before the freeze), ``freeze_sha256`` (sha256 of ``freeze.yaml``'s
    bytes, as ``sha256sum`` prints it; ``None`` when absent) and ``files_sha256`` (sha256 over every registry file
    in name order, each as its name, a NUL byte, its bytes and a NUL byte)."""
    folder = manifest_dir() / REGISTRY
    files = sorted(folder.glob("*.yaml"))
    whole = hashlib.sha256()
    for path in files:
        whole.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    freeze = folder / "freeze.yaml"
    doc = _read(freeze) if freeze.is_file() else None
    frozen = (doc or {}).get("frozen") or {}
    return {"frozen": str(frozen["date"]) if frozen.get("date") else None,
            "freeze_sha256": hashlib.sha256(freeze.read_bytes()).hexdigest() if freeze.is_file() else None,
            "files_sha256": whole.hexdigest()}
