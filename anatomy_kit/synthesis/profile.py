"""One model's per-layer signals, causal and cheap, as data that chapter 7 reads back from JSON.

For every decoder layer ℓ of a model the kit's ablation code supports (Hugging Face causal LMs,
:class:`anatomy_kit.lm.model.PerLayerWidthLM`, :class:`anatomy_kit.width_growth.gpt.GPT`):

- the **causal signal**: the perplexity change when the layer is skipped (its output is its
  input), ``skip ΔPPL %``, with its 95 % t interval paired over the evaluation blocks
  (:func:`anatomy_kit.anatomy.ablation_map` with ``strategy="skip"`` and
  :meth:`~anatomy_kit.anatomy.ablation.AblationMap.intervals`, chapter 1);
- the **cheap signal**: Block Influence (ShortGPT), ``BI_ℓ = 1 − mean_tokens cos(h_ℓ, h_{ℓ+1})``
  of the layer's input and output residual states, from one forward pass
  (:func:`anatomy_kit.card.signals.signal_pass`, the report card's).

With them, the paired data behind the causal signal: each evaluation block's summed NLL with each
layer skipped (``skip_block_nll``, (L, B)) and the tokens it scores (``block_tokens``, (B,)), so chapter 7
can compare two layers of one model block by block (:func:`anatomy_kit.synthesis.depth.edge_contrasts`).

Chapters 3, 5 and 6 save the profile of the model they trained in their metrics
(``"layer_profile"``); chapter 7 (*Synthesis*) compares them with SmolLM2's by relative depth
(:mod:`anatomy_kit.synthesis.depth`) and never retrains.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from ..anatomy import ablation_map
from ..card.signals import cheap_signals, signal_pass
from ..hf.evaluation import make_batches
from ..hf.layers import decoder_layers
from ..validate import AnatomyKitError, check_int
from .depth import layer_depth

__all__ = ["LayerProfile", "layer_profile"]

_ARRAYS = ("skip_delta_pct", "skip_low", "skip_high", "block_influence")


@dataclass(frozen=True, eq=False)
class LayerProfile:
    """Per-layer signals of one model; every array has shape (L,), ``L = n_layers``, layer order.

    ``skip_delta_pct``: ΔPPL % when the layer is skipped (positive = the layer helps);
    ``skip_low``, ``skip_high``: its 95 % t interval paired over blocks; ``block_influence``:
    1 − mean cosine of the layer's input and output states; ``n_tokens``: scored tokens;
    ``baseline_ppl``: the intact model's perplexity on them. ``skip_block_nll`` (L, B) and
    ``block_tokens`` (B,), B ≥ 2: each block's summed NLL with each layer skipped and its scored
    tokens (``None`` in profiles saved before they were recorded). Arrays are read-only; two profiles
    are equal when their :meth:`to_dict` are.
    """

    label: str
    n_layers: int
    n_tokens: int
    baseline_ppl: float
    skip_delta_pct: np.ndarray
    skip_low: np.ndarray
    skip_high: np.ndarray
    block_influence: np.ndarray
    skip_block_nll: np.ndarray | None = None
    block_tokens: np.ndarray | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.label, str) or not self.label.strip():
            raise AnatomyKitError(f"label={self.label!r} must be a non-empty string naming the model")
        n = check_int("n_layers", self.n_layers, minimum=1)
        check_int("n_tokens", self.n_tokens, minimum=1)
        if not (isinstance(self.baseline_ppl, (int, float)) and math.isfinite(self.baseline_ppl)
                and self.baseline_ppl >= 1.0):
            raise AnatomyKitError(f"baseline_ppl={self.baseline_ppl!r} must be a finite perplexity ≥ 1")
        for name in _ARRAYS:
            try:
                arr = np.array(getattr(self, name), dtype=float)   # a copy: the caller's array stays its own
            except (TypeError, ValueError):
                raise AnatomyKitError(f"{name} must be a sequence of numbers, one per layer") from None
            if arr.shape != (n,):
                raise AnatomyKitError(f"{name} has shape {arr.shape}; expected ({n},), one value per layer")
            if not np.isfinite(arr).all():
                raise AnatomyKitError(f"{name} holds non-finite values (NaN or inf): {arr.tolist()}")
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)
        if (self.skip_low > self.skip_high).any():
            raise AnatomyKitError(f"skip_low must not exceed skip_high; layers "
                                  f"{np.flatnonzero(self.skip_low > self.skip_high).tolist()} do")
        self._check_blocks(n)

    def _check_blocks(self, n: int) -> None:
        """``skip_block_nll`` (L, B) and ``block_tokens`` (B,): both or neither, finite, B ≥ 2, tokens ≥ 1."""
        nll, tokens = self.skip_block_nll, self.block_tokens
        if nll is None and tokens is None:
            return
        if nll is None or tokens is None:
            raise AnatomyKitError("skip_block_nll and block_tokens come together (the paired data per block): "
                                  f"got {'skip_block_nll' if tokens is None else 'block_tokens'} alone")
        try:
            nll, tokens = np.array(nll, dtype=float), np.array(tokens, dtype=float)
        except (TypeError, ValueError):
            raise AnatomyKitError("skip_block_nll and block_tokens must hold numbers") from None
        if nll.ndim != 2 or nll.shape[0] != n or nll.shape[1] < 2 or tokens.shape != (nll.shape[1],):
            raise AnatomyKitError(f"skip_block_nll has shape {nll.shape} and block_tokens {tokens.shape}; expected "
                                  f"({n}, B) and (B,) with B ≥ 2 blocks")
        if not (np.isfinite(nll).all() and np.isfinite(tokens).all()) or (tokens < 1).any():
            raise AnatomyKitError("skip_block_nll must be finite and block_tokens finite counts ≥ 1")
        for name, arr in (("skip_block_nll", nll), ("block_tokens", tokens)):
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)

    @property
    def depth(self) -> np.ndarray:
        """Relative depth ``ℓ/(L−1)`` of each layer, shape (L,) (0 for a one-layer model)."""
        return layer_depth(self.n_layers)

    def to_dict(self) -> dict:
        """JSON-ready: plain ints, floats and lists; ``depth`` is included for readers (ignored by :meth:`from_dict`)."""
        out = {"label": self.label, "n_layers": int(self.n_layers), "n_tokens": int(self.n_tokens),
               "baseline_ppl": float(self.baseline_ppl)}
        out.update({name: [float(x) for x in getattr(self, name)] for name in _ARRAYS})
        if self.skip_block_nll is not None:
            out["skip_block_nll"] = self.skip_block_nll.tolist()
            out["block_tokens"] = [int(x) for x in self.block_tokens]
        out["depth"] = self.depth.tolist()
        return out

    @classmethod
    def from_dict(cls, d: dict) -> "LayerProfile":
        """The profile :meth:`to_dict` wrote (e.g. read back from a chapter's metrics JSON)."""
        if not isinstance(d, dict):
            raise AnatomyKitError(f"a layer profile must be a dict (from LayerProfile.to_dict), got {type(d).__name__}")
        missing = [k for k in ("label", "n_layers", "n_tokens", "baseline_ppl", *_ARRAYS) if k not in d]
        if missing:
            raise AnatomyKitError(f"the layer profile dict lacks {missing}; keys present: {sorted(d)}")
        return cls(label=d["label"], n_layers=d["n_layers"], n_tokens=d["n_tokens"],
                   baseline_ppl=float(d["baseline_ppl"]), **{k: d[k] for k in _ARRAYS},
                   skip_block_nll=d.get("skip_block_nll"), block_tokens=d.get("block_tokens"))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LayerProfile) and self.to_dict() == other.to_dict()

    __hash__ = None   # arrays inside: not hashable


def _check_model(model: Any) -> int:
    """The number of decoder layers of a model the kit can sweep, or an :class:`AnatomyKitError`."""
    if not isinstance(model, nn.Module):
        raise AnatomyKitError(f"model must be a torch.nn.Module (a causal LM), got {type(model).__name__}")
    for name in ("get_decoder", "get_output_embeddings"):
        if not callable(getattr(model, name, None)):
            raise AnatomyKitError(f"{type(model).__name__} has no {name}(); give a Hugging Face causal LM, "
                                  "a PerLayerWidthLM or a GPT")
    config = getattr(model, "config", None)
    gate = getattr(model, "gate", None)
    if getattr(config, "old_width", None) is not None and isinstance(gate, torch.Tensor) and float(gate) != 1.0:
        raise AnatomyKitError(f"the GPT is grown with its warm-up gate at {float(gate)}; the kit's layer sweeps "
                              "apply the final norm ungated, so profile it at gate 1 (or before growth)")
    return len(decoder_layers(model))


def layer_profile(model: nn.Module, blocks: torch.Tensor, *, batch_size: int = 4, label: str,
                  store=None) -> LayerProfile:
    """Skip ΔPPL % (with its paired 95 % t interval) and Block Influence of every layer of ``model``.

    ``blocks`` (N, T), N ≥ 2, T ≥ 2: held-out token ids, every position scored (no padding), each
    block at most the model's context. ``batch_size``: blocks per forward pass. ``label``: the
    model's name in chapter 7. ``store`` (dict-like, e.g. ``run.store(name)``) keeps each layer's
    finished skip result under ``"skip/<layer>"`` so a rerun resumes; give one store per model and
    set of blocks (a stored layer is reused whenever its block count matches). The model runs in
    eval mode on its own device, without gradients, and is returned to its previous mode.
    """
    n_layers = _check_model(model)
    if not isinstance(blocks, torch.Tensor) or blocks.ndim != 2:
        raise AnatomyKitError(f"blocks must be a (N, T) tensor of token ids, got {getattr(blocks, 'shape', blocks)!r}")
    if blocks.dtype.is_floating_point or blocks.dtype.is_complex or blocks.dtype == torch.bool:
        raise AnatomyKitError(f"blocks must hold integer token ids, got dtype {blocks.dtype}")
    if blocks.shape[0] < 2 or blocks.shape[1] < 2:
        raise AnatomyKitError(f"blocks has shape {tuple(blocks.shape)}; a paired interval needs N ≥ 2 blocks "
                              "of T ≥ 2 tokens")
    check_int("batch_size", batch_size, minimum=1)
    if not isinstance(label, str) or not label.strip():
        raise AnatomyKitError(f"label={label!r} must be a non-empty string naming the model")
    device = next(model.parameters()).device
    batches = make_batches(blocks.long(), batch_size, device=device)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            amap = ablation_map(model, batches, strategy="skip", store=store, progress=False)
            totals = None
            for b in batches:
                part = signal_pass(model, b.input_ids, b.attention_mask).to_numpy()
                totals = part if totals is None else totals + part
    finally:
        model.train(was_training)
    intervals = amap.intervals()
    layers = [int(l) for l in amap.layers]
    if layers != list(range(n_layers)):
        raise AnatomyKitError(f"the skip sweep covered layers {layers}, not 0..{n_layers - 1}")
    return LayerProfile(label=label, n_layers=n_layers, n_tokens=int(amap.n_tokens),
                        baseline_ppl=float(amap.baseline_ppl), skip_delta_pct=amap.delta_pct,
                        skip_low=np.array([intervals[l].low for l in layers]),
                        skip_high=np.array([intervals[l].high for l in layers]),
                        block_influence=cheap_signals(totals)["block_influence"],
                        skip_block_nll=amap.block_nll, block_tokens=amap.block_targets)
