import math

import numpy as np
import pytest
import torch

from anatomy_kit import anatomy
from anatomy_kit.hf import evaluation
from anatomy_kit.hf.layers import decoder_layers, hidden_of
from anatomy_kit.validate import AnatomyKitError

from conftest import tiny_llama


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
    assert ours == pytest.approx(math.exp(total / n), rel=1e-6)


@pytest.mark.parametrize("strategy", anatomy.ABLATION_STRATEGIES)
def test_prefix_cached_sweep_equals_naive(model, strategy):
    batches = _batches()
    cached = anatomy.ablation_map(model, batches, strategy=strategy, progress=False)
    naive = anatomy.ablation_map(model, batches, strategy=strategy, prefix_cache=False, progress=False)
    assert cached.baseline_ppl == pytest.approx(naive.baseline_ppl, rel=1e-6)
    np.testing.assert_allclose(cached.ppl, naive.ppl, rtol=1e-5)
    # the ablations really change the model
    assert np.abs(cached.delta_pct).max() > 0.1


def test_neighbour_mean_semantics_on_a_known_model(model):
    layers = decoder_layers(model)
    w = [layers[i].mlp.gate_proj.weight.detach().clone() for i in range(6)]
    g = [layers[i].input_layernorm.weight.detach().clone() for i in range(6)]
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with anatomy.ablated(model, 3, "neighbour-mean"):
        torch.testing.assert_close(layers[3].mlp.gate_proj.weight, (w[2] + w[4]) / 2, rtol=0, atol=0)
        torch.testing.assert_close(layers[3].input_layernorm.weight, (g[2] + g[4]) / 2, rtol=0, atol=0)
        torch.testing.assert_close(layers[2].mlp.gate_proj.weight, w[2], rtol=0, atol=0)
    with anatomy.ablated(model, 0, "neighbour-mean"):   # edge: copy the single neighbour
        torch.testing.assert_close(layers[0].mlp.gate_proj.weight, w[1], rtol=0, atol=0)
    with anatomy.ablated(model, 5, "neighbour-mean"):
        torch.testing.assert_close(layers[5].input_layernorm.weight, g[4], rtol=0, atol=0)
    for k, v in model.state_dict().items():            # restored exactly
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
    torch.testing.assert_close(seen["out"], seen["inp"], rtol=0, atol=0)


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
    np.testing.assert_allclose(cached.ppl, naive.ppl, rtol=1e-5)


def test_store_resumes_a_sweep(model, tmp_path):
    from anatomy_kit.book.store import Store

    batches = _batches()
    store = Store(tmp_path / "s.json")
    first = anatomy.ablation_map(model, batches, layers=[0, 1], store=store, progress=False)
    store2 = Store(tmp_path / "s.json")
    assert "neighbour-mean/1" in store2
    store2["neighbour-mean/1"] = 123.0          # a resumed sweep takes stored results as they are
    again = anatomy.ablation_map(model, batches, layers=[0, 1, 2], store=store2, progress=False)
    assert again.ppl[0] == first.ppl[0] and again.ppl[1] == 123.0


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
    assert math.log(evaluation.perplexity(m, [b])) == pytest.approx(hf, rel=1e-5)
