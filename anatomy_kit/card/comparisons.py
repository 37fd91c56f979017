"""Greedy against every other proposal, paired over evaluation blocks, and how stable greedy's choice is.

- :func:`paired_comparisons`: for every k ≥ 1 and every method with a k-set, the perplexity of greedy's
  pruned model relative to that method's, ``ΔPPL % = 100·(exp(mean_b d_b) − 1)`` with
  ``d_b = (NLL_greedy,b − NLL_method,b) / tokens_b`` over the evaluation blocks b: a Student-t
  interval (:func:`anatomy_kit.anatomy.blockwise.ppl_change_interval`) and a two-sided sign-flip
  p (:func:`anatomy_kit.stats.sign_flip_test`, exact up to 16 blocks). Negative: greedy's model is
  better. Both models are measured on the same blocks, so the block-to-block spread of the text
  cancels: a paired comparison tells two methods apart where two separate intervals overlap.
- :func:`calibration_stability`: greedy run again on each half of the calibration blocks; for every
  k, whether the two halves choose the same set, and whether each matches the choice on all of them.
  A choice that changes between halves is not determined by the calibration text's size.

Used by the book page *Your model's report card*.
"""

from __future__ import annotations

import numpy as np

from ..anatomy.blockwise import ppl_change_interval
from ..stats import sign_flip_test

__all__ = ["paired_comparisons", "calibration_stability", "COMPARISON_RULE"]

COMPARISON_RULE = ("ΔPPL % of greedy's pruned model against each other method's k-set, paired over the "
                   "evaluation blocks (t interval; two-sided sign-flip p); negative: greedy is better")


def paired_comparisons(entries: list[dict], blocks: dict[str, np.ndarray], n_targets: np.ndarray,
                       confidence: float, key_of) -> list[dict]:
    """One row per (k, method ≠ greedy) whose set differs from greedy's (module docstring).

    ``entries``: the card's measured sets (``method``, ``k``, ``layers``); ``blocks``: per-block summed
    NLL (B,) by set key; ``key_of(layers)``: the key of a set.
    """
    greedy = {e["k"]: e for e in entries if e["method"] == "greedy"}
    out = []
    for e in entries:
        g = greedy.get(e["k"])
        if g is None or e["method"] == "greedy":
            continue
        a, b = blocks[key_of(g["layers"])], blocks[key_of(e["layers"])]
        same = list(e["layers"]) == list(g["layers"])
        iv = ppl_change_interval(b, a, n_targets, confidence)
        p = 1.0 if same else sign_flip_test((a - b) / n_targets).p
        out.append({"k": e["k"], "method": e["method"], "layers": list(e["layers"]), "greedy": list(g["layers"]),
                    "same_set": same, "delta_pct": iv.mean, "low": iv.low, "high": iv.high, "p": float(p),
                    "n_blocks": int(len(a))})
    return out


def calibration_stability(full: list[list[int]], halves: list[list[list[int]]]) -> dict:
    """Per k, the sets greedy chose on all calibration blocks and on each half, and whether they agree.

    ``full[k−1]``: greedy's k-set on all blocks; ``halves[h][k−1]``: on half ``h`` (two halves).
    ``changed_fraction``: the share of k whose two halves choose different sets.
    """
    rows = []
    for k, chosen in enumerate(full, 1):
        a, b = sorted(halves[0][k - 1]), sorted(halves[1][k - 1])
        rows.append({"k": k, "all": sorted(chosen), "half_a": a, "half_b": b, "halves_agree": a == b,
                     "both_match_all": a == sorted(chosen) == b})
    changed = sum(not r["halves_agree"] for r in rows)
    return {"per_k": rows, "changed": changed, "changed_fraction": changed / len(rows) if rows else 0.0}
