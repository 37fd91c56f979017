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


def _block_nll(model, blocks):
    """Summed next-token NLL of every block (B,), from the model's own forward and loss, one block at a time."""
    with torch.no_grad():
        return torch.tensor([float(model(input_ids=b[None], labels=b[None], use_cache=False).loss) * (b.numel() - 1)
                             for b in blocks], dtype=torch.float64).numpy()


def _sign_flip_p(d):
    """Two-sided exact sign-flip p of the mean of ``d``, every sign pattern enumerated."""
    import itertools

    import numpy as np

    s = abs(d.sum())
    null = [abs(np.dot(signs, d)) for signs in itertools.product((-1, 1), repeat=len(d))]
    return sum(x >= s * (1 - 1e-6) for x in null) / len(null)


def test_greedy_is_compared_with_every_proposal_paired_over_the_blocks(cards, tok, corpus, one_torch_thread):
    """Each comparison's ΔPPL, t interval and sign-flip p, from the rebuilt models' own per-block NLL."""
    import numpy as np
    from scipy import stats

    model, card = cards["llama"]
    blocks = _eval_blocks(card, tok, corpus)
    n = blocks.shape[1] - 1
    p = card.doc["pruning"]
    assert {(c["k"], c["method"]) for c in p["comparisons"]} == \
        {(e["k"], e["method"]) for e in p["sets"] if e["method"] != "greedy"}
    nll = {}
    for c in p["comparisons"]:
        for layers in (c["greedy"], c["layers"]):
            if tuple(layers) not in nll:
                nll[tuple(layers)] = _block_nll(rebuilt(model, layers), blocks)
        d = (nll[tuple(c["greedy"])] - nll[tuple(c["layers"])]) / n
        half = stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d))
        want = [100 * math.expm1(x) for x in (d.mean(), d.mean() - half, d.mean() + half)]
        tol = _rtol(model, blocks) * max(abs(nll[tuple(c["greedy"])]).max(), 1.0) / n * 10
        assert c["same_set"] == (c["greedy"] == c["layers"])
        if c["same_set"]:
            assert c["delta_pct"] == 0 and c["p"] == 1.0
            continue
        for got, w in zip((c["delta_pct"], c["low"], c["high"]), want):
            assert math.log1p(got / 100) == pytest.approx(math.log1p(w / 100), abs=tol), (c["method"], c["k"])
        assert c["p"] == pytest.approx(_sign_flip_p(d)), (c["method"], c["k"])


def test_greedy_scores_after_the_first_step_are_the_pruned_models_calibration_nll(cards, tok, corpus,
                                                                                  one_torch_thread):
    """Step 2's score of every remaining layer j: the calibration NLL of the model without step 1's layer and j."""
    model, card = cards["llama"]
    s = card.doc["settings"]
    text = card_text(tok, corpus, block_size=s["block_size"], n_eval=s["tokens"] // s["block_size"],
                     n_calibration=s["calibration_tokens"] // s["block_size"])
    steps = card.doc["pruning"]["greedy_steps"]
    first, scores = steps[0]["removed"], steps[1]["scores"]
    assert sorted(int(j) for j in scores) == [j for j in range(5) if j != first]
    for j, score in scores.items():
        want = _block_nll(rebuilt(model, [first, int(j)]), text.calibration_blocks).sum()
        assert score == pytest.approx(want, rel=_rtol(model, text.calibration_blocks)), j
    assert steps[1]["removed"] == int(min(scores, key=lambda j: (scores[j], int(j))))


def test_greedys_choice_on_each_calibration_half_is_recomputed_by_brute_force(cards, tok, corpus,
                                                                              one_torch_thread):
    model, card = cards["llama"]
    s = card.doc["settings"]
    cal = card_text(tok, corpus, block_size=s["block_size"], n_eval=s["tokens"] // s["block_size"],
                    n_calibration=s["calibration_tokens"] // s["block_size"]).calibration_blocks
    stability = card.doc["pruning"]["calibration_stability"]
    half = cal.shape[0] // 2
    for name, blocks in (("half_a", cal[:half]), ("half_b", cal[half:])):
        removed = []
        for k in range(1, 4):
            nll = {j: _block_nll(rebuilt(model, removed + [j]), blocks).sum() for j in range(5) if j not in removed}
            removed.append(min(nll, key=lambda j: (nll[j], j)))
            assert stability["per_k"][k - 1][name] == sorted(removed), (name, k)
    rows = stability["per_k"]
    assert stability["changed"] == sum(r["half_a"] != r["half_b"] for r in rows)
    assert all(r["all"] == card.pruned_set(r["k"]) for r in rows)


def test_random_sets_come_from_both_pools_with_exact_enumeration_where_cheaper(cards):
    """5 layers: the interior is 1, 2, 3 (one layer off each end); with 3 draws per k its 3 two-sets and
    one three-set are all enumerated (exact p = #as good / n), while all layers' ten two-sets are drawn."""
    from math import comb

    from anatomy_kit.card.pruning import interior_layers, is_enumerated, random_sets

    _, card = cards["llama"]
    p = card.doc["pruning"]
    assert p["interior_layers"] == interior_layers(5) == [1, 2, 3] and interior_layers(30) == list(range(3, 27))
    assert [r["layers"] for r in p["random_interior"]["2"]] == [[1, 2], [1, 3], [2, 3]]
    assert [r["layers"] for r in p["random_interior"]["3"]] == [[1, 2, 3]]
    assert p["p_floor"]["random_interior"]["2"] == pytest.approx(1 / 3) and p["p_floor"]["random"]["2"] == 0.25
    for e in p["sets"]:
        drawn = [r["ppl"] for r in p["random_interior"][str(e["k"])]]
        as_good = sum(r <= e["ppl"] * (1 + 1e-9) for r in drawn)
        assert e["p_interior"] == pytest.approx(as_good / len(drawn)), (e["method"], e["k"])
    # the boundary: C(n, k) = n_random is enumerated, one more set is drawn
    assert is_enumerated(5, 2, comb(5, 2)) and not is_enumerated(5, 2, comb(5, 2) - 1)
    assert len(random_sets(6, 2, comb(5, 2), seed=0, pool=range(5))) == comb(5, 2)
    drawn = random_sets(6, 2, comb(5, 2) - 1, seed=0, pool=range(5))
    assert len(drawn) == comb(5, 2) - 1 and all(set(c.layers) <= set(range(5)) for c in drawn)


def test_healing_starts_from_the_cards_pruned_model_and_leaves_the_model_as_it_was(cards, tok, corpus,
                                                                                    one_torch_thread):
    """Step 0 of a fine-tune is the card's measured perplexity of that set; three AdamW steps lower it; the
    card's model is unchanged afterwards (the fine-tune itself is checked by hand in test_card_heal)."""
    from anatomy_kit.card.heal import HealRecipe, fine_tune
    from anatomy_kit.hf.evaluation import make_batches

    model, card = cards["llama"]
    s = card.doc["settings"]
    text = card_text(tok, corpus, block_size=s["block_size"], n_eval=s["tokens"] // s["block_size"],
                     n_calibration=s["calibration_tokens"] // s["block_size"])
    evals = make_batches(text.eval_blocks, 2, "cpu")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    p = card.doc["pruning"]
    worst = max(p["sets"] + [r for v in p["random"].values() for r in v], key=lambda e: e["ppl"])
    assert worst["ppl"] > card.baseline_ppl                # a set that raises perplexity: a gap to close
    run = fine_tune(model, worst["layers"], text.calibration_blocks, evals,
                    HealRecipe(steps=3, batch_size=1, lr=1e-3, evals=1))
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert run.curve[0] == pytest.approx(worst["ppl"], rel=1e-5)
    assert run.curve[3] < run.curve[0]


def test_healing_trains_on_fresh_calibration_half_blocks_never_on_evaluation_text(tok, corpus):
    """steps × batch blocks of the calibration half, each step a fresh batch; a request beyond what the
    half holds takes all of it and says the steps repeat; no training block is an evaluation block."""
    from anatomy_kit.card.heal import heal_blocks

    text = card_text(tok, corpus, block_size=32, n_eval=4, n_calibration=2)
    blocks, what = heal_blocks(tok, text, steps=3, batch_size=2)
    assert blocks.shape == (6, 32) and "each step a fresh batch" in what and "6 blocks" in what
    evals = {tuple(b.tolist()) for b in text.eval_blocks}
    assert not evals & {tuple(b.tolist()) for b in blocks}
    assert heal_blocks(tok, text, steps=1, batch_size=1)[0].shape[0] == 2              # never fewer than the card's
    have = text.available_calibration
    many, said = heal_blocks(tok, text, steps=have, batch_size=2)                      # asks for 2 × what exists
    assert many.shape[0] == have and f"repeated after {have // 2} steps" in said
