"""Do the signals agree? The rank-correlation matrix, families of signals, and the layers they dispute.

- :func:`agreement_matrix`: Spearman ρ of every pair of signals over the layers where both are defined, with
  a permutation p (exact for n ≤ 9; :func:`anatomy_kit.stats.spearman`);
- :func:`signal_families`: average-linkage clustering on the distance 1 − ρ, cut at 1 − ``min_rho``:
  a *family* is a group whose members correlate, on average, at ρ ≥ ``min_rho`` (declared before the
  data: 0.5). A ρ that is undefined (a constant signal) counts as 0, no evidence of agreement;
- :func:`percentile_ranks` and :func:`family_score`: a signal's layers as percentiles (1 = the most
  important layer, 0 = the least), and a family's mean percentile per layer;
- :func:`disputed_layers`: for two families, the layers whose percentiles differ most;
- :func:`same_signal_groups`: signals that are one signal in two names (identical one-shot sets at
  every k, or ρ ≥ :data:`SAME_SIGNAL_RHO`): a multi-part verdict counts each group as one part.

Used by chapter 7 (*Synthesis*).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from ..stats import SpearmanResult, spearman
from ..validate import AnatomyKitError, check_int
from .depth import importance_percentiles
from .signals import SignalTable

__all__ = ["Agreement", "agreement_matrix", "signal_families", "percentile_ranks", "family_score", "disputed_layers",
           "FAMILY_MIN_RHO", "SAME_SIGNAL_RHO", "same_signal_groups"]

#: Declared before the data: a family's members correlate at ρ ≥ 0.5 on average (average linkage).
FAMILY_MIN_RHO = 0.5
#: Declared before the data: two signals are one when their rankings correlate at ρ ≥ 0.95 (or their
#: one-shot sets are the same at every k); a verdict with a part per signal then has one part for both.
SAME_SIGNAL_RHO = 0.95


@dataclass(frozen=True)
class Agreement:
    """ρ, p and n for every pair of ``names``; (S, S) arrays, the diagonal ρ = 1, p = 0."""

    names: tuple[str, ...]
    rho: np.ndarray = field(repr=False)      # (S, S), NaN where undefined
    p: np.ndarray = field(repr=False)        # (S, S)
    n: np.ndarray = field(repr=False)        # (S, S) int, layers where both signals are defined
    method: np.ndarray = field(repr=False)   # (S, S) str

    def index(self, name: str) -> int:
        if name not in self.names:
            raise AnatomyKitError(f"no signal {name!r}; the matrix has {', '.join(self.names)}")
        return self.names.index(name)

    def pair(self, a: str, b: str) -> SpearmanResult:
        i, j = self.index(a), self.index(b)
        return SpearmanResult(float(self.rho[i, j]), float(self.p[i, j]), int(self.n[i, j]), str(self.method[i, j]))

    def to_dict(self) -> dict:
        clean = lambda m: [[None if not np.isfinite(x) else float(x) for x in row] for row in m]  # noqa: E731
        return {"names": list(self.names), "rho": clean(self.rho), "p": clean(self.p), "n": self.n.tolist()}


def agreement_matrix(table: SignalTable, *, n_perm: int = 10_000, seed: int = 0) -> Agreement:
    """Spearman ρ and p of every pair of the table's signals (module docstring)."""
    n_perm = check_int("n_perm", n_perm, minimum=100)
    values = table.values()
    names = tuple(values)
    s = len(names)
    rho, p = np.eye(s), np.zeros((s, s))
    n = np.zeros((s, s), dtype=int)
    method = np.full((s, s), "identity", dtype=object)
    for i in range(s):
        n[i, i] = int(np.isfinite(values[names[i]]).sum())
        for j in range(i + 1, s):
            x, y = values[names[i]], values[names[j]]
            both = np.isfinite(x) & np.isfinite(y)
            if both.sum() < 3:
                r = SpearmanResult(np.nan, np.nan, int(both.sum()), "undefined")
            else:
                r = spearman(x[both], y[both], n_perm=n_perm, seed=seed)
            rho[i, j] = rho[j, i] = r.rho
            p[i, j] = p[j, i] = r.p
            n[i, j] = n[j, i] = r.n
            method[i, j] = method[j, i] = r.method
    return Agreement(names, rho, p, n, method)


def signal_families(result: Agreement, *, min_rho: float = FAMILY_MIN_RHO) -> tuple[list[list[str]], list[int]]:
    """``(families, order)``: the signals grouped (module docstring), largest family first, and a leaf
    order of all signals (indices into ``result.names``) that puts each family's members side by side."""
    from scipy.cluster.hierarchy import fcluster, leaves_list, linkage, optimal_leaf_ordering
    from scipy.spatial.distance import squareform

    if not -1 < min_rho < 1:
        raise AnatomyKitError(f"min_rho={min_rho!r}; accepted: a correlation strictly between -1 and 1")
    s = len(result.names)
    if s == 1:
        return [list(result.names)], [0]
    dist = 1.0 - np.where(np.isfinite(result.rho), result.rho, 0.0)
    np.fill_diagonal(dist, 0.0)
    condensed = squareform(np.clip((dist + dist.T) / 2, 0.0, 2.0), checks=False)
    tree = linkage(condensed, method="average")
    order = [int(i) for i in leaves_list(optimal_leaf_ordering(tree, condensed))] if s > 2 else [0, 1]
    labels = fcluster(tree, t=1.0 - min_rho, criterion="distance")
    groups: dict[int, list[str]] = {}
    for i in order:
        groups.setdefault(int(labels[i]), []).append(result.names[i])
    families = sorted(groups.values(), key=lambda g: (-len(g), order.index(result.names.index(g[0]))))
    return families, order


def percentile_ranks(values: np.ndarray) -> np.ndarray:
    """(L,) → (L,): :func:`.depth.importance_percentiles` over the defined layers (1 = the most important,
    0 = the least, ties averaged); NaN stays NaN."""
    v = np.asarray(values, dtype=float)
    out = np.full(v.shape, np.nan)
    ok = np.isfinite(v)
    if ok.sum() < 2:
        raise AnatomyKitError(f"a percentile rank needs at least two defined values, got {int(ok.sum())}")
    out[ok] = importance_percentiles(v[ok])
    return out


def family_score(table: SignalTable, family: list[str]) -> np.ndarray:
    """(L,) mean percentile of the family's signals per layer (over the signals defined there)."""
    if not family:
        raise AnatomyKitError("a family needs at least one signal")
    ranks = np.vstack([percentile_ranks(table[name].values) for name in family])
    counts = np.isfinite(ranks).sum(axis=0)
    sums = np.where(np.isfinite(ranks), ranks, 0.0).sum(axis=0)
    return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def disputed_layers(table: SignalTable, a: list[str], b: list[str], top: int = 3) -> list[dict]:
    """The ``top`` layers where families ``a`` and ``b`` disagree most: ``{layer, a, b, gap}``, gap = a − b."""
    top = check_int("top", top, minimum=1)
    sa, sb = family_score(table, a), family_score(table, b)
    gap = sa - sb
    ok = np.flatnonzero(np.isfinite(gap))
    worst = sorted(ok, key=lambda l: (-abs(gap[l]), l))[:top]
    return [{"layer": int(l), "a": float(sa[l]), "b": float(sb[l]), "gap": float(gap[l])} for l in worst]


def same_signal_groups(names: Sequence[str], sets: Mapping[str, Sequence[Sequence[int]]], result: Agreement, *,
                       min_rho: float = SAME_SIGNAL_RHO) -> list[list[str]]:
    """``names`` grouped into signals that are one: two names join when their one-shot sets
    (``sets[name]``: the set for k = 1 … K) are the same at every k, or their Spearman ρ in ``result`` is
    at least ``min_rho`` (undefined: no); groups are closed transitively and keep ``names``' order.
    Chapter 7: Block Influence and angular distance, one formula in two names at a small model's
    depth, count once in a verdict whose parts are signals."""
    names = list(names)
    if len(set(names)) != len(names) or not names:
        raise AnatomyKitError(f"names={names!r} must be distinct and non-empty")
    if not 0 < min_rho <= 1:
        raise AnatomyKitError(f"min_rho={min_rho!r} must lie in (0, 1]")
    missing = [n for n in names if n not in sets]
    if missing:
        raise AnatomyKitError(f"no one-shot sets for {missing}")
    norm = {n: [tuple(sorted(int(x) for x in s)) for s in sets[n]] for n in names}
    root = {n: n for n in names}

    def find(n: str) -> str:
        while root[n] != n:
            n = root[n]
        return n

    for i, a in enumerate(names):
        for b in names[i + 1:]:
            rho = result.pair(a, b).rho
            if norm[a] == norm[b] or (np.isfinite(rho) and rho >= min_rho):
                root[find(b)] = find(a)
    groups: dict[str, list[str]] = {}
    for n in names:
        groups.setdefault(find(n), []).append(n)
    return list(groups.values())
