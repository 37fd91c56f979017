"""Do the signals agree? Rank correlations, top-k overlaps against chance, and disagreement flags.

- every pair of per-layer signals: Spearman's ρ with an exact (L ≤ 9) or permutation p
  (:func:`anatomy_kit.stats.spearman`);
- every pair's *prunable sets* (the k layers each calls least important, k = K): how many layers they
  share, and the chance that a random k-set shares as many (:func:`anatomy_kit.stats.overlap_chance`,
  the hypergeometric tail of chapter 1's ``SetOverlap`` rule: layers exchangeable);
- a flag on every layer that a cheap signal would prune while skipping the layer is harmful
  (:func:`disagreement_flags`): the signal puts it in one of its proposed sets (its K lowest) *or* in
  its prunable half (its ⌈L/2⌉ lowest), and the whole skip ΔPPL interval lies above the harm threshold
  declared in the settings (:attr:`.settings.CardSettings.harm_pct`). A layer whose cost is at the
  top while the signal ranks it middling (SmolLM2's layer 11) is flagged, not only a signal's top five.

Used by the book page *Your model's report card*.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np

from ..stats import overlap_chance, spearman

__all__ = ["prunable_set", "flagging_set", "rank_agreement", "top_k_overlaps", "disagreement_flags", "flag_rule"]


def flag_rule(harm_pct: float, confidence: float = 0.95) -> str:
    """The flag rule in words, with its declared harm threshold (recorded in every card)."""
    return (f"a cheap signal would prune the layer (it is in one of the signal's proposed sets, its K lowest, or in "
            f"its prunable half, its ⌈L/2⌉ lowest) while the whole {100 * confidence:g} % interval of the skip ΔPPL "
            f"lies above the harm threshold of +{harm_pct:g} %")


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


def flagging_set(values: np.ndarray, k: int) -> set[int]:
    """The layers a signal would prune: its K lowest (every set it proposes, k ≤ K) and its ⌈L/2⌉ lowest."""
    return prunable_set(values, max(k, -(-len(values) // 2)))


def disagreement_flags(cheap: dict[str, np.ndarray], skip: list[dict], k: int, harm_pct: float) -> list[list[str]]:
    """Per layer, the cheap signals that would prune it while skipping it is harmful (:func:`flag_rule`).

    ``skip``: the card's per-layer skip summaries (``low``: the interval's lower end, %). Harmful: ``low >
    harm_pct`` (an interval touching the threshold is not wholly above it).
    """
    harmful = [s["low"] > harm_pct for s in skip]
    sets = {name: flagging_set(v, k) for name, v in cheap.items()}
    return [[name for name, members in sets.items() if layer in members and harmful[layer]]
            for layer in range(len(skip))]
