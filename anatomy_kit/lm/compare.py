"""Paired comparison of training runs seed by seed (chapter 5).

Schedules are compared with the uniform baseline seed by seed (the same seed gives the same
data order and, for equal shapes, the same initialisation draw).
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass
from typing import Any, Mapping

import numpy as np

from ..validate import AnatomyKitError, check_finite, check_int

__all__ = ["paired_bootstrap_ci", "PairedDelta", "paired_deltas", "format_delta_table"]


def paired_bootstrap_ci(deltas: Any, *, n_resamples: int = 10_000, confidence: float = 0.95,
                        seed: int = 0) -> tuple[float, float, float]:
    """Mean of paired differences and its percentile bootstrap CI: ``(mean, low, high)`` (chapter 5).

    Resamples the *pairs* (seeds) with replacement and takes the ``(1±confidence)/2`` quantiles
    (``numpy.quantile``, linear) of the resampled means. When the number of distinct resamples
    ``n**n`` is at most ``n_resamples`` (n ≤ 5 seeds at the default), the bootstrap distribution
    is enumerated exactly instead of sampled, so the CI is deterministic and exact. With 3–5
    pairs the percentile bootstrap is known to under-cover: read the interval as descriptive.
    """
    d = np.asarray(deltas, dtype=float).ravel()
    if d.size == 0:
        raise AnatomyKitError("deltas is empty; need at least one paired difference")
    check_finite("deltas", d)
    n_resamples = check_int("n_resamples", n_resamples, minimum=1)
    if not 0 < float(confidence) < 1:
        raise AnatomyKitError(f"confidence={confidence!r} must lie strictly between 0 and 1 (e.g. 0.95)")
    n = d.size
    if n ** n <= n_resamples:
        idx = np.array(list(itertools.product(range(n), repeat=n)))  # every resample, equiprobable
    else:
        rng = np.random.default_rng(seed)
        idx = rng.integers(0, n, size=(n_resamples, n))
    means = d[idx].mean(axis=1)
    alpha = (1.0 - float(confidence)) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return float(d.mean()), float(low), float(high)


@dataclass(frozen=True)
class PairedDelta:
    """One row of :func:`paired_deltas`: schedule − baseline final loss over shared seeds."""

    schedule: str
    mean_loss: float
    sd_loss: float
    mean_delta: float
    ci_low: float
    ci_high: float
    n_seeds: int

    def as_dict(self) -> dict:
        return asdict(self)


def paired_deltas(results: Mapping[str, Mapping[Any, float]], baseline: str = "uniform", *,
                  n_resamples: int = 10_000, confidence: float = 0.95, seed: int = 0) -> list[PairedDelta]:
    """Per schedule: mean loss, mean paired delta vs ``baseline`` and its bootstrap CI (chapter 5).

    ``results[schedule][seed] = final loss``. Each schedule is paired with the baseline on the
    seeds both have (at least one is required). The baseline's own row has delta 0.
    """
    if baseline not in results:
        raise AnatomyKitError(f"baseline={baseline!r} is not among the schedules {sorted(results)!r}")
    base = results[baseline]
    rows = []
    for name, by_seed in results.items():
        seeds = sorted(set(by_seed) & set(base), key=str)
        if not seeds:
            raise AnatomyKitError(f"schedule {name!r} shares no seed with baseline {baseline!r} "
                                  f"(seeds {sorted(by_seed, key=str)} vs {sorted(base, key=str)})")
        losses = np.array([by_seed[s] for s in seeds], dtype=float)
        deltas = losses - np.array([base[s] for s in seeds], dtype=float)
        mean, lo, hi = paired_bootstrap_ci(deltas, n_resamples=n_resamples, confidence=confidence, seed=seed)
        all_losses = np.array(list(by_seed.values()), dtype=float)
        sd = float(all_losses.std(ddof=1)) if all_losses.size > 1 else float("nan")
        rows.append(PairedDelta(schedule=name, mean_loss=float(all_losses.mean()), sd_loss=sd, mean_delta=mean,
                                ci_low=lo, ci_high=hi, n_seeds=len(seeds)))
    return rows


def format_delta_table(rows: list[PairedDelta], confidence: float = 0.95) -> str:
    """A plain-text table of :func:`paired_deltas` rows (chapter 5)."""
    pct = f"{100 * confidence:g}% CI"
    head = f"{'schedule':<16} {'val loss':>16} {'Δ vs base':>10} {pct:>22} {'seeds':>5}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r.schedule:<16} {r.mean_loss:>8.4f} ± {r.sd_loss:<6.4f} {r.mean_delta:>+10.4f} "
                     f"{'[' + format(r.ci_low, '+.4f') + ', ' + format(r.ci_high, '+.4f') + ']':>22} {r.n_seeds:>5}")
    return "\n".join(lines)
