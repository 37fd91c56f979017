"""Perplexity, and the prefix-cached forward that layer sweeps are built on.

A sweep that changes layer ℓ only needs to recompute layers ℓ … L−1: the residual stream
*entering* layer ℓ is the same as in the unchanged model. :func:`capture_prefix` runs the
model once and keeps, for every layer, its input hidden state and the keyword arguments
(attention mask, rotary position embeddings, …) that the backbone passed to it;
:func:`nll_from_layer` (per batch: :func:`batch_nll_from_layer`) replays layers ``start … L−1`` from that cache, applies the final
norm and the LM head, and returns the summed token NLL.

Introduced in chapter 1 (*The ablation map*).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import nn

from .layers import decoder_layers, final_norm, hidden_of
from ..validate import AnatomyKitError, check_int


@dataclass
class Batch:
    """One batch: ``input_ids`` and ``attention_mask`` (B, T); ``labels`` (B, T), −100 = ignored."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    labels: torch.Tensor

    @property
    def n_targets(self) -> int:
        """Tokens that carry a loss (the label is shifted by one inside the loss)."""
        return int((self.labels[:, 1:] != -100).sum())


def make_batches(blocks: torch.Tensor, batch_size: int, device: torch.device | str = "cpu",
                 attention_mask: torch.Tensor | None = None) -> list[Batch]:
    """Split token blocks (N, T) into batches; padding (mask 0) is excluded from the loss."""
    if not isinstance(blocks, torch.Tensor) or blocks.dim() != 2 or blocks.dtype != torch.long:
        raise AnatomyKitError(f"blocks must be an int64 tensor of shape (N, T), got {getattr(blocks, 'shape', blocks)!r}")
    check_int("batch_size", batch_size, minimum=1)
    if attention_mask is None:
        attention_mask = torch.ones_like(blocks)
    out = []
    for i in range(0, len(blocks), batch_size):
        ids, mask = blocks[i:i + batch_size], attention_mask[i:i + batch_size]
        labels = ids.masked_fill(mask == 0, -100)
        out.append(Batch(ids.to(device), mask.to(device), labels.to(device)))
    return out


def head_nll(model: nn.Module, hidden: torch.Tensor, labels: torch.Tensor, chunk: int = 1024,
             vocab_chunk: int = 4096) -> torch.Tensor:
    """Summed next-token NLL from *final-normed* hidden states (B, T, d) and labels (B, T).

    Logits are computed only at positions that have a target, in float32, in blocks of ``chunk``
    positions × ``vocab_chunk`` vocabulary entries folded into a running softmax normaliser (an
    online softmax), so the (tokens, vocab) matrix never exists and every block stays
    in cache (on a CPU this halves the head's time against one full-logits matmul plus
    ``cross_entropy``; the numbers agree to float rounding). Gemma's final logit softcapping is
    applied. Differentiable (chapter 2 fine-tunes through it). A non-finite logit that matters
    (NaN, +inf, or −inf at a target) is an :class:`AnatomyKitError`.
    """
    return row_nll(model, hidden, labels, chunk, vocab_chunk).sum()   # = the sum of the rows' sums, exactly


def row_nll(model: nn.Module, hidden: torch.Tensor, labels: torch.Tensor, chunk: int = 1024,
            vocab_chunk: int = 4096) -> torch.Tensor:
    """Summed next-token NLL of each row ``(B,)``, computed like :func:`head_nll` in one pass over the batch.

    Per-block statistics (chapter 1's paired intervals) need one sum per row; calling
    :func:`head_nll` row by row would stream the LM head's weights once per row. ``head_nll`` is
    the sum of these, so per-block and total numbers always agree to the last bit.
    """
    rows = torch.zeros(hidden.shape[0], dtype=torch.float32, device=hidden.device)
    bad = torch.zeros((), dtype=torch.long, device=hidden.device)   # non-finite NLLs, read once at the end
    n_scored = 0
    for nll, row in _target_nll(model, hidden, labels, chunk, vocab_chunk):
        nll, row = nll.to(rows.device), row.to(rows.device)
        rows = rows.index_add(0, row, nll)
        bad = bad + (~torch.isfinite(nll)).sum()
        n_scored += len(nll)
    if n_scored and int(bad):                   # one host sync per call, not one per chunk
        raise AnatomyKitError(f"logits hold non-finite values (NaN or inf) at {int(bad)} "
                              f"of {n_scored} scored positions")
    return rows


def _target_nll(model: nn.Module, hidden: torch.Tensor, labels: torch.Tensor, chunk: int, vocab_chunk: int):
    """Yield (NLL of each scored position (n,), its row (n,)) for ``chunk`` scored positions at a time.

    Everything meets on the head's device: with a model split over GPUs (``device_map``) the
    labels sit with the embeddings on the first, the final states on the last, and a tied head
    with the embeddings.
    """
    head = model.get_output_embeddings()
    cap = getattr(model.config, "final_logit_softcapping", None)   # Gemma 2/3 squash their logits
    weight = getattr(head, "weight", None)
    if not (isinstance(weight, torch.Tensor) and weight.ndim == 2 and weight.shape[1] == hidden.shape[-1]):
        weight = None                              # an unusual head: call it on whole rows
    bias = getattr(head, "bias", None) if weight is not None else None
    device = weight.device if weight is not None else hidden.device
    target = labels[:, 1:].to(device)
    keep = target != -100
    h = hidden[:, :-1].to(device)[keep]            # (n_targets, d)
    y = target[keep]                               # (n_targets,)
    row_of = torch.arange(target.shape[0], device=device)[:, None].expand_as(target)[keep]
    for i in range(0, len(y), chunk):
        rows, tgt = h[i:i + chunk], y[i:i + chunk]
        if weight is None:
            nll = _block_nll(head(rows).float(), tgt, cap)
        else:
            nll = _blocked_nll(rows, tgt, weight, bias, cap, vocab_chunk)
        yield nll, row_of[i:i + chunk]


def _capped(logits: torch.Tensor, cap: float | None) -> torch.Tensor:
    return cap * torch.tanh(logits / cap) if cap else logits


def _block_nll(logits: torch.Tensor, y: torch.Tensor, cap: float | None) -> torch.Tensor:
    """Per-row NLL (n,) from whole-vocabulary logits (n, V)."""
    logits = _capped(logits, cap)
    return torch.logsumexp(logits, dim=1) - logits.gather(1, y[:, None]).squeeze(1)


def _blocked_nll(h: torch.Tensor, y: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                 cap: float | None, vocab_chunk: int) -> torch.Tensor:
    """Per-row NLL (n,) of rows ``h`` (n, d) under the head ``weight`` (V, d), vocabulary block by block.

    An online softmax: a running maximum ``m`` and the running sum ``s`` of ``exp(logit − m)``, so
    that ``NLL = (m − logit_target) + log s`` keeps float32's precision on the (small) difference,
    as ``cross_entropy``'s log-softmax does. ``m`` is detached: the gradient through it is zero.
    """
    m = s = None
    tgt = torch.zeros(len(y), dtype=torch.float32, device=h.device)
    for j in range(0, weight.shape[0], vocab_chunk):
        w = weight[j:j + vocab_chunk]
        logits = _capped(nn.functional.linear(h, w, None if bias is None else bias[j:j + vocab_chunk]).float(), cap)
        block_max = logits.detach().amax(dim=1)                               # (n,)
        if m is None:
            m = block_max
            s = torch.exp(logits - m[:, None]).sum(dim=1)
        else:
            new_m = torch.maximum(m, block_max)
            s = s * torch.exp(m - new_m) + torch.exp(logits - new_m[:, None]).sum(dim=1)
            m = new_m
        inside = (y >= j) & (y < j + len(w))
        picked = logits.gather(1, (y - j).clamp(0, len(w) - 1)[:, None]).squeeze(1)
        tgt = tgt + torch.where(inside, picked, torch.zeros_like(picked))
    return (m - tgt) + torch.log(s)


def nll_full(model: nn.Module, batch: Batch) -> torch.Tensor:
    """Summed NLL of one batch through the whole model (the naive path).

    Runs in the caller's gradient mode: :func:`perplexity` wraps it in ``no_grad``, fine-tuning
    (chapter 2's recovery speed) back-propagates through it.
    """
    out = model.get_decoder()(input_ids=batch.input_ids, attention_mask=batch.attention_mask, use_cache=False)
    return head_nll(model, out.last_hidden_state, batch.labels)


@torch.no_grad()
def perplexity(model: nn.Module, batches: list[Batch]) -> float:
    """exp(mean token NLL) over batches, running every layer (no cache)."""
    total, count = 0.0, 0
    for b in batches:
        total += float(nll_full(model, b))
        count += b.n_targets
    return math.exp(total / count)


@dataclass
class LayerCall:
    """What the backbone passed to one decoder layer: hidden state (B, T, d), other args, kwargs."""

    hidden: torch.Tensor
    args: tuple
    kwargs: dict


@dataclass
class PrefixCache:
    """Per batch, the call of every decoder layer in the unchanged model."""

    batches: list[Batch]
    calls: list[list[LayerCall]] = field(default_factory=list)   # [batch][layer]
    baseline_nll: float = 0.0
    n_targets: int = 0
    baseline_rows: list[torch.Tensor] = field(default_factory=list)   # [batch] summed NLL per row (B,)

    @property
    def baseline_ppl(self) -> float:
        return math.exp(self.baseline_nll / self.n_targets)

    def baseline_block_nll(self) -> "np.ndarray":
        """The unchanged model's summed NLL of every block (row of every batch), in order; shape (N,)."""
        import numpy as np

        return np.concatenate([r.detach().cpu().numpy() for r in self.baseline_rows]).astype(float)


@torch.no_grad()
def capture_prefix(model: nn.Module, batches: list[Batch]) -> PrefixCache:
    """Run the unchanged model once per batch, recording every decoder layer's input and every row's NLL."""
    layers = decoder_layers(model)
    cache = PrefixCache(batches=batches)
    for batch in batches:
        calls: list[LayerCall | None] = [None] * len(layers)

        def grab(i, module, args, kwargs):
            if args:
                hidden, rest = args[0], tuple(args[1:])
            else:
                kwargs = dict(kwargs)
                hidden, rest = kwargs.pop("hidden_states"), ()
            calls[i] = LayerCall(hidden=hidden, args=rest, kwargs=dict(kwargs))

        handles = [layer.register_forward_pre_hook((lambda i: lambda m, a, k: grab(i, m, a, k))(i), with_kwargs=True)
                   for i, layer in enumerate(layers)]
        try:
            out = model.get_decoder()(input_ids=batch.input_ids, attention_mask=batch.attention_mask, use_cache=False)
            rows = row_nll(model, out.last_hidden_state, batch.labels)          # (B,), one pass of the head
            cache.baseline_rows.append(rows)
            cache.baseline_nll += float(rows.sum())
        finally:
            for h in handles:
                h.remove()
        cache.calls.append(calls)  # type: ignore[arg-type]
        cache.n_targets += batch.n_targets
    return cache


def batch_nll_from_layer(model: nn.Module, cache: PrefixCache, index: int, start: int) -> torch.Tensor:
    """Summed NLL of cached batch ``index`` when layers ``start … L−1`` are recomputed.

    Whatever the model's layers now hold (ablated weights, hooks) is used for those layers;
    layers before ``start`` are taken from the cache, i.e. from the unchanged model. Runs in the
    caller's gradient mode (fine-tuning a layer back-propagates through it).
    """
    layers = decoder_layers(model)
    if not 0 <= start < len(layers):
        raise AnatomyKitError(f"start={start} is out of range; this model has layers 0..{len(layers) - 1}")
    calls = cache.calls[index]
    hidden = calls[start].hidden
    for i in range(start, len(layers)):
        hidden = hidden_of(layers[i](hidden, *calls[i].args, **calls[i].kwargs))
    return head_nll(model, final_norm(model)(hidden), cache.batches[index].labels)


@torch.no_grad()
def nll_from_layer(model: nn.Module, cache: PrefixCache, start: int) -> float:
    """Summed NLL over all cached batches when layers ``start … L−1`` are recomputed (no gradients)."""
    return sum(float(batch_nll_from_layer(model, cache, i, start)) for i in range(len(cache.batches)))
