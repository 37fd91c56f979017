"""The card's causal signals: ΔPPL of four ways to take layer ℓ out, paired over evaluation blocks.

- ``neighbour-mean`` — chapter 1's protocol, every parameter of layer ℓ replaced by the mean of its
  neighbours' (:func:`anatomy_kit.anatomy.ablated`);
- ``skip`` — the layer is the identity (:func:`anatomy_kit.anatomy.ablated` with ``"skip"``); this is
  what pruning the layer does;
- ``attention`` — only the attention block is dropped (its output is zero,
  :func:`anatomy_kit.hf.layers.silenced`); on Llama-family layers the same as chapter 1's ``zero-attn``;
- ``mlp`` — only the MLP is dropped (likewise; chapter 1's ``zero-mlp``), on any architecture.

Each is replayed from the layer's input in the prefix cache
(:func:`anatomy_kit.anatomy.blockwise.block_nll_from_layer`): the card captures the cache of *one
batch at a time* and runs every edit on it before the next batch, so memory holds one batch, never the
whole token budget. The ΔPPL % and its t interval paired over blocks come from
:func:`anatomy_kit.anatomy.blockwise.ppl_change_interval`. Used by the book page *Your model's report card*.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import numpy as np
from torch import nn

from ..anatomy.ablation import ablated
from ..anatomy.blockwise import block_nll_from_layer, ppl_change_interval
from ..hf.evaluation import PrefixCache
from ..hf.layers import decoder_layers, silenced, sublayer_of
from ..validate import check_choice

__all__ = ["CAUSAL_SIGNALS", "causal_edit", "causal_rows", "causal_summary"]

#: The card's causal signals (names as in the card's JSON).
CAUSAL_SIGNALS = ("neighbour-mean", "skip", "attention", "mlp")


@contextmanager
def causal_edit(model: nn.Module, layer: int, kind: str) -> Iterator[None]:
    """Inside the block, ``layer`` is taken out by ``kind`` (one of :data:`CAUSAL_SIGNALS`); restored after."""
    check_choice("causal signal", kind, CAUSAL_SIGNALS)
    if kind in ("neighbour-mean", "skip"):
        with ablated(model, layer, kind):
            yield
        return
    with silenced(sublayer_of(decoder_layers(model)[layer], kind)):
        yield


def causal_rows(model: nn.Module, cache: PrefixCache, kinds=CAUSAL_SIGNALS) -> dict[str, list[list[float]]]:
    """Per-block summed NLL of every causal edit of every layer on one cached batch: ``{kind: [layer][row]}``."""
    out = {}
    for kind in kinds:
        rows = []
        for layer in range(len(decoder_layers(model))):
            with causal_edit(model, layer, kind):
                rows.append(block_nll_from_layer(model, cache, layer).tolist())
        out[kind] = rows
    return out


def causal_summary(base_nll: np.ndarray, rows: np.ndarray, n_targets: np.ndarray, confidence: float) -> list[dict]:
    """One ``{"ppl", "delta_pct", "low", "high", "anti_layer"}`` per layer from per-block NLL ``rows`` (L, B).

    ``anti_layer``: the whole interval lies below 0 (taking the layer out makes the model better).
    """
    out = []
    total = float(n_targets.sum())
    for layer_rows in rows:
        iv = ppl_change_interval(base_nll, layer_rows, n_targets, confidence)
        out.append({"ppl": float(np.exp(layer_rows.sum() / total)), "delta_pct": iv.mean, "low": iv.low,
                    "high": iv.high, "anti_layer": bool(iv.high < 0)})
    return out
