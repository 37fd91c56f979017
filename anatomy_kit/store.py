"""A resumable store of finished results: one JSON file, every write atomic (chapters 1–6).

A chapter keeps each finished piece of a long computation (one layer of a sweep, one model, one
training run) under a key; a rerun with the same parameters finds it and skips the work.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .jsonio import read_json, write_json
from .validate import AnatomyKitError

__all__ = ["Store"]


class Store:
    """A JSON file of finished results; every write is atomic (write, then rename)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.data: dict[str, Any] = {}
        if self.path.exists():
            doc = read_json(self.path, what="resumable store", hint="delete it to recompute its results")
            if not isinstance(doc, dict):
                raise AnatomyKitError(f"{self.path} is not a resumable store (a JSON object); delete it to recompute")
            self.data = doc

    def __contains__(self, key: str) -> bool:
        return key in self.data

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.data[key] = value
        write_json(self.path, self.data, indent=None)

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)
