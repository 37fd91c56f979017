"""The kit's BPE tokenizer never sees eval text (anatomy_kit.data.bpe_tokenizer; chapters 3, 5 and 6)."""

from __future__ import annotations

import pytest

from anatomy_kit import data
from anatomy_kit.validate import AnatomyKitError

TRAIN_MARK, EVAL_MARK = " plokmijn", " qzxvbwyk"


@pytest.fixture(scope="module")
def marked():
    """The Python docs with a made-up word repeated in every train document and another in every
    eval document (the split of :func:`anatomy_kit.data.token_blocks`)."""
    import datasets

    corpus = data.load_corpus("python-docs")
    ids = list(corpus["id"])
    texts = [t + (EVAL_MARK if data.is_eval_document(i, 15) else TRAIN_MARK) * 200
             for i, t in zip(ids, corpus["text"])]
    assert any(data.is_eval_document(i, 15) for i in ids) and not all(data.is_eval_document(i, 15) for i in ids)
    return datasets.Dataset.from_dict({"id": ids, "text": texts})


@pytest.fixture(scope="module")
def tokenizer(marked):
    return data.bpe_tokenizer(marked, 400)


def test_a_word_of_the_train_documents_becomes_one_token(tokenizer):
    # the positive control: a frequent train word is merged, so merges are what the next test sees
    assert len(tokenizer.tokenize(TRAIN_MARK)) == 1


def test_a_word_only_the_eval_documents_hold_is_never_merged(tokenizer):
    pieces = tokenizer.tokenize(EVAL_MARK)
    assert len(pieces) >= 5, pieces
    assert not any("zxv" in t or "vbw" in t for t in tokenizer.get_vocab())


def test_eval_text_does_not_change_the_tokenizer(marked, tokenizer):
    import datasets

    other = [("completely different eval text " * 50) if data.is_eval_document(i, 15) else t
             for i, t in zip(marked["id"], marked["text"])]
    again = data.bpe_tokenizer(datasets.Dataset.from_dict({"id": list(marked["id"]), "text": other}), 400)
    assert again.get_vocab() == tokenizer.get_vocab()
    assert tokenizer.eos_token == "<eos>" and tokenizer.convert_tokens_to_ids("<eos>") == 0


def test_bad_requests():
    import datasets

    with pytest.raises(AnatomyKitError, match="vocab_size"):
        data.bpe_tokenizer(datasets.Dataset.from_dict({"id": ["a"], "text": ["x"]}), 100)
    only_eval = [i for i in (f"doc{k}" for k in range(200)) if data.is_eval_document(i, 15)][:3]
    with pytest.raises(AnatomyKitError, match="no train documents"):
        data.bpe_tokenizer(datasets.Dataset.from_dict({"id": only_eval, "text": ["x y"] * 3}), 300)
