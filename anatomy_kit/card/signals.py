"""The cheap signals of the layer-pruning literature, from one forward pass (the book page *Your model's report card*).

States: ``h_ℓ`` is the residual stream *entering* decoder layer ℓ (ℓ = 0 … L−1) and ``h_L`` the output
of the last layer *before* the final norm (``output_hidden_states[-1]`` of Llama-family models is
taken after it, so it is not used). Layer ℓ maps ``h_ℓ`` to ``h_{ℓ+1}``. For every scored token
(all positions of every block, padding excluded):

- **Block Influence** (ShortGPT): ``BI_ℓ = 1 − mean_tokens cos(h_ℓ, h_{ℓ+1})``;
- **angular distance** (PruneMe): ``d(ℓ, n) = mean_tokens arccos(cos(h_ℓ, h_{ℓ+n})) / π`` for
  ``n = 1 … N``. PruneMe uses the *last* token of each sequence; the card averages over *all* tokens
  (many more samples; same quantity). The angle is computed as ``2·arcsin(‖ĥ_a − ĥ_b‖/2)``, equal to
  ``arccos(cos)`` but exact near 0 where ``arccos`` loses digits;
- **relative update norm**: ``Σ_tokens ‖h_{ℓ+1} − h_ℓ‖ / Σ_tokens ‖h_ℓ‖`` (a ratio of means: a token whose
  state is near zero, such as a padding embedding, cannot dominate it).

The literature's exact definitions are recorded beside these (:data:`SIGNAL_DEFINITIONS`) and either
can be the one the card ranks and prunes by (:attr:`.settings.CardSettings.angular_tokens`,
:attr:`.settings.CardSettings.update_norm`):

- ``angular_tokens="last"``: PruneMe's ``d(ℓ, n) = mean_sequences arccos(cos(h_ℓ, h_{ℓ+n}))/π`` at the
  *last* scored token of each sequence only; the card's default, ``"all"``, averages every scored token
  (block-size times more samples of the same angle, so a steadier ranking from the same text);
- ``update_norm="mean_of_ratios"``: ``mean_tokens ‖h_{ℓ+1} − h_ℓ‖ / ‖h_ℓ‖``, the per-token mean; the
  default ``"ratio_of_sums"`` (above) keeps a near-zero state from dominating.

:func:`state_hooks` records them while *any* forward pass of the model runs (the card runs them
during its prefix-cache capture, so they cost no pass of their own); the sums stay tensors on the
device of the first layer's input, each per-layer term moved there (a model split over GPUs with a
``device_map`` works: where two layers on two devices meet, the earlier state moves to the later
one's device); a model on the ``meta`` device works: no value is read until :meth:`SignalSums.to_numpy`).
Per token, the states are taken in float32 whatever the model's dtype. Low values of every signal
mean "this layer changes little", which the pruning literature reads as "prunable".
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np
import torch
from torch import nn

from ..hf.layers import decoder_layers, hidden_of
from ..validate import AnatomyKitError, check_choice, check_int

__all__ = ["CHEAP_SIGNALS", "SIGNAL_DEFINITIONS", "SignalSums", "state_hooks", "signal_pass", "SignalTotals", "cheap_signals",
           "literature_signals", "best_blocks", "max_offset"]

#: Per-layer cheap signals in the card, in display order (work shift and GW come from :mod:`.work`).
CHEAP_SIGNALS = ("block_influence", "angular_distance", "update_norm")

#: The selectable definitions of the cheap signals (the first of each is the card's default).
SIGNAL_DEFINITIONS = {"angular_tokens": ("all", "last"), "update_norm": ("ratio_of_sums", "mean_of_ratios")}


def max_offset(n_layers: int, max_prune: int) -> int:
    """N, the largest block length whose angular distance is recorded: max(L // 4, K), at most L."""
    return max(1, min(n_layers, max(n_layers // 4, max_prune)))


@dataclass
class SignalSums:
    """Token-summed signals of one or more batches, as tensors on the model's device (float64).

    ``cos`` (L,): Σ cos(h_ℓ, h_{ℓ+1}); ``update`` (L,): Σ ‖h_{ℓ+1} − h_ℓ‖; ``norm`` (L,): Σ ‖h_ℓ‖; ``angle`` (L, N):
    ``angle[ℓ, n−1]`` = Σ angle(h_ℓ, h_{ℓ+n}) / π (zero where ℓ + n > L); ``tokens``: Σ token weights.
    ``angle_last`` (L, N): the same at each sequence's last scored token only; ``sequences``: how many
    sequences; ``ratio`` (L,): Σ ‖h_{ℓ+1} − h_ℓ‖ / ‖h_ℓ‖ per token.
    """

    n_layers: int
    n_offsets: int
    cos: torch.Tensor | None = None
    update: torch.Tensor | None = None
    norm: torch.Tensor | None = None
    angle: torch.Tensor | None = None
    tokens: torch.Tensor | None = None
    angle_last: torch.Tensor | None = None
    ratio: torch.Tensor | None = None
    sequences: torch.Tensor | None = None
    _recent: dict = field(default_factory=dict, repr=False)

    def _start(self, like: torch.Tensor) -> None:
        if self.cos is None:
            kw = dict(dtype=torch.float64, device=like.device)
            self.cos, self.update = torch.zeros(self.n_layers, **kw), torch.zeros(self.n_layers, **kw)
            self.norm = torch.zeros(self.n_layers, **kw)
            self.angle = torch.zeros(self.n_layers, self.n_offsets, **kw)
            self.tokens = torch.zeros((), **kw)
            self.angle_last = torch.zeros(self.n_layers, self.n_offsets, **kw)
            self.ratio = torch.zeros(self.n_layers, **kw)
            self.sequences = torch.zeros((), **kw)

    def add_state(self, index: int, hidden: torch.Tensor, weight: torch.Tensor) -> None:
        """Take in ``h_index`` (B, T, d) with token weights (B, T); pair it with the kept earlier states."""
        h = hidden.detach().float()
        self._start(h)
        home = self.cos.device                   # the sums' device: the first state's
        w = weight.to(h.device, torch.float32)
        unit = h / h.norm(dim=-1, keepdim=True).clamp_min(1e-30)
        # each row's last scored position (B,): the largest index whose weight is positive
        last = ((w > 0) * torch.arange(1, w.shape[1] + 1, device=w.device)).argmax(dim=1)
        rows = torch.arange(w.shape[0], device=w.device)
        has = (w > 0).any(dim=1)
        if index == 0:
            self.tokens = self.tokens + w.sum().double().to(home)
            self.sequences = self.sequences + has.sum().double().to(home)
        for n in range(1, self.n_offsets + 1):
            earlier = self._recent.get(index - n)
            if earlier is None:
                continue
            # a model split over devices (device_map): the earlier state may sit on another one
            h_prev, unit_prev = (x.to(h.device) for x in earlier)
            angle = 2 * torch.asin(((unit - unit_prev).norm(dim=-1) / 2).clamp(max=1.0)) / torch.pi   # (B, T)
            self.angle[index - n, n - 1] += (angle * w).sum().double().to(home)
            self.angle_last[index - n, n - 1] += (angle[rows, last] * has).sum().double().to(home)
            if n == 1:
                step = (h - h_prev).norm(dim=-1)
                self.ratio[index - 1] += (step / h_prev.norm(dim=-1).clamp_min(1e-30) * w).sum().double().to(home)
                self.cos[index - 1] += ((unit * unit_prev).sum(dim=-1) * w).sum().double().to(home)
                self.update[index - 1] += (step * w).sum().double().to(home)
                self.norm[index - 1] += (h_prev.norm(dim=-1) * w).sum().double().to(home)
        self._recent[index] = (h, unit)
        self._recent.pop(index - self.n_offsets, None)

    def finish_batch(self) -> None:
        self._recent.clear()

    def to_numpy(self) -> "SignalTotals":
        """The sums as NumPy (reads the values: not on ``meta``)."""
        if self.cos is None:
            raise AnatomyKitError("no state was recorded: run a forward pass inside state_hooks first")
        return SignalTotals(self.cos.cpu().numpy(), self.update.cpu().numpy(), self.norm.cpu().numpy(),
                            self.angle.cpu().numpy(), float(self.tokens.cpu()), self.angle_last.cpu().numpy(),
                            self.ratio.cpu().numpy(), float(self.sequences.cpu()))


@contextmanager
def state_hooks(model: nn.Module, n_offsets: int, weight_of=None) -> Iterator[SignalSums]:
    """Record the cheap signals of every forward pass run inside the block (module docstring).

    ``weight_of()`` returns the token weights (B, T) of the batch being run (default: every
    token weighs 1); call :meth:`SignalSums.finish_batch` between batches.
    """
    layers = decoder_layers(model)
    sums = SignalSums(len(layers), check_int("n_offsets", n_offsets, minimum=1, maximum=len(layers)))

    def weights(h):
        return weight_of() if weight_of is not None else torch.ones(h.shape[:2], device=h.device)

    def on_input(i, module, args, kwargs):
        h = args[0] if args else kwargs["hidden_states"]
        sums.add_state(i, h, weights(h))

    def on_last_output(module, args, kwargs, output):
        h = hidden_of(output)
        sums.add_state(len(layers), h, weights(h))

    handles = [layer.register_forward_pre_hook((lambda i: lambda m, a, k: on_input(i, m, a, k))(i), with_kwargs=True)
               for i, layer in enumerate(layers)]
    handles.append(layers[-1].register_forward_hook(on_last_output, with_kwargs=True))
    try:
        yield sums
    finally:
        for h in handles:
            h.remove()


@torch.no_grad()
def signal_pass(model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, *,
                n_offsets: int = 1) -> SignalSums:
    """The cheap-signal sums of one batch (B, T) from one pass of the decoder stack (no LM head).

    Without ``attention_mask`` every token counts and the model gets no mask (its causal mask alone).

    The card records the same sums during its prefix-cache capture instead; this stand-alone pass
    serves tests (also on the ``meta`` device) and users who want only the cheap signals.
    """
    weight = torch.ones_like(input_ids) if attention_mask is None else attention_mask
    with state_hooks(model, n_offsets, weight_of=lambda: weight) as sums:
        model.get_decoder()(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
    sums.finish_batch()
    return sums


@dataclass(frozen=True)
class SignalTotals:
    """:class:`SignalSums` as NumPy, added over batches with ``+``."""

    cos: np.ndarray
    update: np.ndarray
    norm: np.ndarray
    angle: np.ndarray
    tokens: float
    angle_last: np.ndarray
    ratio: np.ndarray
    sequences: float

    def __add__(self, other: "SignalTotals") -> "SignalTotals":
        return SignalTotals(self.cos + other.cos, self.update + other.update, self.norm + other.norm,
                            self.angle + other.angle, self.tokens + other.tokens, self.angle_last + other.angle_last,
                            self.ratio + other.ratio, self.sequences + other.sequences)

    def to_dict(self) -> dict:
        return {"cos": self.cos.tolist(), "update": self.update.tolist(), "norm": self.norm.tolist(),
                "angle": self.angle.tolist(), "tokens": self.tokens, "angle_last": self.angle_last.tolist(),
                "ratio": self.ratio.tolist(), "sequences": self.sequences}

    @classmethod
    def from_dict(cls, d: dict) -> "SignalTotals":
        return cls(np.asarray(d["cos"], float), np.asarray(d["update"], float), np.asarray(d["norm"], float),
                   np.asarray(d["angle"], float), float(d["tokens"]), np.asarray(d["angle_last"], float),
                   np.asarray(d["ratio"], float), float(d["sequences"]))

    def angular_matrix(self, tokens: str = "all") -> np.ndarray:
        """``d(ℓ, n)`` (L, N) over all scored tokens or at each sequence's last one (``tokens="last"``,
        PruneMe's); NaN where ℓ + n > L (no such pair of states)."""
        check_choice("angular_tokens", tokens, SIGNAL_DEFINITIONS["angular_tokens"])
        n_layers, n_off = self.angle.shape
        d = self.angle / self.tokens if tokens == "all" else self.angle_last / self.sequences
        valid = np.arange(n_layers)[:, None] + np.arange(1, n_off + 1)[None, :] <= n_layers
        return np.where(valid, d, np.nan)


def cheap_signals(totals: SignalTotals, angular_tokens: str = "all",
                  update_norm: str = "ratio_of_sums") -> dict[str, np.ndarray]:
    """``{"block_influence", "angular_distance" (n = 1), "update_norm"}``, each (L,), by the chosen
    definitions (module docstring; :data:`SIGNAL_DEFINITIONS`)."""
    check_choice("update_norm", update_norm, SIGNAL_DEFINITIONS["update_norm"])
    if not totals.tokens > 0:
        raise AnatomyKitError("the signal sums hold no token")
    return {"block_influence": 1.0 - totals.cos / totals.tokens,
            "angular_distance": totals.angular_matrix(angular_tokens)[:, 0],
            "update_norm": totals.update / totals.norm if update_norm == "ratio_of_sums"
            else totals.ratio / totals.tokens}


def literature_signals(totals: SignalTotals) -> dict[str, np.ndarray]:
    """Every definition of :data:`SIGNAL_DEFINITIONS`, each (L,), named by its definition."""
    return {"angular_distance (all tokens)": totals.angular_matrix("all")[:, 0],
            "angular_distance (last token, PruneMe)": totals.angular_matrix("last")[:, 0],
            "update_norm (ratio of sums)": totals.update / totals.norm,
            "update_norm (mean of ratios)": totals.ratio / totals.tokens}


def best_blocks(angular: np.ndarray) -> list[dict]:
    """PruneMe's choice for every block length n: the start ℓ minimising ``d(ℓ, n)``; removes layers ℓ … ℓ+n−1.

    ``angular``: (L, N) from :meth:`SignalTotals.angular_matrix`. Ties go to the earliest start
    (``numpy.nanargmin``).
    """
    out = []
    for n in range(1, angular.shape[1] + 1):
        column = angular[:, n - 1]
        start = int(np.nanargmin(column))
        out.append({"n": n, "start": start, "layers": list(range(start, start + n)), "distance": float(column[start])})
    return out
