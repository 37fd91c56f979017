"""Per-block NLL and the paired interval of a perplexity change (chapter 1; chapter 2 reuses it).

A perplexity change measured on one text is a difference of two numbers on the *same* tokens,
so its uncertainty is that of a paired difference. The unit we pair over is the evaluation
block (a stretch of ``T`` consecutive tokens): tokens inside one block share their context and
are not independent, blocks are much closer to it. With ``B`` blocks, ``n_b`` scored tokens in
block ``b`` and summed NLLs ``base_b`` (intact model) and ``new_b`` (changed model),

    d_b = (new_b − base_b) / n_b              (nats per token, one value per block)
    ΔPPL % = 100 · (exp(mean d) − 1)

and the Student-t interval of ``mean d`` on ``B − 1`` degrees of freedom
(:func:`anatomy_kit.stats.paired_t_interval`) is mapped through the same monotone function, so
its coverage carries over. With blocks of equal length (what :func:`anatomy_kit.data.token_blocks`
cuts) ``mean d`` is exactly the pooled log-perplexity ratio, and the point estimate is the
ablation map's ΔPPL.

:func:`block_nll_from_layer` replays layers ``start … L−1`` from a
:class:`~anatomy_kit.hf.evaluation.PrefixCache` (like
:func:`~anatomy_kit.hf.evaluation.nll_from_layer`) and returns one summed NLL per block instead
of one total; :func:`block_nll_full` does the same with a full forward pass.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch
from torch import nn

from ..hf.evaluation import Batch, PrefixCache, row_nll
from ..hf.layers import decoder_layers, final_norm, hidden_of
from ..stats import Interval, paired_t_interval
from ..validate import AnatomyKitError

__all__ = ["block_targets", "block_nll_from_layer", "block_nll_full", "ppl_change_interval", "pct_change",
           "half_width_pct", "BlockMeter"]


def block_targets(batches: Sequence[Batch] | PrefixCache) -> np.ndarray:
    """Scored tokens of every block (row of every batch), in order; shape (B,), int."""
    batches = batches.batches if isinstance(batches, PrefixCache) else batches
    if not batches:
        raise AnatomyKitError("no batches: give at least one batch of evaluation tokens")
    return np.concatenate([(b.labels[:, 1:] != -100).sum(dim=1).cpu().numpy() for b in batches]).astype(int)


def _as_numpy(rows: list[torch.Tensor]) -> np.ndarray:
    """Per-row NLLs of every batch, (B,) each, as one float64 array: one copy to the host, not one per row."""
    return torch.cat([r.detach().to(rows[0].device) for r in rows]).double().cpu().numpy()


@torch.no_grad()
def block_nll_from_layer(model: nn.Module, cache: PrefixCache, start: int) -> np.ndarray:
    """Summed NLL of every cached block when layers ``start … L−1`` are recomputed; shape (B,).

    Layers before ``start`` come from the cache (the unchanged model); whatever the model holds
    now (ablated weights, hooks) is used from ``start`` on. ``start = 0`` replays every layer,
    which gives the intact model's per-block NLL. The sum over blocks equals
    :func:`~anatomy_kit.hf.evaluation.nll_from_layer` (up to float summation order).
    """
    layers = decoder_layers(model)
    if not isinstance(cache, PrefixCache):
        raise AnatomyKitError("cache must be a PrefixCache from evaluation.capture_prefix(model, batches)")
    if not 0 <= start < len(layers):
        raise AnatomyKitError(f"start={start} is out of range; this model has layers 0..{len(layers) - 1}")
    out: list[torch.Tensor] = []
    for calls, batch in zip(cache.calls, cache.batches):
        hidden = calls[start].hidden
        for i in range(start, len(layers)):
            hidden = hidden_of(layers[i](hidden, *calls[i].args, **calls[i].kwargs))
        out.append(row_nll(model, final_norm(model)(hidden), batch.labels))   # one head pass per batch
    return _as_numpy(out)


@torch.no_grad()
def block_nll_full(model: nn.Module, batches: Sequence[Batch]) -> np.ndarray:
    """Summed NLL of every block through the whole model (no cache); shape (B,)."""
    if not batches:
        raise AnatomyKitError("no batches: give at least one batch of evaluation tokens")
    out: list[torch.Tensor] = []
    for b in batches:
        h = model.get_decoder()(input_ids=b.input_ids, attention_mask=b.attention_mask, use_cache=False)
        out.append(row_nll(model, h.last_hidden_state, b.labels))
    return _as_numpy(out)


def pct_change(log_ratio: float) -> float:
    """``100 · (exp(x) − 1)``: a mean log-perplexity change (nats/token) as a ΔPPL in percent."""
    if math.isinf(log_ratio):
        return math.inf if log_ratio > 0 else -100.0
    return 100.0 * math.expm1(log_ratio)


def ppl_change_interval(base_nll, new_nll, n_targets, confidence: float = 0.95) -> Interval:
    """ΔPPL % of ``new`` against ``base``, with a t interval paired over blocks (see module docstring).

    ``base_nll``, ``new_nll``: summed NLL per block, shape (B,); ``n_targets``: scored tokens per
    block, shape (B,) (or one int for all). Returns an :class:`~anatomy_kit.stats.Interval` whose
    ``mean``, ``low`` and ``high`` are in percent; ``sd`` is the standard deviation of ``d_b``
    in nats per token. One block gives an unbounded interval (no spread is known).
    """
    base, new = np.asarray(base_nll, dtype=float), np.asarray(new_nll, dtype=float)
    if base.ndim != 1 or base.shape != new.shape or base.size == 0:
        raise AnatomyKitError(f"base_nll and new_nll must be 1-D of equal length (one value per block), "
                              f"got shapes {base.shape} and {new.shape}")
    n = np.broadcast_to(np.asarray(n_targets, dtype=float), base.shape)
    if not (np.isfinite(n).all() and (n > 0).all()):
        raise AnatomyKitError(f"n_targets must be positive token counts, one per block; got {n.tolist()}")
    t = paired_t_interval((new - base) / n, confidence)
    return Interval(pct_change(t.mean), pct_change(t.low), pct_change(t.high), t.n, t.sd, t.df, t.confidence, "t")


def half_width_pct(interval: Interval) -> float:
    """Half the width of a ΔPPL interval on the log scale, as a percentage: ``100 · (exp(h) − 1)``.

    ``h`` is the t half-width in nats per token; this is the smallest ΔPPL (either sign) whose
    interval can exclude 0 with this text (chapter 1's "how large an effect can this text resolve").
    """
    if not (math.isfinite(interval.high) and interval.low > -100):
        return math.inf
    lo, hi = math.log1p(interval.low / 100), math.log1p(interval.high / 100)
    return pct_change((hi - lo) / 2)


class BlockMeter:
    """Per-block NLL of a model as it is *now*, replayed from a prefix cache and kept in a store (chapter 2).

    ``base`` (B,) is the intact model's per-block NLL, ``n_targets`` (B,) the scored tokens.
    :meth:`measure` applies an edit (a context manager, e.g. a manipulation), replays layers
    ``start … L−1`` and keeps the per-block NLL under ``key`` in ``store``; :meth:`change` turns it
    into a ΔPPL interval (:func:`ppl_change_interval`) and :meth:`ppl` into a perplexity.
    """

    def __init__(self, model: nn.Module, cache: PrefixCache, store=None):
        self.model, self.cache, self.store = model, cache, store
        self.base = cache.baseline_block_nll()              # recorded by capture_prefix
        self.n_targets = block_targets(cache)

    def measure(self, key: str, start: int, edit) -> np.ndarray:
        """Per-block NLL with ``edit()`` in force (a callable returning a context manager), from layer ``start``."""
        if self.store is not None and key in self.store and len(self.store[key]) == len(self.base):
            return np.asarray(self.store[key], dtype=float)
        with edit():
            blocks = block_nll_from_layer(self.model, self.cache, start)
        if self.store is not None:
            self.store[key] = blocks.tolist()
        return blocks

    def change(self, blocks, confidence: float = 0.95) -> Interval:
        """ΔPPL % of ``blocks`` against the intact model, t interval paired over blocks."""
        return ppl_change_interval(self.base, blocks, self.n_targets, confidence)

    def ppl(self, blocks) -> float:
        """Perplexity of per-block NLLs ``blocks``."""
        return math.exp(float(np.sum(blocks)) / float(self.n_targets.sum()))
