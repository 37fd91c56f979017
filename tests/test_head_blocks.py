"""The blocked LM head (vocabulary blocks folded by log-sum-exp) equals one full cross-entropy, values and gradients."""

from __future__ import annotations

import types

import numpy as np
import pytest
import torch
from torch import nn

from anatomy_kit.hf import evaluation
from anatomy_kit.validate import AnatomyKitError

from conftest import f32_sum_rtol

V, D = 10_007, 24          # a vocabulary that no block size divides
PER_TOKEN = 13             # the per-token NLLs' own float32 gap (≲ 26u each), in sum terms of 2u (first test)


class _Model(nn.Module):
    """The two things head_nll reads: ``get_output_embeddings()`` and ``config``."""

    def __init__(self, head: nn.Module, cap: float | None = None):
        super().__init__()
        self.head = head
        self.config = types.SimpleNamespace(final_logit_softcapping=cap)

    def get_output_embeddings(self):
        return self.head


def _data(seed=0, B=3, T=40):
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(B, T, D, generator=g)
    labels = torch.randint(0, V, (B, T), generator=g)
    labels[1, 25:] = -100                                  # padding inside the batch
    labels[0, 5] = V - 1                                    # a target in the last, partial vocabulary block
    return hidden, labels


def _plain(model, hidden, labels, cap=None):
    logits = model.get_output_embeddings()(hidden[:, :-1]).float()
    if cap:
        logits = cap * torch.tanh(logits / cap)
    return nn.functional.cross_entropy(logits.reshape(-1, V), labels[:, 1:].reshape(-1), ignore_index=-100,
                                       reduction="sum")


@pytest.mark.parametrize("vocab_chunk,chunk,bias,cap", [(4096, 1024, False, None), (1000, 7, True, None),
                                                         (333, 50, False, 3.0), (20_000, 1024, True, 30.0)])
def test_blocked_head_equals_full_cross_entropy_with_gradients(vocab_chunk, chunk, bias, cap):
    torch.manual_seed(1)
    head = nn.Linear(D, V, bias=bias)
    model = _Model(head, cap)
    hidden, labels = _data()
    h1 = hidden.clone().requires_grad_(True)
    ours = evaluation.head_nll(model, h1, labels, chunk=chunk, vocab_chunk=vocab_chunk)
    ours.backward()
    grads = (h1.grad.clone(), head.weight.grad.clone())
    head.zero_grad()
    h2 = hidden.clone().requires_grad_(True)
    plain = _plain(model, h2, labels, cap)
    plain.backward()
    # Two float32 sums of n per-token NLLs in different orders (index_add vs cross_entropy's reduction):
    # 2n·u. The per-token NLLs differ too, by ≲ 240u absolute (the log-sum-exp over V in other blocks ≲ 45u,
    # 24-term logits of |Σ w·h| ≲ 2 in other matmul shapes ≲ 2·96u), ≲ 26u of one NLL ≈ log V: + PER_TOKEN.
    n = int((labels[:, 1:] != -100).sum())
    assert float(ours.detach()) == pytest.approx(float(plain.detach()), rel=f32_sum_rtol(n + PER_TOKEN))
    torch.testing.assert_close(grads[0], h2.grad, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(grads[1], head.weight.grad, rtol=1e-4, atol=1e-6)


def test_row_sums_equal_row_by_row_and_add_up_to_the_total():
    model = _Model(nn.Linear(D, V, bias=False))
    hidden, labels = _data(seed=2)
    with torch.no_grad():
        rows = evaluation.row_nll(model, hidden, labels, chunk=17, vocab_chunk=2048)
        one_by_one = torch.stack([evaluation.head_nll(model, hidden[r:r + 1], labels[r:r + 1]) for r in range(3)])
        total = evaluation.head_nll(model, hidden, labels)
    # Other chunk sizes change the float32 per-token NLLs in their last bits (+ PER_TOKEN, as above), and
    # each row's float32 sum of T − 1 = 39 of them may differ by 2·39·u; the total adds 3 rows on each side.
    torch.testing.assert_close(rows, one_by_one, rtol=f32_sum_rtol(39 + PER_TOKEN), atol=0)
    assert float(rows.sum()) == pytest.approx(float(total), rel=f32_sum_rtol(39 + PER_TOKEN + 3))


def test_a_head_without_a_weight_matrix_is_called_on_whole_rows():
    linear = nn.Linear(D, V)
    wrapped = nn.Sequential(linear)                         # no .weight: the generic path
    hidden, labels = _data(seed=3)
    with torch.no_grad():
        a = evaluation.head_nll(_Model(wrapped), hidden, labels)
        b = evaluation.head_nll(_Model(linear), hidden, labels)
    n = int((labels[:, 1:] != -100).sum())                  # float32 sums of n per-token NLLs that differ in
    assert float(a) == pytest.approx(float(b), rel=f32_sum_rtol(n + PER_TOKEN))   # their last bits (see above)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_a_non_finite_logit_is_a_named_error(bad):
    head = nn.Linear(D, V, bias=True)
    with torch.no_grad():
        head.bias[123] = bad
    hidden, labels = _data(seed=4)
    with pytest.raises(AnatomyKitError, match="logits hold non-finite values"):
        evaluation.head_nll(_Model(head), hidden, labels)


def test_the_prefix_capture_records_every_blocks_baseline_nll(one_torch_thread):
    from conftest import tiny_llama

    from anatomy_kit.anatomy.blockwise import block_nll_full

    model = tiny_llama(n_layers=3)
    ids = torch.randint(3, 512, (5, 20), generator=torch.Generator().manual_seed(5))
    batches = evaluation.make_batches(ids, 2)                   # batches of 2, 2 and 1 blocks
    cache = evaluation.capture_prefix(model, batches)
    rows = cache.baseline_block_nll()
    assert rows.shape == (5,)
    # Same forward and the same row_nll on the same batches, on one thread: equal bit for bit.
    np.testing.assert_array_equal(rows, block_nll_full(model, batches))
    # baseline_nll adds each batch's float32 sum of its rows (≤ 2 terms: one rounding, ≤ u relative) in
    # float64; rows.sum() adds the same float32 rows in float64 (error ~1e-16, negligible). So the two
    # differ by at most f32_sum_rtol(2, sides=1) = 2u ≈ 1.2e-7 relative, whichever the kernel path.
    assert rows.sum() == pytest.approx(cache.baseline_nll, rel=f32_sum_rtol(2, sides=1))
