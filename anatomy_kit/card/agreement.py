"""Do the signals agree? Rank correlations, top-k overlaps against chance, and disagreement flags.

- every pair of per-layer signals: Spearman's ρ with an exact (L ≤ 9) or permutation p
  (:func:`anatomy_kit.stats.spearman`);
- every pair's *prunable sets* (the k layers each calls least important, k = K): how many layers they
  share, and the chance that a random k-set shares as many (:func:`anatomy_kit.stats.overlap_chance`,
  the hypergeometric tail of chapter 1's ``SetOverlap`` rule: layers exchangeable);
- a flag on every layer that a cheap signal puts in its prunable set while skipping the layer is
  costly: its skip ΔPPL is at least the median over layers *and* its interval lies above 0.

Used by the book page *Your model's report card*.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np

from ..stats import overlap_chance, spearman

__all__ = ["prunable_set", "rank_agreement", "top_k_overlaps", "disagreement_flags", "FLAG_RULE"]

FLAG_RULE = ("a cheap signal puts the layer among its K most prunable while skipping it costs at least the median "
             "skip ΔPPL over layers, with a 95 % interval above 0")


def prunable_set(values: np.ndarray, k: int) -> set[int]:
    """The ``k`` layers with the lowest values (ties: lower layer first)."""
    order = sorted(range(len(values)), key=lambda l: (float(values[l]), l))
    return set(order[:k])


def rank_agreement(signals: dict[str, np.ndarray], *, seed: int = 0, n_perm: int = 10_000) -> list[dict]:
    """Spearman ρ and p for every pair of signals (in the order given)."""
    out = []
    for a, b in combinations(signals, 2):
        r = spearman(signals[a], signals[b], n_perm=n_perm, seed=seed)
        out.append({"a": a, "b": b, "rho": None if np.isnan(r.rho) else r.rho,
                    "p": None if np.isnan(r.p) else r.p, "method": r.method, "n": r.n})
    return out


def top_k_overlaps(signals: dict[str, np.ndarray], k: int) -> list[dict]:
    """Shared members of every pair's prunable ``k``-sets, with the chance of sharing as many."""
    n = len(next(iter(signals.values())))
    sets = {name: prunable_set(v, k) for name, v in signals.items()}
    out = []
    for a, b in combinations(signals, 2):
        shared = sorted(sets[a] & sets[b])
        out.append({"a": a, "b": b, "k": k, "shared": shared, "n_shared": len(shared),
                    "chance_p": overlap_chance(len(shared), n, k, k)})
    return out


def disagreement_flags(cheap: dict[str, np.ndarray], skip: list[dict], k: int) -> list[list[str]]:
    """Per layer, the cheap signals that call it prunable while its skip ΔPPL is large (:data:`FLAG_RULE`).

    ``skip``: the card's per-layer skip summaries (``delta_pct``, ``low``).
    """
    median = float(np.median([s["delta_pct"] for s in skip]))
    costly = [s["delta_pct"] >= median and s["low"] > 0 for s in skip]
    sets = {name: prunable_set(v, k) for name, v in cheap.items()}
    return [[name for name, members in sets.items() if layer in members and costly[layer]]
            for layer in range(len(skip))]
