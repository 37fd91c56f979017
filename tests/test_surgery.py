"""Weight surgery (anatomy_kit.hf.surgery): exact restoration, neighbour means, noise and clones."""

from __future__ import annotations

import pytest
import torch

from anatomy_kit.hf import surgery
from anatomy_kit.hf.layers import decoder_layers, layer_module
from anatomy_kit.validate import AnatomyKitError

from conftest import tiny_llama


def _snapshot(model):
    return {k: v.clone() for k, v in model.state_dict().items()}


def _same(model, snap):
    return all(torch.equal(v, snap[k]) for k, v in model.state_dict().items())   # exact: put back, not recomputed


def test_swapped_restores_bit_for_bit_even_after_training_inside():
    model = tiny_llama(n_layers=4)
    snap = _snapshot(model)
    names = surgery.layer_parameter_names(model, 2)
    new = {full: torch.zeros_like(p) for full, p in model.named_parameters() if full in names.values()}
    with surgery.swapped(model, new):
        assert all(float(p.detach().abs().sum()) == 0 for n, p in model.named_parameters() if n in new)
        with torch.no_grad():                                 # writes land in the swapped-in tensors only
            for n, p in model.named_parameters():
                if n in new:
                    p.add_(1.0)
    assert _same(model, snap)
    with pytest.raises(RuntimeError), surgery.swapped(model, new):
        raise RuntimeError("inside")
    assert _same(model, snap)
    with pytest.raises(AnatomyKitError, match="has no parameter 'nope'"):
        with surgery.swapped(model, {"nope": torch.zeros(1)}):
            pass
    bad = next(iter(new))
    with pytest.raises(AnatomyKitError, match="non-finite"):
        with surgery.swapped(model, {bad: torch.full_like(new[bad], float("nan"))}):
            pass
    assert _same(model, snap)


def test_neighbour_mean_is_the_average_and_edges_copy_their_neighbour():
    model = tiny_llama(n_layers=5)
    L = decoder_layers(model)
    mean = surgery.neighbour_mean(model, 2)
    for rel, full in surgery.layer_parameter_names(model, 2).items():
        a = dict(L[1].named_parameters())[rel]
        b = dict(L[3].named_parameters())[rel]
        torch.testing.assert_close(mean[full], (a + b) / 2, rtol=0, atol=0)      # exact: the same (a + b) / 2
    edge = surgery.neighbour_mean(model, 0)
    for rel, full in surgery.layer_parameter_names(model, 0).items():
        assert torch.equal(edge[full], dict(L[1].named_parameters())[rel])      # exact: a copy
    assert surgery.neighbour_indices(5, 0, "previous") == [1] and surgery.neighbour_indices(5, 4, "next") == [3]
    assert surgery.neighbour_indices(5, 2, "previous") == [1] and surgery.neighbour_indices(5, 2, "mean") == [1, 3]
    torch.testing.assert_close(surgery.neighbour_weight(model, 2, "q", "mean"),      # exact: the same sum / 2
                               (layer_module(model, 1, "q").weight + layer_module(model, 3, "q").weight) / 2,
                               rtol=0, atol=0)
    with pytest.raises(AnatomyKitError, match="neighbour='left'"):
        surgery.neighbour_indices(5, 2, "left")


def test_cloned_layer_is_its_source_plus_the_stated_noise():
    model = tiny_llama(n_layers=4)
    exact = surgery.cloned_layer(model, 1, 3)
    src = surgery.layer_parameter_names(model, 1)
    params = dict(model.named_parameters())
    for rel, full in surgery.layer_parameter_names(model, 3).items():
        assert torch.equal(exact[full], params[src[rel]])         # exact: no noise, a copy
    noisy = surgery.cloned_layer(model, 1, 3, noise_std=0.1, seed=5)
    again = surgery.cloned_layer(model, 1, 3, noise_std=0.1, seed=5)
    w = surgery.layer_parameter_names(model, 3)["mlp.up_proj.weight"]
    w_src = params[src["mlp.up_proj.weight"]]
    eps = ((noisy[w] - w_src) / (0.1 * w_src.std())).detach()
    assert abs(float(eps.mean())) < 0.05 and abs(float(eps.std()) - 1) < 0.05      # N(0, (0.1·std)²)
    assert all(torch.equal(noisy[k], again[k]) for k in noisy)                        # seeded
    surgery.clone_layer(model, 1, 3, noise_std=0.1, seed=5)
    assert torch.equal(dict(model.named_parameters())[w], noisy[w])       # exact: the same values, written
    with pytest.raises(AnatomyKitError, match="target=7"):
        surgery.cloned_layer(model, 1, 7)


def test_requires_grad_only_restores_the_flags():
    model = tiny_llama(n_layers=2)
    first = next(model.parameters())
    first.requires_grad_(False)
    flags = [p.requires_grad for p in model.parameters()]
    chosen = [layer_module(model, 1, "q").weight]
    with surgery.requires_grad_only(model, chosen):
        assert [p for p in model.parameters() if p.requires_grad] == chosen
    assert [p.requires_grad for p in model.parameters()] == flags
