"""Token clouds at the FFNs of a decoder model, and per-FFN perturbation sensitivity.

An FFN moves every token's state; chapter 4 (*Geometric work*) treats one FFN as the
transport of a *cloud* of token states ``X = {x_i}`` to ``Y = {y_i}`` with the correspondence
``x_i ↔ y_i`` known (same token). :func:`capture_ffn_clouds` records matched pairs with
forward hooks, on a Hugging Face model or on the kit's own models (their parts carry the same
names). The geometry itself lives in :mod:`.metrics`, :mod:`.topology` and :mod:`.work`.

What ``x`` and ``y`` are (``point``):

- ``"residual"`` (default): ``x_i`` = the residual stream entering the FFN sub-block (after
  attention, before the FFN's input norm) and ``y_i = x_i + FFN(norm(x_i))`` = the residual
  leaving it, which is the decoder layer's output. Recorded as ``y`` = layer output and
  ``x = y − δ`` with ``δ`` the FFN's contribution to the residual (the MLP output, passed
  through ``post_feedforward_layernorm`` in Gemma-2/3 layers). Assumes the FFN is the last
  sub-block of a sequential (non-parallel) decoder layer: true for Llama, Mistral, Qwen,
  Gemma, SmolLM2 and GPT-2.
- ``"ffn"``: ``x_i`` = the normalised FFN input and ``y_i = FFN(x_i)`` = the MLP output.

Introduced in chapter 4 (*Geometric work*).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from ..hf.layers import decoder_layers, hidden_of, hooked, mlp_of, run_model
from ..validate import AnatomyKitError, check_choice, check_finite, check_int

POINTS = ("residual", "ffn")
SAMPLINGS = ("uniform", "maxmin")


@dataclass(frozen=True)
class FFNCloud:
    """Matched input/output token states of one FFN (chapter 4, *Geometric work*).

    ``x``, ``y``: (n, d) float64 — row ``i`` of both is the same token.
    ``token_index``: (n,) int64 flat positions into ``input_ids.reshape(-1)``
    (``row * seq_len + position``); identical for every layer of one capture.
    ``point``: ``"residual"`` or ``"ffn"`` (see the module docstring).
    """

    layer: int
    x: np.ndarray
    y: np.ndarray
    token_index: np.ndarray
    point: str = "residual"

    @property
    def n(self) -> int:
        return int(self.x.shape[0])


def _check_inputs(model: nn.Module, input_ids, attention_mask):
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2:
        raise AnatomyKitError(f"input_ids must be a (batch, seq) tensor, got {getattr(input_ids, 'shape', type(input_ids))}")
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    if not isinstance(attention_mask, torch.Tensor) or attention_mask.shape != input_ids.shape:
        raise AnatomyKitError(f"attention_mask must have the shape of input_ids {tuple(input_ids.shape)}, "
                              f"got {getattr(attention_mask, 'shape', type(attention_mask))}")
    device = next(model.parameters()).device
    return input_ids.to(device), attention_mask.to(device)


def maxmin_indices(points: np.ndarray, n: int, *, seed: int = 0) -> np.ndarray:
    """Greedy farthest-point (max-min) subsample of ``n`` rows of ``points`` (m, d).

    Starts from a seeded random row, then repeatedly adds the row farthest (Euclidean) from
    those chosen. Returns sorted row indices (n,). Chapter 4 (*Geometric work*).
    """
    pts = np.asarray(points, dtype=np.float64)
    m = pts.shape[0]
    n = check_int("n_tokens", n, minimum=1, maximum=m)
    chosen = np.empty(n, dtype=np.int64)
    chosen[0] = np.random.default_rng(seed).integers(m)
    sq = np.einsum("ij,ij->i", pts, pts)
    dist = np.full(m, np.inf)
    for k in range(1, n):
        c = pts[chosen[k - 1]]
        dist = np.minimum(dist, np.maximum(sq - 2 * pts @ c + c @ c, 0.0))
        dist[chosen[:k]] = -1.0
        chosen[k] = int(np.argmax(dist))
    return np.sort(chosen)


class _StopForward(Exception):
    pass


def _ffn_contribution_module(layer: nn.Module) -> nn.Module:
    """The module whose output is added to the residual by the FFN sub-block."""
    post = getattr(layer, "post_feedforward_layernorm", None)
    return post if isinstance(post, nn.Module) else mlp_of(layer)


def _first_tensor(args, kwargs) -> torch.Tensor:
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, torch.Tensor):
            return a
    raise AnatomyKitError("the FFN was called without a tensor argument")


@torch.no_grad()
def _run(model, ids, mask, layers, point, select, batch_size, stop_after=None):
    """Forward in chunks; ``select(chunk_start, rows)`` → flat positions (within the chunk) to keep.

    Returns per requested layer lists of (x, y) float32 tensors.
    """
    dec = decoder_layers(model)
    store = {l: ([], []) for l in layers}
    state: dict = {}

    def on_ffn(i, module, args, kwargs, output):
        if i in store:
            if point == "ffn":
                inp = _first_tensor(args, kwargs)
                state["x"], state["y"] = inp, hidden_of(output)
            else:
                state["delta"] = hidden_of(output)

    def on_layer(i, module, args, kwargs, output):
        if i not in store:
            return
        keep = state["keep"]
        if point == "ffn":
            x, y = state.pop("x"), state.pop("y")
        else:
            y = hidden_of(output)
            x = y - state.pop("delta")
        d = y.shape[-1]
        store[i][0].append(x.reshape(-1, d)[keep].float().cpu())
        store[i][1].append(y.reshape(-1, d)[keep].float().cpu())
        if stop_after is not None and i == stop_after:
            raise _StopForward

    mods = [(_ffn_contribution_module(l) if point == "residual" else mlp_of(l)) for l in dec]
    with hooked(mods, on_ffn, with_kwargs=True), hooked(list(dec), on_layer, with_kwargs=True):
        for s in range(0, ids.shape[0], batch_size):
            rows = ids[s:s + batch_size]
            state["keep"] = torch.as_tensor(select(s, rows.shape[0]), dtype=torch.long, device=ids.device)
            if state["keep"].numel() == 0:
                continue
            try:
                run_model(model, rows, mask[s:s + batch_size])
            except _StopForward:
                pass
    return store


def capture_ffn_clouds(model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, *,
                       n_tokens: int, sampling: str = "uniform", seed: int = 0, point: str = "residual",
                       layers: list[int] | None = None, batch_size: int = 8,
                       reference_layer: int | None = None) -> list[FFNCloud]:
    """Matched FFN input/output clouds of ``n_tokens`` tokens for every FFN (chapter 4).

    ``input_ids``, ``attention_mask``: (B, T); tokens with mask 0 (padding) are never sampled.
    The same ``n_tokens`` tokens are used at every layer (row ``i`` of every cloud is one token),
    chosen reproducibly from ``seed``: ``"uniform"`` without replacement, or ``"maxmin"``
    (farthest-point on the *unit-normalised* ``x`` of ``reference_layer``, default the middle
    FFN, from a first forward pass that stops at that layer — angular coverage, so a few
    huge-norm tokens do not take all the picks). ``point`` chooses what ``x`` and ``y`` are
    (module docstring). The forward pass runs ``batch_size`` rows at a time.
    Returns one :class:`FFNCloud` per layer in ``layers`` (default all), ascending.
    """
    check_choice("point", point, POINTS)
    check_choice("sampling", sampling, SAMPLINGS)
    check_int("batch_size", batch_size, minimum=1)
    check_int("seed", seed, minimum=0)
    ids, mask = _check_inputs(model, input_ids, attention_mask)
    n_layers = len(decoder_layers(model))
    layers = list(range(n_layers)) if layers is None else sorted({check_int("layer", l, minimum=0, maximum=n_layers - 1) for l in layers})
    if not layers:
        raise AnatomyKitError("layers=[] selects no FFN; give at least one layer index")
    T = ids.shape[1]
    valid = np.flatnonzero(mask.reshape(-1).cpu().numpy() != 0)  # flat positions of real tokens
    n_tokens = check_int("n_tokens", n_tokens, minimum=2)
    if n_tokens > valid.size:
        raise AnatomyKitError(f"n_tokens={n_tokens} is larger than the {valid.size} non-padding tokens available; "
                              f"pass more text or n_tokens <= {valid.size}")

    def selector(flat: np.ndarray):
        flat = np.sort(flat)
        return lambda s, b: flat[(flat >= s * T) & (flat < (s + b) * T)] - s * T

    if sampling == "uniform":
        chosen = np.sort(np.random.default_rng(seed).choice(valid, size=n_tokens, replace=False))
    else:
        ref = n_layers // 2 if reference_layer is None else check_int("reference_layer", reference_layer,
                                                                      minimum=0, maximum=n_layers - 1)
        xs = _run(model, ids, mask, [ref], point, selector(valid), batch_size, stop_after=ref)[ref][0]
        x = torch.cat(xs).double().numpy()
        check_finite(f"layer {ref} FFN input x (max-min reference)", x)
        norms = np.linalg.norm(x, axis=1, keepdims=True)
        chosen = valid[maxmin_indices(x / np.where(norms > 0, norms, 1.0), n_tokens, seed=seed)]
    store = _run(model, ids, mask, layers, point, selector(chosen), batch_size)
    clouds = []
    for l in layers:
        x = torch.cat(store[l][0]).double().numpy()
        y = torch.cat(store[l][1]).double().numpy()
        check_finite(f"layer {l} FFN output states y", y)
        check_finite(f"layer {l} FFN input states x", x)
        clouds.append(FFNCloud(layer=l, x=x, y=y, token_index=chosen.astype(np.int64), point=point))
    return clouds
