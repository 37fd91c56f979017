"""Every perplexity the card reports for a pruned set is the perplexity of exactly that pruned model.

The check rebuilds each pruned model independently: a fresh copy of the model, the layers deleted from
its layer list by hand, its configuration's layer count and per-layer attention types cut to match,
and the perplexity from the model's own forward and loss (``model(ids, labels=ids).loss``), sharing no
code with the card's prefix-cache replay. ``save_pruned`` folders reload with ``from_pretrained`` and
reproduce the card's perplexity to 1e-5 relative. Windows (16 tokens) are narrower than the blocks
(32), so a layer given the wrong attention type changes the numbers.
"""

import copy
import math

import pytest
import torch
from torch import nn

from anatomy_kit.card import build_card, save_pruned
from anatomy_kit.card.text import card_text

from conftest import f32_forward_rtol, f32_sum_rtol, ppl_rtol
from test_card_architectures import TINY, corpus, tiny_model, tok  # noqa: F401 (module fixtures, shared)

ARCHS = ["llama", "gemma2", "qwen2", "gpt2"]


@pytest.fixture(scope="module")
def cards(tok, corpus):
    torch.set_num_threads(1)
    out = {}
    for arch in ARCHS:
        model = tiny_model(arch, len(tok), n_layers=5)
        settings = TINY.__class__(**{**TINY.to_dict(), "max_prune": 3})
        out[arch] = (model, build_card(model, tokenizer=tok, corpus=corpus, settings=settings, progress=False))
    return out


def _eval_blocks(card, tok, corpus):
    s, text = card.doc["settings"], None
    text = card_text(tok, corpus, block_size=s["block_size"], n_eval=s["tokens"] // s["block_size"],
                     n_calibration=s["calibration_tokens"] // s["block_size"])
    assert text.token_sha256 == card.doc["text"]["token_sha256"]       # the card's very tokens
    return text.eval_blocks


def _layer_list(model):
    """Where each architecture keeps its layers (written out here, not the kit's lookup)."""
    return (model.transformer, "h") if hasattr(model, "transformer") else (model.model, "layers")


def rebuilt(model, drop):
    """A fresh copy of ``model`` with the layers in ``drop`` deleted and its config cut to match."""
    fresh = copy.deepcopy(model)
    owner, attr = _layer_list(fresh)
    kept = [i for i in range(len(getattr(owner, attr))) if i not in set(drop)]
    setattr(owner, attr, nn.ModuleList([getattr(owner, attr)[i] for i in kept]))
    cfg = fresh.config
    if getattr(cfg, "layer_types", None) is not None:
        cfg.layer_types = [cfg.layer_types[i] for i in kept]
    cfg.num_hidden_layers = len(kept)
    return fresh


def own_mean_nll(model, blocks):
    """Mean next-token NLL from the model's own forward and loss."""
    with torch.no_grad():
        return float(model(input_ids=blocks, labels=blocks, use_cache=False).loss)


def _rtol(model, blocks):
    # two float32 forward passes (different code paths) plus float32 sums over the scored tokens
    return f32_forward_rtol(model.config.num_hidden_layers, 32) + f32_sum_rtol(blocks.shape[0] * (blocks.shape[1] - 1))


@pytest.mark.parametrize("arch", ARCHS)
def test_every_reported_pruned_perplexity_is_that_pruned_models(arch, cards, tok, corpus, one_torch_thread):
    model, card = cards[arch]
    blocks = _eval_blocks(card, tok, corpus)
    p = card.doc["pruning"]
    reported = [(e["layers"], e["ppl"]) for e in p["sets"]] + \
        [(r["layers"], r["ppl"]) for sets in p["random"].values() for r in sets]
    assert len(reported) > 20
    for layers, ppl in reported:
        mean = own_mean_nll(rebuilt(model, layers), blocks)
        assert math.log(ppl) == pytest.approx(mean, rel=_rtol(model, blocks)), (arch, layers)
    base = own_mean_nll(model, blocks)
    assert math.log(card.baseline_ppl) == pytest.approx(base, rel=_rtol(model, blocks))


@pytest.mark.parametrize("arch", ARCHS)
def test_save_pruned_reloads_with_the_cards_perplexity(arch, cards, tok, corpus, tmp_path, one_torch_thread):
    from transformers import AutoModelForCausalLM

    model, card = cards[arch]
    blocks = _eval_blocks(card, tok, corpus)
    singles = {tuple(r["layers"]): r["ppl"] for r in card.doc["pruning"]["random"]["1"]}
    # greedy's recommended 3-set, and layer 0 alone: it breaks Gemma 2's and Qwen 2's attention-type pattern
    for drop, ppl in ((card.pruned_set(3), card.pruned_ppl(3)), ([0], singles[(0,)])):
        folder = save_pruned(model, drop, tmp_path / f"{arch}-{'-'.join(map(str, drop))}", tok)
        again = AutoModelForCausalLM.from_pretrained(folder).eval()
        assert again.config.num_hidden_layers == 5 - len(drop)
        rtol = ppl_rtol(_rtol(again, blocks), ppl)
        assert math.exp(own_mean_nll(again, blocks)) == pytest.approx(ppl, rel=rtol), (arch, drop)
    owner, attr = _layer_list(model)
    assert len(getattr(owner, attr)) == 5 and model.config.num_hidden_layers == 5    # the model is unchanged


def test_each_sets_p_counts_the_random_sets_that_do_as_well(cards):
    """k = 1: every single layer, exactly (#as good / L); k ≥ 2: the drawn sets, (1 + #as good) / (1 + R)."""
    _, card = cards["llama"]
    p = card.doc["pruning"]
    for e in p["sets"]:
        pool = [r["ppl"] for r in p["random"][str(e["k"])]]
        as_good = sum(r <= e["ppl"] * (1 + 1e-9) for r in pool)
        want = as_good / len(pool) if e["k"] == 1 else (1 + as_good) / (1 + len(pool))
        assert e["p_random"] == pytest.approx(want), (e["method"], e["k"])
    assert len(p["random"]["1"]) == 5 and all(len(p["random"][str(k)]) == 3 for k in (2, 3))
