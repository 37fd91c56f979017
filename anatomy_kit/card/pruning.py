"""Pruning suggestions that are measured, not guessed (the book page *Your model's report card*).

For k = 1 … K the card proposes layer sets to remove and measures each pruned model's perplexity on
the evaluation blocks:

- **one-shot, by signal**: the k layers with the lowest value of a signal (every signal reads "low =
  changes little = prunable"): the cheap signals, the work profiles, and ``skip (calibration)``, the
  ΔPPL of skipping each layer measured on the *calibration* blocks;
- **PruneMe block**: the contiguous k-block whose end states are closest in angle (:func:`.signals.best_blocks`);
- **greedy** (SLEB's scheme): starting from the intact model, remove the layer whose removal raises
  the calibration NLL least, then *re-score every remaining layer on the already pruned model*, and
  repeat. What is re-scored: the summed NLL of the calibration blocks with each remaining layer
  skipped in addition. Cost per step: one capture pass plus one replay of layers j … L−1 per
  remaining candidate j, about (L − k)/2 full passes over the calibration blocks, one batch at a
  time (memory holds one batch's prefix cache);
- **baselines**: "drop the last k layers" and random k-sets from two pools, all layers and the
  position-only interior (:func:`interior_layers`): k = 1 every single layer of the pool; k ≥ 2 every
  k-set when there are at most ``n_random`` (exact), else ``n_random`` drawn without repeats with the
  card's seed.

Sets are chosen on the calibration blocks or without any loss, never on the evaluation blocks, so a
measured perplexity is not selected on the text it is measured on. A pruned model is the model with
:func:`anatomy_kit.anatomy.skipped` on each layer of the set, replayed from the first of them through
the prefix cache (:func:`anatomy_kit.anatomy.blockwise.block_nll_from_layer`).
"""

from __future__ import annotations

import math
from contextlib import ExitStack, contextmanager
from itertools import combinations
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np
import torch
from torch import nn

from ..anatomy.ablation import skipped
from ..anatomy.blockwise import block_nll_from_layer
from ..hf.evaluation import Batch, capture_prefix
from ..hf.layers import decoder_layers
from ..validate import AnatomyKitError, check_int

__all__ = ["Candidate", "pruned", "one_shot_sets", "block_sets", "last_k_sets", "interior_layers", "random_sets",
           "is_enumerated", "greedy_removal",
           "set_key", "measure_sets", "random_p"]


@dataclass(frozen=True)
class Candidate:
    """One proposed pruning: ``layers`` (sorted, 0-based) to remove, by ``method``, with k = len(layers)."""

    method: str
    layers: tuple[int, ...]

    @property
    def k(self) -> int:
        return len(self.layers)


def set_key(layers: Sequence[int]) -> str:
    """A stable text key of a layer set, ``"3,7,21"`` (sorted)."""
    return ",".join(str(int(x)) for x in sorted(layers))


@contextmanager
def pruned(model: nn.Module, layers: Sequence[int]) -> Iterator[None]:
    """Inside the block every layer in ``layers`` is skipped (the identity); restored after."""
    all_layers = decoder_layers(model)
    for layer in layers:
        check_int("layer", int(layer), minimum=0, maximum=len(all_layers) - 1)
    with ExitStack() as stack:
        for layer in sorted(set(int(x) for x in layers)):
            stack.enter_context(skipped(all_layers[layer]))
        yield


def one_shot_sets(signals: dict[str, np.ndarray], max_k: int) -> list[Candidate]:
    """For each signal and k = 1 … K, the k layers with the lowest values (ties: lower layer first)."""
    out = []
    for name, values in signals.items():
        order = sorted(range(len(values)), key=lambda l: (float(values[l]), l))
        out += [Candidate(name, tuple(sorted(order[:k]))) for k in range(1, max_k + 1)]
    return out


def block_sets(best: list[dict], max_k: int) -> list[Candidate]:
    """PruneMe's contiguous block for k = 1 … K (``best`` from :func:`.signals.best_blocks`)."""
    by_n = {b["n"]: b for b in best}
    return [Candidate("prune_me_block", tuple(by_n[k]["layers"])) for k in range(1, max_k + 1) if k in by_n]


def last_k_sets(n_layers: int, max_k: int) -> list[Candidate]:
    """Layers L−k … L−1 for k = 1 … K."""
    return [Candidate("last_k", tuple(range(n_layers - k, n_layers))) for k in range(1, max_k + 1)]


def interior_layers(n_layers: int) -> list[int]:
    """The position-only interior pool: every layer but the first and last ``max(1, L // 10)`` (declared
    before any measurement: the ends are where the pruning literature finds layers it cannot remove;
    a random set from this pool uses the layers' positions and nothing measured)."""
    margin = max(1, n_layers // 10)
    return list(range(margin, n_layers - margin))


def random_sets(n_layers: int, max_k: int, n_random: int, seed: int, pool: Sequence[int] | None = None,
                method: str = "random") -> list[Candidate]:
    """Random k-sets for every k = 2 … K from ``pool`` (default: all layers), seeded: all of them when
    there are at most ``n_random`` (exact enumeration), else ``n_random`` distinct ones drawn."""
    pool = list(range(n_layers)) if pool is None else sorted(int(x) for x in pool)
    rng = np.random.default_rng(seed)
    out = []
    for k in range(2, max_k + 1):
        if k > len(pool):
            continue
        if math.comb(len(pool), k) <= n_random:
            out += [Candidate(method, s) for s in combinations(pool, k)]
            continue
        seen: set[tuple[int, ...]] = set()
        while len(seen) < n_random:
            seen.add(tuple(sorted(int(x) for x in rng.choice(pool, size=k, replace=False))))
        out += [Candidate(method, s) for s in sorted(seen)]
    return out


def is_enumerated(pool_size: int, k: int, n_random: int) -> bool:
    """Whether :func:`random_sets` lists every k-set of the pool (k = 1 always: every single layer)."""
    return k == 1 or math.comb(pool_size, k) <= n_random


@torch.no_grad()
def _calibration_scores(model: nn.Module, batches: list[Batch], removed: tuple[int, ...]) -> dict[int, float]:
    """Summed calibration NLL with each remaining layer skipped on top of ``removed``: ``{layer: nll}``.

    Streamed: one batch's prefix cache at a time, every candidate scored on it before the next
    batch, so memory holds one batch whatever ``calibration_tokens`` is (as the card's settings say).
    """
    remaining = [j for j in range(len(decoder_layers(model))) if j not in removed]
    scores = {j: 0.0 for j in remaining}
    for batch in batches:
        with pruned(model, removed):
            cache = capture_prefix(model, [batch])
        for j in remaining:
            with pruned(model, removed + (j,)):
                scores[j] += float(block_nll_from_layer(model, cache, j).sum())
        del cache
    return scores


def greedy_removal(model: nn.Module, batches: list[Batch], max_k: int, store=None,
                   prefix: str = "greedy") -> tuple[list[Candidate], list[dict]]:
    """Greedy removal on the calibration ``batches`` (module docstring): the sets for k = 1 … K and each step's scores.

    Each step is kept in ``store`` (a dict-like) under ``"<prefix>/<k>"``, so an interrupted run resumes.
    Returns ``(candidates, steps)``, ``steps[k−1] = {"removed": layer, "scores": {layer: nll}}``.
    """
    removed: tuple[int, ...] = ()
    steps, out = [], []
    for k in range(1, max_k + 1):
        key = f"{prefix}/{k}"
        if store is not None and key in store:
            step = store[key]
        else:
            scores = _calibration_scores(model, batches, removed)
            best = min(scores, key=lambda j: (scores[j], j))
            step = {"removed": int(best), "scores": {str(j): v for j, v in scores.items()}}
            if store is not None:
                store[key] = step
        removed = tuple(sorted(removed + (int(step["removed"]),)))
        steps.append(step)
        out.append(Candidate("greedy", removed))
    return out, steps


def measure_sets(model: nn.Module, cache, sets: dict[str, tuple[int, ...]]) -> dict[str, list[float]]:
    """Per-block summed NLL of each pruned model on one cached batch: ``{set key: [row NLL]}``."""
    out = {}
    for key, layers in sets.items():
        if not layers:
            raise AnatomyKitError("an empty layer set prunes nothing")
        with pruned(model, layers):
            out[key] = block_nll_from_layer(model, cache, min(layers)).tolist()
    return out


def random_p(value: float, random_values: Sequence[float], exact: bool) -> float:
    """One-sided p of a pruned set's NLL against the random k-sets: P(random ≤ value).

    ``exact`` (k = 1, every layer enumerated): ``#{random ≤ value} / n``; otherwise the Monte Carlo
    ``(1 + #{random ≤ value}) / (1 + n)``. Small p: the set beats chance. Ties count as "as good".
    """
    r = np.asarray(random_values, dtype=float)
    tol = 1e-9 * max(1.0, abs(value))
    count = int((r <= value + tol).sum())
    return count / r.size if exact else (1 + count) / (1 + r.size)
