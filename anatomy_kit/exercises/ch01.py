"""Self-checks for chapter 1 (*The ablation map*).

- :func:`check_next_token_nll` – the reader's mean next-token NLL of a batch (the log of its perplexity);
- :func:`check_neighbour_mean` – the reader's neighbour-mean ablation of one layer;
- :func:`check_delta_interval` – the reader's paired t interval of a perplexity change.

Each check builds its own small inputs (random logits and labels, a tiny random
``LlamaForCausalLM``, random block NLLs), compares the reader's answer with a loop over tokens in
float64 or with the kit's (:func:`anatomy_kit.hf.surgery.neighbour_mean`,
:func:`anatomy_kit.anatomy.blockwise.ppl_change_interval`) and says in one sentence what is wrong.
The interval check names a slip (a normal quantile, an unpaired Welch or pooled two-sample t, no
exponential) only when that slip reproduces the answer on every one of its random cases.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..anatomy.blockwise import ppl_change_interval
from ..hf.surgery import layer_parameter_names, neighbour_mean
from .core import check, generic

__all__ = ["tiny_llama", "check_next_token_nll", "check_neighbour_mean", "check_delta_interval", "WRONG_ANSWERS"]


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


# ---------------------------------------------------------------------------- the mean NLL of a batch

#: Positions per block of the NLL check's inputs, and the scored positions of each block (the rest are
#: labelled −100, as padding is): unequal counts, so a mean of block means differs from the token mean.
_NLL_T, _NLL_SCORED = 7, (6, 3, 5)
_NLL_VOCAB = 11


def _nll_inputs(seed: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    """Random ``(logits (blocks, T, vocabulary) float32, labels (blocks, T) int64)``; −100 marks unscored tokens.

    Label 0 of every block is a real token (a model never predicts it: nothing comes before it)."""
    g = torch.Generator().manual_seed(seed)
    logits = 2 * torch.randn(len(_NLL_SCORED), _NLL_T, _NLL_VOCAB, generator=g)
    labels = torch.randint(0, _NLL_VOCAB, (len(_NLL_SCORED), _NLL_T), generator=g)
    for b, scored in enumerate(_NLL_SCORED):
        labels[b, 1 + scored:] = -100           # the scored targets are labels 1 … scored
    return logits, labels


def _token_nlls(logits: torch.Tensor, labels: torch.Tensor, shift: int = 1) -> list[list[float]]:
    """Per block, the NLL of every scored target, one token at a time in float64: position t − shift
    predicts the label at t (shift 1: the next token; 0: the same position; −1: the previous one)."""
    x, y = logits.double().tolist(), labels.tolist()
    out = []
    for row, targets in zip(x, y):
        nlls = []
        for t, label in enumerate(targets):
            if label == -100 or not 0 <= t - shift < len(row):
                continue
            scores = row[t - shift]
            top = max(scores)
            nlls.append(top + math.log(sum(math.exp(s - top) for s in scores)) - scores[label])
        out.append(nlls)
    return out


def _nll_candidates(logits, labels) -> dict[str, float]:
    """The right mean and each slip's value, from the float64 loop (``"right"`` is the answer)."""
    per_block = _token_nlls(logits, labels)
    flat = [v for block in per_block for v in block]
    n_positions = labels.shape[0] * (labels.shape[1] - 1)       # every predicting position, padding included
    return {
        "right": sum(flat) / len(flat),
        "sum": sum(flat),
        "padding": sum(flat) / n_positions,
        "block means": sum(sum(b) / len(b) for b in per_block) / len(per_block),
        "no shift": _flat_mean(_token_nlls(logits, labels, shift=0)),
        "backwards": _flat_mean(_token_nlls(logits, labels, shift=-1)),
        "perplexity": math.exp(sum(flat) / len(flat)),
        "bits": sum(flat) / len(flat) / math.log(2),
    }


def _flat_mean(per_block: list[list[float]]) -> float:
    flat = [v for block in per_block for v in block]
    return sum(flat) / len(flat)


_NLL_SLIPS = {
    "sum": "you returned the summed NLL; divide by the number of scored tokens to get the mean",
    "padding": "you divided by every position, the ones labelled −100 too; count only the scored tokens",
    "block means": "you averaged the blocks' own means; blocks score different numbers of tokens, so weight "
                   "every scored token equally",
    "no shift": "the logits at position t predict the token at t + 1: compare logits[:, :-1] with labels[:, 1:]",
    "backwards": "you shifted the wrong way: logits[:, :-1] (positions 0 … T−2) predict labels[:, 1:]",
    "perplexity": "you returned exp(NLL), the perplexity; return the mean NLL itself in nats per token",
    "bits": "your NLL is in bits (log base 2); the book measures it in nats, with the natural log",
}


@check()
def check_next_token_nll(fn) -> str | None:
    """``fn(logits, labels)`` (shapes ``(blocks, T, vocabulary)`` and ``(blocks, T)``) must return the mean
    next-token NLL in nats per token as a float: position t predicts label t + 1, labels −100 are not scored."""
    for seed in (3, 4):
        logits, labels = _nll_inputs(seed)
        yours = float(fn(logits.clone(), labels.clone()))
        values = _nll_candidates(logits, labels)
        # float32 log-softmax over 11 logits and a mean over ≤ 21 tokens: ~50 roundings of 6e-8 relative
        if math.isclose(yours, values["right"], rel_tol=1e-5):
            continue
        for slip, message in _NLL_SLIPS.items():
            if math.isclose(yours, values[slip], rel_tol=1e-5):
                return message
        return generic(f"your mean NLL is {yours:.5g} nats/token, the loop over tokens gives "
                       f"{values['right']:.5g}: average −log softmax(logits[b, t])[labels[b, t + 1]] over "
                       "the scored targets")
    return None


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


#: ``(blocks, mean change in nats/token, its spread across blocks)``: the last case gives the changed model a far
#: wider spread than the intact one, so that Welch's unpaired degrees of freedom differ from the pooled 2B − 2.
_INTERVAL_CASES = ((5, 0.05, 0.04), (8, -0.01, 0.04), (3, 0.3, 0.04), (6, 0.8, 0.6))


def _interval_inputs():
    """The check's random blocks: ``[(base, new, n), …]``, summed NLL per block and tokens per block."""
    rng = np.random.default_rng(7)
    out = []
    for n_blocks, shift, spread in _INTERVAL_CASES:
        n = np.full(n_blocks, 127)
        base = rng.normal(3.4, 0.3, n_blocks) * n
        out.append((base, base + rng.normal(shift, spread, n_blocks) * n, n))
    return out


def _same(got, want, rel: float) -> bool:
    return all(math.isclose(a, b, rel_tol=rel, abs_tol=1e-9) for a, b in zip(got, want))


@check()
def check_delta_interval(fn) -> str | None:
    """``fn(base_nll, new_nll, n_targets)`` (per-block summed NLLs, tokens per block) must return the
    95 % t interval ``(low, high)`` of ΔPPL in percent, paired over blocks."""
    cases = _interval_inputs()
    yours = [tuple(float(x) for x in fn(base.copy(), new.copy(), n.copy())) for base, new, n in cases]
    wants = [_interval(*case) for case in cases]
    if all(_same(y, w, 1e-6) for y, w in zip(yours, wants)):
        return None
    for mistake, message in _INTERVAL_MISTAKES:          # a slip is named only if it explains every case
        if all(_same(y, mistake(*case), 1e-4) for y, case in zip(yours, cases)):
            return message
    n, (low, high), (want_low, want_high) = next(
        (c[2], y, w) for c, y, w in zip(cases, yours, wants) if not _same(y, w, 1e-6))
    narrower = "narrower than" if high - low < want_high - want_low else "different from"
    return generic(f"for {len(n)} blocks yours is ({low:.4g}, {high:.4g}) %, {narrower} the kit's ({want_low:.4g}, "
                   f"{want_high:.4g}) %: take d_b = (new_b − base_b)/n_b, its t interval, then 100·(exp(·) − 1)")


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


def _t_interval(base, new, n, *, ddof: int = 1):
    """The paired t interval of ΔPPL %, with the standard deviation's divisor B − ``ddof``."""
    from scipy import stats

    d = (new - base) / n
    half = stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=ddof) / math.sqrt(len(d))
    return 100 * math.expm1(d.mean() - half), 100 * math.expm1(d.mean() + half)


def _population_sd(base, new, n):
    return _t_interval(base, new, n, ddof=0)


def _z_interval(base, new, n):
    d = (new - base) / n
    m, se = d.mean(), d.std(ddof=1) / math.sqrt(len(d))
    return 100 * math.expm1(m - 1.959964 * se), 100 * math.expm1(m + 1.959964 * se)


def _two_samples(base, new, n, *, welch: bool):
    """The unpaired interval: intact and changed blocks as two independent samples of per-token NLL."""
    from scipy import stats

    a, b = base / n, new / n
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1)) if welch else len(a) + len(b) - 2
    half = stats.t.ppf(0.975, df) * math.sqrt(va + vb)      # equal sizes: the pooled and Welch errors agree
    m = b.mean() - a.mean()
    return 100 * math.expm1(m - half), 100 * math.expm1(m + half)


def _welch(base, new, n):
    return _two_samples(base, new, n, welch=True)


def _pooled(base, new, n):
    return _two_samples(base, new, n, welch=False)


def _no_exp(base, new, n):
    iv = ppl_change_interval(base, new, n)
    lo, hi = math.log1p(iv.low / 100), math.log1p(iv.high / 100)
    return 100 * lo, 100 * hi


_FIRST_BLOCKS = _INTERVAL_CASES[0][0]
_INTERVAL_MISTAKES = [
    (_z_interval, f"with {_FIRST_BLOCKS} blocks use Student's t quantile with {_FIRST_BLOCKS - 1} degrees of "
                  "freedom, not the normal 1.96 (your interval is too narrow)"),
    (_welch, "your interval is Welch's unpaired t, which treats the intact and the changed blocks as independent "
             "samples; pair them instead: one difference d_b per block, then its one-sample t interval"),
    (_pooled, "your interval is Student's two-sample (pooled) t, which treats the intact and the changed blocks as "
              "independent samples; pair them instead: one difference d_b per block, then its one-sample t interval"),
    (_no_exp, "your interval is in nats per token times 100; map it through 100·(exp(x) − 1) to get percent"),
    (_population_sd,
     "your standard deviation divides by B, the population formula; the sample standard deviation of the d_b "
     "divides by B − 1 (numpy's std(ddof=1))"),
]

def _nll_sum(logits, labels):
    return torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten(),
                                             reduction="sum")


def _nll_over_padding(logits, labels):
    return _nll_sum(logits, labels) / labels[:, 1:].numel()


def _nll_block_means(logits, labels):
    return torch.stack([_right_nll(logits[b:b + 1], labels[b:b + 1]) for b in range(len(labels))]).mean()


def _right_nll(logits, labels):
    return torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten())


def _nll_no_shift(logits, labels):
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten())


def _nll_backwards(logits, labels):
    return torch.nn.functional.cross_entropy(logits[:, 1:].flatten(0, 1), labels[:, :-1].flatten())


def _nll_perplexity(logits, labels):
    return torch.exp(_right_nll(logits, labels))


def _nll_bits(logits, labels):
    return _right_nll(logits, labels) / math.log(2)


WRONG_ANSWERS = {
    "check_next_token_nll": [(_nll_sum, "summed NLL"), (_nll_over_padding, "labelled −100 too"),
                             (_nll_block_means, "weight every scored token equally"),
                             (_nll_no_shift, "predict the token at t + 1"), (_nll_backwards, "wrong way"),
                             (_nll_perplexity, "the perplexity"), (_nll_bits, "in bits")],
    "check_neighbour_mean": [(_with_itself, "without layer ℓ itself"), (_edge_halved, "edge layer has one neighbour"),
                             (_no_norms, "norm gains included"), (_in_place, "changed the model's own weights")],
    "check_delta_interval": [(_z_interval, "normal 1.96"), (_welch, "Welch's unpaired t"),
                             (_pooled, "two-sample (pooled) t"), (_no_exp, "100·(exp(x) − 1)"),
                             (_population_sd, "population formula")],
}
