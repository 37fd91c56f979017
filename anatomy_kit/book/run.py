"""What every chapter does first and last: resolve its parameters, save its results.

A chapter's papermill parameters cell holds plain values (``scale``, ``device``, ``model``,
``corpus``, ``seed``, ``build_dir`` and sizes set to ``None`` = "the scale's default").
:func:`resolve_run` validates all of them, fills the defaults of the chosen scale, prints the
run size it resolved, and returns a :class:`Run`. At the end the chapter calls
:meth:`Run.save_metrics` with its numbers and its verdict on each paper claim; the
reproduction runner gathers those files into one report.

Long computations go through :meth:`Run.store`, a small JSON store in the build folder keyed
by the run's parameters, so a crashed or interrupted chapter resumes where it stopped.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..environment import run_environment
from ..jsonio import write_json
from ..validate import AnatomyKitError, check_choice, check_int
from ..store import Store

SCALES = ("smoke", "hour", "full")
DEVICES = ("auto", "cpu", "cuda")


@dataclass
class Run:
    """A chapter's resolved parameters."""

    chapter: str
    scale: str
    device: str
    model: str
    corpus: str
    seed: int
    sizes: dict[str, Any]
    build_dir: Path
    started: float = field(default_factory=time.time)

    @property
    def key(self) -> str:
        """A short hash of everything that determines the results."""
        d = {k: v for k, v in asdict(self).items() if k not in ("build_dir", "started", "device")}
        return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:12]

    def describe(self) -> str:
        sizes = ", ".join(f"{k}={v}" for k, v in self.sizes.items())
        return (f"chapter {self.chapter} at scale={self.scale!r}: model={self.model!r}, corpus={self.corpus!r}, "
                f"device={self.device!r}, seed={self.seed}; {sizes}")

    def store(self, name: str) -> Store:
        """A resumable store for partial results of this exact run."""
        return Store(self.build_dir / "checkpoints" / f"{self.chapter}-{name}-{self.key}.json")

    def path(self, *parts: str) -> Path:
        """A path inside the build folder (parents created)."""
        p = self.build_dir.joinpath(*parts)
        p.parent.mkdir(parents=True, exist_ok=True)
        return p

    def save_metrics(self, metrics: dict[str, Any], claims: list) -> Path:
        """Write ``metrics/<chapter>.json``: run, numbers, claims, wall time, environment (the kernel
        path, threads and versions that decide whether another run agrees bit for bit)."""
        out = self.path("metrics", f"{self.chapter}.json")
        doc = {
            "chapter": self.chapter,
            "run": {k: v for k, v in asdict(self).items() if k not in ("build_dir", "started")},
            "seconds": round(time.time() - self.started, 1),
            "environment": run_environment(),
            "metrics": metrics,
            "claims": [_claim_dict(c) for c in claims],
        }
        return write_json(out, doc)


def resolve_run(chapter: str, *, scale: str, device: str, defaults: dict[str, dict[str, Any]],
                model: str | None = None, corpus: str | None = None, seed: int = 0,
                build_dir: str | os.PathLike = "../build", **sizes: Any) -> Run:
    """Validate a chapter's parameters and fill the defaults of its scale.

    ``defaults`` maps each scale to a dict that holds ``model``, ``corpus`` and every size the
    chapter accepts. A size passed as ``None`` takes the scale's default; a size the chapter
    does not declare is an error (so a misspelt papermill parameter cannot pass silently).
    """
    check_choice("scale", scale, SCALES)
    check_choice("device", device, DEVICES)
    check_int("seed", seed, minimum=0)
    base = dict(defaults[scale])
    unknown = sorted(set(sizes) - set(base))
    if unknown:
        raise AnatomyKitError(f"unknown parameter(s) {unknown} for chapter {chapter}; "
                              f"accepted: {sorted(k for k in base if k not in ('model', 'corpus'))}")
    for name, value in sizes.items():
        if value is None:
            continue
        default = base[name]
        if isinstance(default, bool):
            if not isinstance(value, bool):
                raise AnatomyKitError(f"{name}={value!r} must be True or False")
        elif isinstance(default, int):
            check_int(name, value, minimum=1)
        elif isinstance(default, float):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise AnatomyKitError(f"{name}={value!r} must be a number > 0")
            value = float(value)
        elif isinstance(default, (list, tuple)):
            if not isinstance(value, (list, tuple)) or not value:
                raise AnatomyKitError(f"{name}={value!r} must be a non-empty list like {default!r}")
            value = list(value)
        base[name] = value
    model = model or base.pop("model")
    corpus = corpus or base.pop("corpus")
    base.pop("model", None)
    base.pop("corpus", None)
    from ..hf.models import check_model_name
    from ..manifest import corpus_entries

    check_model_name(model)
    check_choice("corpus", corpus, corpus_entries())
    run = Run(chapter=chapter, scale=scale, device=device, model=model, corpus=corpus, seed=int(seed),
              sizes=base, build_dir=Path(build_dir).resolve())
    print(run.describe())
    return run


def _claim_dict(claim) -> dict:
    """A claim as the report stores it; only :class:`anatomy_kit.verdicts.claims.Claim` (rule-decided) is accepted."""
    from ..verdicts.claims import Claim

    if not isinstance(claim, Claim):
        raise AnatomyKitError(f"claim={claim!r} is not a Claim; build it with anatomy_kit.verdicts.claims.Claim(id, ours, rule)")
    return claim.to_dict()
