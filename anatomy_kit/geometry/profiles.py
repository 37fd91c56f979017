"""The work-profiles file: what chapter 4 measures and chapter 5 allocates by (JSON, versioned schema)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..jsonio import read_json, require_fields, write_json
from ..validate import AnatomyKitError, check_finite
from .work import WorkProfiles

__all__ = ["SCHEMA", "ProfileBundle", "save_profiles", "load_profiles"]

SCHEMA = "anatomy_kit/work-profiles/1"


@dataclass
class ProfileBundle:
    """What :func:`load_profiles` returns: the profiles, per-layer diagnostics (L,) each, and metadata.

    ``residual_norm_growth`` is whatever was saved; :func:`anatomy_kit.geometry.measure_work`
    saves the *difference* ``mean ‖y‖ − ‖x‖`` (and the ratio in ``meta["residual_norm_ratio"]``).
    """

    profiles: WorkProfiles
    meta: dict
    intrinsic_dimension: np.ndarray | None = None
    sensitivity: np.ndarray | None = None
    residual_norm_growth: np.ndarray | None = None


def _layer_vector(name: str, value: Any, n: int) -> list[float] | None:
    if value is None:
        return None
    v = np.asarray(value, dtype=np.float64).reshape(-1)
    if v.shape[0] != n:
        raise AnatomyKitError(f"{name} has {v.shape[0]} values but the profiles have {n} layers")
    check_finite(name, v)
    return v.tolist()


def save_profiles(path: str | Path, profiles: WorkProfiles, meta: dict, *, intrinsic_dimension: Any = None,
                  sensitivity: Any = None, residual_norm_growth: Any = None) -> Path:
    """Write work profiles and per-layer diagnostics as JSON for chapter 5 (chapter 4).

    Schema (``"schema": "anatomy_kit/work-profiles/1"``)::

        {"schema": str, "model": str, "n_tokens": int, "point": "residual"|"ffn",
         "radius": float, "layers": [int] (L),
         "statistics": [str], "geometries": [str],
         "profiles": {"<statistic>/<geometry>": {"raw": [float] (L), "normalised": [float] (L)}},
         "intrinsic_dimension": [float] (L) | null,     # TwoNN of the FFN input clouds
         "sensitivity": [float] (L) | null,             # loss increase under FFN-output noise, nats
         "residual_norm_growth": [float] (L) | null,    # as passed, e.g. mean ‖y‖ − ‖x‖ (chapter 4)
         "meta": {...}}                                 # everything else passed in ``meta``

    ``"normalised"`` divides each profile by its sum over layers. ``meta`` must contain
    ``"model"`` (a name or hub id). Returns the path written.
    """
    if not isinstance(meta, dict) or not isinstance(meta.get("model"), str):
        raise AnatomyKitError(f"meta must be a dict with a 'model' name, got {meta!r}")
    n = len(profiles.layers)
    norm = profiles.normalised("sum")
    doc = {
        "schema": SCHEMA, "model": meta["model"], "n_tokens": int(profiles.n_tokens), "point": profiles.point,
        "radius": float(profiles.radius), "layers": [int(l) for l in profiles.layers],
        "statistics": list(profiles.statistics), "geometries": list(profiles.geometries),
        "profiles": {f"{s}/{g}": {"raw": p.tolist(), "normalised": norm.profile(s, g).tolist()}
                     for s, g, p in profiles.items()},
        "intrinsic_dimension": _layer_vector("intrinsic_dimension", intrinsic_dimension, n),
        "sensitivity": _layer_vector("sensitivity", sensitivity, n),
        "residual_norm_growth": _layer_vector("residual_norm_growth", residual_norm_growth, n),
        "meta": {k: v for k, v in meta.items() if k != "model"},
    }
    return write_json(path, doc)


REQUIRED = ("schema", "model", "n_tokens", "point", "radius", "layers", "statistics", "geometries", "profiles")


def load_profiles(path: str | Path) -> ProfileBundle:
    """Read a file written by :func:`save_profiles` (chapter 4; consumed by chapter 5)."""
    path = Path(path)
    doc = read_json(path, what="work-profiles file", hint="run chapter 4 (ch04_geometric_work) first")
    require_fields(doc, REQUIRED, path=path, what="work-profiles file")
    if doc.get("schema") != SCHEMA:
        raise AnatomyKitError(f"{path} has schema {doc.get('schema')!r}; expected {SCHEMA!r}")
    stats, geoms = tuple(doc["statistics"]), tuple(doc["geometries"])
    missing = [f"{s}/{g}" for s in stats for g in geoms if f"{s}/{g}" not in doc["profiles"]]
    if missing:
        raise AnatomyKitError(f"{path} lacks the profile(s) {missing} that its statistics and geometries name")
    values = np.array([[doc["profiles"][f"{s}/{g}"]["raw"] for g in geoms] for s in stats]).transpose(2, 0, 1)
    profiles = WorkProfiles(np.array(doc["layers"]), stats, geoms, values.astype(np.float64),
                            int(doc["n_tokens"]), doc["point"], float(doc["radius"]))
    vec = lambda k: None if doc.get(k) is None else np.array(doc[k], dtype=np.float64)  # noqa: E731
    return ProfileBundle(profiles, {"model": doc["model"], **doc.get("meta", {})}, vec("intrinsic_dimension"),
                         vec("sensitivity"), vec("residual_norm_growth"))
