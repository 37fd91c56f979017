"""Diagnostics of a grown model: dead singular directions of its output projections, and loss spikes.

Chapter 6, *Growing the residual stream*. The author's precursor experiments found that after a
zero-padded width growth about half of the singular directions of every attention output
projection stayed inactive (σ ≤ 1e-6) through training. :func:`output_spectra` measures, for every
layer, the singular values of ``attn.proj`` (D × D) and ``mlp.fc2`` (D × F): how many of the D
possible directions are **dead** (σ ≤ ``rel_tol``·σ_max, float64 SVD; relative, so that it does
not depend on the weights' scale; the precursor's threshold was absolute) and the **entropy
effective rank** exp(−Σ pᵢ log pᵢ), pᵢ = σᵢ / Σσ (Roy & Vetterli, 2007), which is D for equal
singular values and counts near-dead directions fractionally.

:func:`spike_and_heal` reads a loss curve after growth: how far it rose above the loss the small
model had when it was grown, and at which step it came back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from anatomy_kit.validate import AnatomyKitError, check_choice, check_positive

__all__ = ["singular_values", "entropy_rank", "dead_directions", "OutputSpectrum", "output_spectra",
           "dead_fraction", "spike_and_heal", "SpikeHeal", "MODULES"]

MODULES = ("attn.proj", "mlp.fc2")


def singular_values(W: torch.Tensor) -> np.ndarray:
    """Singular values of a 2-D weight, descending, from a float64 SVD."""
    if not isinstance(W, torch.Tensor) or W.dim() != 2:
        raise AnatomyKitError(f"W must be a 2-D tensor, got {getattr(W, 'shape', type(W).__name__)}")
    return torch.linalg.svdvals(W.detach().to(torch.float64).cpu()).numpy()


def entropy_rank(sigma) -> float:
    """exp(entropy of σ/Σσ): between 1 (one direction) and len(σ) (all equal); 0 for a zero matrix."""
    s = np.asarray(sigma, dtype=float)
    if s.ndim != 1 or (s < 0).any() or not np.isfinite(s).all():
        raise AnatomyKitError("sigma must be a 1-D array of finite, non-negative singular values")
    total = s.sum()
    if total == 0:
        return 0.0
    p = s[s > 0] / total
    return float(math.exp(-(p * np.log(p)).sum()))


def dead_directions(sigma, rel_tol: float = 1e-6) -> int:
    """How many singular values are ≤ ``rel_tol``·σ_max (all of them for a zero matrix)."""
    check_positive("rel_tol", rel_tol)
    s = np.asarray(sigma, dtype=float)
    return int(s.size) if s.size == 0 or s.max() == 0 else int((s <= rel_tol * s.max()).sum())


@dataclass(frozen=True)
class OutputSpectrum:
    """One output projection of one layer: its singular values, dead count and entropy rank."""

    layer: int
    module: str
    full_rank: int
    dead: int
    entropy_rank: float
    sigma: tuple[float, ...]

    def to_dict(self) -> dict:
        return {"layer": self.layer, "module": self.module, "full_rank": self.full_rank, "dead": self.dead,
                "entropy_rank": self.entropy_rank, "sigma": list(self.sigma)}


def output_spectra(model, rel_tol: float = 1e-6) -> list[OutputSpectrum]:
    """``attn.proj`` and ``mlp.fc2`` of every block of a :class:`~anatomy_kit.width_growth.gpt.GPT`."""
    blocks = getattr(model, "blocks", None)
    if blocks is None:
        raise AnatomyKitError(f"model of type {type(model).__name__} has no .blocks; pass an anatomy_kit GPT")
    out = []
    for i, block in enumerate(blocks):
        for module in MODULES:
            W = block.get_submodule(module).weight
            s = singular_values(W)
            out.append(OutputSpectrum(i, module, min(W.shape), dead_directions(s, rel_tol), entropy_rank(s),
                                      tuple(float(x) for x in s)))
    return out


def dead_fraction(spectra: list[OutputSpectrum], new_dims: int, module: str = "attn.proj") -> float:
    """Mean over layers of (dead directions of ``module``) / ``new_dims`` (1.0: as many as the new width)."""
    check_choice("module", module, MODULES)
    if new_dims < 1:
        raise AnatomyKitError(f"new_dims={new_dims} must be >= 1")
    rows = [s.dead for s in spectra if s.module == module]
    if not rows:
        raise AnatomyKitError(f"no spectra of {module!r} given")
    return float(np.mean(rows)) / new_dims


@dataclass(frozen=True)
class SpikeHeal:
    """``spike``: the highest loss after growth minus the loss at growth; ``heal_step``: the first
    step at which the loss is back at or below it (None: not within the curve)."""

    before: float
    peak: float
    peak_step: int
    heal_step: int | None

    @property
    def spike(self) -> float:
        return self.peak - self.before


def spike_and_heal(curve: list[tuple[int, float]], before: float) -> SpikeHeal:
    """Read ``curve`` ``[(step, loss), …]`` (steps since growth, 0 = the grown model untrained)."""
    if not curve:
        raise AnatomyKitError("curve is empty; it needs (step, loss) pairs after growth")
    points = sorted((int(s), float(v)) for s, v in curve)
    step, peak = max(points, key=lambda p: p[1])
    after_peak = [s for s, v in points if s >= step and v <= before]
    return SpikeHeal(float(before), peak, step, after_peak[0] if after_peak else None)
