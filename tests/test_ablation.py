import math

import numpy as np
import pytest
import torch

from anatomy_kit import anatomy
from anatomy_kit.hf import evaluation
from anatomy_kit.hf.layers import decoder_layers, hidden_of
from anatomy_kit.validate import AnatomyKitError

from conftest import f32_forward_rtol, f32_sum_rtol, ppl_rtol


def _batches(vocab=512, n=6, t=24, batch_size=3, pad=True, seed=1):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, vocab, (n, t), generator=g)
    mask = torch.ones_like(ids)
    if pad:  # right-padding of different lengths: padded positions carry no loss
        mask[1, -5:] = 0
        mask[4, -9:] = 0
    return evaluation.make_batches(ids, batch_size, attention_mask=mask)


def test_perplexity_matches_hugging_face_loss(model):
    batches = _batches(pad=False)
    ours = evaluation.perplexity(model, batches)
    total = n = 0
    with torch.no_grad():
        for b in batches:
            out = model(input_ids=b.input_ids, labels=b.labels)
            k = b.n_targets
            total, n = total + out.loss.item() * k, n + k
    # Per batch, two float32 sums of its per-token NLLs in different orders (ours by row, HF's mean) on
    # logits from d = 32-term dot products of differently shaped matmuls; PPL scales the gap by log PPL.
    per_batch = max(b.n_targets for b in batches)
    assert ours == pytest.approx(math.exp(total / n), rel=ppl_rtol(f32_sum_rtol(per_batch) + f32_forward_rtol(1, 32),
                                                                   ours))


@pytest.mark.parametrize("strategy", anatomy.ABLATION_STRATEGIES)
def test_prefix_cached_sweep_equals_naive(model, strategy):
    batches = _batches()
    cached = anatomy.ablation_map(model, batches, strategy=strategy, progress=False)
    naive = anatomy.ablation_map(model, batches, strategy=strategy, prefix_cache=False, progress=False)
    # Exact: the replay calls the same layers with the same inputs and kwargs as the full pass, and the
    # same head and sums follow (the same computation in the same order: bit for bit on any kernel path).
    assert cached.baseline_ppl == naive.baseline_ppl
    np.testing.assert_array_equal(cached.ppl, naive.ppl)
    np.testing.assert_array_equal(cached.block_nll, naive.block_nll)        # block by block
    np.testing.assert_array_equal(cached.baseline_block_nll, naive.baseline_block_nll)
    # the ablations really change the model
    assert np.abs(cached.delta_pct).max() > 0.1


def test_neighbour_mean_semantics_on_a_known_model(model):
    layers = decoder_layers(model)
    w = [layers[i].mlp.gate_proj.weight.detach().clone() for i in range(6)]
    g = [layers[i].input_layernorm.weight.detach().clone() for i in range(6)]
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with anatomy.ablated(model, 3, "neighbour-mean"):   # exact: the kit computes the same (a + b) / 2, or copies
        torch.testing.assert_close(layers[3].mlp.gate_proj.weight, (w[2] + w[4]) / 2, rtol=0, atol=0)
        torch.testing.assert_close(layers[3].input_layernorm.weight, (g[2] + g[4]) / 2, rtol=0, atol=0)
        torch.testing.assert_close(layers[2].mlp.gate_proj.weight, w[2], rtol=0, atol=0)
    with anatomy.ablated(model, 0, "neighbour-mean"):   # edge: copy the single neighbour
        torch.testing.assert_close(layers[0].mlp.gate_proj.weight, w[1], rtol=0, atol=0)
    with anatomy.ablated(model, 5, "neighbour-mean"):
        torch.testing.assert_close(layers[5].input_layernorm.weight, g[4], rtol=0, atol=0)
    for k, v in model.state_dict().items():            # restored exactly: the saved tensors are put back
        assert torch.equal(v, before[k]), k


def test_skip_makes_the_block_the_identity_for_every_batch_element(model):
    batches = _batches(pad=False)
    b = batches[0]
    seen = {}
    layer = decoder_layers(model)[2]
    with anatomy.ablated(model, 2, "skip"):
        # registered after the ablation's hook, so it sees the ablated output
        handle = layer.register_forward_hook(
            lambda m, a, k, o: seen.update(inp=(a[0] if a else k["hidden_states"]).clone(), out=hidden_of(o).clone()),
            with_kwargs=True)
        try:
            model(input_ids=b.input_ids)
        finally:
            handle.remove()
    assert seen["out"].shape[0] == 3
    torch.testing.assert_close(seen["out"], seen["inp"], rtol=0, atol=0)   # exact: the input is passed through


def test_zero_mlp_equals_removing_the_mlp_branch(model):
    b = _batches(pad=False)[0]
    layer = decoder_layers(model)[1]
    with anatomy.ablated(model, 1, "zero-mlp"):
        assert float(layer.mlp.down_proj.weight.detach().abs().sum()) == 0
        with torch.no_grad():
            out = model(input_ids=b.input_ids).logits
    original = layer.mlp.forward
    layer.mlp.forward = lambda x: torch.zeros_like(x)
    try:
        with torch.no_grad():
            ref = model(input_ids=b.input_ids).logits
    finally:
        layer.mlp.forward = original
    torch.testing.assert_close(out, ref)


def test_tuple_returning_layers_gpt2():
    """GPT-2 blocks may return tuples; the cached sweep must still equal the naive one."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    m = GPT2LMHeadModel(GPT2Config(vocab_size=512, n_embd=32, n_layer=4, n_head=4, n_positions=64)).eval()
    batches = _batches(pad=False)
    cached = anatomy.ablation_map(m, batches, strategy="skip", progress=False)
    naive = anatomy.ablation_map(m, batches, strategy="skip", prefix_cache=False, progress=False)
    np.testing.assert_array_equal(cached.ppl, naive.ppl)    # the same computation, as above: bit for bit


def test_store_resumes_a_sweep(model, tmp_path):
    from anatomy_kit.store import Store

    batches = _batches()
    store = Store(tmp_path / "s.json")
    first = anatomy.ablation_map(model, batches, layers=[0, 1], store=store, progress=False)
    store2 = Store(tmp_path / "s.json")
    assert "neighbour-mean/1" in store2 and len(store2["neighbour-mean/1"]["block_nll"]) == 6
    fake = [100.0] * 6                           # a resumed sweep takes stored results as they are
    store2["neighbour-mean/1"] = {"ppl": 0.0, "block_nll": fake}
    store2["neighbour-mean/2"] = 55.0            # an old-format entry (a bare PPL) is recomputed
    again = anatomy.ablation_map(model, batches, layers=[0, 1, 2], store=store2, progress=False)
    assert again.ppl[0] == first.ppl[0] and np.array_equal(again.block_nll[1], fake)   # stored floats, read back
    assert again.ppl[1] == pytest.approx(math.exp(600.0 / first.n_tokens))
    assert again.ppl[2] != 55.0 and isinstance(store2["neighbour-mean/2"], dict)


def test_bad_inputs(model):
    batches = _batches()
    with pytest.raises(AnatomyKitError, match="strategy='drop' is not accepted"):
        anatomy.ablation_map(model, batches, strategy="drop")
    with pytest.raises(AnatomyKitError, match="layer=6 is out of range; this model has layers 0..5"):
        anatomy.ablation_map(model, batches, layers=[6])
    with pytest.raises(AnatomyKitError, match="batches is empty"):
        anatomy.ablation_map(model, [])


def test_perplexity_matches_hugging_face_with_logit_softcapping():
    """Gemma-2 squashes its logits (tanh softcap); our head must do the same."""
    from transformers import Gemma2Config, Gemma2ForCausalLM

    torch.manual_seed(0)
    cfg = Gemma2Config(vocab_size=512, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, head_dim=8, final_logit_softcapping=2.0, initializer_range=0.3)
    m = Gemma2ForCausalLM(cfg).eval()
    b = _batches(pad=False)[0]
    with torch.no_grad():
        hf = float(m(input_ids=b.input_ids, labels=b.labels).loss)
    # mean NLLs: float32 sums of n per-token NLLs in two orders, logits from 32-term dot products
    assert math.log(evaluation.perplexity(m, [b])) == pytest.approx(hf, rel=f32_sum_rtol(b.n_targets)
                                                                    + f32_forward_rtol(1, 32))


def _hf_block_nll(model, batches):
    """Summed NLL of every row, from Hugging Face's own loss on one row at a time."""
    out = []
    with torch.no_grad():
        for b in batches:
            for r in range(len(b.input_ids)):
                labels = b.labels[r:r + 1]
                n = int((labels[:, 1:] != -100).sum())
                loss = model(input_ids=b.input_ids[r:r + 1], attention_mask=b.attention_mask[r:r + 1],
                             labels=labels).loss
                out.append(float(loss) * n)
    return np.array(out)


def test_block_nll_matches_hugging_face_row_by_row(model):
    from anatomy_kit.anatomy import blockwise

    batches = _batches()
    cache = evaluation.capture_prefix(model, batches)
    ours = blockwise.block_nll_from_layer(model, cache, 0)
    # HF runs each row alone (other matmul shapes, its own loss): a 6-layer width-32 forward's gap plus
    # two float32 sums of a row's ≤ 23 per-token NLLs in different orders
    rtol = f32_forward_rtol(6, 32) + f32_sum_rtol(23)
    np.testing.assert_allclose(ours, _hf_block_nll(model, batches), rtol=rtol)
    np.testing.assert_array_equal(blockwise.block_nll_full(model, batches), ours)   # replay = full pass, bit for bit
    # the same float32 rows, added as float32 sums of a batch's 3 rows (baseline_nll) or in float64 (ours.sum())
    assert ours.sum() == pytest.approx(cache.baseline_nll, rel=f32_sum_rtol(3, sides=1))
    np.testing.assert_array_equal(blockwise.block_targets(cache), [23, 18, 23, 23, 14, 23])
    with anatomy.ablated(model, 3, "skip"):   # a changed layer: replay from it = full forward, per block
        np.testing.assert_allclose(blockwise.block_nll_from_layer(model, cache, 3), _hf_block_nll(model, batches),
                                   rtol=rtol)


def test_ppl_change_interval_by_hand():
    from scipy import stats as sps

    from anatomy_kit.anatomy import blockwise

    n = np.array([100, 100, 100, 100])
    base = np.array([300.0, 320.0, 310.0, 290.0])
    new = base + np.array([5.0, 9.0, 2.0, 8.0])             # d = 0.05, 0.09, 0.02, 0.08 nats/token
    d = (new - base) / n
    half = sps.t.ppf(0.975, 3) * d.std(ddof=1) / 2
    iv = blockwise.ppl_change_interval(base, new, n)
    assert iv.mean == pytest.approx(100 * math.expm1(d.mean()))
    assert (iv.low, iv.high) == pytest.approx((100 * math.expm1(d.mean() - half), 100 * math.expm1(d.mean() + half)))
    assert (iv.n, iv.df, iv.method) == (4, 3, "t")
    assert blockwise.half_width_pct(iv) == pytest.approx(100 * math.expm1(half))
    # the pooled PPL ratio of equal blocks is the point estimate
    assert iv.mean == pytest.approx(100 * (math.exp(new.sum() / 400) / math.exp(base.sum() / 400) - 1))
    one = blockwise.ppl_change_interval(base[:1], new[:1], n[:1])
    assert one.high == math.inf and blockwise.half_width_pct(one) == math.inf
    with pytest.raises(AnatomyKitError, match="equal length"):
        blockwise.ppl_change_interval(base, new[:3], n)
    with pytest.raises(AnatomyKitError, match="positive token counts"):
        blockwise.ppl_change_interval(base, new, [100, 0, 100, 100])


def _map(ppl_blocks, base_blocks, n=100):
    ppl_blocks = np.asarray(ppl_blocks, dtype=float)
    base = np.asarray(base_blocks, dtype=float)
    return anatomy.AblationMap(strategy="neighbour-mean", baseline_ppl=math.exp(base.sum() / (n * len(base))),
                               layers=np.arange(len(ppl_blocks)),
                               ppl=np.exp(ppl_blocks.sum(axis=1) / (n * len(base))), n_tokens=n * len(base),
                               block_nll=ppl_blocks, baseline_block_nll=base, block_targets=np.full(len(base), n))


def test_intervals_anti_layers_and_the_interior_range():
    base = np.array([300.0, 310.0, 305.0, 295.0])
    shift = {0: 400, 1: 60, 2: -3, 3: -1, 4: 30, 5: 500}               # summed NLL change per block
    noise = np.array([[0.5, -0.4, 0.3, -0.2]])
    rows = np.array([base + shift[l] + (5 * noise[0] if l != 2 else 0.2 * noise[0]) for l in range(6)])
    amap = _map(rows, base)
    assert amap.established_anti_layers() == [2]                        # −3 ± small noise: surely below 0
    assert amap.anti_layers() == [2, 3]                                   # by the point estimate
    assert amap.delta_interval(3).low < 0 < amap.delta_interval(3).high   # −1 ± noise: not resolved
    assert amap.redundant(2) == [2, 3] and amap.critical(2) == [1, 4]
    rng, top, low = amap.importance_range(n_layers=6)
    assert (top, low) == (1, 3)                                          # edges 0 and 5 are left out
    assert rng.mean == pytest.approx(abs(amap.delta_pct[1]) / abs(amap.delta_pct[3]))
    assert rng.high == math.inf and 0 < rng.low < rng.mean               # L3's interval contains 0
    wide = amap.delta_interval(1, 0.975)
    assert rng.low == pytest.approx(wide.low / max(abs(amap.delta_interval(3, 0.975).low),
                                                   amap.delta_interval(3, 0.975).high))
    with pytest.raises(AnatomyKitError, match="layer=9"):
        amap.delta_interval(9)
    old = anatomy.AblationMap("skip", 20.0, np.arange(3), np.array([21.0, 19.0, 40.0]), 10)
    with pytest.raises(AnatomyKitError, match="no per-block NLL"):
        old.delta_interval(1)


def _abs_interval_pct(rows, base, layer, n=100, confidence=0.975):
    """|ΔPPL| % bounds of ``layer`` from its t interval at ``confidence``, by hand (numpy and scipy only)."""
    from scipy import stats as sps

    d = (rows[layer] - base) / n
    half = sps.t.ppf((1 + confidence) / 2, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d))
    low, high = 100 * math.expm1(d.mean() - half), 100 * math.expm1(d.mean() + half)
    return (0.0, max(abs(low), abs(high))) if low <= 0 <= high else tuple(sorted((abs(low), abs(high))))


def test_the_resolved_range_takes_the_least_important_layer_whose_effect_is_resolved():
    base = np.array([300.0, 310.0, 305.0, 295.0])
    shift = {0: 400, 1: 60, 2: -3, 3: -1, 4: 30, 5: 500}
    noise = np.array([0.5, -0.4, 0.3, -0.2])
    rows = np.array([base + shift[l] + (5 * noise if l != 2 else 0.2 * noise) for l in range(6)])
    amap = _map(rows, base)
    rng, top, low = amap.importance_range(n_layers=6, resolved=True)
    # L3 (−1 ± 5·noise) is the smallest but its interval reaches 0; L2 (−3 ± 0.2·noise) is the smallest resolved
    assert (top, low) == (1, 2)
    (t_lo, t_hi), (m_lo, m_hi) = _abs_interval_pct(rows, base, 1), _abs_interval_pct(rows, base, 2)
    assert m_lo > 0 and math.isfinite(rng.high)
    assert rng.low == pytest.approx(t_lo / m_hi, rel=1e-9) and rng.high == pytest.approx(t_hi / m_lo, rel=1e-9)
    assert rng.mean == pytest.approx(abs(amap.delta_pct[1] / amap.delta_pct[2]), rel=1e-12)
    # the unrestricted range keeps L3 and its infinite upper end
    assert amap.importance_range(n_layers=6)[1:] == (1, 3)
    # when the smallest layer is itself resolved, both ranges are the same
    rows_sharp = rows.copy()
    rows_sharp[3] = base - 1 + 0.2 * noise
    sharp = _map(rows_sharp, base)
    assert sharp.importance_range(n_layers=6, resolved=True) == sharp.importance_range(n_layers=6)
    # L2 made as noisy as the others: its interval reaches 0, and the denominator moves to L4 (30 ± 5·noise)
    rows_noisy = rows.copy()
    rows_noisy[2] = base - 3 + 5 * noise
    noisy = _map(rows_noisy, base)
    assert noisy.delta_interval(2, 0.975).low < 0 < noisy.delta_interval(2, 0.975).high
    assert noisy.importance_range(n_layers=6, resolved=True)[1:] == (1, 4)


def test_resolved_means_resolved_at_the_bonferroni_level():
    """A layer whose t statistic lies between t(0.975, 3) = 3.18 and t(0.9875, 3) = 4.18 is resolved by its 95 %
    interval but not by the 97.5 % one the range's bounds use: it cannot be the range's denominator."""
    from scipy import stats as sps

    base = np.array([300.0, 310.0, 305.0, 295.0])
    alternating = np.array([1.0, -1.0, 1.0, -1.0])
    c = 3.7 * alternating.std(ddof=1) / 2                  # mean change giving t = 3.7 over 4 blocks
    shift = {0: base + 400, 1: base + 60 + 0.2 * alternating, 2: base + c + alternating,
             3: base - 1 + 5 * alternating, 4: base + 30 + 0.2 * alternating, 5: base + 500}
    rows = np.array([shift[l] for l in range(6)])
    d = (rows[2] - base) / 100
    t = d.mean() / (d.std(ddof=1) / 2)
    assert sps.t.ppf(0.975, 3) < t < sps.t.ppf(0.9875, 3)
    amap = _map(rows, base)
    assert amap.delta_interval(2, 0.95).excludes(0.0) and not amap.delta_interval(2, 0.975).excludes(0.0)
    assert amap.importance_range(n_layers=6, resolved=True)[1:] == (1, 4)
    # at a confidence whose Bonferroni level (0.95) is the one L2 passes, L2 is the denominator
    assert amap.importance_range(n_layers=6, resolved=True, confidence=0.9)[1:] == (1, 2)


def test_a_resolved_range_needs_a_second_resolved_layer():
    base = np.array([300.0, 310.0, 305.0, 295.0])
    noise = np.array([5.0, -4.0, 3.0, -2.0])
    rows = np.array([base + s + (noise if l not in (0, 1, 3) else 0.0) for l, s in enumerate([400, 60, 1, 500])])
    amap = _map(rows, base)
    assert amap.importance_range(n_layers=4)[1:] == (1, 2)          # L2's interval reaches 0
    with pytest.raises(AnatomyKitError, match="resolves no second effect"):
        amap.importance_range(n_layers=4, resolved=True)


def test_zero_attn_equals_removing_the_attention_branch(model):
    b = _batches(pad=False)[0]
    layer = decoder_layers(model)[2]
    with anatomy.ablated(model, 2, "zero-attn"):
        with torch.no_grad():
            out = model(input_ids=b.input_ids).logits
    original = layer.self_attn.forward
    layer.self_attn.forward = lambda *a, **k: (torch.zeros_like(k.get("hidden_states", a[0] if a else None)), None)
    try:
        with torch.no_grad():
            ref = model(input_ids=b.input_ids).logits
    finally:
        layer.self_attn.forward = original
    torch.testing.assert_close(out, ref)


def test_block_meter_measures_edits_and_resumes(model, tmp_path):
    from anatomy_kit.anatomy import blockwise
    from anatomy_kit.store import Store

    batches = _batches(pad=False)          # equal blocks: the mean per-block change is the pooled one
    cache = evaluation.capture_prefix(model, batches)
    meter = blockwise.BlockMeter(model, cache, Store(tmp_path / "m.json"))
    skipped = meter.measure("skip/2", 2, lambda: anatomy.ablated(model, 2, "skip"))
    # the same replay of the same cached inputs: bit for bit
    np.testing.assert_array_equal(skipped, anatomy.ablation_map(model, batches, strategy="skip", layers=[2],
                                                                progress=False).block_nll[0])
    iv = meter.change(skipped)
    assert iv.mean == pytest.approx(100 * (meter.ppl(skipped) / meter.ppl(meter.base) - 1), rel=1e-9)
    # the same float32 rows, added in float64 (meter) or as float32 sums of a batch's 3 rows (cache)
    base_ppl = cache.baseline_ppl
    assert meter.ppl(meter.base) == pytest.approx(base_ppl, rel=ppl_rtol(f32_sum_rtol(3, sides=1), base_ppl))
    again = blockwise.BlockMeter(model, cache, Store(tmp_path / "m.json"))
    np.testing.assert_array_equal(again.measure("skip/2", 2, lambda: pytest.fail("not resumed")), skipped)  # stored
