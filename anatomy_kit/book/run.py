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
from ..manifest import registry_stamp
from ..validate import AnatomyKitError, check_choice, check_int
from ..store import Store

SCALES = ("smoke", "hour", "full")
DEVICES = ("auto", "cpu", "cuda")
#: The data a run collects: ``exploratory`` (the seeds and evaluation text every run used before the rules
#: were frozen) and, once the registry's freeze declares it, ``confirmatory`` (its plan's seeds and text).
PHASES = ("exploratory", "confirmatory")
#: The phase a run takes when its ``phase`` parameter is ``None``.
DEFAULT_PHASE = "confirmatory"
#: Parameters that change how a run goes, never what it measures: setting them keeps a run on its plan.
NEUTRAL_PARAMETERS = ("device", "build_dir", "processes", "n_jobs")


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
    phase: str = "exploratory"
    overrides: tuple[str, ...] = ()
    """The parameters set away from the scale's default (model, corpus, seed, sizes; device and the like
    excluded): a run with any is not the registered one, and its verdicts are exploratory."""

    @property
    def key(self) -> str:
        """A short hash of everything that determines the results."""
        d = {k: v for k, v in asdict(self).items() if k not in ("build_dir", "started", "device", "overrides")}
        return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:12]

    @property
    def text_split(self) -> str:
        """The evaluation text of this run's phase: ``"standard"`` (exploratory) or ``"held-out"`` (confirmatory;
        :mod:`anatomy_kit.data.blocks`). Every chapter passes it to ``token_blocks``, ``bpe_tokenizer`` and the card."""
        from ..data.blocks import text_split_of

        return text_split_of(self.phase)

    def describe(self) -> str:
        sizes = ", ".join(f"{k}={v}" for k, v in self.sizes.items())
        return (f"chapter {self.chapter} at scale={self.scale!r}, {self.phase} data: model={self.model!r}, "
                f"corpus={self.corpus!r}, device={self.device!r}, seed={self.seed}; {sizes}")

    def design(self, claim_id: str):
        """The registered design of ``claim_id`` at this run's scale (:class:`~anatomy_kit.verdicts.registration.Design`):
        the values the chapter reads (seed counts, null draws, arms, K), whether this run is the registered one
        (``on_plan``) and its phase. A run at the scale's defaults whose sizes differ from the registered design is
        an error: a changed design is an amendment of the registry, never a silent edit of a chapter."""
        from ..verdicts.registry import Design, rule_registry

        registry = rule_registry()
        if claim_id not in registry.entries:
            raise AnatomyKitError(f"claim {claim_id!r} is not in the rule registry (data_manifest/registry/)")
        entry = registry.entries[claim_id]
        if entry.chapter != self.chapter:
            raise AnatomyKitError(f"claim {claim_id!r} belongs to {entry.chapter}, not {self.chapter}")
        _, forms = entry.current
        if self.scale not in forms:
            raise AnatomyKitError(f"claim {claim_id!r} has no registered design at scale {self.scale!r}")
        values = dict(forms[self.scale].design)
        mine = json.loads(json.dumps({"model": self.model, "corpus": self.corpus, **self.sizes}, default=str))
        differ = [f"{k}: run {mine[k]!r}, registered {v!r}" for k, v in values.items() if k in mine and mine[k] != v]
        if differ and not self.overrides:
            raise AnatomyKitError(f"{self.chapter} at scale {self.scale!r} runs claim {claim_id!r} with a design other "
                                  f"than the registered one ({'; '.join(differ)}): a changed design is an amendment "
                                  "(data_manifest/registry/)")
        off = "; ".join(f"{k} set to {getattr(self, k, None) if k in ('model', 'corpus', 'seed') else self.sizes.get(k)!r}"
                        for k in self.overrides)
        return Design(claim_id, self.scale, values, on_plan=not self.overrides, off_plan=off, phase=self.phase,
                      spec=forms[self.scale].spec)

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
            "run": {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()
                    if k not in ("build_dir", "started")},
            "seconds": round(time.time() - self.started, 1),
            "environment": run_environment(),
            "registry": registry_stamp(),
            "metrics": metrics,
            "claims": [_claim_dict(c) for c in claims],
        }
        return write_json(out, doc)


def phase_seed_offset(phase: str) -> int:
    """The first seed of a phase: 0 for the exploratory data, the freeze plan's ``seed_offset`` for the
    confirmatory data (seeds no earlier run used)."""
    check_choice("phase", phase, PHASES)
    if phase == "exploratory":
        return 0
    from ..verdicts.registry import rule_registry

    freeze = rule_registry().freeze
    if freeze is None or "seed_offset" not in freeze.plan:
        raise AnatomyKitError("phase='confirmatory' needs the frozen registry's plan (data_manifest/registry/"
                              "freeze.yaml); the registry is not frozen yet, so only phase='exploratory' exists")
    return check_int("plan seed_offset", freeze.plan["seed_offset"], minimum=1)


def resolve_run(chapter: str, *, scale: str, device: str, defaults: dict[str, dict[str, Any]],
                model: str | None = None, corpus: str | None = None, seed: int = 0,
                build_dir: str | os.PathLike = "../build", phase: str | None = None, **sizes: Any) -> Run:
    """Validate a chapter's parameters and fill the defaults of its scale.

    ``defaults`` maps each scale to a dict that holds ``model``, ``corpus`` and every size the
    chapter accepts. A size passed as ``None`` takes the scale's default; a size the chapter
    does not declare is an error (so a misspelt papermill parameter cannot pass silently).
    ``phase`` (``None``: :data:`DEFAULT_PHASE`) picks the data: the run's first seed is the phase's
    offset (:func:`phase_seed_offset`) plus ``seed``. Every parameter set away from the scale's
    default (``seed`` ≠ 0 included; device and worker counts excepted) is listed in ``Run.overrides``.
    """
    check_choice("scale", scale, SCALES)
    check_choice("device", device, DEVICES)
    check_int("seed", seed, minimum=0)
    phase = check_choice("phase", DEFAULT_PHASE if phase is None else phase, PHASES)
    offset = phase_seed_offset(phase)
    base = dict(defaults[scale])
    overrides = [name for name, value in (("model", model), ("corpus", corpus)) if value is not None
                 and value != base.get(name)] + (["seed"] if seed else [])
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
        if value != base[name] and name not in NEUTRAL_PARAMETERS:
            overrides.append(name)
        base[name] = value
    model = model or base.pop("model")
    corpus = corpus or base.pop("corpus")
    base.pop("model", None)
    base.pop("corpus", None)
    from ..hf.models import check_model_name
    from ..manifest import corpus_entries

    check_model_name(model)
    check_choice("corpus", corpus, corpus_entries())
    run = Run(chapter=chapter, scale=scale, device=device, model=model, corpus=corpus, seed=offset + int(seed),
              sizes=base, build_dir=Path(build_dir).resolve(), phase=phase, overrides=tuple(overrides))
    print(run.describe())
    return run


def _claim_dict(claim) -> dict:
    """A claim as the report stores it; only :class:`anatomy_kit.verdicts.claims.Claim` (rule-decided) is accepted."""
    from ..verdicts.claims import Claim

    if not isinstance(claim, Claim):
        raise AnatomyKitError(f"claim={claim!r} is not a Claim; build it with anatomy_kit.verdicts.claims.Claim(id, ours, rule)")
    return claim.to_dict()
