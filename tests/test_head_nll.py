"""The LM-head loss over more target tokens than one chunk equals a plain full cross-entropy.

``head_nll`` computes logits ``chunk`` rows at a time; a loss that kept only the first chunk (or
dropped the last partial one) would pass every test whose batches fit in one chunk. Here the
targets span several chunks, with padding in the middle of a batch.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from anatomy_kit.hf import evaluation

from conftest import f32_forward_rtol, f32_sum_rtol, ppl_rtol, tiny_llama

# Ours adds each row's ≤ 299 per-token NLLs one by one, then the 3 rows (≤ 302·u); cross_entropy's sum
# is a cascade (pairwise) sum (≤ ~log2(897)·u ≈ 10u); the head's logits are 32-term dot products in
# matmuls of other shapes. So the summed NLLs differ by at most:
NLL_RTOL = f32_sum_rtol(302 + 10, sides=1) + f32_forward_rtol(1, 32)


def _plain_nll(model, hidden, labels):
    """Σ −log p(target) over every position with a target: one (B·(T−1), vocab) cross-entropy."""
    logits = model.get_output_embeddings()(hidden[:, :-1]).float()
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1),
                                       ignore_index=-100, reduction="sum")


@pytest.fixture(scope="module")
def setup(one_torch_thread):
    model = tiny_llama(n_layers=2)
    g = torch.Generator().manual_seed(4)
    ids = torch.randint(3, 512, (3, 300), generator=g)          # 3 × 299 = 897 targets > one 512-row chunk
    mask = torch.ones_like(ids)
    mask[1, 200:] = 0                                           # padding inside the batch
    batch = evaluation.make_batches(ids, 3, attention_mask=mask)[0]
    with torch.no_grad():
        out = model.get_decoder()(input_ids=batch.input_ids, attention_mask=batch.attention_mask)
    return model, out.last_hidden_state, batch


@pytest.mark.parametrize("chunk", [512, 100, 7, 10_000])
def test_head_nll_over_many_chunks_equals_full_cross_entropy(setup, chunk):
    model, hidden, batch = setup
    assert batch.n_targets == 3 * 299 - 100 and batch.n_targets > 512
    with torch.no_grad():
        ours = evaluation.head_nll(model, hidden, batch.labels, chunk=chunk)
        plain = _plain_nll(model, hidden, batch.labels)
    assert float(ours) == pytest.approx(float(plain), rel=NLL_RTOL)


def test_perplexity_over_many_chunks_matches_hugging_face(setup):
    model, _, batch = setup
    with torch.no_grad():
        hf = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, labels=batch.labels).loss
    ppl = float(torch.exp(hf))
    assert evaluation.perplexity(model, [batch]) == pytest.approx(ppl, rel=ppl_rtol(NLL_RTOL, ppl))


def test_prefix_replay_over_many_chunks_equals_the_full_pass(setup):
    model, hidden, batch = setup
    cache = evaluation.capture_prefix(model, [batch])
    with torch.no_grad():
        plain = float(_plain_nll(model, hidden, batch.labels))
    assert cache.baseline_nll == pytest.approx(plain, rel=NLL_RTOL)
    assert evaluation.nll_from_layer(model, cache, 1) == pytest.approx(plain, rel=NLL_RTOL)
