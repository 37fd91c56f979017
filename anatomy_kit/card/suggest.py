"""The pruning panel of a card: propose the sets, measure them, compare each with the random k-sets.

:func:`pruning_panel` puts together :mod:`.pruning`'s proposals (one-shot by signal, PruneMe's block,
greedy on the calibration blocks, the last k, random k-sets from all layers and from the position-only
interior) and :mod:`.measure`'s perplexities into the card's ``"pruning"`` section. Every set's ΔPPL has
its t interval paired over evaluation blocks (:func:`anatomy_kit.anatomy.blockwise.ppl_change_interval`);
``p_random`` (``p_interior``) is the one-sided chance that a random set of the same size from all layers
(from the interior) does at least as well: exact where every set of the pool is measured (k = 1, or
fewer sets than ``n_random``), Monte Carlo otherwise, with its floor in ``p_floor``. Greedy is compared
with every other method's set, paired over the evaluation blocks, and run again on each half of the
calibration blocks to see whether its choice is stable (:mod:`.comparisons`). The recommended set for
each k is greedy's: chosen on the calibration blocks, so its measured perplexity is not the winner of a
comparison on the evaluation blocks. Used by the book page *Your model's report card*.
"""

from __future__ import annotations

import numpy as np
import torch

from ..anatomy.blockwise import ppl_change_interval

from ..hf.evaluation import Batch
from .comparisons import COMPARISON_RULE, calibration_stability, paired_comparisons
from .measure import BatchResults, measure_pruned
from .pruning import (Candidate, block_sets, greedy_removal, interior_layers, is_enumerated, last_k_sets,
                      one_shot_sets, random_p, random_sets, set_key)
from .signals import CHEAP_SIGNALS
from .work import WORK_SIGNALS

__all__ = ["RESCORED", "PROPOSAL_METHODS", "INTERIOR", "pruning_panel", "candidates"]

RESCORED = ("greedy: after each removal, the summed NLL of the calibration blocks with each remaining layer also "
            "skipped is re-measured on the pruned model (one capture pass plus a replay of layers j … L−1 per "
            "candidate j: about (L − k)/2 full passes over the calibration blocks per step)")


def candidates(signals: dict[str, np.ndarray], best: list[dict], greedy: list[Candidate], steps: list[dict],
               n_layers: int, max_k: int, n_random: int, seed: int) -> list[Candidate]:
    """Every proposed set, k = 1 … K: one-shot by signal (with ``skip_calibration`` from greedy's first step),
    PruneMe's block, greedy, the last k, and the random sets (k ≥ 2) from all layers and from the interior."""
    skip_cal = np.array([steps[0]["scores"].get(str(j), np.inf) for j in range(n_layers)], dtype=float)
    one_shot = one_shot_sets({**signals, "skip_calibration": skip_cal}, max_k)
    return (one_shot + block_sets(best, max_k) + greedy + last_k_sets(n_layers, max_k)
            + random_sets(n_layers, max_k, n_random, seed)
            + random_sets(n_layers, max_k, n_random, seed + 1, pool=interior_layers(n_layers),
                          method=INTERIOR))


def _entry(c: Candidate, blocks: np.ndarray, results: BatchResults, confidence: float, chosen_on: str) -> dict:
    iv = ppl_change_interval(results.base_nll, blocks, results.n_targets, confidence)
    return {"method": c.method, "k": c.k, "layers": list(c.layers),
            "ppl": float(np.exp(blocks.sum() / results.n_targets.sum())), "delta_pct": iv.mean, "low": iv.low,
            "high": iv.high, "p_random": None, "p_interior": None, "chosen_on": chosen_on}


#: The method name of the random sets drawn from the position-only interior (:func:`.pruning.interior_layers`).
INTERIOR = "random_interior"
_RANDOM = ("random", INTERIOR)

#: Every method whose sets the card measures (and ``--save-pruned`` can remove), baselines excluded.
PROPOSAL_METHODS = (*CHEAP_SIGNALS, *WORK_SIGNALS, "skip_calibration", "prune_me_block", "greedy",
                    "last_k")

_CHOSEN_ON = {"skip_calibration": "calibration blocks", "greedy": "calibration blocks", "last_k": "no data",
              "random": "no data (seeded draw)", INTERIOR: "layer positions only (seeded draw)",
              "prune_me_block": "evaluation blocks, states only (no loss)"}


def _halves(calibration: list[Batch]) -> list[list[Batch]]:
    """The calibration batches in two halves (by block), for the stability check."""
    ids = torch.cat([b.input_ids for b in calibration])
    mask = torch.cat([b.attention_mask for b in calibration])
    labels = torch.cat([b.labels for b in calibration])
    half, size = ids.shape[0] // 2, calibration[0].input_ids.shape[0]
    return [[Batch(ids[i:min(i + size, hi)], mask[i:min(i + size, hi)], labels[i:min(i + size, hi)])
             for i in range(lo, hi, size)] for lo, hi in ((0, half), (half, ids.shape[0]))]


def pruning_panel(model, eval_batches: list[Batch], calibration: list[Batch], results: BatchResults,
                  signals: dict[str, np.ndarray], best: list[dict], *, max_k: int, n_random: int, seed: int,
                  confidence: float, store, clock, progress: bool = True) -> dict:
    """The card's ``"pruning"`` section (module docstring)."""
    n_layers = results.causal["skip"].shape[0]
    with clock.stage("greedy removal"):
        greedy, steps = greedy_removal(model, calibration, max_k, store=store)
    halves = _halves(calibration)
    stability = None
    if all(halves):
        with clock.stage("greedy on calibration halves"):
            half_sets = [[list(c.layers) for c in greedy_removal(model, h, max_k, store=store,
                                                                  prefix=f"greedy_half{i}")[0]]
                         for i, h in enumerate(halves)]
        stability = calibration_stability([list(c.layers) for c in greedy], half_sets)
    sets = candidates(signals, best, greedy, steps, n_layers, max_k, n_random, seed)
    wanted = {set_key(c.layers): c.layers for c in sets if c.k >= 2}
    blocks = measure_pruned(model, eval_batches, wanted, store=store, clock=clock, progress=progress)
    blocks.update({str(j): results.causal["skip"][j] for j in range(n_layers)})     # k = 1: the skip sweep itself
    total = results.n_targets.sum()
    entries, randoms = [], {m: {} for m in _RANDOM}
    for c in sets:
        if c.method in _RANDOM:
            randoms[c.method].setdefault(str(c.k), []).append(
                {"layers": list(c.layers), "ppl": float(np.exp(blocks[set_key(c.layers)].sum() / total))})
            continue
        entries.append(_entry(c, blocks[set_key(c.layers)], results, confidence,
                              _CHOSEN_ON.get(c.method, "evaluation blocks, states only (no loss)")))
    pools = {"random": list(range(n_layers)), INTERIOR: interior_layers(n_layers)}
    for method, pool in pools.items():
        randoms[method]["1"] = [{"layers": [j], "ppl": float(np.exp(blocks[str(j)].sum() / total))} for j in pool]
    for e in entries:
        for method, field in (("random", "p_random"), (INTERIOR, "p_interior")):
            drawn = [r["ppl"] for r in randoms[method].get(str(e["k"]), [])]
            exact = is_enumerated(len(pools[method]), e["k"], n_random)
            e[field] = random_p(e["ppl"], drawn, exact=exact) if drawn else None
    floors = {method: {str(k): (1 / len(randoms[method][str(k)]) if is_enumerated(len(pool), k, n_random)
                                else 1 / (1 + len(randoms[method][str(k)])))
                       for k in range(1, max_k + 1) if str(k) in randoms[method]}
              for method, pool in pools.items()}
    return {"max_k": max_k, "methods": sorted({e["method"] for e in entries}), "rescored": RESCORED,
            "greedy_steps": [{"removed": int(s["removed"]), "scores": s["scores"]} for s in steps],
            "sets": entries,
            "random": {k: v for k, v in randoms["random"].items()},
            "random_interior": {k: v for k, v in randoms[INTERIOR].items()},
            "interior_layers": pools[INTERIOR], "p_floor": floors,
            "comparisons": paired_comparisons(entries, blocks, results.n_targets, confidence, set_key),
            "comparison_rule": COMPARISON_RULE, "calibration_stability": stability,
            "recommended": {str(e["k"]): e for e in entries if e["method"] == "greedy"}}
