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

from ..hf.evaluation import Batch, PrefixCache, capture_prefix, nll_from_layer, perplexity
from ..hf.layers import MODULE_PATHS, decoder_layers, replace_hidden
from ..hf.surgery import layer_parameter_names, neighbour_mean, swapped
from ..progress import progress_bar
from ..validate import AnatomyKitError, check_choice, check_layer_index

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
    """Perplexity after ablating each layer. Arrays have shape (L,)."""

    strategy: str
    baseline_ppl: float
    layers: np.ndarray        # layer indices that were ablated
    ppl: np.ndarray           # PPL with that layer ablated
    n_tokens: int             # scored tokens

    @property
    def delta_pct(self) -> np.ndarray:
        """Relative PPL change in percent; negative means the ablated model is *better*."""
        return 100.0 * (self.ppl - self.baseline_ppl) / self.baseline_ppl

    def ranked(self, *, n_layers: int | None = None, interior_only: bool = True) -> list[int]:
        """Ablated layers from most to least important (:func:`~anatomy_kit.anatomy.importance.rank_layers`)."""
        from .importance import rank_layers

        return rank_layers(self.delta_pct, self.layers, n_layers=n_layers, interior_only=interior_only)

    def critical(self, k: int = 4, *, n_layers: int | None = None, interior_only: bool = True) -> list[int]:
        """The ``k`` most important layers (interior ones by default), in layer order."""
        return sorted(self.ranked(n_layers=n_layers, interior_only=interior_only)[:k])

    def anti_layers(self) -> list[int]:
        """Layers whose ablation lowers perplexity."""
        return [int(l) for l, d in zip(self.layers, self.delta_pct) if d < 0]

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(layers=self.layers.tolist(), ppl=self.ppl.tolist(), delta_pct=self.delta_pct.tolist())
        return d


def ablation_map(model: nn.Module, batches: list[Batch], *, strategy: str = "neighbour-mean",
                 layers: list[int] | None = None, prefix_cache: bool = True,
                 cache: PrefixCache | None = None, store=None, progress: bool = True) -> AblationMap:
    """Ablate each layer in turn and measure perplexity.

    With ``prefix_cache`` (default) the residual stream entering every layer is computed once
    and ablation ℓ only runs layers ℓ … L−1; otherwise every ablation runs the whole model
    (the naive sweep, same numbers). Pass ``cache`` to share one capture between strategies.
    ``store`` (a dict-like, e.g. :meth:`anatomy_kit.book.run.Run.store`) keeps each finished
    layer's perplexity under ``"<strategy>/<layer>"``, so an interrupted sweep resumes.
    """
    check_choice("strategy", strategy, ABLATION_STRATEGIES)
    n = len(decoder_layers(model))
    layers = list(range(n)) if layers is None else [check_layer_index("layer", l, n) for l in layers]
    if not batches:
        raise AnatomyKitError("batches is empty; give at least one batch of evaluation tokens")
    if prefix_cache:
        cache = cache or capture_prefix(model, batches)
        baseline, n_tokens = cache.baseline_ppl, cache.n_targets
    else:
        baseline, n_tokens = perplexity(model, batches), sum(b.n_targets for b in batches)
    ppl = []
    for layer in progress_bar(layers, desc=f"ablation map ({strategy})", enabled=progress):
        key = f"{strategy}/{layer}"
        if store is not None and key in store:
            ppl.append(float(store[key]))
            continue
        with ablated(model, layer, strategy):
            if prefix_cache:
                ppl.append(math.exp(nll_from_layer(model, cache, layer) / n_tokens))
            else:
                ppl.append(perplexity(model, batches))
        if store is not None:
            store[key] = ppl[-1]
    return AblationMap(strategy=strategy, baseline_ppl=float(baseline), layers=np.array(layers),
                       ppl=np.array(ppl, dtype=float), n_tokens=int(n_tokens))
