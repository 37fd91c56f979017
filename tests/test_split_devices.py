"""A model split over two accelerators (``device_map``): the card's signals and the head's NLL (issue 30, item 3).

Under the device guard, SmolLM2's depth (30 layers) with layers 0–14 on one stand-in accelerator
and the rest on another: where states from two devices meet, the kit must move them to one. The
values are checked against the same model on one device (the same CPU computation in the same
order, so equal exactly).
"""

from __future__ import annotations

import torch

from anatomy_kit.card.signals import signal_pass
from anatomy_kit.hf import evaluation
from conftest import tiny_llama
from device_guard import DeviceGuard, split_over_accelerators

ACC = torch.device("cpu", 1)


def _inputs():
    torch.manual_seed(1)
    return torch.randint(3, 512, (2, 12))


def test_signals_and_nll_of_a_model_split_at_layer_15_match_the_model_on_one_device():
    ids = _inputs()
    whole = tiny_llama(n_layers=30)
    sums = signal_pass(whole, ids, n_offsets=4).to_numpy()
    (batch,) = evaluation.make_batches(ids, 2)
    rows = evaluation.row_nll(whole, whole.model(input_ids=ids).last_hidden_state, batch.labels)
    with DeviceGuard() as guard:
        split = tiny_llama(n_layers=30)
        split_over_accelerators(split, boundary=15)
        assert guard.label(split.model.layers[14].mlp.up_proj.weight) == 1
        assert guard.label(split.model.layers[15].mlp.up_proj.weight) == 2
        got = signal_pass(split, ids.to(ACC), n_offsets=4).to_numpy()   # offsets 1-4 cross the boundary
        (split_batch,) = evaluation.make_batches(ids, 2, device=ACC)    # labels with the embeddings
        hidden = split.model(input_ids=split_batch.input_ids).last_hidden_state
        assert guard.label(hidden) == 2
        split_rows = evaluation.row_nll(split, hidden, split_batch.labels)   # tied head: accelerator 1
        ppl = evaluation.perplexity(split, [split_batch])
    # the same CPU kernels in the same order on both sides: equal bit for bit
    assert (got.cos == sums.cos).all() and (got.angle == sums.angle).all() and got.tokens == sums.tokens
    assert (got.update == sums.update).all() and (got.norm == sums.norm).all()
    assert torch.equal(split_rows, rows)
    assert ppl == evaluation.perplexity(whole, [batch])


def test_the_ablation_map_across_the_boundary_matches_the_model_on_one_device():
    """Neighbour means of layers 14 and 15 read a neighbour on the other accelerator; skips replay across it."""
    from anatomy_kit.anatomy import ablation_map

    ids = _inputs()
    layers = [13, 14, 15, 16]
    whole = tiny_llama(n_layers=30)
    ref = {s: ablation_map(whole, evaluation.make_batches(ids, 2), strategy=s, layers=layers, progress=False)
           for s in ("neighbour-mean", "skip")}
    with DeviceGuard():
        split = tiny_llama(n_layers=30)
        split_over_accelerators(split, boundary=15)
        got = {s: ablation_map(split, evaluation.make_batches(ids, 2, device=ACC), strategy=s, layers=layers,
                               progress=False) for s in ref}
    for s in ref:                                   # the same CPU computation in the same order: equal
        assert got[s].baseline_ppl == ref[s].baseline_ppl
        assert list(got[s].delta_pct) == list(ref[s].delta_pct), s
