"""The report card's cheap signals against independent few-line formulas on a hand-built 2-layer model.

The model is written out here (an embedding and two residual layers ``a = h + tanh(A h)``,
``h' = a + tanh(M a)``), so every state is known in closed form; the formulas below recompute each
signal from those states in float64 with NumPy, sharing no code with :mod:`anatomy_kit.card`.
"""

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

from anatomy_kit.card.signals import best_blocks, cheap_signals, signal_pass
from anatomy_kit.card.work import work_signals

from conftest import f32_forward_rtol, f32_sum_rtol

D, V, B, T = 8, 20, 3, 12


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.self_attn = nn.Sequential(nn.Linear(D, D, bias=False), nn.Tanh())
        self.mlp = nn.Sequential(nn.Linear(D, D, bias=False), nn.Tanh())

    def forward(self, hidden_states, **_):
        a = hidden_states + self.self_attn(hidden_states)
        return a + self.mlp(a)


class HandBuilt(nn.Module):
    """Two residual layers; ``model.layers`` and ``get_decoder()`` as the kit expects of a decoder."""

    def __init__(self, seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.config = SimpleNamespace(num_hidden_layers=2, hidden_size=D)
        self.embed = nn.Embedding(V, D)
        self.layers = nn.ModuleList([Layer(), Layer()])

    def get_decoder(self):
        return self

    def forward(self, input_ids, attention_mask=None, use_cache=None):
        h = self.embed(input_ids)
        for layer in self.layers:
            h = layer(h)
        return h


def _states(model, ids):
    """Every state h_0 … h_2 and the FFN inputs a_0, a_1, float64, (B·T, D), by hand."""
    W = {n: p.detach().double().numpy() for n, p in model.named_parameters()}
    h = W["embed.weight"][ids.numpy().reshape(-1)]
    states, ffn_in = [h], []
    for i in range(2):
        a = h + np.tanh(h @ W[f"layers.{i}.self_attn.0.weight"].T)
        h = a + np.tanh(a @ W[f"layers.{i}.mlp.0.weight"].T)
        ffn_in.append(a)
        states.append(h)
    return states, ffn_in


def _cos(x, y):
    return (x * y).sum(1) / np.linalg.norm(x, axis=1) / np.linalg.norm(y, axis=1)


def _angles(points):
    u = points / np.linalg.norm(points, axis=1, keepdims=True)
    return np.arccos(np.clip(u @ u.T, -1, 1))


@pytest.fixture(scope="module")
def setup():
    model = HandBuilt().eval()
    ids = torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(1))
    return model, ids, *_states(model, ids)


def _tol(n_tokens):
    # float32 forward of 2 layers of width D, then float32 sums over the tokens (module docstring)
    return 4 * (f32_forward_rtol(2, D) + f32_sum_rtol(n_tokens))


def test_block_influence_update_norm_and_angular_distance_match_their_formulas(setup):
    model, ids, states, _ = setup
    totals = signal_pass(model, ids, n_offsets=2).to_numpy()
    got = cheap_signals(totals)
    bi = [1 - _cos(states[l], states[l + 1]).mean() for l in range(2)]
    update = [np.linalg.norm(states[l + 1] - states[l], axis=1).sum() / np.linalg.norm(states[l], axis=1).sum()
              for l in range(2)]
    angular = [np.arccos(np.clip(_cos(states[l], states[l + 1]), -1, 1)).mean() / np.pi for l in range(2)]
    tol = _tol(B * T)
    np.testing.assert_allclose(got["block_influence"], bi, rtol=tol)
    np.testing.assert_allclose(got["update_norm"], update, rtol=tol)
    np.testing.assert_allclose(got["angular_distance"], angular, rtol=tol)
    two = np.arccos(np.clip(_cos(states[0], states[2]), -1, 1)).mean() / np.pi     # n = 2: h_0 against h_2
    matrix = totals.angular_matrix()
    assert matrix.shape == (2, 2) and np.isnan(matrix[1, 1])                      # h_1 → h_3 does not exist
    np.testing.assert_allclose([matrix[0, 0], matrix[1, 0], matrix[0, 1]], angular + [two], rtol=tol)


def test_best_block_is_the_closest_pair_of_states(setup):
    model, ids, states, _ = setup
    matrix = signal_pass(model, ids, n_offsets=2).to_numpy().angular_matrix()
    d1 = [np.arccos(np.clip(_cos(states[l], states[l + 1]), -1, 1)).mean() for l in range(2)]
    best = best_blocks(matrix)
    assert best[0]["start"] == int(np.argmin(d1)) and best[0]["layers"] == [int(np.argmin(d1))]
    assert best[1] == {"n": 2, "start": 0, "layers": [0, 1], "distance": pytest.approx(matrix[0, 1])}


def test_padding_tokens_carry_no_weight(setup):
    model, ids, states, _ = setup
    mask = torch.ones_like(ids)
    mask[:, -4:] = 0                                  # the last 4 positions of every row do not count
    got = cheap_signals(signal_pass(model, ids, mask, n_offsets=1).to_numpy())
    keep = mask.numpy().reshape(-1) == 1
    bi = [1 - _cos(states[l][keep], states[l + 1][keep]).mean() for l in range(2)]
    np.testing.assert_allclose(got["block_influence"], bi, rtol=_tol(int(keep.sum())))


def test_geometric_work_shift_and_gw_match_their_formulas(setup):
    model, ids, states, ffn_in = setup
    n = B * T                                         # every token: the sample is the whole set, in order
    got = work_signals(model, ids, n_tokens=n, seed=0, batch_size=B)
    shift = [np.arccos(np.clip(_cos(ffn_in[l], states[l + 1]), -1, 1)).mean() for l in range(2)]
    gw = [np.sqrt(np.mean((_angles(ffn_in[l]) - _angles(states[l + 1])) ** 2)) for l in range(2)]
    # the kit takes angles as 2·arcsin(chord/2) (exact near 0); arccos here: agreement to float32 rounding
    np.testing.assert_allclose(got["work_shift"], shift, rtol=_tol(n), atol=1e-6)
    np.testing.assert_allclose(got["work_gw"], gw, rtol=_tol(n * n), atol=1e-6)


def test_the_literatures_definitions_match_their_formulas(setup):
    """PruneMe's last-token angular distance and the per-token mean of the update ratio, by hand."""
    model, ids, states, _ = setup
    totals = signal_pass(model, ids, n_offsets=2).to_numpy()
    last = [s.reshape(B, T, D)[:, -1] for s in states]                 # each sequence's last token (B, D)
    d_last = [np.arccos(np.clip(_cos(last[l], last[l + 1]), -1, 1)).mean() / np.pi for l in range(2)]
    two = np.arccos(np.clip(_cos(last[0], last[2]), -1, 1)).mean() / np.pi
    ratio = [(np.linalg.norm(states[l + 1] - states[l], axis=1) / np.linalg.norm(states[l], axis=1)).mean()
             for l in range(2)]
    tol = _tol(B * T)
    got = cheap_signals(totals, angular_tokens="last", update_norm="mean_of_ratios")
    np.testing.assert_allclose(got["angular_distance"], d_last, rtol=tol, atol=1e-7)
    np.testing.assert_allclose(got["update_norm"], ratio, rtol=tol)
    np.testing.assert_allclose(totals.angular_matrix("last")[0, 1], two, rtol=tol, atol=1e-7)
    every = [np.arccos(np.clip(_cos(states[l], states[l + 1]), -1, 1)).mean() / np.pi for l in range(2)]
    assert not np.allclose(d_last, every, rtol=1e-3)                   # the two scopes differ on this model
    with pytest.raises(ValueError, match="angular_tokens='first' is not accepted"):
        totals.angular_matrix("first")


def test_the_last_token_is_each_rows_last_scored_one(setup):
    model, ids, states, _ = setup
    mask = torch.ones_like(ids)
    mask[0, -3:] = 0                                   # row 0 ends 3 positions early; rows 1, 2 at T − 1
    got = cheap_signals(signal_pass(model, ids, mask, n_offsets=1).to_numpy(), angular_tokens="last")
    ends = [T - 4, T - 1, T - 1]
    last = [np.stack([s.reshape(B, T, D)[b, e] for b, e in enumerate(ends)]) for s in states]
    want = [np.arccos(np.clip(_cos(last[l], last[l + 1]), -1, 1)).mean() / np.pi for l in range(2)]
    np.testing.assert_allclose(got["angular_distance"], want, rtol=_tol(B * T), atol=1e-7)
