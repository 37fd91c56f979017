"""The card's FLOP model counts exactly the decoder-layer passes a card runs (``benchmarks/bench_card.py`` relies on it)."""

import pytest

from anatomy_kit.card import CardSettings, build_card
from anatomy_kit.card.cost import card_flops, card_passes, planned_passes
from anatomy_kit.lm.estimates import HUB_SHAPES
from anatomy_kit.hf.layers import decoder_layers

from conftest import tiny_llama
from test_card_architectures import TINY, small_corpus


@pytest.mark.parametrize("quick", [False, True])
def test_layer_passes_match_what_the_card_runs(quick, tmp_path, one_torch_thread):
    from conftest import tiny_tokenizer

    model = tiny_llama()
    seen = []
    handles = [layer.register_forward_pre_hook(lambda m, a, k: seen.append(
        (a[0] if a else k["hidden_states"]).shape[:2].numel()), with_kwargs=True) for layer in decoder_layers(model)]
    settings = CardSettings(**{**TINY.to_dict(), "max_prune": 2, "quick": quick})
    card = build_card(model, tokenizer=tiny_tokenizer(), corpus=small_corpus(tmp_path), settings=settings,
                      progress=False)
    for h in handles:
        h.remove()
    counted = card_passes(card.doc)
    assert sum(layer_tokens for layer_tokens, _ in counted.values()) == sum(seen)
    planned = planned_passes(6, settings)
    if quick:                                            # nothing random: the plan is the count
        assert planned == {k: (float(a), float(b)) for k, (a, b) in counted.items()}
    flops = card_flops(counted, HUB_SHAPES["HuggingFaceTB/SmolLM2-135M"], 32)
    assert set(flops) == set(counted) and all(f >= 0 for f in flops.values())
