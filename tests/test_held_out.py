"""The confirmatory run's evaluation text: held-out documents no exploratory run evaluated on, recorded in the
manifest, split by the same stable hash everywhere (token blocks, the BPE tokenizer, the report card)."""

from __future__ import annotations

import hashlib

import pytest

from anatomy_kit import data
from anatomy_kit.card.settings import CardSettings
from anatomy_kit.card.text import card_text
from anatomy_kit.manifest import corpus_entries
from anatomy_kit.validate import AnatomyKitError


def _bucket(doc_id: str) -> int:
    """By hand: the first eight hex digits of the id's sha256, modulo 100."""
    return int(hashlib.sha256(doc_id.encode()).hexdigest()[:8], 16) % 100


@pytest.mark.parametrize("doc_id", ["while", "assert", "binary", "doc0", "doc17", ""])
def test_the_bucket_and_both_splits_by_hand(doc_id):
    b = _bucket(doc_id)
    assert data.document_bucket(doc_id) == b
    assert data.is_eval_document(doc_id, 15) is (b < 15)
    assert data.is_eval_document(doc_id, 50, "standard") is (b < 50)
    assert data.is_eval_document(doc_id, 15, "held-out") is (15 <= b < 30)
    assert data.is_eval_document(doc_id, 50, "held-out") is (15 <= b < 30)     # eval_percent is not used


def test_the_held_out_band_at_its_edges():
    ids = [f"doc{k}" for k in range(2000)]
    by = {b: next(i for i in ids if _bucket(i) == b) for b in (14, 15, 29, 30)}
    assert [data.is_eval_document(by[b], 15, "held-out") for b in (14, 15, 29, 30)] == [False, True, True, False]
    with pytest.raises(AnatomyKitError, match="split='final'"):
        data.is_eval_document("x", 15, "final")


def test_the_manifest_lists_the_held_out_documents_of_the_offline_corpus():
    ids, _ = data.python_docs_text()
    entry = corpus_entries()["python-docs"]["held_out"]
    assert tuple(entry["buckets"]) == data.HELD_OUT_BUCKETS == (15, 30)
    assert sorted(entry["documents"]) == sorted(i for i in ids if 15 <= _bucket(i) < 30)
    assert len(entry["documents"]) == 14


def test_no_exploratory_run_evaluated_on_a_held_out_document(tokenizer):
    ids, texts = data.python_docs_text()
    held = set(corpus_entries()["python-docs"]["held_out"]["documents"])
    chapters_eval = {i for i in ids if data.is_eval_document(i, 15)}
    assert not held & chapters_eval
    # the report card's exploratory evaluation: the first documents, in id order, of its evaluation half that
    # fill its blocks; the largest evaluation any exploratory card used was 2,048 tokens
    half = [(i, t) for i, t in zip(ids, texts) if data.is_eval_document(i, 50)]
    used, tokens = set(), 0
    from anatomy_kit.hf.models import load_model
    tok = load_model("embedded", device="cpu").tokenizer
    for i, t in half:
        used.add(i)
        tokens += len(tok(t, add_special_tokens=False)["input_ids"]) + 1
        if tokens >= 2048:
            break
    assert used == {"assert", "assignment"} and not held & used


def test_token_blocks_and_the_tokenizer_take_the_held_out_split(tokenizer):
    corpus = {"id": [f"doc{k}" for k in range(120)], "text": [f"document number {k} " * 30 for k in range(120)]}
    held = [k for k, i in enumerate(corpus["id"]) if 15 <= _bucket(i) < 30]
    blocks = data.token_blocks(tokenizer, corpus, block_size=16, n_train=1, n_eval=1, split="held-out")
    first = tokenizer(corpus["text"][held[0]], add_special_tokens=False)["input_ids"][:16]
    assert blocks.eval[0].tolist() == first                     # the first held-out document opens the eval blocks
    standard = data.token_blocks(tokenizer, corpus, block_size=16, n_train=1, n_eval=1)
    assert standard.eval[0].tolist() != first
    marked = {"id": corpus["id"], "text": [("zzqq " if k in held else "aabb ") * 50 for k in range(120)]}
    bpe = data.bpe_tokenizer(marked, 260, split="held-out")
    assert "zzqq" not in "".join(bpe.get_vocab())            # never fitted on held-out text
    assert "aabb" in "".join(bpe.get_vocab()) or any("aab" in v for v in bpe.get_vocab())


def test_the_card_reads_its_evaluation_blocks_from_the_split_it_is_given(tokenizer):
    standard = card_text(tokenizer, "python-docs", block_size=32, n_eval=2, n_calibration=2)
    held = card_text(tokenizer, "python-docs", block_size=32, n_eval=2, n_calibration=2, split="held-out")
    assert (standard.split, held.split) == ("standard", "held-out")
    assert standard.token_sha256 != held.token_sha256
    ids, texts = data.python_docs_text()
    first = next(t for i, t in zip(ids, texts) if 15 <= _bucket(i) < 30)
    assert held.eval_blocks[0].tolist() == tokenizer(first, add_special_tokens=False)["input_ids"][:32]
    with pytest.raises(AnatomyKitError, match="text_split='x'"):
        CardSettings(text_split="x").validate()
    assert CardSettings().text_split == "standard"


def test_a_runs_phase_names_its_text_split():
    from anatomy_kit.book.run import Run

    def run(phase):
        return Run("ch01_ablation_map", "smoke", "cpu", "embedded", "python-docs", 0, {}, ".", phase=phase)

    assert run("exploratory").text_split == "standard" and run("confirmatory").text_split == "held-out"
    with pytest.raises(AnatomyKitError, match="phase='later'"):
        run("later").text_split


def test_the_confirmatory_run_follows_the_frozen_plan():
    """The freeze commit declared the confirmatory seeds and text before this code existed: the held-out buckets,
    the seed offset the confirmatory phase starts from, and the book's default phase must be the plan's."""
    from anatomy_kit.book import run as RUN
    from anatomy_kit.verdicts.registry import rule_registry

    freeze = rule_registry().freeze
    assert freeze is not None, "the registry must be frozen before the confirmatory run"
    plan = freeze.plan
    assert plan["text"]["split"] == "held-out" and plan["text"]["corpus"] == "python-docs"
    assert tuple(plan["text"]["buckets"]) == data.HELD_OUT_BUCKETS
    assert RUN.phase_seed_offset("confirmatory") == plan["seed_offset"]
    assert RUN.phase_seed_offset("exploratory") == 0
    assert RUN.DEFAULT_PHASE == "confirmatory"
    # no confirmatory seed is an exploratory one: exploratory seeds are small, and chapter 3's reference model
    # draws 10_000 + seed; an offset of 20_000 or more keeps both ranges apart for any seed below 10_000
    assert plan["seed_offset"] >= 20_000
