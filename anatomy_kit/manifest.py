"""Read ``data_manifest/``: the models, corpora and reference numbers the book uses.

Every model and corpus has a source, a licence and a checksum; every paper number has
its source and how sure we are of it (see ``../shared/papers/SPECS.md`` in the project
notes). Reference numbers are *compared against*, never used as outputs.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

import yaml

from .validate import AnatomyKitError


def manifest_dir() -> Path:
    """``$ANATOMY_KIT_MANIFEST`` or the ``data_manifest/`` folder beside the package."""
    env = os.environ.get("ANATOMY_KIT_MANIFEST")
    path = Path(env) if env else Path(__file__).resolve().parents[1] / "data_manifest"
    if not path.is_dir():
        raise AnatomyKitError(f"data manifest folder {path} not found; set ANATOMY_KIT_MANIFEST")
    return path


@lru_cache(maxsize=None)
def _load(name: str) -> dict:
    with open(manifest_dir() / f"{name}.yaml", encoding="utf-8") as f:
        return yaml.safe_load(f)


def model_entries() -> dict:
    """Model entries by key (``embedded``, hub ids)."""
    return _load("models")["models"]


def corpus_entries() -> dict:
    """Corpus entries by name (``python-docs``, ``fineweb-edu``, ...)."""
    return _load("corpora")["corpora"]


def references() -> dict:
    """Paper reference numbers by claim id (``p1.baseline_ppl``, ...)."""
    return _load("references")["references"]
