"""The kit's two decoders against independent few-line reference forwards in float64 (chapters 3, 5 and 6).

The models compute in float32 through fused kernels (one q|k|v matmul, rotary positions for
queries and keys in one pass, ``scaled_dot_product_attention``); the references below read the
same weights by name and write every step out: norms by their formulas, heads split by hand, a
causal softmax over explicit scores, rotary positions by the rotate-half formula. Logits and
every weight's gradient must agree to float32 rounding.

Tolerance: each float32 matmul, norm or softmax of the forward pass rounds a value by at most
``n·u`` relative for an ``n``-term sum (``u = 2⁻²⁴``), and the residual stream carries every
layer's rounding to the end: :func:`conftest.f32_forward_rtol` ``(L + 1, n)``, with ``n`` the
longest sum in the model (the widest FFN, the model width, or the context in the attention's
weighted sum) and the head counted as one more layer; the backward pass rounds about as often
again (twice that for gradients). Errors are measured against the largest reference value of
the tensor, since single logits or gradient entries can be near zero.
"""

from __future__ import annotations

import math

import pytest
import torch

from anatomy_kit.lm import LMConfig, build_lm
from anatomy_kit.width_growth.gpt import GPT, GPTConfig

from conftest import f32_forward_rtol


@pytest.fixture(scope="module", autouse=True)
def _one_thread(one_torch_thread):
    """Tiny models on one torch thread (see conftest.one_torch_thread)."""


def _rms(x, w, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w


def _layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(((x - mu) ** 2).mean(-1, keepdim=True) + eps) * w + b


def _causal_attention(q, k, v):
    """q, k, v: (B, H, T, hd) → (B, H, T, hd); scores q·k/√hd, positions after the query masked."""
    T = q.shape[-2]
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    future = torch.arange(T)[None, :] > torch.arange(T)[:, None]
    return torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1) @ v


def _heads(x, n_heads):
    B, T, D = x.shape
    return x.reshape(B, T, n_heads, D // n_heads).transpose(1, 2)


def _merge(y):
    B, H, T, hd = y.shape
    return y.transpose(1, 2).reshape(B, T, H * hd)


def _rotary(x, base):
    """Rotate-half rotary positions on x (B, H, T, hd): x·cos(tθ) + [−x₂, x₁]·sin(tθ)."""
    hd, T = x.shape[-1], x.shape[-2]
    theta = base ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)           # (hd/2,)
    angle = torch.arange(T, dtype=torch.float64)[:, None] * theta[None, :]        # (T, hd/2)
    cos, sin = torch.cos(angle).repeat(1, 2), torch.sin(angle).repeat(1, 2)
    x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


def reference_lm(cfg: LMConfig, w: dict, idx: torch.Tensor) -> torch.Tensor:
    """Logits (B, T, V) of a PerLayerWidthLM with weights ``w`` (float64, by state-dict name)."""
    x = w["embed.weight"][idx]
    for i, width in enumerate(cfg.ffn_widths):
        p = f"layers.{i}."
        h = _rms(x, w[p + "norm1.weight"], cfg.norm_eps)
        q, k, v = (h @ w[p + "attn.qkv.weight"].T).split(cfg.d_model, dim=-1)
        q, k, v = (_heads(t, cfg.n_heads) for t in (q, k, v))
        q, k = _rotary(q, cfg.rope_base), _rotary(k, cfg.rope_base)
        x = x + _merge(_causal_attention(q, k, v)) @ w[p + "attn.o.weight"].T
        h = _rms(x, w[p + "norm2.weight"], cfg.norm_eps) @ w[p + "mlp.up.weight"].T
        if cfg.ffn == "swiglu":
            gate, up = h[..., :width], h[..., width:]
            h = gate * torch.sigmoid(gate) * up
        else:
            h = 0.5 * h * (1 + torch.erf(h / math.sqrt(2)))
        x = x + h @ w[p + "mlp.down.weight"].T
    return _rms(x, w["norm.weight"], cfg.norm_eps) @ w["embed.weight"].T


def reference_gpt(cfg: GPTConfig, w: dict, idx: torch.Tensor) -> torch.Tensor:
    """Logits (B, T, V) of an ungated GPT with weights ``w`` (float64, by state-dict name)."""
    T = idx.shape[1]
    x = w["wte.weight"][idx] + w["wpe.weight"][:T]
    for i in range(cfg.n_layers):
        p = f"blocks.{i}."
        h = _layer_norm(x, w[p + "ln1.weight"], w[p + "ln1.bias"], cfg.ln_eps)
        q, k, v = (_heads(h @ w[f"{p}attn.{m}.weight"].T + w[f"{p}attn.{m}.bias"], cfg.n_heads) for m in "qkv")
        x = x + _merge(_causal_attention(q, k, v)) @ w[p + "attn.proj.weight"].T + w[p + "attn.proj.bias"]
        h = _layer_norm(x, w[p + "ln2.weight"], w[p + "ln2.bias"], cfg.ln_eps) @ w[p + "mlp.fc1.weight"].T
        h = h + w[p + "mlp.fc1.bias"]
        h = 0.5 * h * (1 + torch.erf(h / math.sqrt(2)))
        x = x + h @ w[p + "mlp.fc2.weight"].T + w[p + "mlp.fc2.bias"]
    head = w["wte.weight"] if cfg.tie_embeddings else w["lm_head.weight"]
    logits = _layer_norm(x, w["ln_f.weight"], w["ln_f.bias"], cfg.ln_eps) @ head.T
    return logits + w["lm_head.bias"] if cfg.head_bias else logits


def _disturbed(model: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Norm gains and biases away from their initial 1 and 0, so a reference that drops one is caught."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 1:
                p.add_(0.3 * torch.randn(p.shape, generator=g))
    return model


def _compare(model: torch.nn.Module, reference, cfg, idx: torch.Tensor, longest_sum: int, n_layers: int) -> None:
    """Logits and every parameter's gradient of ``model`` (float32) against ``reference`` (float64)."""
    names = [n for n, _ in model.named_parameters()]                  # a tied weight once
    ref_w = {n: p.detach().double().requires_grad_(n in names) for n, p in model.state_dict().items()}
    ref_logits = reference(cfg, ref_w, idx)
    target = torch.randint(0, ref_logits.shape[-1], idx.shape, generator=torch.Generator().manual_seed(5))
    torch.nn.functional.cross_entropy(ref_logits.reshape(-1, ref_logits.shape[-1]), target.reshape(-1)).backward()
    model.zero_grad(set_to_none=True)
    logits = model(idx)                                              # (B, T, V)
    torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1)).backward()
    rtol = f32_forward_rtol(n_layers + 1, longest_sum)
    gap = float((logits.detach().double() - ref_logits.detach()).abs().max() / ref_logits.detach().abs().max())
    assert gap <= rtol, f"logits differ by {gap:.2e} of their largest value (allowed {rtol:.2e})"
    for name, p in model.named_parameters():
        ref = ref_w[name].grad
        # the key bias adds q·b to a whole row of scores, which the softmax ignores: its exact gradient
        # is 0, so both sides hold rounding of the terms that cancel, the size of the key weight's
        scale = ref_w[name.replace("k.bias", "k.weight")].grad if name.endswith("attn.k.bias") else ref
        gap = float((p.grad.double() - ref).abs().max() / scale.abs().max())
        assert gap <= 2 * rtol, f"gradient of {name} differs by {gap:.2e} of its largest entry (allowed {2 * rtol:.2e})"


@pytest.mark.parametrize("ffn", ["swiglu", "gelu"])
def test_the_kit_lm_computes_the_reference_forward_and_gradients(ffn):
    cfg = LMConfig(vocab_size=61, n_layers=3, d_model=32, n_heads=4, ffn_widths=[48, 96, 32], max_seq_len=16,
                   ffn=ffn)
    model = _disturbed(build_lm(cfg, 3), 1)
    idx = torch.randint(0, cfg.vocab_size, (3, 16), generator=torch.Generator().manual_seed(2))
    _compare(model, reference_lm, cfg, idx, longest_sum=max(cfg.ffn_widths), n_layers=cfg.n_layers)


@pytest.mark.parametrize("tied, head_bias", [(True, False), (False, True)])
def test_the_gpt_computes_the_reference_forward_and_gradients(tied, head_bias):
    # init_std 0.1, not GPT-2's 0.02: attention far from uniform, so the queries' gradient is not a
    # difference of nearly equal terms (whose rounding the tolerance below does not cover)
    cfg = GPTConfig(vocab_size=61, n_layers=2, d_model=32, n_heads=4, max_seq_len=16, tie_embeddings=tied,
                    head_bias=head_bias, init_std=0.1)
    torch.manual_seed(4)
    model = _disturbed(GPT(cfg), 6)
    idx = torch.randint(0, cfg.vocab_size, (3, 16), generator=torch.Generator().manual_seed(2))
    _compare(model, reference_gpt, cfg, idx, longest_sum=cfg.ff_width, n_layers=cfg.n_layers)


def test_the_key_bias_gets_no_gradient_since_the_softmax_ignores_it():
    """The exception the comparison above makes, checked: the reference's key-bias gradient is 0 to rounding."""
    cfg = GPTConfig(vocab_size=61, n_layers=1, d_model=32, n_heads=4, max_seq_len=16)
    torch.manual_seed(4)
    model = _disturbed(GPT(cfg), 6)
    w = {n: p.detach().double().requires_grad_() for n, p in model.state_dict().items()}
    idx = torch.randint(0, cfg.vocab_size, (3, 16), generator=torch.Generator().manual_seed(2))
    reference_gpt(cfg, w, idx).square().mean().backward()
    k_bias, k_weight = w["blocks.0.attn.k.bias"].grad, w["blocks.0.attn.k.weight"].grad
    assert float(k_bias.abs().max()) <= 1e-12 * float(k_weight.abs().max())   # float64 rounding only
