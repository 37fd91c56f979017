import pytest
import torch

from anatomy_kit import data
from anatomy_kit.manifest import corpus_entries
from anatomy_kit.validate import AnatomyKitError


def test_python_docs_matches_manifest_checksum():
    entry = corpus_entries()["python-docs"]
    corpus = data.load_corpus("python-docs")
    assert len(corpus) == 79
    assert data.corpus_sha256(list(corpus["text"])) == entry["sha256"]


def test_blocks_are_deterministic_and_split_by_document(tokenizer):
    a = data.token_blocks(tokenizer, "python-docs", block_size=32, n_train=20, n_eval=5)
    b = data.token_blocks(tokenizer, "python-docs", block_size=32, n_train=20, n_eval=5)
    assert torch.equal(a.train, b.train) and torch.equal(a.eval, b.eval)
    assert a.train.shape == (20, 32) and a.eval.shape == (5, 32) and a.train.dtype == torch.long
    ids = data.load_corpus("python-docs")["id"]
    eval_docs = [i for i in ids if data.is_eval_document(i, 15)]
    assert 0 < len(eval_docs) < len(ids) / 2


def test_too_short_corpus_says_how_many_tokens_exist(tokenizer):
    with pytest.raises(AnatomyKitError, match=r"too short: its eval split has [\d,]+ tokens = \d+ blocks of 64"):
        data.token_blocks(tokenizer, "python-docs", block_size=64, n_train=0, n_eval=10**6)


def test_unknown_corpus():
    with pytest.raises(AnatomyKitError, match="corpus='tinystories' is not accepted.*python-docs"):
        data.load_corpus("tinystories")


def test_bad_block_size(tokenizer):
    with pytest.raises(AnatomyKitError, match="block_size=1 must be >= 2"):
        data.token_blocks(tokenizer, "python-docs", block_size=1, n_train=1, n_eval=1)
