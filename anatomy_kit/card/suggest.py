"""The pruning panel of a card: propose the sets, measure them, compare each with the random k-sets.

:func:`pruning_panel` puts together :mod:`.pruning`'s proposals (one-shot by signal, PruneMe's block,
greedy on the calibration blocks, the last k, random k-sets) and :mod:`.measure`'s perplexities into
the card's ``"pruning"`` section. Every set's ΔPPL has its t interval paired over evaluation blocks
(:func:`anatomy_kit.anatomy.blockwise.ppl_change_interval`); ``p_random`` is the one-sided chance that a
random set of the same size does at least as well (k = 1: all L layers, exact). The recommended set for
each k is greedy's: chosen on the calibration blocks, so its measured perplexity is not the winner of a
comparison on the evaluation blocks. Used by the book page *Your model's report card*.
"""

from __future__ import annotations

import numpy as np

from ..anatomy.blockwise import ppl_change_interval
from ..hf.evaluation import Batch
from .measure import BatchResults, measure_pruned
from .pruning import (Candidate, block_sets, greedy_removal, last_k_sets, one_shot_sets, random_p, random_sets,
                      set_key)
from .signals import CHEAP_SIGNALS
from .work import WORK_SIGNALS

__all__ = ["RESCORED", "PROPOSAL_METHODS", "pruning_panel", "candidates"]

RESCORED = ("greedy: after each removal, the summed NLL of the calibration blocks with each remaining layer also "
            "skipped is re-measured on the pruned model (one capture pass plus a replay of layers j … L−1 per "
            "candidate j: about (L − k)/2 full passes over the calibration blocks per step)")


def candidates(signals: dict[str, np.ndarray], best: list[dict], greedy: list[Candidate], steps: list[dict],
               n_layers: int, max_k: int, n_random: int, seed: int) -> list[Candidate]:
    """Every proposed set, k = 1 … K: one-shot by signal (with ``skip_calibration`` from greedy's first step),
    PruneMe's block, greedy, the last k, and the random sets (k ≥ 2)."""
    skip_cal = np.array([steps[0]["scores"].get(str(j), np.inf) for j in range(n_layers)], dtype=float)
    one_shot = one_shot_sets({**signals, "skip_calibration": skip_cal}, max_k)
    return (one_shot + block_sets(best, max_k) + greedy + last_k_sets(n_layers, max_k)
            + random_sets(n_layers, max_k, n_random, seed))


def _entry(c: Candidate, blocks: np.ndarray, results: BatchResults, confidence: float, chosen_on: str) -> dict:
    iv = ppl_change_interval(results.base_nll, blocks, results.n_targets, confidence)
    return {"method": c.method, "k": c.k, "layers": list(c.layers),
            "ppl": float(np.exp(blocks.sum() / results.n_targets.sum())), "delta_pct": iv.mean, "low": iv.low,
            "high": iv.high, "p_random": None, "chosen_on": chosen_on}


#: Every method whose sets the card measures (and ``--save-pruned`` can remove), baselines excluded.
PROPOSAL_METHODS = (*CHEAP_SIGNALS, *WORK_SIGNALS, "skip_calibration", "prune_me_block", "greedy",
                    "last_k")

_CHOSEN_ON = {"skip_calibration": "calibration blocks", "greedy": "calibration blocks", "last_k": "no data",
              "random": "no data (seeded draw)", "prune_me_block": "evaluation blocks, states only (no loss)"}


def pruning_panel(model, eval_batches: list[Batch], calibration: list[Batch], results: BatchResults,
                  signals: dict[str, np.ndarray], best: list[dict], *, max_k: int, n_random: int, seed: int,
                  confidence: float, store, clock, progress: bool = True) -> dict:
    """The card's ``"pruning"`` section (module docstring)."""
    n_layers = results.causal["skip"].shape[0]
    with clock.stage("greedy removal"):
        greedy, steps = greedy_removal(model, calibration, max_k, store=store)
    sets = candidates(signals, best, greedy, steps, n_layers, max_k, n_random, seed)
    wanted = {set_key(c.layers): c.layers for c in sets if c.k >= 2}
    blocks = measure_pruned(model, eval_batches, wanted, store=store, clock=clock, progress=progress)
    blocks.update({str(j): results.causal["skip"][j] for j in range(n_layers)})     # k = 1: the skip sweep itself
    entries, randoms = [], {}
    for c in sets:
        e = _entry(c, blocks[set_key(c.layers)], results, confidence,
                   _CHOSEN_ON.get(c.method, "evaluation blocks, states only (no loss)"))
        (randoms.setdefault(str(c.k), []) if c.method == "random" else entries).append(e)
    randoms["1"] = [{"layers": [j], "ppl": float(np.exp(blocks[str(j)].sum() / results.n_targets.sum()))}
                    for j in range(n_layers)]
    for e in entries:
        pool = [r["ppl"] for r in randoms.get(str(e["k"]), [])]
        e["p_random"] = random_p(e["ppl"], pool, exact=e["k"] == 1) if pool else None
    return {"max_k": max_k, "methods": sorted({e["method"] for e in entries}), "rescored": RESCORED,
            "greedy_steps": [{"removed": int(s["removed"]), "scores": s["scores"]} for s in steps],
            "sets": entries,
            "random": {k: [{"layers": r["layers"], "ppl": r["ppl"]} for r in v] for k, v in randoms.items()},
            "recommended": {str(e["k"]): e for e in entries if e["method"] == "greedy"}}
