"""The anatomy of a trained model, layer by layer (paper 1, Wietrzykowski 2026).

This module holds the ablation map: how much perplexity changes when one decoder layer
is taken out. Strategies (all restore the model afterwards):

``neighbour-mean``
    The paper's protocol: every parameter of layer ℓ (attention, MLP and both norms) is
    replaced by the mean of the same parameter in layers ℓ−1 and ℓ+1. Edge convention
    (ours; the paper does not say): layer 0 copies layer 1 and layer L−1 copies layer L−2.
``skip``
    The block is the identity: the layer's output is its input.
``zero-mlp``
    The MLP's output is zero (``down_proj`` weights set to zero); attention stays.
``zero-attn``
    The attention's output is zero (``o_proj`` weights set to zero); the MLP stays.

Importance is the relative perplexity change, ``100·(PPL_ablated − PPL_base)/PPL_base`` %.

Introduced in chapter 1 (*The ablation map*).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Iterator

import math

import numpy as np
import torch
from torch import nn

from ..hf.evaluation import Batch, PrefixCache, capture_prefix, perplexity
from ..hf.layers import MODULE_PATHS, decoder_layers, replace_hidden
from ..hf.surgery import layer_parameter_names, neighbour_mean, swapped
from ..progress import progress_bar
from ..stats import Interval
from ..validate import AnatomyKitError, check_choice, check_layer_index
from .blockwise import block_nll_from_layer, block_nll_full, block_targets, ppl_change_interval
from .ranking import interior_layers, rank_layers

ABLATION_STRATEGIES = ("neighbour-mean", "skip", "zero-mlp", "zero-attn")


@contextmanager
def ablated(model: nn.Module, layer: int, strategy: str = "neighbour-mean") -> Iterator[None]:
    """Context manager: inside it, ``layer`` is ablated by ``strategy``; afterwards restored exactly."""
    check_choice("strategy", strategy, ABLATION_STRATEGIES)
    layers = decoder_layers(model)
    check_layer_index("layer", layer, len(layers))
    if strategy == "skip":
        with skipped(layers[layer]):
            yield
        return
    if strategy == "neighbour-mean":
        new = neighbour_mean(model, layer)
    else:
        names = layer_parameter_names(model, layer)
        prefix = MODULE_PATHS["down" if strategy == "zero-mlp" else "o"] + "."
        params = dict(model.named_parameters())
        new = {full: torch.zeros_like(params[full]) for rel, full in names.items() if rel.startswith(prefix)}
    with swapped(model, new):
        yield


@contextmanager
def skipped(layer: nn.Module) -> Iterator[None]:
    """Inside the block the decoder layer is the identity: its output is its input hidden state."""
    def identity(module, args, kwargs, output):
        hidden = args[0] if args else kwargs["hidden_states"]
        return replace_hidden(output, hidden)

    handle = layer.register_forward_hook(identity, with_kwargs=True)
    try:
        yield
    finally:
        handle.remove()


@dataclass
class AblationMap:
    """Perplexity after ablating each layer. Arrays have shape (L,) unless stated.

    ``block_nll`` (L, B), ``baseline_block_nll`` (B,) and ``block_targets`` (B,) hold the summed
    NLL of every evaluation block (ablated and intact) and its scored tokens: the paired data
    behind :meth:`delta_interval` (absent, ``None``, in maps saved before they were recorded).
    """

    strategy: str
    baseline_ppl: float
    layers: np.ndarray        # layer indices that were ablated
    ppl: np.ndarray           # PPL with that layer ablated
    n_tokens: int             # scored tokens
    block_nll: np.ndarray | None = None
    baseline_block_nll: np.ndarray | None = None
    block_targets: np.ndarray | None = None

    @property
    def delta_pct(self) -> np.ndarray:
        """Relative PPL change in percent; negative means the ablated model is *better*."""
        return 100.0 * (self.ppl - self.baseline_ppl) / self.baseline_ppl

    def delta_interval(self, layer: int, confidence: float = 0.95) -> Interval:
        """ΔPPL % of ablating ``layer`` with its t interval paired over evaluation blocks (chapter 1)."""
        if self.block_nll is None:
            raise AnatomyKitError("this map holds no per-block NLL (saved by an older version); recompute it")
        where = [i for i, l in enumerate(self.layers) if int(l) == int(layer)]
        if not where:
            raise AnatomyKitError(f"layer={layer} was not ablated in this map; its layers are {self.layers.tolist()}")
        return ppl_change_interval(self.baseline_block_nll, self.block_nll[where[0]], self.block_targets, confidence)

    def intervals(self, confidence: float = 0.95) -> dict[int, Interval]:
        """:meth:`delta_interval` of every ablated layer, ``{layer: Interval}``."""
        return {int(l): self.delta_interval(int(l), confidence) for l in self.layers}

    def ranked(self, *, n_layers: int | None = None, interior_only: bool = True) -> list[int]:
        """Ablated layers from most to least important (:func:`~anatomy_kit.anatomy.ranking.rank_layers`)."""
        return rank_layers(self.delta_pct, self.layers, n_layers=n_layers, interior_only=interior_only)

    def critical(self, k: int = 4, *, n_layers: int | None = None, interior_only: bool = True) -> list[int]:
        """The ``k`` most important layers (interior ones by default), in layer order."""
        return sorted(self.ranked(n_layers=n_layers, interior_only=interior_only)[:k])

    def redundant(self, k: int = 4, *, n_layers: int | None = None, interior_only: bool = True) -> list[int]:
        """The ``k`` least important layers (interior ones by default), in layer order."""
        return sorted(self.ranked(n_layers=n_layers, interior_only=interior_only)[-k:])

    def anti_layers(self) -> list[int]:
        """Layers whose ablation lowers perplexity (by the point estimate; see :meth:`established_anti_layers`)."""
        return [int(l) for l, d in zip(self.layers, self.delta_pct) if d < 0]

    def established_anti_layers(self, confidence: float = 0.95) -> list[int]:
        """Layers whose ΔPPL interval lies entirely below 0 (the glossary's *anti-layer*)."""
        return [l for l, iv in self.intervals(confidence).items() if iv.high < 0]

    def importance_range(self, *, n_layers: int | None = None, confidence: float = 0.95,
                         resolved: bool = False) -> tuple[Interval, int, int]:
        """Largest over smallest |ΔPPL| among the interior layers, with a conservative interval.

        The ratio's bounds come from the two layers' own intervals, each at confidence
        ``(1 + confidence)/2`` so that both hold together with at least ``confidence`` (Bonferroni):
        ``[low |Δ_max| / high |Δ_min|, high |Δ_max| / low |Δ_min|]``, the upper bound infinite when
        the smallest layer's interval contains 0. With ``resolved``, the smallest is taken among the
        interior layers whose ``(1 + confidence)/2`` interval excludes 0 (the least important layer
        whose effect the text resolves), so both bounds are finite: the range the measurement
        resolves, which any finite text can refute (chapter 1's ``p1.importance_range``). Returns
        (interval, layer of max, layer of min).
        """
        n = n_layers if n_layers is not None else int(max(self.layers)) + 1
        value = dict(zip((int(l) for l in self.layers), self.delta_pct))
        inner = [l for l in interior_layers(n) if l in value]
        if len(inner) < 2:
            raise AnatomyKitError(f"the map covers {len(inner)} interior layer(s); a range needs at least 2")
        each = (1 + confidence) / 2
        top = max(inner, key=lambda l: abs(value[l]))
        pool = inner
        if resolved:
            pool = [l for l in inner if l != top and self.delta_interval(l, each).excludes(0.0)]
            if not pool:
                raise AnatomyKitError(f"no interior layer besides L{top} has a {100 * each:g} % interval that "
                                      "excludes 0: the text resolves no second effect, so no range")
        low = min(pool, key=lambda l: abs(value[l]))

        def abs_bounds(layer):
            iv = self.delta_interval(layer, each)
            a, b = abs(iv.low), abs(iv.high)
            return (0.0, max(a, b)) if iv.low <= 0 <= iv.high else (min(a, b), max(a, b))

        (t_lo, t_hi), (m_lo, m_hi) = abs_bounds(top), abs_bounds(low)
        point = abs(value[top]) / abs(value[low]) if value[low] else math.inf
        ratio = Interval(point, t_lo / m_hi if m_hi > 0 else math.inf, t_hi / m_lo if m_lo > 0 else math.inf,
                         len(self.baseline_block_nll), math.nan, len(self.baseline_block_nll) - 1, confidence,
                         "Bonferroni t")
        return ratio, top, low

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(layers=self.layers.tolist(), ppl=self.ppl.tolist(), delta_pct=self.delta_pct.tolist())
        for k in ("block_nll", "baseline_block_nll", "block_targets"):
            d[k] = None if d[k] is None else np.asarray(d[k]).tolist()
        return d


def ablation_map(model: nn.Module, batches: list[Batch], *, strategy: str = "neighbour-mean",
                 layers: list[int] | None = None, prefix_cache: bool = True,
                 cache: PrefixCache | None = None, store=None, progress: bool = True) -> AblationMap:
    """Ablate each layer in turn and measure perplexity, block by block.

    With ``prefix_cache`` (default) the residual stream entering every layer is computed once
    and ablation ℓ only runs layers ℓ … L−1; otherwise every ablation runs the whole model
    (the naive sweep, same numbers). Pass ``cache`` to share one capture between strategies.
    ``store`` (a dict-like, e.g. :meth:`anatomy_kit.book.run.Run.store`) keeps each finished
    layer's result (``{"ppl", "block_nll"}``) under ``"<strategy>/<layer>"``, so an interrupted
    sweep resumes. Every block's NLL is kept, for :meth:`AblationMap.delta_interval`.
    """
    check_choice("strategy", strategy, ABLATION_STRATEGIES)
    n = len(decoder_layers(model))
    layers = list(range(n)) if layers is None else [check_layer_index("layer", l, n) for l in layers]
    if not batches:
        raise AnatomyKitError("batches is empty; give at least one batch of evaluation tokens")
    if prefix_cache:
        cache = cache or capture_prefix(model, batches)
        baseline, n_tokens = cache.baseline_ppl, cache.n_targets
        base_blocks = cache.baseline_block_nll()          # recorded by capture_prefix, no second pass
    else:
        baseline, n_tokens = perplexity(model, batches), sum(b.n_targets for b in batches)
        base_blocks = block_nll_full(model, batches)
    rows = []
    for layer in progress_bar(layers, desc=f"ablation map ({strategy})", enabled=progress):
        key = f"{strategy}/{layer}"
        stored = store.get(key) if store is not None and key in store else None
        if isinstance(stored, dict) and len(stored.get("block_nll") or ()) == len(base_blocks):
            rows.append([float(x) for x in stored["block_nll"]])
            continue
        with ablated(model, layer, strategy):
            blocks = block_nll_from_layer(model, cache, layer) if prefix_cache else block_nll_full(model, batches)
        rows.append(blocks.tolist())
        if store is not None:
            store[key] = {"ppl": math.exp(float(blocks.sum()) / n_tokens), "block_nll": rows[-1]}
    block = np.asarray(rows, dtype=float).reshape(len(layers), len(base_blocks))
    return AblationMap(strategy=strategy, baseline_ppl=float(baseline), layers=np.array(layers),
                       ppl=np.exp(block.sum(axis=1) / n_tokens), n_tokens=int(n_tokens), block_nll=block,
                       baseline_block_nll=base_blocks, block_targets=block_targets(batches))
