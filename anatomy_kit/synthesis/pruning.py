"""The decisive test: remove the k layers a signal calls least important, and measure what breaks.

For every signal and k = 1 … K the *one-shot* set is the k layers with the lowest values (ties: lower
layer first; layers where the signal is undefined are never chosen). Beside them: sets given from
elsewhere (greedy removal from the report card, chosen on its calibration blocks), "drop the last k",
and the null, random k-sets: k = 1 every single layer (exact), k ≥ 2 ``n_random`` distinct seeded
draws. Each distinct set is measured once, on the evaluation blocks, as the perplexity of the model with
those layers skipped (replayed from the first of them through the prefix cache); every set's ΔPPL has a
t interval paired over blocks, and its place in the null is a :class:`RandomSetNull` whose one-sided p
is ``P(random ≤ ours)`` (k = 1: ``#/L``; k ≥ 2: ``(1 + #)/(1 + n)``; small = better than chance).
Per-block NLLs of every set are kept in ``store`` (a dict-like), so an interrupted run resumes.

The position-only null (:func:`position_null`) asks the harder question: better than random sets drawn
from the interior layers alone, chosen by position (the outer :data:`EDGE_SHARE` of the depth at each
end left out, at least one layer: declared without looking at any importance), so that a set is not
"better than chance" merely for avoiding the edge layers every random set risks. At least
``n_sets`` = 99 sets (p floor 0.01), every interior set when there are no more than that (exact);
the interior sets the decisive test already measured are reused, then fresh distinct draws added.

Used by chapter 7 (*Synthesis*).
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import asdict, dataclass, field
from typing import Sequence

import numpy as np
import torch

from ..anatomy.blockwise import block_nll_from_layer, block_targets, ppl_change_interval
from ..card.pruning import last_k_sets, pruned, random_p, random_sets, set_key
from ..hf.evaluation import capture_prefix
from ..hf.layers import decoder_layers
from ..progress import progress_bar
from ..stats import PermutationNull, format_p
from ..validate import AnatomyKitError, check_int

__all__ = ["RandomSetNull", "PrunedSet", "PruningTest", "one_shot", "random_set_null", "card_measurements",
           "decisive_test", "EDGE_SHARE", "interior_layers", "position_null_sets", "position_null"]

#: Declared before the data: the position-only null leaves out this share of the depth at each end
#: (at least one layer): 3 of 30 layers at each end of SmolLM2-135M.
EDGE_SHARE = 0.1


@dataclass(frozen=True)
class RandomSetNull(PermutationNull):
    """A pruned set's perplexity against random sets of the same size (a :class:`PermutationNull` whose
    draws are random layer sets rather than shuffled orders)."""

    k: int = 1

    def describe(self, digits: int = 3) -> str:
        what = (f"all {self.n_perm} single layers" if self.method == "exact"
                else f"{self.n_perm} random {self.k}-sets")
        return (f"PPL {self.observed:.{digits}g} vs random sets {self.null_mean:.{digits}g} "
                f"[{self.null_low:.{digits}g}, {self.null_high:.{digits}g}] (central 95 % of {what}), "
                f"{self.alternative} {format_p(self.p)}")

    @property
    def draws(self) -> str:
        return "single layers" if self.method == "exact" else f"random {self.k}-sets"


@dataclass(frozen=True)
class PrunedSet:
    """One measured set: ``method`` (a signal's name, ``greedy``, ``last k`` or ``random``), its layers, PPL,
    ΔPPL % with its paired t interval, and (non-random sets) its :class:`RandomSetNull`."""

    method: str
    layers: tuple[int, ...]
    ppl: float
    delta_pct: float
    low: float
    high: float
    null: RandomSetNull | None = field(default=None, compare=False)

    @property
    def k(self) -> int:
        return len(self.layers)

    def to_dict(self) -> dict:
        return {"method": self.method, "k": self.k, "layers": list(self.layers), "ppl": self.ppl,
                "delta_pct": self.delta_pct, "low": self.low, "high": self.high,
                "p_random": None if self.null is None else self.null.p}


@dataclass(frozen=True)
class PruningTest:
    """Every measured set; ``seconds_per_set``: mean wall time of one pruned evaluation."""

    baseline_ppl: float
    n_tokens: int
    max_k: int
    sets: tuple[PrunedSet, ...]
    random: dict[int, tuple[PrunedSet, ...]]
    seconds_per_set: float

    def curve(self, method: str) -> list[PrunedSet]:
        """The method's sets for k = 1 … K (those it proposed)."""
        out = sorted((s for s in self.sets if s.method == method), key=lambda s: s.k)
        if not out:
            raise AnatomyKitError(f"no sets by {method!r}; methods: {', '.join(self.methods)}")
        return out

    @property
    def methods(self) -> list[str]:
        return list(dict.fromkeys(s.method for s in self.sets))

    def mean_log_ppl(self, method: str) -> float:
        """The method's mean log PPL over k = 1 … K: its pruning curve in one number (lower = less harm)."""
        c = self.curve(method)
        if len(c) != self.max_k:
            raise AnatomyKitError(f"{method!r} proposed sets for k = {[s.k for s in c]}, not every k = 1 … {self.max_k}")
        return float(np.mean([np.log(s.ppl) for s in c]))

    def to_dict(self) -> dict:
        return {"baseline_ppl": self.baseline_ppl, "n_tokens": self.n_tokens, "max_k": self.max_k,
                "seconds_per_set": self.seconds_per_set, "sets": [s.to_dict() for s in self.sets],
                "random": {str(k): [{"layers": list(r.layers), "ppl": r.ppl} for r in v]
                           for k, v in self.random.items()}}


def one_shot(values: np.ndarray, k: int) -> tuple[int, ...]:
    """The ``k`` layers with the lowest defined values (ties: lower layer first), sorted."""
    v = np.asarray(values, dtype=float)
    ok = [l for l in range(v.size) if np.isfinite(v[l])]
    k = check_int("k", k, minimum=1, maximum=len(ok))
    return tuple(sorted(sorted(ok, key=lambda l: (v[l], l))[:k]))


def random_set_null(ppl: float, pool: Sequence[float], k: int, exact: bool) -> RandomSetNull:
    """``ppl`` against the PPLs of random ``k``-sets; ``p`` is the card's :func:`~anatomy_kit.card.pruning.random_p`
    (``P(random ≤ ppl)``: ``exact``, every set enumerated, ``#/n``; else ``(1 + #)/(1 + n)``; ties count)."""
    if len(pool) == 0:
        raise AnatomyKitError("random_set_null needs at least one random set's PPL")
    r = np.asarray(pool, dtype=float)
    p = random_p(ppl, r, exact)
    low, high = np.quantile(r, [0.025, 0.975])
    return RandomSetNull(float(ppl), float(p), "less", int(r.size), int(r.size), "exact" if exact else "monte carlo",
                         float(r.mean()), float(r.std()), float(low), float(high), r, k=k)


def card_measurements(progress: dict) -> dict[str, list[float]]:
    """Per-block NLLs the report card already measured on its evaluation blocks, by set key: every single
    layer skipped (its causal sweep) and every pruned set it measured. ``progress``: the card's
    ``progress.json`` (:mod:`anatomy_kit.card.cache`). Seeding :func:`decisive_test`'s ``store`` with them
    means no set the card measured is measured again (same model, blocks and batches: the same numbers)."""
    batches = sorted((k for k in progress if k.startswith("batch/")), key=lambda k: int(k.split("/")[1]))
    if not batches:
        raise AnatomyKitError("the card's progress holds no evaluation batch ('batch/0' …); is it a card's progress.json?")
    out: dict[str, list[float]] = {}
    if all(progress[b].get("causal") for b in batches):
        skip = np.concatenate([np.asarray(progress[b]["causal"]["skip"], float) for b in batches], axis=1)  # (L, B)
        out.update({str(j): row.tolist() for j, row in enumerate(skip)})
    pruned_batches = sorted((k for k in progress if k.startswith("prune/")), key=lambda k: int(k.split("/")[1]))
    if len(pruned_batches) == len(batches):
        for key in progress[pruned_batches[0]]:
            out[key] = [x for b in pruned_batches for x in progress[b][key]]
    return out


def _proposals(signals: dict, given: dict, n: int, max_k: int) -> list[tuple[str, tuple[int, ...]]]:
    """``(method, layers)`` of every non-random set: one-shot by signal, the given sets, the last k."""
    out: list[tuple[str, tuple[int, ...]]] = []
    for name, v in signals.items():
        out += [(name, one_shot(v, k)) for k in range(1, max_k + 1) if k <= int(np.isfinite(v).sum())]
    for method, sets in given.items():
        for s in sets:
            s = tuple(sorted(int(x) for x in s))
            if not s or len(set(s)) != len(s) or min(s) < 0 or max(s) >= n:
                raise AnatomyKitError(f"given set {s} of {method!r} is not a set of distinct layers in 0..{n - 1}")
            out.append((method, s))
    return out + [("last k", c.layers) for c in last_k_sets(n, max_k)]


def _measure_streamed(model, batches, wanted: dict[str, tuple[int, ...]], store, progress: bool
                      ) -> tuple[np.ndarray, dict[str, np.ndarray], list[float]]:
    """(intact per-block NLL, ``{set key: per-block NLL}``, seconds per measured set) of ``wanted`` sets.

    Streamed: one batch's prefix cache at a time, every set not yet in ``store`` measured on it
    before the next batch, so memory holds one batch whatever the number of evaluation tokens.
    """
    blocks: dict[str, np.ndarray] = {}
    if store is not None:
        blocks = {key: np.asarray(store[key], dtype=float) for key in wanted if key in store}
    missing = [key for key in wanted if key not in blocks]
    parts: dict[str, list[np.ndarray]] = {key: [] for key in missing}
    seconds = dict.fromkeys(missing, 0.0)
    base_parts = []
    for batch in progress_bar(batches, desc="pruned sets, batch by batch", enabled=progress):
        cache = capture_prefix(model, [batch])
        base_parts.append(cache.baseline_block_nll())
        for key in missing:
            t0 = time.perf_counter()
            with pruned(model, wanted[key]):
                parts[key].append(block_nll_from_layer(model, cache, min(wanted[key])))
            seconds[key] += time.perf_counter() - t0
        del cache
    for key in missing:
        blocks[key] = np.concatenate(parts[key])
        if store is not None:
            store[key] = blocks[key].tolist()
    return np.concatenate(base_parts), blocks, list(seconds.values())


@torch.no_grad()
def decisive_test(model, batches, signals: dict[str, np.ndarray], *, max_k: int, n_random: int, seed: int = 0,
                  given: dict[str, Sequence[Sequence[int]]] | None = None, store=None,
                  confidence: float = 0.95, progress: bool = False) -> PruningTest:
    """Measure every signal's one-shot sets, the ``given`` sets, the last k and the random null (module docstring).

    ``signals``: ``{name: (L,)}``, higher = more important; ``given``: ``{method: [layers for k = 1 … K]}``.
    """
    layers = decoder_layers(model)
    n = len(layers)
    max_k = check_int("max_k", max_k, minimum=1, maximum=n - 1)
    n_random = check_int("n_random", n_random, minimum=1)
    if not signals:
        raise AnatomyKitError("decisive_test needs at least one signal")
    for name, v in signals.items():
        if np.asarray(v).shape != (n,):
            raise AnatomyKitError(f"signal {name!r} has shape {np.asarray(v).shape}; this model has {n} layers")
    proposals = _proposals(signals, given or {}, n, max_k)
    randoms = [(1, (j,)) for j in range(n)] + [(c.k, c.layers) for c in random_sets(n, max_k, n_random, seed)]
    wanted = {set_key(s): s for _, s in proposals} | {set_key(s): s for _, s in randoms}

    targets = block_targets(batches)
    base, blocks, timed = _measure_streamed(model, batches, wanted, store, progress)

    def measured(method: str, s: tuple[int, ...]) -> PrunedSet:
        iv = ppl_change_interval(base, blocks[set_key(s)], targets, confidence)
        ppl = float(np.exp(blocks[set_key(s)].sum() / targets.sum()))
        return PrunedSet(method, s, ppl, iv.mean, iv.low, iv.high)

    random = {}
    for k, s in randoms:
        random.setdefault(k, []).append(measured("random", s))
    sets = []
    for method, s in proposals:
        m = measured(method, s)
        pool = [r.ppl for r in random[m.k]] if m.k in random else []
        sets.append(PrunedSet(**{**{f: getattr(m, f) for f in ("method", "layers", "ppl", "delta_pct", "low", "high")},
                                 "null": random_set_null(m.ppl, pool, m.k, exact=m.k == 1) if pool else None}))
    baseline = float(np.exp(base.sum() / targets.sum()))
    return PruningTest(baseline, int(targets.sum()), max_k, tuple(sets),
                       {k: tuple(v) for k, v in random.items()}, float(np.mean(timed)) if timed else float("nan"))


def interior_layers(n_layers: int, edge_share: float = EDGE_SHARE) -> tuple[int, ...]:
    """The layers a position-only null draws from: all but ``max(1, ⌈edge_share·L⌉)`` at each end
    (``range(3, 27)`` of 30 layers at 10 %)."""
    n = check_int("n_layers", n_layers, minimum=3)
    if not 0 <= edge_share < 0.5:
        raise AnatomyKitError(f"edge_share={edge_share!r} must lie in [0, 0.5)")
    m = max(1, math.ceil(edge_share * n - 1e-9))
    if n - 2 * m < 1:
        raise AnatomyKitError(f"edge_share={edge_share} leaves no interior layer of {n}")
    return tuple(range(m, n - m))


def position_null_sets(n_layers: int, k: int, n_sets: int, seed: int, measured: Sequence[Sequence[int]] = (),
                       edge_share: float = EDGE_SHARE) -> tuple[tuple[tuple[int, ...], ...], bool]:
    """``(sets, exact)``: every interior ``k``-set when there are at most ``n_sets`` (``exact``), else
    ``n_sets`` distinct ones: the interior ``k``-sets among ``measured`` first (in their order, so what
    was measured is reused), then fresh uniform draws (``numpy.random.default_rng(seed)``) until
    ``n_sets``. Uniform either way: the measured sets came from uniform draws over all k-sets."""
    pool = interior_layers(n_layers, edge_share)
    k = check_int("k", k, minimum=1, maximum=len(pool))
    n_sets = check_int("n_sets", n_sets, minimum=1)
    if math.comb(len(pool), k) <= n_sets:
        return tuple(itertools.combinations(pool, k)), True
    inside = set(pool)
    chosen = dict.fromkeys(t for t in (tuple(sorted(int(x) for x in s)) for s in measured)
                           if len(t) == k and len(set(t)) == k and set(t) <= inside)
    chosen = dict.fromkeys(list(chosen)[:n_sets])
    rng = np.random.default_rng(check_int("seed", seed, minimum=0))
    while len(chosen) < n_sets:
        chosen.setdefault(tuple(sorted(int(x) for x in rng.choice(pool, size=k, replace=False))))
    return tuple(chosen), False


@torch.no_grad()
def position_null(model, batches, test: PruningTest, methods: Sequence[str], *, k: int, n_sets: int = 99,
                  seed: int = 0, store=None, edge_share: float = EDGE_SHARE,
                  progress: bool = False) -> dict[str, RandomSetNull]:
    """Each method's ``k``-set (from ``test``) against the position-only null (module docstring):
    ``{method: RandomSetNull}`` with ``p`` = ``P(interior set's PPL ≤ ours)``, exact (``#/n``) only
    when every interior set was enumerated and ours is one of them, else ``(1 + #)/(1 + n)``. Sets in
    ``store`` are not measured again; the new ones are stored. Chapter 7 (``book.cheap_beat_chance``)."""
    if not methods:
        raise AnatomyKitError("position_null needs at least one method")
    ours = {m: next((s for s in test.curve(m) if s.k == k), None) for m in methods}
    missing = [m for m, s in ours.items() if s is None]
    if missing:
        raise AnatomyKitError(f"methods {missing} proposed no {k}-set")
    n = len(decoder_layers(model))
    measured = [r.layers for r in test.random.get(k, ())]
    sets, enumerated = position_null_sets(n, k, n_sets, seed, measured, edge_share)
    targets = block_targets(batches)
    _, blocks, _ = _measure_streamed(model, batches, {set_key(s): s for s in sets}, store, progress)
    pool = [float(np.exp(blocks[set_key(s)].sum() / targets.sum())) for s in sets]
    return {m: random_set_null(s.ppl, pool, k, exact=enumerated and s.layers in set(sets))
            for m, s in ours.items()}
