"""A small decoder-only language model whose FFN width can differ per layer.

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

import math
from dataclasses import asdict, dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from .validate import AnatomyKitError, check_choice, check_int, check_positive

__all__ = ["LMConfig", "PerLayerWidthLM", "param_count", "ffn_clouds", "PRESETS", "training_flops"]


#: Model shapes and training recipes of chapter 5, by name. ``smoke`` runs on 2 CPU cores inside
#: the book build; the others are OUR configurations for paper 2's 128M/256M/440M OpenWebText runs
#: (the paper's own shapes, token budgets and learning rates were not available): GPT-2 BPE,
#: SwiGLU width ≈ 8/3·d rounded to a multiple of 256, context 1024, 0.5M-token batches,
#: Chinchilla-style 20 tokens per parameter, 3/3/5 seeds as in the paper.
PRESETS: dict[str, dict] = {
    "smoke": dict(n_layers=6, d_model=64, n_heads=4, mean_width=192, multiple=32, block_size=64,
                  tokenizer="bpe", vocab_size=1024, batch_size=16, grad_accum=1, steps=240, lr=6e-3,
                  warmup=24, n_seeds=3, precision="fp32", n_train=1800, n_eval=128),
    "128M": dict(n_layers=12, d_model=768, n_heads=12, mean_width=2048, multiple=256, block_size=1024,
                 tokenizer="gpt2", vocab_size=50304, batch_size=32, grad_accum=16, steps=4800, lr=6e-4,
                 warmup=100, n_seeds=3, precision="bf16", n_train=2_500_000, n_eval=512),
    "256M": dict(n_layers=16, d_model=1024, n_heads=16, mean_width=2816, multiple=256, block_size=1024,
                 tokenizer="gpt2", vocab_size=50304, batch_size=32, grad_accum=16, steps=9800, lr=4e-4,
                 warmup=200, n_seeds=3, precision="bf16", n_train=5_000_000, n_eval=512),
    "440M": dict(n_layers=24, d_model=1152, n_heads=18, mean_width=3072, multiple=256, block_size=1024,
                 tokenizer="gpt2", vocab_size=50304, batch_size=32, grad_accum=16, steps=16800, lr=3e-4,
                 warmup=300, n_seeds=5, precision="bf16", n_train=8_600_000, n_eval=512),
}


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
    """Rotary position embedding (rotate-half convention, as in Llama)."""

    def __init__(self, head_dim: int, max_seq_len: int, base: float):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        t = torch.arange(max_seq_len, dtype=torch.float32)
        freqs = torch.outer(t, inv_freq)                      # (T, hd/2)
        emb = torch.cat([freqs, freqs], dim=-1)               # (T, hd)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:      # x: (B, H, T, hd)
        T = x.shape[-2]
        cos, sin = self.cos[:T].to(x.dtype), self.sin[:T].to(x.dtype)
        x1, x2 = x.chunk(2, dim=-1)
        return x * cos + torch.cat([-x2, x1], dim=-1) * sin


class Attention(nn.Module):
    def __init__(self, cfg: LMConfig, rope: RotaryEmbedding):
        super().__init__()
        self.n_heads = cfg.n_heads
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.o = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        self.rope = rope

    def forward(self, x: torch.Tensor) -> torch.Tensor:      # x: (B, T, d)
        B, T, d = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, d // self.n_heads).permute(2, 0, 3, 1, 4)
        q, k = self.rope(q), self.rope(k)                    # (B, H, T, hd)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
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
    def __init__(self, cfg: LMConfig, width: int, rope: RotaryEmbedding):
        super().__init__()
        self.norm1 = nn.RMSNorm(cfg.d_model, eps=cfg.norm_eps)
        self.attn = Attention(cfg, rope)
        self.norm2 = nn.RMSNorm(cfg.d_model, eps=cfg.norm_eps)
        self.ffn = FFN(cfg.d_model, width, cfg.ffn)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.ffn(self.norm2(x))


class PerLayerWidthLM(nn.Module):
    """Decoder-only LM with per-layer FFN widths ``config.ffn_widths`` (chapter 5).

    ``forward(idx)`` maps token ids ``(B, T)`` to logits ``(B, T, vocab)``; with ``targets``
    ``(B, T)`` it returns ``(logits, mean cross-entropy)``.
    """

    def __init__(self, config: LMConfig):
        super().__init__()
        self.config = config.validate()
        rope = RotaryEmbedding(config.d_model // config.n_heads, config.max_seq_len, config.rope_base)
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        self.blocks = nn.ModuleList(Block(config, int(w), rope) for w in config.ffn_widths)
        self.norm = nn.RMSNorm(config.d_model, eps=config.norm_eps)
        self.apply(self._init)
        # GPT-2 style: residual-writing projections scaled down with depth.
        for blk in self.blocks:
            nn.init.normal_(blk.attn.o.weight, std=config.std / math.sqrt(2 * config.n_layers))
            nn.init.normal_(blk.ffn.down.weight, std=config.std / math.sqrt(2 * config.n_layers))

    def _init(self, module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=self.config.std)

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
        for blk in self.blocks:
            x = blk(x)
        logits = F.linear(self.norm(x), self.embed.weight)   # tied: (B, T, vocab)
        if targets is None:
            return logits
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        return logits, loss


@torch.no_grad()
def ffn_clouds(model: PerLayerWidthLM, blocks: torch.Tensor, *, n_tokens: int, seed: int = 0,
               batch_size: int = 16) -> list:
    """Matched token states around every FFN of a :class:`PerLayerWidthLM` (chapter 5).

    The ``"residual"`` point of :mod:`anatomy_kit.clouds`: ``x`` = the residual stream entering
    the FFN sub-block (after attention), ``y = x + FFN(norm(x))`` = the block's output, for the
    same ``n_tokens`` token positions (drawn uniformly without replacement, seeded) at every
    layer. ``blocks``: token ids ``(N, T)``. Returns ``anatomy_kit.clouds.FFNCloud`` objects, the
    input of :func:`anatomy_kit.geometry.work_profiles`.
    """
    from .clouds import FFNCloud

    if blocks.ndim != 2:
        raise AnatomyKitError(f"blocks must have shape (N, T); got {tuple(blocks.shape)}")
    total = blocks.numel()
    n_tokens = check_int("n_tokens", n_tokens, minimum=2, maximum=total)
    g = torch.Generator().manual_seed(seed)
    index = torch.randperm(total, generator=g)[:n_tokens].sort().values
    xs: list[list[torch.Tensor]] = [[] for _ in model.blocks]
    ys: list[list[torch.Tensor]] = [[] for _ in model.blocks]
    hooks = []
    for i, blk in enumerate(model.blocks):
        hooks.append(blk.norm2.register_forward_pre_hook(lambda m, args, i=i: xs[i].append(args[0].detach())))
        hooks.append(blk.register_forward_hook(lambda m, args, out, i=i: ys[i].append(out.detach())))
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    try:
        for b in range(0, blocks.shape[0], batch_size):
            model(blocks[b:b + batch_size].to(device))
    finally:
        for h in hooks:
            h.remove()
        model.train(was_training)
    clouds = []
    for i in range(len(model.blocks)):
        x = torch.cat(xs[i]).reshape(total, -1)[index].double().cpu().numpy()
        y = torch.cat(ys[i]).reshape(total, -1)[index].double().cpu().numpy()
        clouds.append(FFNCloud(layer=i, x=x, y=y, token_index=index.numpy().astype("int64"), point="residual"))
    return clouds
