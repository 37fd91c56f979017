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


@pytest.mark.parametrize("method, factor", [("full", 3), ("lora", 2)])
def test_heal_passes_count_the_forward_passes_a_fine_tune_runs(method, factor, one_torch_thread):
    """Every layer's forward tokens, training (with grad) and evaluation apart, against heal_passes: training
    counts ``factor`` forward passes' worth (backward included), evaluation one per scheduled point."""
    import torch

    from anatomy_kit.card.cost import heal_passes
    from anatomy_kit.card.heal import HealRecipe, fine_tune
    from anatomy_kit.hf.evaluation import make_batches

    model = tiny_llama(n_layers=4)
    seen = {True: 0, False: 0}
    for layer in decoder_layers(model):
        layer.register_forward_pre_hook(lambda m, a, k: seen.__setitem__(torch.is_grad_enabled(), seen[
            torch.is_grad_enabled()] + (a[0] if a else k["hidden_states"]).shape[:2].numel()), with_kwargs=True)
    g = torch.Generator().manual_seed(0)
    evals = make_batches(torch.randint(3, 500, (6, 16), generator=g), 3)
    recipe = HealRecipe(method=method, steps=5, batch_size=2, evals=2, lora_rank=2)
    fine_tune(model, [2], torch.randint(3, 500, (7, 16), generator=g), evals, recipe)
    passes = heal_passes(4, steps=5, batch_size=2, block_size=16, n_evals=len(recipe.eval_steps()), eval_tokens=96,
                         method=method)
    assert passes["training"] == (factor * seen[True], factor * 5 * 2 * 16)        # a skipped layer runs too
    assert passes["evaluation"] == (seen[False], 3 * 96) and seen[False] == 3 * 96 * 4


def test_heal_estimate_takes_the_cards_own_rate_on_a_cpu_and_the_assumed_one_on_a_gpu():
    from anatomy_kit.card.cost import heal_estimate, heal_passes, measured_rate, model_shape
    from anatomy_kit.card.heal import HealRecipe
    from anatomy_kit.lm.estimates import ASSUMED_FLOPS

    shape = model_shape(tiny_llama(n_layers=6))
    assert (shape.n_layers, shape.d_model, shape.vocab, shape.width, shape.ffn, shape.tied_head) == \
        (6, 32, 512, 64, "swiglu", True)
    assert shape.params == sum(p.numel() for p in tiny_llama(n_layers=6).parameters())
    doc = {"provenance": {"timings": {"capture + cheap signals": {"wall_s": 2.0}, "greedy removal": {"wall_s": 0.0},
                                      "load": {"wall_s": 9.0}}},
           "text": {"block_size": 32, "eval_tokens": 128, "n_eval_blocks": 4, "calibration_tokens": 64},
           "settings": {"geometry_tokens": 24, "dtype": "float32"}, "model": {"n_layers": 6}, "pruning": None}
    flops = card_flops(card_passes(doc), shape, 32)
    assert flops["capture + cheap signals"] > 0 and flops["verification"] > 0          # "load": no FLOP stage
    assert measured_rate(doc, shape) == pytest.approx(flops["capture + cheap signals"] / 2.0)
    recipe = HealRecipe(method="lora", steps=10, batch_size=4, evals=4)
    cpu = heal_estimate(doc, shape, recipe, 3, device_type="cpu")
    per_run = sum(card_flops(heal_passes(6, steps=10, batch_size=4, block_size=32, n_evals=5, eval_tokens=128,
                                         method="lora"), shape, 32).values())
    assert cpu["runs"] == 4 and cpu["flops"] == pytest.approx(4 * per_run)          # three healed k and the control
    assert cpu["seconds"] == pytest.approx(4 * per_run / measured_rate(doc, shape))
    gpu = heal_estimate({**doc, "settings": {**doc["settings"], "dtype": "bfloat16"}}, shape, recipe, 3,
                        device_type="cuda")
    assert gpu["seconds"] == pytest.approx(4 * per_run / ASSUMED_FLOPS["train-bf16"])
    untimed = heal_estimate({**doc, "provenance": {"timings": {}}}, shape, recipe, 3, device_type="cpu")
    assert untimed["seconds"] is None
