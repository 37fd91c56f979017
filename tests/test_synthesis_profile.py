"""Chapter 7's layer profiles (anatomy_kit.synthesis.profile), the GPT's Hugging Face-style access
(anatomy_kit.width_growth.gpt) that lets the kit's sweeps run on it, and the depth statistics
(anatomy_kit.synthesis.depth)."""

import itertools
import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from anatomy_kit import anatomy, data
from anatomy_kit.width_growth.gpt import GPT, GPTConfig, set_gate
from anatomy_kit.hf import evaluation
from anatomy_kit.hf.layers import decoder_layers, hidden_of
from anatomy_kit.lm import LMConfig, build_lm
from anatomy_kit.synthesis.depth import (edge_contrasts, edge_importance, importance_percentiles, layer_depth,
                                         resample_depth)
from anatomy_kit.synthesis.profile import LayerProfile, layer_profile
from anatomy_kit.validate import AnatomyKitError

from conftest import F32_U, f32_forward_rtol, f32_sum_rtol, tiny_llama

VOCAB = 512
T = 32


@pytest.fixture(scope="module")
def text_blocks(tokenizer):
    """Eight blocks of 32 tokens of the Python documentation (the word-level tokenizer's 512 ids)."""
    ids, texts = data.python_docs_text()
    return data.token_blocks(tokenizer, {"id": ids, "text": texts}, block_size=T, n_train=0, n_eval=8).eval


def tiny_gpt(n_layers: int = 4, seed: int = 0, **changes) -> GPT:
    """An ungrown GPT with weights large enough that its layers differ (init std 0.2, not 0.02)."""
    torch.manual_seed(seed)
    cfg = GPTConfig(vocab_size=VOCAB, n_layers=n_layers, d_model=32, n_heads=4, max_seq_len=64, init_std=0.2,
                    **changes)
    model = GPT(cfg).eval()
    with torch.no_grad():   # LayerNorm gains and biases off their 1 / 0 defaults, so layers differ there too
        for name, p in model.named_parameters():
            if name.endswith(("ln1.weight", "ln2.weight", "ln_f.weight")):
                p.copy_(1 + 0.1 * torch.randn_like(p))
    return model


# ---------------------------------------------------------------------------------------------
# The GPT through the Hugging Face-style path
# ---------------------------------------------------------------------------------------------

def test_gpt_decoder_nll_equals_forward_cross_entropy(text_blocks, one_torch_thread):
    model = tiny_gpt()
    (batch,) = evaluation.make_batches(text_blocks, len(text_blocks))
    with torch.no_grad():
        ours = float(evaluation.nll_full(model, batch))                # summed over N·(T−1) targets
        _, mean_ce = model(text_blocks[:, :-1], targets=text_blocks[:, 1:])
    theirs = float(mean_ce) * batch.n_targets
    # Two float32 sums of the same N·(T−1) per-token NLLs in different orders, on logits of forward
    # passes over T and T−1 positions (L = 4 blocks plus the head, d = 32-term dot products).
    rtol = f32_sum_rtol(batch.n_targets) + f32_forward_rtol(model.config.n_layers + 1, model.config.d_model)
    assert ours == pytest.approx(theirs, rel=rtol)
    assert abs(ours / batch.n_targets - math.log(VOCAB)) > 0.1            # not a uniform predictor


def test_gpt_decoder_leaves_the_warmup_gate_alone(text_blocks):
    model = tiny_gpt(old_width=16, warmup_tokens=10_000).train()
    set_gate(model, 0.5)
    model.get_decoder()(input_ids=text_blocks[:2])
    assert float(model.gate) == 0.5 and int(model.tokens_seen) == 0    # forward() in train mode would move both
    with pytest.raises(AnatomyKitError, match="attention mask"):
        mask = torch.ones_like(text_blocks[:2])
        mask[0, -3:] = 0
        model.get_decoder()(input_ids=text_blocks[:2], attention_mask=mask)


def test_gpt_skip_equals_a_forward_without_the_block(text_blocks, one_torch_thread):
    model = tiny_gpt()
    batches = evaluation.make_batches(text_blocks, 4)
    amap = anatomy.ablation_map(model, batches, strategy="skip", progress=False)
    assert amap.block_nll.shape == (model.config.n_layers, len(text_blocks))
    for k in range(model.config.n_layers):
        rows = []
        with torch.no_grad():
            for b in batches:
                x = model.wte(b.input_ids) + model.wpe(torch.arange(b.input_ids.shape[1]))
                for i, block in enumerate(model.blocks):
                    if i != k:
                        x = block(x, model._read)
                rows.append(evaluation.row_nll(model, model.ln_f(x), b.labels))
        manual = torch.cat(rows).numpy().astype(float)
        # Exact: the sweep replays the same blocks on the same cached inputs, batch by batch, then the
        # same head and per-row sums; only the skipped block's output differs (its input, both ways).
        np.testing.assert_array_equal(amap.block_nll[k], manual)
    assert np.abs(amap.delta_pct).min() > 0.01                          # every skip changes the model


# ---------------------------------------------------------------------------------------------
# layer_profile
# ---------------------------------------------------------------------------------------------

def _manual_block_influence(model, blocks) -> np.ndarray:
    """1 − mean over tokens of cos(layer input, layer output), from forward hooks on each layer, shape (L,)."""
    layers = decoder_layers(model)
    cos_sum, count = torch.zeros(len(layers), dtype=torch.float64), 0

    def hook(i):
        def record(module, args, kwargs, output):
            h_in = (args[0] if args else kwargs["hidden_states"]).double()
            h_out = hidden_of(output).double()
            cos_sum[i] += F.cosine_similarity(h_in, h_out, dim=-1).sum()
        return record

    handles = [layer.register_forward_hook(hook(i), with_kwargs=True) for i, layer in enumerate(layers)]
    try:
        with torch.no_grad():
            model.get_decoder()(input_ids=blocks, use_cache=False)
    finally:
        for h in handles:
            h.remove()
    count = blocks.numel()
    return 1.0 - (cos_sum / count).numpy()


@pytest.mark.parametrize("kind", ["llama", "per-layer-width", "gpt"])
def test_layer_profile_matches_the_skip_map_and_block_influence(kind, text_blocks, one_torch_thread):
    if kind == "llama":
        model = tiny_llama(n_layers=5)
    elif kind == "per-layer-width":
        model = build_lm(LMConfig(vocab_size=VOCAB, n_layers=3, d_model=32, n_heads=4, ffn_widths=[48, 64, 80],
                                  max_seq_len=64, init_std=0.2), seed=1).eval()
    else:
        model = tiny_gpt(n_layers=3)
    model.train()
    modes = []
    handle = decoder_layers(model)[0].register_forward_pre_hook(lambda m, a: modes.append(m.training))
    try:
        prof = layer_profile(model, text_blocks, batch_size=3, label=kind)
    finally:
        handle.remove()
    assert modes and not any(modes)                                      # the profile runs in eval mode
    assert model.training                                                # and restores the mode
    model.eval()
    n = len(decoder_layers(model))
    assert prof.n_layers == n and prof.label == kind
    assert prof.n_tokens == text_blocks.numel() - len(text_blocks)
    amap = anatomy.ablation_map(model, evaluation.make_batches(text_blocks, 3), strategy="skip", progress=False)
    # Exact: the same sweep in the same order (same batches, same cache, same head).
    np.testing.assert_array_equal(prof.skip_delta_pct, amap.delta_pct)
    assert prof.baseline_ppl == amap.baseline_ppl
    for l, iv in amap.intervals().items():
        assert (prof.skip_low[l], prof.skip_high[l]) == (iv.low, iv.high)
    # the paired data behind them, exactly the map's: (L, B) summed NLLs and (B,) scored tokens
    np.testing.assert_array_equal(prof.skip_block_nll, amap.block_nll)
    np.testing.assert_array_equal(prof.block_tokens, amap.block_targets)
    assert prof.skip_block_nll.shape == (n, len(text_blocks))
    assert (prof.block_tokens == text_blocks.shape[1] - 1).all()
    # The point estimate inside its interval: equal-length blocks make the pooled ΔPPL the interval's
    # centre up to float64 rounding of N per-block terms.
    slack = 1e-9 * (1 + np.abs(prof.skip_delta_pct))
    assert (prof.skip_low <= prof.skip_delta_pct + slack).all()
    assert (prof.skip_delta_pct <= prof.skip_high + slack).all()
    # Block Influence against an independent computation (cosine in float64 from layer hooks). The
    # card's cosine is a float32 dot of unit vectors over d terms, each unit vector a float32
    # norm of d terms: within a few d-term float32 sums of the float64 value, per token.
    d = 32
    np.testing.assert_allclose(prof.block_influence, _manual_block_influence(model, text_blocks),
                               rtol=0, atol=3 * f32_sum_rtol(d))
    assert prof.block_influence.max() > 100 * 3 * f32_sum_rtol(d)      # not all zero


def test_layer_profile_resumes_from_its_store(text_blocks, one_torch_thread):
    model = tiny_gpt(n_layers=3)
    store = {}
    first = layer_profile(model, text_blocks, label="gpt", store=store)
    assert sorted(store) == ["skip/0", "skip/1", "skip/2"]
    store["skip/1"] = {"ppl": 0.0, "block_nll": [float(x) + 1.0 for x in store["skip/1"]["block_nll"]]}
    again = layer_profile(model, text_blocks, label="gpt", store=store)
    # The stored layer is reused (its block NLLs were raised by 1 nat each), the others agree exactly
    # (the same computation in the same order).
    assert again.skip_delta_pct[1] > first.skip_delta_pct[1]
    np.testing.assert_array_equal(again.skip_delta_pct[[0, 2]], first.skip_delta_pct[[0, 2]])


def test_layer_profile_round_trips_through_json(text_blocks, one_torch_thread):
    prof = layer_profile(tiny_gpt(n_layers=3), text_blocks, label="tiny GPT")
    back = LayerProfile.from_dict(json.loads(json.dumps(prof.to_dict())))
    assert back == prof
    for name in ("skip_delta_pct", "skip_low", "skip_high", "block_influence", "skip_block_nll", "block_tokens"):
        np.testing.assert_array_equal(getattr(back, name), getattr(prof, name))   # exact: floats through JSON
    np.testing.assert_array_equal(prof.depth, [0.0, 0.5, 1.0])
    assert prof.to_dict()["depth"] == [0.0, 0.5, 1.0]
    with pytest.raises(ValueError):
        prof.skip_delta_pct[0] = 1.0                                      # read-only arrays


def test_layer_profile_validates_its_input(text_blocks):
    model = tiny_gpt(n_layers=2)
    with pytest.raises(AnatomyKitError, match="N ≥ 2 blocks"):
        layer_profile(model, text_blocks[:1], label="x")
    with pytest.raises(AnatomyKitError, match="integer token ids"):
        layer_profile(model, text_blocks.float(), label="x")
    with pytest.raises(AnatomyKitError, match=r"\(N, T\) tensor"):
        layer_profile(model, text_blocks[0], label="x")
    with pytest.raises(AnatomyKitError, match="label"):
        layer_profile(model, text_blocks, label=" ")
    with pytest.raises(AnatomyKitError, match="batch_size"):
        layer_profile(model, text_blocks, label="x", batch_size=0)
    with pytest.raises(AnatomyKitError, match="torch.nn.Module"):
        layer_profile("gpt2", text_blocks, label="x")
    with pytest.raises(AnatomyKitError, match="get_decoder"):
        layer_profile(torch.nn.Linear(2, 2), text_blocks, label="x")
    grown = set_gate(tiny_gpt(n_layers=2, old_width=16), 0.5)
    with pytest.raises(AnatomyKitError, match="gate"):
        layer_profile(grown, text_blocks, label="x")


def test_layer_profile_dataclass_validates():
    good = dict(label="m", n_layers=2, n_tokens=10, baseline_ppl=5.0, skip_delta_pct=[1.0, 2.0],
                skip_low=[0.0, 1.0], skip_high=[2.0, 3.0], block_influence=[0.1, 0.2])
    LayerProfile(**good)
    for change, words in [(dict(skip_low=[0.0]), "shape"), (dict(block_influence=[0.1, math.nan]), "non-finite"),
                          (dict(baseline_ppl=0.5), "baseline_ppl"), (dict(n_tokens=0), "n_tokens"),
                          (dict(skip_low=[3.0, 1.0]), "skip_low"), (dict(label=""), "label")]:
        with pytest.raises(AnatomyKitError, match=words):
            LayerProfile(**(good | change))
    with pytest.raises(AnatomyKitError, match="lacks"):
        LayerProfile.from_dict({k: v for k, v in good.items() if k != "skip_high"})
    # the paired blocks: both or neither, (L, B) and (B,) with B ≥ 2, finite, tokens ≥ 1
    blocks = dict(skip_block_nll=[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], block_tokens=[3, 3, 4])
    prof = LayerProfile(**good, **blocks)
    assert prof.skip_block_nll.shape == (2, 3) and prof.block_tokens.tolist() == [3, 3, 4]
    assert LayerProfile.from_dict(prof.to_dict()) == prof
    older = LayerProfile.from_dict({k: v for k, v in good.items()})       # saved before blocks were recorded
    assert older.skip_block_nll is None and older.block_tokens is None and "skip_block_nll" not in older.to_dict()
    for change, words in [(dict(block_tokens=None), "come together"), (dict(skip_block_nll=None), "come together"),
                          (dict(skip_block_nll=[[1.0, 2.0, 3.0]]), "shape"),
                          (dict(skip_block_nll=[[1.0], [2.0]], block_tokens=[3]), "B ≥ 2"),
                          (dict(block_tokens=[3, 3]), "shape"),
                          (dict(block_tokens=[3, 0, 4]), "≥ 1"),
                          (dict(skip_block_nll=[[1.0, math.inf, 3.0], [4.0, 5.0, 6.0]]), "finite")]:
        with pytest.raises(AnatomyKitError, match=words):
            LayerProfile(**good, **(blocks | change))


# ---------------------------------------------------------------------------------------------
# depth.py (synthetic numbers: pure statistics)
# ---------------------------------------------------------------------------------------------

def test_edge_importance_exact_null_by_hand():
    # values [4, 1, 2, 3]: ranks 1, 4, 3, 2 → percentiles 1, 0, 1/3, 2/3; edges (1 + 2/3)/2 = 5/6.
    # The six pairs' means: 1/2 (0,1), 2/3 (0,2), 5/6 (0,3), 1/6 (1,2), 1/3 (1,3), 1/2 (2,3): only
    # the edge pair reaches 5/6, so p = 1/6.
    res = edge_importance([4.0, 1.0, 2.0, 3.0])
    assert res.method == "exact" and res.alternative == "greater"
    assert (res.n, res.n_perm) == (4, 6)
    assert res.observed == pytest.approx(5 / 6, abs=1e-15)
    np.testing.assert_allclose(res.null, [1 / 2, 2 / 3, 5 / 6, 1 / 6, 1 / 3, 1 / 2], rtol=0, atol=1e-15)
    assert res.p == pytest.approx(1 / 6, abs=1e-15)
    assert res.null_mean == pytest.approx(0.5, abs=1e-15)               # every layer is in L − 1 of the pairs
    assert res.p == res.p_value("greater")


def test_edge_importance_edges_least_important_and_ties():
    # [0, 5, 1]: percentiles 0, 1, 1/2; edges 1/4; pairs 1/2, 1/4, 3/4: all three reach 1/4.
    res = edge_importance([0.0, 5.0, 1.0])
    assert res.observed == pytest.approx(0.25, abs=1e-15) and res.p == 1.0
    # Ties share their average rank: a flat profile gives every layer 1/2, so p = 1.
    flat = edge_importance([2.0] * 5)
    assert flat.observed == 0.5 and flat.p == 1.0 and flat.n_perm == 10
    # The smallest p is 1/C(L, 2): edges strictly most important at L = 30.
    values = np.r_[100.0, np.linspace(1, 2, 28), 90.0]
    assert edge_importance(values).p == pytest.approx(1 / math.comb(30, 2), abs=1e-15)


def test_importance_percentiles_and_depth():
    np.testing.assert_allclose(importance_percentiles([4.0, 1.0, 2.0, 3.0]), [1, 0, 1 / 3, 2 / 3], atol=1e-15)
    np.testing.assert_allclose(importance_percentiles([1.0, 1.0, 0.0]), [0.75, 0.75, 0.0], atol=1e-15)
    np.testing.assert_array_equal(layer_depth(5), [0, 0.25, 0.5, 0.75, 1])
    np.testing.assert_array_equal(layer_depth(1), [0.0])


def test_edge_importance_null_counts_every_pair_once():
    v = np.array([3.0, 7.0, 1.0, 4.0, 9.0, 2.0])
    res = edge_importance(v)
    pct = importance_percentiles(v)
    want = [(pct[i] + pct[j]) / 2 for i, j in itertools.combinations(range(6), 2)]
    np.testing.assert_array_equal(res.null, want)   # exact: the same sums in the same order
    assert res.p == sum(x >= res.observed - 1e-9 for x in want) / 15


def test_edge_contrasts_by_hand():
    # 4 layers, 2 blocks of 2 and 4 tokens; summed NLL with each layer skipped, per block
    nll = [[10.0, 20.0],    # layer 0 skipped: 5.0 and 5.0 nats/token
           [4.0, 12.0],     # layer 1: 2.0, 3.0
           [6.0, 4.0],      # layer 2: 3.0, 1.0
           [8.0, 8.0]]      # layer 3 (last): 4.0, 2.0
    got = edge_contrasts(nll, [2, 4])
    assert list(got) == ["first − layer 1", "first − layer 2", "last − layer 1", "last − layer 2"]
    assert got["first − layer 1"] == [3.0, 2.0] and got["first − layer 2"] == [2.0, 4.0]
    assert got["last − layer 1"] == [2.0, -1.0] and got["last − layer 2"] == [1.0, 1.0]
    # three layers: one interior layer, two contrasts
    assert list(edge_contrasts(np.ones((3, 2)), [1, 1])) == ["first − layer 1", "last − layer 1"]


@pytest.mark.parametrize("nll, tokens, words", [
    (np.ones((2, 3)), [1, 1, 1], "L ≥ 3"), (np.ones((3, 1)), [1], "B ≥ 2"), (np.ones(3), [1], "shape"),
    (np.ones((3, 2)), [1, 1, 1], "token counts"), (np.ones((3, 2)), [1, 0], "token counts"),
    ([[1.0, np.nan]] * 3, [1, 1], "non-finite"), ([["a", "b"]] * 3, [1, 1], "numbers")])
def test_edge_contrasts_validates(nll, tokens, words):
    with pytest.raises(AnatomyKitError, match=words):
        edge_contrasts(nll, tokens)


def test_resample_depth():
    # depths 0, 1/2, 1 for values 0, 1, 4; the grid 0, 1/4, …, 1 interpolates linearly between them.
    np.testing.assert_allclose(resample_depth([0.0, 1.0, 4.0], 5), [0, 0.5, 1, 2.5, 4], atol=1e-15)
    out = resample_depth(np.arange(30.0), 7)
    assert out[0] == 0.0 and out[-1] == 29.0


@pytest.mark.parametrize("call, words", [
    (lambda: edge_importance([1.0, 2.0]), "at least 3"),
    (lambda: edge_importance([1.0, math.nan, 2.0]), "non-finite"),
    (lambda: edge_importance([[1.0, 2.0, 3.0]]), "one-dimensional"),
    (lambda: edge_importance("abc"), "sequence of numbers"),
    (lambda: resample_depth([1.0], 5), "at least 2"),
    (lambda: resample_depth([1.0, 2.0], 1), "n_points"),
    (lambda: layer_depth(0), "n_layers"),
])
def test_depth_validates_its_input(call, words):
    with pytest.raises(AnatomyKitError, match=words):
        call()
