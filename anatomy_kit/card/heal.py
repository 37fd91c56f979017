"""Healing, measured: fine-tune a recommended pruned model briefly and see how much of its perplexity gap closes.

Pruned models are used after a short fine-tune (PruneMe heals with QLoRA). :func:`heal_pruned` does it
with chapter 2's recovery machinery (:func:`anatomy_kit.anatomy.recovery.recovery_speed`, every
parameter trainable, no noise): the layers of ``drop`` are skipped (:func:`.pruning.pruned`), AdamW
(lr ``lr``, grad-norm clip 1) takes ``steps`` steps on the training batches, and the evaluation
blocks are scored after each step; the model is restored exactly afterwards. Reported, on the
evaluation blocks: the healed model's ΔPPL against the intact model and against the unhealed pruned
model, each with its t interval paired over blocks, and the share of the pruned model's log-perplexity
gap that healing closes, ``1 − log(PPL_healed / PPL_intact) / log(PPL_pruned / PPL_intact)``, with an
interval from the healed-versus-intact interval (the pruned model's gap held at its measured value).
:func:`heal_blocks` gives the training batches: ``steps × batch_size`` blocks of the corpus's calibration
half (never a document of the evaluation half), so each step sees fresh text. Healing on the card's
512 calibration tokens alone overfits them within a few steps: on the embedded SmolLM2 at k = 3 the
perplexity fell from 35.3 to 31.2 in two steps and then rose to 305 by step 40.
Used by the book page *Your model's report card*.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch
from torch import nn

from ..anatomy.blockwise import ppl_change_interval
from ..anatomy.recovery import recovery_speed
from ..hf.evaluation import Batch, capture_prefix
from ..validate import check_int, check_positive
from .errors import CorpusTooShort
from .pruning import pruned
from .text import CardText, card_text

__all__ = ["block_nll", "heal_blocks", "heal_pruned", "heal_reading"]

#: what "gap closed" means when the healed model beats the untuned intact model
BEYOND_INTACT = ("the healed model is better than the intact one: the fine-tune also adapts the model to this text, "
                 "so the share of the gap closed is not the pruning's alone (compare with the intact model "
                 "fine-tuned the same way)")


def heal_reading(vs_intact_high: float) -> str | None:
    """A warning for the card when the healed model's whole ΔPPL interval against the untuned intact model lies
    below 0 (``vs_intact_high`` < 0, in %); ``None`` otherwise (an interval touching or straddling 0 is silent)."""
    return BEYOND_INTACT if vs_intact_high < 0 else None


def heal_blocks(tokenizer, text: CardText, *, steps: int, batch_size: int) -> tuple[torch.Tensor, str]:
    """``(blocks (M, block_size) int64, what they are)``: the healing text beside the card's ``text``,
    ``steps × batch_size`` blocks of the calibration half (at least the card's own calibration blocks);
    fewer, then repeated by the steps, where the corpus's calibration half holds fewer."""
    check_int("steps", steps, minimum=1)
    check_int("batch_size", batch_size, minimum=1)
    sizes = dict(block_size=text.block_size, n_eval=int(text.eval_blocks.shape[0]))
    n_card = int(text.calibration_blocks.shape[0])
    try:
        blocks = card_text(tokenizer, text.corpus, **sizes, split=text.split,
                           n_calibration=max(n_card, steps * batch_size)).calibration_blocks
    except CorpusTooShort:          # a short calibration half: all of it (the steps then repeat blocks)
        blocks = card_text(tokenizer, text.corpus, **sizes, split=text.split,
                           n_calibration=max(n_card, text.available_calibration)).calibration_blocks
    n = int(blocks.shape[0])
    fresh = "each step a fresh batch" if n >= steps * batch_size else f"repeated after {n // batch_size} steps"
    return blocks, f"{n} blocks of the calibration half ({n * text.block_size:,} tokens; {fresh})"


@torch.no_grad()
def block_nll(model: nn.Module, batches: list[Batch]) -> np.ndarray:
    """Summed next-token NLL of every block of ``batches`` (B,), float64."""
    return capture_prefix(model, batches).baseline_block_nll().astype(float)


def heal_pruned(model: nn.Module, drop: Sequence[int], calibration: list[Batch], eval_batches: list[Batch], *,
                steps: int, base_rows: np.ndarray, n_targets: np.ndarray, lr: float = 1e-4,
                confidence: float = 0.95, seed: int = 0, trained_on: str = "calibration blocks") -> dict:
    """Heal the model without ``drop`` for ``steps`` steps on ``calibration`` (module docstring).

    ``base_rows`` (B,): the intact model's summed NLL per evaluation block; ``n_targets`` (B,).
    """
    check_int("steps", steps, minimum=1)
    check_positive("lr", lr)
    last: dict[str, np.ndarray] = {}

    def evaluate(m: nn.Module) -> float:
        last["rows"] = block_nll(m, eval_batches)
        return float(math.exp(last["rows"].sum() / n_targets.sum()))

    with pruned(model, drop):
        before = block_nll(model, eval_batches)
        cache = capture_prefix(model, eval_batches)
        run = recovery_speed(model, 0, calibration, cache, noise_fraction=0.0, max_steps=steps, lr=lr,
                             trainable="model", seed=seed, evaluate=evaluate, full_curve=True)
    after = last["rows"]
    vs_intact = ppl_change_interval(base_rows, after, n_targets, confidence)
    vs_pruned = ppl_change_interval(before, after, n_targets, confidence)
    gap = math.log1p(ppl_change_interval(base_rows, before, n_targets, confidence).mean / 100)   # nats/token
    closed = [1 - math.log1p(x / 100) / gap if gap > 0 else float("nan")
              for x in (vs_intact.mean, vs_intact.high, vs_intact.low)]
    return {"layers": sorted(int(x) for x in drop), "steps": steps, "lr": lr, "trained_on": trained_on,
            "ppl_pruned": run.curve[0], "ppl_healed": run.curve[-1], "curve": run.curve,
            "vs_intact": {"delta_pct": vs_intact.mean, "low": vs_intact.low, "high": vs_intact.high},
            "vs_pruned": {"delta_pct": vs_pruned.mean, "low": vs_pruned.low, "high": vs_pruned.high},
            "gap_closed": {"share": closed[0], "low": closed[1], "high": closed[2]},
            "reading": heal_reading(vs_intact.high)}
