"""Where the book's chapters are: the checkout that holds ``notebooks/chapters.yaml``, and that list.

Read by the runner (executing chapters) and the report (chapter titles); kept apart from both so
neither imports the other.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from ..validate import AnatomyKitError

__all__ = ["project_root", "chapter_manifest"]

#: The source checkout this module was imported from (``None`` for an installed wheel).
_SOURCE = Path(__file__).resolve().parents[2]


def project_root(start: Path | None = None) -> Path:
    """The repository holding ``notebooks/chapters.yaml``: ``$ANATOMY_KIT_ROOT``, the current folder or
    one above it, or the checkout the kit was imported from. The chapters are not part of the wheel."""
    env = os.environ.get("ANATOMY_KIT_ROOT")
    candidates = [Path(env)] if env else []
    here = (start or Path.cwd()).resolve()
    candidates += [here, *here.parents, _SOURCE]
    for c in candidates:
        if (c / "notebooks" / "chapters.yaml").is_file():
            return c
    raise AnatomyKitError("no notebooks/chapters.yaml here or above, nor beside the installed kit: run this from "
                          "a checkout of the Transformer Anatomy repository or set ANATOMY_KIT_ROOT")


def chapter_manifest(root: Path | None = None) -> list[dict[str, Any]]:
    """Chapters in book order: ``id``, ``file`` (under notebooks/), ``title``, ``budget_s``, ``timeout_s``."""
    path = (root or project_root()) / "notebooks" / "chapters.yaml"
    try:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f)
        chapters = doc["chapters"]
    except (OSError, yaml.YAMLError, KeyError, TypeError) as err:
        raise AnatomyKitError(f"{path} does not list the chapters ({err.__class__.__name__}: {err})") from None
    for c in chapters:
        missing = sorted({"id", "file", "title", "budget_s", "timeout_s"} - set(c))
        if missing:
            raise AnatomyKitError(f"{path}: chapter entry {c!r} lacks {missing}")
    return chapters
