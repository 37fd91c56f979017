"""Self-checks for chapter 1 (*The ablation map*).

- :func:`check_neighbour_mean` – the reader's neighbour-mean ablation of one layer;
- :func:`check_delta_interval` – the reader's paired t interval of a perplexity change.

Each check builds its own small inputs (a tiny random ``LlamaForCausalLM``, random block NLLs),
compares the reader's answer with the kit's (:func:`anatomy_kit.hf.surgery.neighbour_mean`,
:func:`anatomy_kit.anatomy.blockwise.ppl_change_interval`) and says in one sentence what is wrong.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..anatomy.blockwise import ppl_change_interval
from ..hf.surgery import layer_parameter_names, neighbour_mean
from .core import check

__all__ = ["tiny_llama", "check_neighbour_mean", "check_delta_interval", "WRONG_ANSWERS"]


def tiny_llama(n_layers: int = 6, seed: int = 0, vocab: int = 128):
    """A random ``LlamaForCausalLM`` (hidden 32, 4 heads, 2 KV heads) with distinct norm gains per layer."""
    from transformers import LlamaConfig, LlamaForCausalLM

    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=n_layers,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                      tie_word_embeddings=True, initializer_range=0.15)
    model = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:   # norm gains start at 1 in every layer: make layers distinguishable
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=g))
    return model


def _state(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


@check()
def check_neighbour_mean(fn) -> str | None:
    """``fn(model, layer)`` must return ``{full parameter name: tensor}`` for every parameter of decoder
    layer ``layer`` (attention, MLP, both norms) as ½(ℓ−1 + ℓ+1), an edge layer copying its one neighbour,
    without changing the model."""
    model = tiny_llama()
    before = _state(model)
    for layer in (2, 0, 5):
        yours = fn(model, layer)
        if any(not torch.equal(v, before[k]) for k, v in model.state_dict().items()):
            return "your function changed the model's own weights; return new tensors and leave the model as it was"
        want = neighbour_mean(model, layer)
        if not isinstance(yours, dict) or set(yours) != set(want):
            missing = sorted(set(want) - set(yours or {}))[:3]
            return (f"for layer {layer} return one tensor per parameter of that layer (norm gains included); "
                    f"missing or unexpected names, e.g. {missing or sorted(set(yours) - set(want))[:3]}")
        bad = [k for k in want if not torch.allclose(torch.as_tensor(yours[k]).float(), want[k], atol=1e-6)]
        if bad:
            where = "an edge layer has one neighbour and copies it" if layer in (0, 5) else \
                "the mean is ½(W[ℓ−1] + W[ℓ+1]), without layer ℓ itself"
            name = bad[0].split(f"layers.{layer}.")[-1]
            return f"layer {layer}: your {name} differs from the kit's ({where})"
    return None


def _interval(base, new, n):
    iv = ppl_change_interval(base, new, n)
    return iv.low, iv.high


@check()
def check_delta_interval(fn) -> str | None:
    """``fn(base_nll, new_nll, n_targets)`` (per-block summed NLLs, tokens per block) must return the
    95 % t interval ``(low, high)`` of ΔPPL in percent, paired over blocks."""
    rng = np.random.default_rng(7)
    for n_blocks, shift in ((5, 0.05), (8, -0.01), (3, 0.3)):
        n = np.full(n_blocks, 127)
        base = rng.normal(3.4, 0.3, n_blocks) * n
        new = base + rng.normal(shift, 0.04, n_blocks) * n
        low, high = (float(x) for x in fn(base.copy(), new.copy(), n.copy()))
        want_low, want_high = _interval(base, new, n)
        if math.isclose(low, want_low, rel_tol=1e-6, abs_tol=1e-9) and math.isclose(high, want_high, rel_tol=1e-6,
                                                                                    abs_tol=1e-9):
            continue
        for mistake, message in _INTERVAL_MISTAKES:
            wrong = mistake(base, new, n)
            if all(math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-9) for a, b in zip((low, high), wrong)):
                return message.format(n=n_blocks, df=n_blocks - 1)
        narrower = "narrower than" if high - low < want_high - want_low else "different from"
        return (f"for {n_blocks} blocks yours is ({low:.4g}, {high:.4g}) %, {narrower} the kit's ({want_low:.4g}, "
                f"{want_high:.4g}) %: take d_b = (new_b − base_b)/n_b, its t interval, then 100·(exp(·) − 1)")
    return None


# ---------------------------------------------------------------------------- typical mistakes

def _with_itself(model, layer):
    params = dict(model.named_parameters())
    n = model.config.num_hidden_layers
    idx = [j for j in (layer - 1, layer, layer + 1) if 0 <= j < n]
    names = [layer_parameter_names(model, j) for j in idx]
    return {full: sum(params[s[rel]].detach() for s in names) / len(names)
            for rel, full in layer_parameter_names(model, layer).items()}


def _edge_halved(model, layer):
    params = dict(model.named_parameters())
    n = model.config.num_hidden_layers
    lo, hi = max(layer - 1, 0), min(layer + 1, n - 1)   # at an edge this averages the layer with itself
    a, b = layer_parameter_names(model, lo), layer_parameter_names(model, hi)
    return {full: (params[a[rel]].detach() + params[b[rel]].detach()) / 2
            for rel, full in layer_parameter_names(model, layer).items()}


def _no_norms(model, layer):
    return {k: v for k, v in neighbour_mean(model, layer).items() if not k.endswith("layernorm.weight")}


def _in_place(model, layer):
    new = neighbour_mean(model, layer)
    params = dict(model.named_parameters())
    with torch.no_grad():
        for k, v in new.items():
            params[k].copy_(v)
    return new


def _z_interval(base, new, n):
    d = (new - base) / n
    m, se = d.mean(), d.std(ddof=1) / math.sqrt(len(d))
    return 100 * math.expm1(m - 1.959964 * se), 100 * math.expm1(m + 1.959964 * se)


def _unpaired(base, new, n):
    a, b = base / n, new / n
    from scipy import stats

    se = math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
    t = stats.t.ppf(0.975, 2 * len(a) - 2)
    m = b.mean() - a.mean()
    return 100 * math.expm1(m - t * se), 100 * math.expm1(m + t * se)


def _no_exp(base, new, n):
    iv = ppl_change_interval(base, new, n)
    lo, hi = math.log1p(iv.low / 100), math.log1p(iv.high / 100)
    return 100 * lo, 100 * hi


def _bootstrap(base, new, n):
    d = (new - base) / n
    rng = np.random.default_rng(0)
    means = d[rng.integers(0, len(d), (2000, len(d)))].mean(axis=1)
    lo, hi = np.quantile(means, [0.025, 0.975])
    return 100 * math.expm1(lo), 100 * math.expm1(hi)


_INTERVAL_MISTAKES = [
    (_z_interval, "with {n} blocks use Student's t quantile with {df} degrees of freedom, not the normal 1.96 "
                  "(your interval is too narrow)"),
    (_unpaired, "pair the blocks (one difference per block) instead of comparing the two sets of blocks as "
                "independent samples"),
    (_no_exp, "your interval is in nats per token times 100; map it through 100·(exp(x) − 1) to get percent"),
]

WRONG_ANSWERS = {
    "check_neighbour_mean": [_with_itself, _edge_halved, _no_norms, _in_place],
    "check_delta_interval": [_z_interval, _unpaired, _no_exp, _bootstrap],
}
