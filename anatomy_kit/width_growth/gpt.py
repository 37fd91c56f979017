"""The nanoGPT-sized decoder that chapter 6, *Growing the residual stream*, grows in width.

Paper 3 (Ramasubramanian B, "Closed-Form Residual-Space Rotation for Offline Transformer Width
Growth") grows a GPT-2-vocabulary decoder with learned position embeddings, pre-norm blocks with
``LayerNorm``, GELU ``fc1``/``fc2`` FFNs and biases (d256, 4 heads, 8 layers → d384, 6 heads). The
author's precursor code shows that shape; this module is our re-implementation of it, not theirs.

Parts are named so that growth code and hooks can find them::

    wte (V, D), wpe (T_max, D)
    blocks[i].ln1 -> blocks[i].attn.{q, k, v} (one stacked matmul) -> SDPA (causal) -> blocks[i].attn.proj
    blocks[i].ln2 -> blocks[i].mlp.fc1 -> GELU -> blocks[i].mlp.fc2
    ln_f -> lm_head (V, D), tied to wte unless ``tie_embeddings=False``

The warm-up gate (INFERRED: the paper's text was not available; the seed summary says a scalar
``new_dim_alpha_gate`` ramps 0 → 1 over ~40M tokens). A grown model remembers ``old_width`` = d: the
residual coordinates ``d .. D-1`` are "new". The gate ``g`` lives in **every LayerNorm**, the only
place where a pre-norm model reads its residual stream:

* statistics are weighted: ``w = [1_d; g·1_k]``, ``μ = Σ w x / Σ w``, ``σ² = Σ w (x − μ)² / D``;
* the normalised output's new coordinates are multiplied by ``g``.

At ``g = 1`` this is exactly ``nn.LayerNorm`` over D. At ``g = 0`` it normalises the old d
coordinates only (divided by D, not d: the old gains carry the √(d/D) factor that chapter 6
derives, so one set of weights serves both ends) and hides the new coordinates from every reader.
Writes are not gated: what lands in the new coordinates stays invisible until g > 0. The seed
summary puts the gate on the blocks' outputs (the writes); we do not, because a write gate alone
leaves LayerNorm averaging over D coordinates instead of d (so not even zero-padding is exact at
g = 0), and the rotations of ``srio.py`` mix old and new coordinates in every write. A gate on the
reads makes g = 0 reproduce the small model exactly for every operator (tested).

The ramp lives in the model, not in the training loop: with ``config.warmup_tokens`` set, every
training-mode forward first sets ``g = min(1, tokens_seen / warmup_tokens)`` and then adds the
batch's B·T tokens (times the world size under ``torch.distributed``) to the ``tokens_seen``
buffer. Both are buffers of the state dict, so a checkpointed run resumes the ramp where it
stopped; evaluation (eval mode) reads the gate without moving it. Growing resets the count.

Cost: the model keeps host copies of ``gate`` and ``tokens_seen`` (:meth:`GPT.host_value`), valid
while the buffers are unchanged (PyTorch's version counter and the buffer's identity tell), so a
forward reads the device only after a buffer was loaded or written from outside; once g = 1 the
ramp only counts tokens on the device. ``finish_warmup`` drops the gate once g = 1, leaving the
plain grown model. Buffers have shape (1,), not (), so every tensor of the state dict can be
hashed and saved as bytes.

Hugging Face-style access (``get_decoder``, ``get_output_embeddings``) lets the kit's layer sweeps
(:func:`anatomy_kit.hf.evaluation.capture_prefix`, :func:`anatomy_kit.anatomy.ablation_map`) run on a
GPT; those sweeps apply ``ln_f`` as a plain module after the last block, so they are exact for a
model that is not grown or whose gate is 1. Used by chapter 7 (*Synthesis*).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import torch.nn as nn
import torch.nn.functional as F

from anatomy_kit.validate import AnatomyKitError, check_int, check_positive

WARMUP_TOKENS = 40_000_000  # the brief: gate ramped 0 → 1 over "2 shards, about 40M tokens"


@dataclass(frozen=True)
class GPTConfig:
    """Shape of a :class:`GPT`; ``old_width`` marks a grown model (coordinates ≥ old_width are new)."""

    vocab_size: int = 50257
    n_layers: int = 8
    d_model: int = 256
    n_heads: int = 4
    d_ff: int | None = None  # None → 4·d_model
    max_seq_len: int = 256
    ln_eps: float = 1e-5
    init_std: float = 0.02
    tie_embeddings: bool = True
    head_bias: bool = False  # a grown model may need one (folding ln_f's β into the head)
    old_width: int | None = None  # None: not grown, no gate
    warmup_tokens: int | None = None  # None: the gate stays where set_gate put it; else the ramp

    @property
    def ff_width(self) -> int:
        return 4 * self.d_model if self.d_ff is None else self.d_ff

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def validate(self) -> "GPTConfig":
        """Return self, or raise :class:`AnatomyKitError` naming the bad field."""
        for name in ("vocab_size", "n_layers", "d_model", "n_heads", "max_seq_len"):
            check_int(name, getattr(self, name), minimum=1)
        if self.d_model % self.n_heads:
            raise AnatomyKitError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if self.d_ff is not None:
            check_int("d_ff", self.d_ff, minimum=1)
        check_positive("ln_eps", self.ln_eps)
        check_positive("init_std", self.init_std)
        if self.old_width is not None:
            check_int("old_width", self.old_width, minimum=1, maximum=self.d_model - 1)
        if self.warmup_tokens is not None:
            check_int("warmup_tokens", self.warmup_tokens, minimum=1)
        return self

    def with_(self, **changes) -> "GPTConfig":
        return replace(self, **changes).validate()


def gated_layer_norm(x: torch.Tensor, ln: nn.LayerNorm, old_width: int, gate: torch.Tensor) -> torch.Tensor:
    """LayerNorm over D = x.shape[-1] whose view of coordinates ≥ ``old_width`` is scaled by ``gate``.

    x: (..., D) → (..., D). Equals ``ln(x)`` at gate = 1 (see the module docstring for the maths).
    """
    w = torch.ones(x.shape[-1], dtype=x.dtype, device=x.device)
    w[old_width:] = gate.to(x.dtype)
    mean = (x * w).sum(-1, keepdim=True) / w.sum()
    centred = x - mean
    var = (w * centred * centred).sum(-1, keepdim=True) / x.shape[-1]
    return (centred * torch.rsqrt(var + ln.eps) * ln.weight + ln.bias) * w


class Attention(nn.Module):
    """Causal multi-head self-attention; ``q``, ``k``, ``v``: (H·hd, D) each, ``proj``: (D, H·hd).

    ``q``, ``k`` and ``v`` stay three modules (what the growth operators and checkpoints name), but
    the forward pass applies them as one (3·H·hd, D) matmul of their stacked weights and biases (one
    kernel instead of three, and fewer steps in the backward pass); their own ``forward`` (and any
    hook on it) is not called.
    """

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.n_heads, self.head_dim = cfg.n_heads, cfg.head_dim
        self.q = nn.Linear(cfg.d_model, cfg.d_model)
        self.k = nn.Linear(cfg.d_model, cfg.d_model)
        self.v = nn.Linear(cfg.d_model, cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x (B, T, D) → (B, T, D)
        B, T, _ = x.shape
        weight = torch.cat((self.q.weight, self.k.weight, self.v.weight))   # (3·H·hd, D)
        bias = torch.cat((self.q.bias, self.k.bias, self.v.bias))           # (3·H·hd,)
        q, k, v = F.linear(x, weight, bias).view(B, T, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, hd)
        return self.proj(y.transpose(1, 2).reshape(B, T, self.n_heads * self.head_dim))


class MLP(nn.Module):
    """``fc1`` (F, D) → GELU → ``fc2`` (D, F)."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.fc1 = nn.Linear(cfg.d_model, cfg.ff_width)
        self.fc2 = nn.Linear(cfg.ff_width, cfg.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, D) → (B, T, D)
        return self.fc2(F.gelu(self.fc1(x)))


class Block(nn.Module):
    """Pre-norm block: x + attn(ln1(x)), then + mlp(ln2(x)); ``read`` applies a (gated) norm."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model, eps=cfg.ln_eps)
        self.attn = Attention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model, eps=cfg.ln_eps)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor, read=None) -> torch.Tensor:  # (B, T, D) → (B, T, D)
        read = read or (lambda ln, h: ln(h))
        x = x + self.attn(read(self.ln1, x))
        return x + self.mlp(read(self.ln2, x))


class GPT(nn.Module):
    """Decoder LM. ``forward(idx (B, T)) → logits (B, T, V)``; with targets, ``(logits, mean CE)``.

    ``gate`` (1,) and ``tokens_seen`` (1,) int64 are buffers (saved with the weights); they matter
    only when ``config.old_width`` is set (``tokens_seen`` drives the ramp when
    ``config.warmup_tokens`` is set). ``new_coords`` is the (D,) bool mask of the new coordinates.
    """

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config.validate()
        cfg = self.config
        self.wte = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.wpe = nn.Embedding(cfg.max_seq_len, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model, eps=cfg.ln_eps)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=cfg.head_bias)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.wte.weight
        self.register_buffer("gate", torch.ones(1))
        self.register_buffer("tokens_seen", torch.zeros(1, dtype=torch.long))
        self.apply(self._init)

    def _init(self, m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=self.config.init_std)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    @property
    def new_coords(self) -> torch.Tensor:
        mask = torch.zeros(self.config.d_model, dtype=torch.bool, device=self.gate.device)
        if self.config.old_width is not None:
            mask[self.config.old_width:] = True
        return mask

    @torch.compiler.disable
    def host_value(self, name: str) -> float | int:
        """``float(self.gate)`` or ``int(self.tokens_seen)`` without a device sync when the host copy is current
        (chapter 6).

        The copy is re-read when the buffer is another tensor (``load_state_dict(assign=True)``) or
        was written in place since (its ``_version`` moved: ``fill_``, ``copy_``, a checkpoint load).
        """
        t = getattr(self, name)
        cached = self.__dict__.setdefault("_host", {}).get(name)
        if cached is None or cached[0] is not t or cached[1] != t._version:
            cached = (t, t._version, float(t) if t.is_floating_point() else int(t))
            self._host[name] = cached
        return cached[2]

    def _remember(self, name: str, value: float | int) -> None:
        """Record ``value`` as the host copy of buffer ``name``, which the caller has just written."""
        t = getattr(self, name)
        self.__dict__.setdefault("_host", {})[name] = (t, t._version, value)

    def _read(self, ln: nn.LayerNorm, x: torch.Tensor) -> torch.Tensor:
        if self.config.old_width is None or self.host_value("gate") == 1.0:
            return ln(x)
        return gated_layer_norm(x, ln, self.config.old_width, self.gate)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        B, T = idx.shape
        if T > self.config.max_seq_len:
            raise AnatomyKitError(f"sequence length {T} exceeds max_seq_len={self.config.max_seq_len}")
        if self.training:
            self._advance_warmup(B * T)
        pos = torch.arange(T, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)  # (B, T, D)
        for block in self.blocks:
            x = block(x, self._read)
        logits = self.lm_head(self._read(self.ln_f, x))  # (B, T, V)
        if targets is None:
            return logits
        flat = logits.reshape(-1, logits.shape[-1])
        return logits, F.cross_entropy(flat.to(torch.promote_types(flat.dtype, torch.float32)), targets.reshape(-1))

    @torch.compiler.disable
    def _advance_warmup(self, n_tokens: int) -> None:
        """Set the gate from the tokens seen so far, then count this batch's (training mode only)."""
        cfg = self.config
        if cfg.old_width is None or cfg.warmup_tokens is None:
            return
        world = torch.distributed.get_world_size() if torch.distributed.is_initialized() else 1
        seen = self.host_value("tokens_seen")
        with torch.no_grad():
            if self.host_value("gate") != 1.0 or seen < cfg.warmup_tokens:   # at g = 1 the ramp is over
                gate = min(1.0, seen / cfg.warmup_tokens)
                self.gate.fill_(gate)
                self._remember("gate", float(torch.tensor(gate, dtype=self.gate.dtype)))   # as the buffer holds it
            self.tokens_seen.add_(n_tokens * world)
        self._remember("tokens_seen", seen + n_tokens * world)

    def param_count(self) -> int:
        """Trainable parameters, a tied embedding counted once."""
        return sum(p.numel() for p in self.parameters())

    def get_decoder(self) -> "_Decoder":
        """Hugging Face-style access (:mod:`anatomy_kit.hf.evaluation`, chapter 7's layer profiles).

        A callable ``(input_ids=(B, T), attention_mask=None) → .last_hidden_state (B, T, D)``: wte + wpe,
        the blocks with the model's (gated) reads, the final norm. Unlike ``forward`` it never
        moves the warm-up gate. The kit's prefix-cached sweeps re-apply ``ln_f`` ungated: use them
        on a model that is not grown or whose gate is 1.
        """
        return _Decoder(self)

    def get_output_embeddings(self) -> nn.Linear:
        """Hugging Face-style access: ``lm_head`` (hidden (…, D) → logits (…, V)), tied to wte by default."""
        return self.lm_head


class _Decoder:
    """A :class:`GPT` without its head, called like a Hugging Face decoder (``input_ids=``, ``attention_mask=``)."""

    def __init__(self, model: GPT):
        self.model = model

    def __call__(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **_: object):
        from types import SimpleNamespace

        m = self.model
        if not isinstance(input_ids, torch.Tensor) or input_ids.ndim != 2:
            raise AnatomyKitError(f"input_ids must have shape (batch, seq); got {getattr(input_ids, 'shape', input_ids)!r}")
        if input_ids.shape[1] > m.config.max_seq_len:
            raise AnatomyKitError(f"sequence length {input_ids.shape[1]} exceeds max_seq_len={m.config.max_seq_len}")
        if attention_mask is not None and not bool(attention_mask.all()):
            raise AnatomyKitError("GPT takes no attention mask; give unpadded token blocks")
        pos = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = m.wte(input_ids) + m.wpe(pos)  # (B, T, D)
        for block in m.blocks:
            x = block(x, m._read)
        return SimpleNamespace(last_hidden_state=m._read(m.ln_f, x))


def set_gate(model: GPT, gate: float) -> GPT:
    """Set the warm-up gate in place (0 = the small model's function, 1 = the plain grown model)."""
    g = check_positive("gate", gate, allow_zero=True)
    if g > 1:
        raise AnatomyKitError(f"gate={gate!r} must be in [0, 1]")
    model.gate.fill_(g)
    model._remember("gate", float(torch.tensor(g, dtype=model.gate.dtype)))   # the host copy: no read-back
    return model


def finish_warmup(model: GPT) -> GPT:
    """Drop the gate of a grown model whose gate is 1 (in place): the plain model, no gated norms."""
    if model.config.old_width is not None and float(model.gate) != 1.0:
        raise AnatomyKitError(f"gate={float(model.gate)} must be 1 before the warm-up can finish")
    model.config = model.config.with_(old_width=None)
    return model


def gate_schedule(tokens_seen: int, warmup_tokens: int = WARMUP_TOKENS) -> float:
    """Linear warm-up g = min(1, tokens_seen / warmup_tokens) (INFERRED shape; the brief gives ~40M)."""
    check_int("tokens_seen", tokens_seen, minimum=0)
    check_int("warmup_tokens", warmup_tokens, minimum=1)
    return min(1.0, tokens_seen / warmup_tokens)

