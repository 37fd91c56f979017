"""The card's memory estimate and FLOP count, against hand-worked differences (issue 30, item 7).

Differences between two settings isolate one term of :func:`anatomy_kit.card.loading.estimate_memory`
(the parameter count and the other terms cancel), so each term is checked by its own formula.
"""

from __future__ import annotations

import pytest
from transformers import LlamaConfig

from anatomy_kit.card.cost import card_flops
from anatomy_kit.card.loading import estimate_memory
from anatomy_kit.card.settings import CardSettings
from anatomy_kit.lm.estimates import ModelShape

D, T, B = 64, 32, 2


def _config(n_layers: int) -> LlamaConfig:
    return LlamaConfig(vocab_size=256, hidden_size=D, intermediate_size=128, num_hidden_layers=n_layers,
                       num_attention_heads=4, num_key_value_heads=2)


def _activations(n_layers: int, **settings) -> int:
    s = CardSettings(block_size=T, batch_size=B, tokens=4 * T, calibration_tokens=2 * T, **settings).validate()
    return estimate_memory(_config(n_layers), s).activation_bytes


def test_no_k_given_counts_the_default_k_not_a_quarter_of_the_layers():
    # 30 layers: default K = min(5, 30 // 4) = 5, and N = max(30 // 4, K) = 7 either way
    assert _activations(30) == _activations(30, max_prune=4)     # the default K: 30 // 4 capped at 4


def test_the_signal_states_are_2_n_plus_1_float32_states():
    # 8 layers: K = 1 gives N = max(2, 1) = 2, K = 5 gives N = 5: 2·(5 − 2) more states of B·T·d float32
    assert _activations(8, max_prune=5) - _activations(8, max_prune=1) == 2 * 3 * B * T * D * 4


def test_more_tokens_add_only_their_ids_not_their_activations():
    # 4 more evaluation blocks: their ids, mask and labels (3 × int64 per token) stay on the device
    more = CardSettings(block_size=T, batch_size=B, tokens=8 * T, calibration_tokens=2 * T).validate()
    assert estimate_memory(_config(8), more).activation_bytes - _activations(8) == 3 * 8 * 4 * T


@pytest.mark.parametrize("tied", [True, False])
def test_an_untied_embedding_is_a_lookup_not_layer_flops(tied):
    V, L, layer_params = 1000, 4, 10_000                  # per layer
    params = L * layer_params + V * D * (1 if tied else 2)
    flops = card_flops({"s": (1, 0)}, ModelShape(params, L, D, V, tied_head=tied), block_size=T)
    assert flops["s"] == pytest.approx(2 * layer_params + 4 * T * D, rel=1e-12)   # one layer-token
    head = card_flops({"s": (0, 1)}, ModelShape(params, L, D, V, tied_head=tied), block_size=T)
    assert head["s"] == 2 * V * D                                                   # one head-token
