"""A small decoder-only language model whose FFN width can differ per layer (chapter 5).

Introduced in chapter 5 (*The width solver*).

Llama-shaped and nanoGPT-sized: pre-norm blocks (RMSNorm), causal self-attention through
``scaled_dot_product_attention`` with rotary positions, a SwiGLU FFN whose hidden width is
``config.ffn_widths[ℓ]`` in layer ``ℓ``, tied input/output embeddings, no biases. Parameters::

    vocab·d  +  Σ_ℓ (4·d² + 3·d·w_ℓ + 2·d)  +  d        (embedding, layers, final norm)

so at fixed ``Σ_ℓ w_ℓ`` every width schedule has exactly the same parameter count.
Initialisation: normal with std ``0.5/sqrt(d_model)`` (0.018 at d = 768, GPT-2's 0.02; 0.0625 at
d = 64, where 0.02 left small models on a long, seed-dependent plateau), residual-writing
projections scaled by ``1/sqrt(2L)``.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import asdict, dataclass, field

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from ..validate import AnatomyKitError, check_choice, check_int, check_positive

__all__ = ["LMConfig", "PerLayerWidthLM", "param_count", "build_lm", "training_flops"]


def training_flops(config: "LMConfig", tokens: float, seq_len: int) -> float:
    """Training FLOPs ``6·N·D + 12·L·T·d·D`` (weights, plus attention scores; chapter 5).

    ``N`` counts the non-embedding parameters plus the output projection (tied, but its matmul
    is paid), ``D`` the tokens, ``T`` the context. The Kaplan/Chinchilla rule of thumb.
    """
    n = param_count(config) - config.vocab_size * config.d_model - config.d_model  # layers
    n += config.vocab_size * config.d_model  # the LM head's matmul
    return 6.0 * n * tokens + 12.0 * config.n_layers * seq_len * config.d_model * tokens


@dataclass
class LMConfig:
    """Configuration of :class:`PerLayerWidthLM` (chapter 5)."""

    vocab_size: int
    n_layers: int
    d_model: int
    n_heads: int
    ffn_widths: list[int] = field(default_factory=list)
    max_seq_len: int = 256
    ffn: str = "swiglu"          # "swiglu" (3 matrices, Llama) or "gelu" (2 matrices, GPT-2)
    rope_base: float = 10000.0
    norm_eps: float = 1e-5
    init_std: float | None = None  # None: 0.5/sqrt(d_model) (0.018 at d=768 ≈ GPT-2's 0.02)

    def validate(self) -> "LMConfig":
        """Raise :class:`AnatomyKitError` naming the first bad field; return ``self``."""
        check_int("vocab_size", self.vocab_size, minimum=2)
        check_int("n_layers", self.n_layers, minimum=1)
        check_int("d_model", self.d_model, minimum=1)
        check_int("n_heads", self.n_heads, minimum=1)
        check_int("max_seq_len", self.max_seq_len, minimum=1)
        check_choice("ffn", self.ffn, ("swiglu", "gelu"))
        check_positive("rope_base", self.rope_base)
        check_positive("norm_eps", self.norm_eps)
        if self.init_std is not None:
            check_positive("init_std", self.init_std)
        if self.d_model % self.n_heads:
            raise AnatomyKitError(
                f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}; "
                f"choose n_heads among the divisors of {self.d_model}")
        if (self.d_model // self.n_heads) % 2:
            raise AnatomyKitError(
                f"head dimension d_model/n_heads={self.d_model // self.n_heads} must be even for rotary positions")
        widths = list(self.ffn_widths)
        if len(widths) != self.n_layers:
            raise AnatomyKitError(
                f"ffn_widths has {len(widths)} entries but n_layers={self.n_layers}; give one width per layer")
        for i, w in enumerate(widths):
            check_int(f"ffn_widths[{i}]", w, minimum=1)
        return self

    @property
    def std(self) -> float:
        """The initialisation standard deviation in use."""
        return float(self.init_std) if self.init_std is not None else 0.5 / math.sqrt(self.d_model)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["ffn_widths"] = [int(w) for w in self.ffn_widths]
        return d


def param_count(config: LMConfig) -> int:
    """Closed-form parameter count of :class:`PerLayerWidthLM` (chapter 5)."""
    config.validate()
    d, v = config.d_model, config.vocab_size
    n_mats = 3 if config.ffn == "swiglu" else 2
    layers = sum(4 * d * d + n_mats * d * int(w) + 2 * d for w in config.ffn_widths)
    return v * d + layers + d


class RotaryEmbedding(nn.Module):
    """Rotary position embedding (rotate-half convention, as in Llama).

    ``forward(x)`` rotates ``x`` (…, T, hd), positions along dim −2: ``x·cos + rotate_half(x)·sin``
    with ``rotate_half(x) = [−x₂, x₁]``, computed as ``x·cos + roll(x, hd/2)·[−sin₁, sin₂]`` (the
    same products: a sign moves from one factor to the other, which float multiplication does
    exactly) in three kernels instead of six, for queries and keys together.
    """

    def __init__(self, head_dim: int, max_seq_len: int, base: float):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        t = torch.arange(max_seq_len, dtype=torch.float32)
        freqs = torch.outer(t, inv_freq)                      # (T, hd/2)
        self.register_buffer("cos", torch.cat([freqs, freqs], dim=-1).cos(), persistent=False)  # (T, hd)
        sin = freqs.sin()
        self.register_buffer("sin_signed", torch.cat([-sin, sin], dim=-1), persistent=False)   # (T, hd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:      # x: (..., T, hd)
        T = x.shape[-2]
        cos, sin = self.cos[:T].to(x.dtype), self.sin_signed[:T].to(x.dtype)
        return torch.addcmul(x * cos, x.roll(x.shape[-1] // 2, dims=-1), sin)


class Attention(nn.Module):
    def __init__(self, cfg: LMConfig, rope: RotaryEmbedding):
        super().__init__()
        self.n_heads = cfg.n_heads
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.o = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        self.rope = rope

    def forward(self, x: torch.Tensor) -> torch.Tensor:      # x: (B, T, d)
        B, T, d = x.shape
        qkv = self.qkv(x).view(B, T, 3, self.n_heads, d // self.n_heads).permute(2, 0, 3, 1, 4)  # (3, B, H, T, hd)
        qk, v = qkv.split([2, 1])                            # split/unbind, not indexing: cheaper backward
        q, k = self.rope(qk).unbind(0)                       # queries and keys in one pass (B, H, T, hd) each
        y = F.scaled_dot_product_attention(q, k, v.squeeze(0), is_causal=True)   # strided views: no copies
        return self.o(y.transpose(1, 2).reshape(B, T, d))


class FFN(nn.Module):
    """SwiGLU (``down(silu(gate x) * up x)``) or GELU (``down(gelu(up x))``) of hidden width ``width``."""

    def __init__(self, d_model: int, width: int, kind: str):
        super().__init__()
        self.kind = kind
        self.up = nn.Linear(d_model, (2 if kind == "swiglu" else 1) * width, bias=False)  # gate and up fused
        self.down = nn.Linear(width, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:      # x: (B, T, d)
        if self.kind == "swiglu":
            gate, up = self.up(x).chunk(2, dim=-1)            # (B, T, w) each
            return self.down(F.silu(gate) * up)
        return self.down(F.gelu(self.up(x)))


class Block(nn.Module):
    """Pre-norm decoder layer: ``x + attn(norm1 x)``, then ``+ mlp(norm2 ·)``; parts named as in Llama-style
    models (``attn``, ``mlp``), so :mod:`anatomy_kit.hf.layers` finds them."""

    def __init__(self, cfg: LMConfig, width: int, rope: RotaryEmbedding):
        super().__init__()
        self.norm1 = nn.RMSNorm(cfg.d_model, eps=cfg.norm_eps)
        self.attn = Attention(cfg, rope)
        self.norm2 = nn.RMSNorm(cfg.d_model, eps=cfg.norm_eps)
        self.mlp = FFN(cfg.d_model, width, cfg.ffn)

    def forward(self, x: torch.Tensor) -> torch.Tensor:      # x: (B, T, d) -> (B, T, d)
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class PerLayerWidthLM(nn.Module):
    """Decoder-only LM with per-layer FFN widths ``config.ffn_widths`` (chapter 5).

    ``forward(idx)`` maps token ids ``(B, T)`` to logits ``(B, T, vocab)``; with ``targets``
    ``(B, T)`` it returns ``(logits, mean cross-entropy)``. Parts: ``embed``, ``layers`` (the
    decoder layers, each with ``attn`` and ``mlp``), ``norm`` (final) — the names the kit's hook
    helpers (:mod:`anatomy_kit.hf.layers`) look for. With ``checkpoint_activations`` set (what
    ``TrainConfig(activation_checkpointing=True)`` does during training), each layer's activations
    are recomputed in the backward pass (``torch.utils.checkpoint``): same loss and gradients, less
    memory (the 440M preset on a small GPU).
    """

    checkpoint_activations: bool = False

    def __init__(self, config: LMConfig, seed: int | None = None):
        super().__init__()
        self.config = config.validate()
        rope = RotaryEmbedding(config.d_model // config.n_heads, config.max_seq_len, config.rope_base)
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        self.layers = nn.ModuleList(Block(config, int(w), rope) for w in config.ffn_widths)
        self.norm = nn.RMSNorm(config.d_model, eps=config.norm_eps)
        self._initialise(seed)

    def _initialise(self, seed: int | None) -> None:
        """Normal(0, std) for every matrix; residual-writing projections (``attn.o``, ``mlp.down``) get
        std/√(2L), GPT-2 style. With ``seed`` every weight draws from its own generator seeded by
        ``(seed, parameter name)``, so two models that differ in one layer's FFN width share every other
        tensor exactly (paired comparisons, chapter 5); without it the global RNG is used in module order."""
        residual = ("attn.o.weight", "mlp.down.weight")
        for name, p in self.named_parameters():
            if p.ndim < 2:
                continue
            std = self.config.std / (math.sqrt(2 * self.config.n_layers) if name.endswith(residual) else 1.0)
            gen = None
            if seed is not None:
                digest = hashlib.sha256(f"{int(seed)}:{name}".encode()).digest()
                gen = torch.Generator().manual_seed(int.from_bytes(digest[:8], "little"))
            with torch.no_grad():
                nn.init.normal_(p, std=std, generator=gen)

    def get_decoder(self) -> "_Decoder":
        """Hugging Face-style access (used by :mod:`anatomy_kit.hf.evaluation`): embedding, layers, final norm."""
        return _Decoder(self)

    def get_output_embeddings(self) -> nn.Module:
        """Hugging Face-style access: the LM head, tied to the embedding (hidden (…, d) → logits (…, V))."""
        return _TiedHead(self.embed)

    def param_count(self) -> int:
        """Number of parameters (tied embedding counted once); equals :func:`param_count`."""
        return sum(p.numel() for p in self.parameters())

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        if idx.ndim != 2:
            raise AnatomyKitError(f"idx must have shape (batch, seq); got {tuple(idx.shape)}")
        if idx.shape[1] > self.config.max_seq_len:
            raise AnatomyKitError(
                f"sequence length {idx.shape[1]} exceeds max_seq_len={self.config.max_seq_len}")
        x = self.embed(idx)                                  # (B, T, d)
        recompute = self.checkpoint_activations and self.training and torch.is_grad_enabled()
        for blk in self.layers:
            x = checkpoint(blk, x, use_reentrant=False) if recompute else blk(x)
        logits = F.linear(self.norm(x), self.embed.weight)   # tied: (B, T, vocab)
        if targets is None:
            return logits
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        return logits, loss


class _TiedHead(nn.Module):
    def __init__(self, embed: nn.Embedding):
        super().__init__()
        self.weight = embed.weight

    def forward(self, h: torch.Tensor) -> torch.Tensor:      # (…, d) -> (…, V)
        return F.linear(h, self.weight)


class _Decoder:
    """The model without its head, called like a Hugging Face decoder (``input_ids=``, ``attention_mask=``)."""

    def __init__(self, model: "PerLayerWidthLM"):
        self.model = model

    def __call__(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **_: object):
        from types import SimpleNamespace

        if attention_mask is not None and not bool(attention_mask.all()):
            raise AnatomyKitError("PerLayerWidthLM takes no attention mask; give unpadded token blocks")
        x = self.model.embed(input_ids)
        for blk in self.model.layers:
            x = blk(x)
        return SimpleNamespace(last_hidden_state=self.model.norm(x))


def build_lm(config: LMConfig, seed: int = 0) -> PerLayerWidthLM:
    """A freshly initialised :class:`PerLayerWidthLM`, every weight seeded by ``(seed, its name)`` (chapter 5).

    The caller's global random state is not touched.
    """
    return PerLayerWidthLM(config, seed=seed)
