"""JSON in and out, the one way the kit does it.

- :func:`to_jsonable` is the single converter for what the standard library cannot write
  (NumPy scalars and arrays, paths, tuples of those, zero-dimensional tensors).
- :func:`write_json` writes a file atomically: a temporary file in the same folder, then
  ``os.replace``, so a crash leaves either the old file or the new one, never half of one.
- :func:`read_json` reads a file the kit wrote and turns a missing file, bad JSON or a missing
  field into an :class:`~anatomy_kit.validate.AnatomyKitError` that names the file and what to do.

Every file the kit writes (chapter metrics, resumable stores, the importance profile, work
profiles, checkpoint metadata, the report) goes through these three functions.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable

from .validate import AnatomyKitError

__all__ = ["to_jsonable", "write_json", "read_json", "require_fields"]


def to_jsonable(x: Any) -> Any:
    """``json.dumps(default=...)`` hook: NumPy scalars/arrays, paths and scalar tensors."""
    try:
        import numpy as np

        if isinstance(x, np.generic):
            return x.item()
        if isinstance(x, np.ndarray):
            return x.tolist()
    except ImportError:  # pragma: no cover - numpy is a hard dependency
        pass
    if isinstance(x, Path):
        return str(x)
    if hasattr(x, "detach") and hasattr(x, "tolist"):   # a torch tensor
        return x.detach().cpu().tolist()
    if isinstance(x, (set, frozenset)):
        return sorted(x)
    raise TypeError(f"cannot store {type(x).__name__} in JSON")


def write_json(path: str | os.PathLike, obj: Any, *, indent: int | None = 1) -> Path:
    """Write ``obj`` as JSON to ``path`` atomically (parents created); return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    try:
        tmp.write_text(json.dumps(obj, indent=indent, default=to_jsonable), encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def read_json(path: str | os.PathLike, *, what: str = "JSON file", hint: str = "") -> Any:
    """Read a JSON file; a missing or unreadable file is an error naming ``what`` and ``hint``."""
    path = Path(path)
    if not path.exists():
        raise AnatomyKitError(f"no {what} at {path}" + (f"; {hint}" if hint else ""))
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise AnatomyKitError(f"{path} is not a valid {what}: {err}" + (f"; {hint}" if hint else "")) from None


def require_fields(doc: Any, fields: Iterable[str], *, path: str | os.PathLike, what: str) -> dict:
    """Return ``doc`` if it is a dict holding every field; otherwise name the missing ones."""
    if not isinstance(doc, dict):
        raise AnatomyKitError(f"{path} does not hold a {what} (a JSON object), but a {type(doc).__name__}")
    missing = sorted(set(fields) - set(doc))
    if missing:
        raise AnatomyKitError(f"{path} lacks field(s) {missing} of a {what}")
    return doc
