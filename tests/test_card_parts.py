"""The report card's parts one by one: causal edits against chapter 1's ablation map, agreement and its
chance, widths from chapter 5's solver, mergekit slices, corpus files."""

from math import comb

import numpy as np
import pytest
import torch

from anatomy_kit import anatomy
from anatomy_kit.card.agreement import disagreement_flags, flagging_set, prunable_set, rank_agreement, top_k_overlaps
from anatomy_kit.card.causal import causal_rows
from anatomy_kit.card.exports import kept_slices, mergekit_yaml
from anatomy_kit.card.text import corpus_kind, read_documents
from anatomy_kit.card.widths import suggest_widths, today_widths, width_multiple
from anatomy_kit.hf import evaluation
from anatomy_kit.stats import overlap_chance, spearman

from conftest import tiny_llama


def test_causal_edits_equal_chapter_1s_ablations_on_a_llama(one_torch_thread):
    """skip, neighbour-mean, mlp and attention drops are chapter 1's skip, neighbour-mean, zero-mlp and
    zero-attn on a Llama layer (no bias): the same computation in the same order, so equal exactly."""
    model = tiny_llama()
    blocks = torch.randint(3, 500, (4, 24), generator=torch.Generator().manual_seed(0))
    batches = evaluation.make_batches(blocks, 2)
    rows = [causal_rows(model, evaluation.capture_prefix(model, [b])) for b in batches]
    names = {"skip": "skip", "neighbour-mean": "neighbour-mean", "mlp": "zero-mlp", "attention": "zero-attn"}
    for kind, strategy in names.items():
        ours = np.concatenate([np.asarray(r[kind]) for r in rows], axis=1)           # (L, blocks)
        amap = anatomy.ablation_map(model, batches, strategy=strategy, progress=False)
        np.testing.assert_array_equal(ours, amap.block_nll, err_msg=kind)


def test_overlap_chance_is_the_hypergeometric_tail():
    for n, a, b in ((30, 6, 6), (10, 3, 4), (5, 5, 2)):
        for shared in range(0, min(a, b) + 1):
            direct = sum(comb(a, j) * comb(n - a, b - j) for j in range(shared, min(a, b) + 1)) / comb(n, b)
            assert overlap_chance(shared, n, a, b) == pytest.approx(direct, rel=1e-12)
    with pytest.raises(ValueError, match="shared"):
        overlap_chance(4, 10, 3, 3)


def test_agreement_pairs_overlaps_and_flags():
    signals = {"a": np.array([5.0, 1, 4, 2, 3, 6, 7]), "b": np.array([6.0, 2, 5, 1, 4, 7, 3]),
               "c": np.array([1.0, 7, 2, 6, 5, 3, 4])}
    assert prunable_set(signals["a"], 2) == {1, 3}
    rho = {(r["a"], r["b"]): r for r in rank_agreement(signals)}
    assert rho[("a", "b")]["rho"] == pytest.approx(spearman(signals["a"], signals["b"]).rho)
    assert rho[("a", "b")]["method"] == "exact" and len(rho) == 3
    overlap = {(o["a"], o["b"]): o for o in top_k_overlaps(signals, 2)}
    assert overlap[("a", "b")]["shared"] == [1, 3] and overlap[("a", "b")]["chance_p"] == pytest.approx(1 / comb(7, 2))



def test_a_layer_a_signal_ranks_middling_is_flagged_when_skipping_it_is_harmful():
    """The flag (harm threshold 20 %): 7 layers, prunable half = the 4 lowest, K = 2.

    Signal a ranks (lowest first) 1, 3, 4, 2, 0, 5, 6; its proposed sets are {1, 3}, its half {1, 3, 4, 2}.
    Skip intervals' lower ends: layer 2 (a's 4th lowest: in the half, not in a set) clears 20; layer 4
    touches it (not wholly above); layer 1 straddles it; layer 0 clears it but a ranks it 5th."""
    a = np.array([5.0, 1, 4, 2, 3, 6, 7])
    lows = [25.0, 10.0, 30.0, -5.0, 20.0, 50.0, 21.0]
    skip = [{"delta_pct": lo + 10, "low": lo} for lo in lows]
    flags = disagreement_flags({"a": a}, skip, 2, harm_pct=20.0)
    assert [l for l, f in enumerate(flags) if f] == [2]               # the middling-ranked, harmful layer
    assert disagreement_flags({"a": a}, skip, 2, harm_pct=9.0)[1] == ["a"]     # lower threshold: 1 clears it
    assert disagreement_flags({"a": a}, skip, 2, harm_pct=19.999)[4] == ["a"]  # just below: 4 clears it
    c = np.array([1.0, 7, 2, 6, 5, 3, 4])                                # c's half: 0, 2, 5, 6
    flags = disagreement_flags({"a": a, "c": c}, skip, 2, harm_pct=20.0)
    assert flags[0] == ["c"] and flags[2] == ["a", "c"] and flags[5] == ["c"] and flags[6] == ["c"]
    assert flagging_set(np.arange(8.0), 5) == set(range(5))             # K above the half: K wins


def test_widths_meet_the_budget_within_their_bounds():
    model = tiny_llama()
    today, params = today_widths(model)
    assert today == [64] * 6 and params == [3 * 32 * 64] * 6 and width_multiple(today) == 16
    work = np.array([1.0, 2, 3, 4, 5, 6])
    w = suggest_widths(work, today, params, 0.75)
    assert sum(w.suggested) == 0.75 * sum(today) and all(x % 16 == 0 and 16 <= x <= 128 for x in w.suggested)
    assert w.suggested == sorted(w.suggested) and w.suggested[0] < w.suggested[-1]     # more work, more width
    assert w.params_suggested == 0.75 * w.params_today


def test_mergekit_slices_are_half_open_and_keep_every_other_layer():
    assert kept_slices(10, [3, 4, 9]) == [(0, 3), (5, 9)]
    assert kept_slices(4, [0]) == [(1, 4)]
    import yaml

    text = mergekit_yaml("owner/model@abc", 6, [2], friendly="my model")
    doc = yaml.safe_load(text)
    assert [s["sources"][0]["layer_range"] for s in doc["slices"]] == [[0, 2], [3, 6]]
    assert doc["merge_method"] == "passthrough" and doc["slices"][0]["sources"][0]["model"] == "owner/model@abc"
    assert "# anatomy_kit layer card: my model without layers [2]" in text
    assert "the first slice [0, 2] keeps layers 0..1\n" in text                 # the file's own first slice
    assert "the first slice [1, 6] keeps layers 1..5\n" in mergekit_yaml("m", 6, [0])


def mergekit_resolves(model: str) -> bool:
    """mergekit's reading of a ``model:`` (``ModelReference.parse``): ``path@revision`` split at the last
    ``@``; an existing folder is loaded from disk if it holds config.json, anything else goes to the hub
    as an ``owner/name`` id. A relative folder only resolves from the directory it was typed in."""
    import re
    from pathlib import Path

    path = model.rsplit("@", 1)[0] if "@" in model and not Path(model).exists() else model
    if Path(path).is_dir():
        return Path(path).is_absolute() and (Path(path) / "config.json").is_file()
    return re.fullmatch(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*", path) is not None


def test_the_mergekit_model_is_what_mergekit_can_load(saved_tiny_model, tmp_path, monkeypatch):
    from anatomy_kit.card.exports import mergekit_model
    from anatomy_kit.hf.models import convert_embedded

    monkeypatch.chdir(saved_tiny_model.parent)
    local = mergekit_model({"name": f"./{saved_tiny_model.name}", "source": "local"})
    assert local == str(saved_tiny_model.resolve()) and mergekit_resolves(local)
    monkeypatch.chdir(tmp_path)                                   # from another directory it still loads
    assert mergekit_resolves(local) and not mergekit_resolves(f"./{saved_tiny_model.name}")
    assert mergekit_model({"name": "embedded", "source": "embedded"}) == str(convert_embedded().resolve())
    assert mergekit_resolves(mergekit_model({"name": "embedded", "source": "embedded"}))
    hub = {"name": "HuggingFaceTB/SmolLM2-135M", "source": "hub", "revision": "93efa2f"}
    assert mergekit_model(hub) == "HuggingFaceTB/SmolLM2-135M@93efa2f" and mergekit_resolves(mergekit_model(hub))
    assert not mergekit_resolves("embedded")                      # what the first card wrote
    assert mergekit_model({"name": "object", "source": "object", "location": None}) is None


def test_corpus_files_and_names(tmp_path):
    jsonl = tmp_path / "c.jsonl"
    jsonl.write_text('{"text": "one two", "id": "x"}\n\n{"text": "three"}\n')
    assert corpus_kind(str(jsonl)) == "file" and corpus_kind("python-docs") == "manifest"
    assert corpus_kind("owner/name:config") == "datasets"
    kind, ids, texts, digest = read_documents(str(jsonl), 10)
    assert ids == ["x", "c.jsonl:3"] and texts == ["one two", "three"] and len(digest) == 64
    (tmp_path / "bad.jsonl").write_text('{"txt": 1}\n')
    with pytest.raises(ValueError, match='line 1 has no string field "text"'):
        read_documents(str(tmp_path / "bad.jsonl"), 10)
    txt = tmp_path / "c.txt"
    txt.write_text("first doc\nstill first\n\n\nsecond doc\n")
    assert read_documents(str(txt), 10)[2] == ["first doc\nstill first", "second doc"]
    with pytest.raises(ValueError, match="not accepted"):
        corpus_kind("no such thing")


def test_an_anti_layer_needs_its_whole_interval_below_zero():
    """Per-block NLL changes (nats per token, 4 blocks of 10 tokens): all −0.1 (wholly below 0), mixed with a
    negative mean but an interval straddling 0, and all +0.1. The t interval is recomputed here."""
    from scipy import stats

    from anatomy_kit.card.causal import causal_summary

    base = np.array([30.0, 31.0, 29.0, 30.5])
    n = np.full(4, 10.0)
    changes = {"below": np.full(4, -0.1), "straddles": np.array([-0.3, 0.2, -0.25, 0.15]), "above": np.full(4, 0.1)}
    rows = np.stack([base + 10 * d for d in changes.values()])
    out = dict(zip(changes, causal_summary(base, rows, n, 0.95)))
    d = changes["straddles"]
    half = stats.t.ppf(0.975, 3) * d.std(ddof=1) / 2
    assert d.mean() < 0 < d.mean() + half                                     # the interval straddles 0
    assert out["straddles"]["low"] < 0 < out["straddles"]["high"] and not out["straddles"]["anti_layer"]
    assert out["below"]["anti_layer"] and out["below"]["high"] == pytest.approx(100 * np.expm1(-0.1))
    assert not out["above"]["anti_layer"]


def test_a_pruned_cards_layers_sit_at_their_original_depth():
    """A child cut from a 6-layer parent (layers 1 and 3 dropped) keeps layers 0, 2, 4, 5 of it."""
    from anatomy_kit.card.compare import layer_positions

    child = {"model": {"n_layers": 4, "pruned": {"dropped_layers": [1, 3], "source_layers": 6}}}
    assert layer_positions(child) == ([0, 2, 4, 5], 6)
    assert layer_positions({"model": {"n_layers": 6}}) == (list(range(6)), 6)
    with pytest.raises(ValueError, match="do not match its pruning record"):
        layer_positions({"model": {"n_layers": 5, "pruned": {"dropped_layers": [1, 3], "source_layers": 6}}})
