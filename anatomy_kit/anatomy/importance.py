"""The importance profile of a model, as data: one JSON file that later chapters read.

Chapter 2 (*Anatomy II: weights, manipulation, recovery*) writes it from the ablation map of
chapter 1 and its own recovery measurements; the width and growth chapters read it instead of
recomputing the anatomy. Format (``schema`` = :data:`SCHEMA`), all per-layer lists of length
``n_layers`` in layer order::

    {
      "schema": "anatomy_kit/importance-profile/v1",
      "model": "embedded", "corpus": "python-docs", "scale": "smoke", "n_layers": 30,
      "baseline_ppl": 29.19,                  # intact model on the evaluation tokens
      "n_tokens": 762,                        # scored evaluation tokens
      "ablation_strategy": "neighbour-mean",
      "ablation_ppl": [...],                  # PPL with layer ℓ ablated
      "ablation_delta_pct": [...],            # 100·(PPL_ablated − PPL_base)/PPL_base, %
      "recovery_steps": [null | int, ...],    # steps to recover from noise; null = not measured
      "recovery_recovered": [null | bool, ...],  # false = did not recover within recovery_max_steps
      "recovery_max_steps": 4, "recovery_noise_fraction": 0.5,
      "extra": {...}                          # free-form per-chapter additions (documented there)
    }

Importance is ``ablation_delta_pct``: larger = removing the layer hurts more; negative = an
anti-layer, whose removal helps.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..jsonio import read_json, require_fields, write_json
from ..validate import AnatomyKitError, check_int
from .ablation import AblationMap
from .ranking import interior_layers, rank_layers

SCHEMA = "anatomy_kit/importance-profile/v1"
FILENAME = "importance_profile.json"

__all__ = ["SCHEMA", "FILENAME", "interior_layers", "rank_layers", "ImportanceProfile", "profile_path",
           "save_profile", "load_profile", "ablation_map_from_metrics", "chapter_metric"]


@dataclass
class ImportanceProfile:
    """Per-layer importance of one model on one corpus (see the module docstring for fields)."""

    model: str
    corpus: str
    scale: str
    n_layers: int
    baseline_ppl: float
    n_tokens: int
    ablation_strategy: str
    ablation_ppl: list[float]
    ablation_delta_pct: list[float]
    recovery_steps: list[int | None] = field(default_factory=list)
    recovery_recovered: list[bool | None] = field(default_factory=list)
    recovery_max_steps: int | None = None
    recovery_noise_fraction: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    schema: str = SCHEMA

    def __post_init__(self):
        check_int("n_layers", self.n_layers, minimum=1)
        if not self.recovery_steps:
            self.recovery_steps = [None] * self.n_layers
        if not self.recovery_recovered:
            self.recovery_recovered = [None] * self.n_layers
        for name in ("ablation_ppl", "ablation_delta_pct", "recovery_steps", "recovery_recovered"):
            value = getattr(self, name)
            if not isinstance(value, (list, tuple)) or len(value) != self.n_layers:
                raise AnatomyKitError(f"importance profile field {name} has "
                                      f"{len(value) if isinstance(value, (list, tuple)) else type(value).__name__}"
                                      f" entries; n_layers={self.n_layers} are required")
        if self.schema != SCHEMA:
            raise AnatomyKitError(f"importance profile schema {self.schema!r} is not supported; expected {SCHEMA!r}")
        if not (isinstance(self.baseline_ppl, (int, float)) and math.isfinite(self.baseline_ppl) and self.baseline_ppl > 0):
            raise AnatomyKitError(f"baseline_ppl={self.baseline_ppl!r} must be a finite number > 0")

    @classmethod
    def from_ablation_map(cls, amap, *, model: str, corpus: str, scale: str, n_layers: int | None = None,
                          **kwargs) -> "ImportanceProfile":
        """From an :class:`anatomy_kit.anatomy.AblationMap` covering every layer 0 … L−1."""
        layers = [int(l) for l in amap.layers]
        n = n_layers if n_layers is not None else len(layers)
        if layers != list(range(n)):
            raise AnatomyKitError(f"the ablation map covers layers {layers}; a profile needs every layer 0..{n - 1}")
        return cls(model=model, corpus=corpus, scale=scale, n_layers=n, baseline_ppl=float(amap.baseline_ppl),
                   n_tokens=int(amap.n_tokens), ablation_strategy=amap.strategy,
                   ablation_ppl=[float(x) for x in amap.ppl], ablation_delta_pct=[float(x) for x in amap.delta_pct],
                   **kwargs)

    @property
    def importance(self) -> np.ndarray:
        """ΔPPL % per layer, shape (L,)."""
        return np.asarray(self.ablation_delta_pct, dtype=float)

    def ranked(self, *, interior_only: bool = False) -> list[int]:
        """Layers from most to least important (ties by layer index); see :func:`rank_layers`."""
        return rank_layers(self.importance, n_layers=self.n_layers, interior_only=interior_only)

    def critical(self, k: int = 4, *, interior_only: bool = True) -> list[int]:
        """The ``k`` most important layers, in layer order."""
        check_int("k", k, minimum=1, maximum=self.n_layers)
        return sorted(self.ranked(interior_only=interior_only)[:k])

    def redundant(self, k: int = 4, *, interior_only: bool = True) -> list[int]:
        """The ``k`` least important layers (anti-layers first), in layer order."""
        check_int("k", k, minimum=1, maximum=self.n_layers)
        return sorted(self.ranked(interior_only=interior_only)[-k:])

    def anti_layers(self) -> list[int]:
        """Layers whose ablation lowered perplexity."""
        return [l for l in range(self.n_layers) if self.importance[l] < 0]

    def set_recovery(self, layer: int, steps: int | None, *, max_steps: int, noise_fraction: float) -> None:
        """Record one layer's recovery (``steps=None``: did not recover within ``max_steps``)."""
        check_int("layer", layer, minimum=0, maximum=self.n_layers - 1)
        self.recovery_steps[layer] = None if steps is None else int(steps)
        self.recovery_recovered[layer] = steps is not None
        self.recovery_max_steps = int(max_steps)
        self.recovery_noise_fraction = float(noise_fraction)

    def to_dict(self) -> dict:
        return asdict(self)


def profile_path(build_dir: str | os.PathLike) -> Path:
    """Where the profile lives in a build folder: ``<build_dir>/importance_profile.json``."""
    return Path(build_dir) / FILENAME


def save_profile(profile: ImportanceProfile, path: str | os.PathLike) -> Path:
    """Write the profile as JSON (atomic). ``path`` may be a build folder or a ``.json`` file."""
    path = Path(path)
    return write_json(path if path.suffix == ".json" else profile_path(path), profile.to_dict())


REQUIRED = ("model", "corpus", "scale", "n_layers", "baseline_ppl", "n_tokens", "ablation_strategy",
            "ablation_ppl", "ablation_delta_pct")


def load_profile(path: str | os.PathLike) -> ImportanceProfile:
    """Read a profile written by :func:`save_profile` (a build folder or the ``.json`` file)."""
    path = Path(path)
    if path.suffix != ".json":
        path = profile_path(path)
    doc = read_json(path, what="importance profile", hint="run chapter 2 (ch02_anatomy_weights) first")
    require_fields(doc, REQUIRED, path=path, what="importance profile")
    known = set(ImportanceProfile.__dataclass_fields__)
    return ImportanceProfile(**{k: v for k, v in doc.items() if k in known})


def ablation_map_from_metrics(build_dir: str | os.PathLike, *, model: str, corpus: str,
                              strategy: str = "neighbour-mean", chapter: str = "ch01_ablation_map"):
    """The ablation map that chapter 1 saved in ``<build_dir>/metrics/<chapter>.json``, or ``None``.

    Returns an :class:`anatomy_kit.anatomy.AblationMap` if the file exists, was computed for the
    same ``model`` and ``corpus``, and holds ``strategy``; otherwise ``None`` (the caller then
    computes the map itself). The second value is the chapter-1 run (its sizes), for the printout.
    """
    path = Path(build_dir) / "metrics" / f"{chapter}.json"
    if not path.exists():
        return None, None
    try:
        doc = read_json(path, what="chapter metrics file")
        run = doc["run"]
        entry = doc["metrics"]["maps"][strategy]
    except (AnatomyKitError, KeyError, TypeError):
        return None, None
    if run.get("model") != model or run.get("corpus") != corpus:
        return None, run
    blocks = {k: None if entry.get(k) is None else np.asarray(entry[k], dtype=int if k == "block_targets" else float)
              for k in ("block_nll", "baseline_block_nll", "block_targets")}
    amap = AblationMap(strategy=entry["strategy"], baseline_ppl=float(entry["baseline_ppl"]),
                       layers=np.asarray(entry["layers"], dtype=int), ppl=np.asarray(entry["ppl"], dtype=float),
                       n_tokens=int(entry["n_tokens"]), **blocks)
    return amap, run


def chapter_metric(build_dir: str | os.PathLike, key: str, chapter: str = "ch01_ablation_map") -> Any:
    """``metrics[key]`` of ``<build_dir>/metrics/<chapter>.json``, or ``None`` if the file or key is missing
    (chapter 2 reads chapter 1's quantisation error this way)."""
    path = Path(build_dir) / "metrics" / f"{chapter}.json"
    if not path.exists():
        return None
    try:
        return read_json(path, what="chapter metrics file").get("metrics", {}).get(key)
    except (AnatomyKitError, AttributeError):
        return None
