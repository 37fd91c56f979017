"""File checksums: the one sha256 of a file that the manifest, checkpoints and token files record."""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["sha256_of"]


def sha256_of(path: Path, chunk: int = 1 << 20) -> str:
    """Hex sha256 of the file at ``path``, read ``chunk`` bytes at a time (never whole into memory)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()
