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


def _tagged_corpus(n_docs=40, words=30):
    """Documents whose every word names its document (``d7w3``): a token says where it came from.

    Not language, and not used as such: it lets the split be checked token by token."""
    import datasets

    ids = [f"doc-{i}" for i in range(n_docs)]
    texts = [" ".join(f"d{i}w{j}" for j in range(words)) for i in range(n_docs)]
    return datasets.Dataset.from_dict({"id": ids, "text": texts})


def _word_tokenizer(corpus):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(corpus["text"], trainers.WordLevelTrainer(special_tokens=["<unk>", "<eos>"]))
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token="<eos>")


def test_train_and_eval_blocks_hold_only_their_own_documents():
    corpus = _tagged_corpus()
    tok = _word_tokenizer(corpus)
    eval_docs = {i for i, d in enumerate(corpus["id"]) if data.is_eval_document(d, 30)}
    assert 0 < len(eval_docs) < len(corpus)
    blocks = data.token_blocks(tok, corpus, block_size=16, n_train=30, n_eval=8, eval_percent=30)

    def docs_of(x):
        words = tok.convert_ids_to_tokens(x.reshape(-1).tolist())
        return {int(w[1:].split("w")[0]) for w in words if w.startswith("d")}

    assert docs_of(blocks.eval) <= eval_docs and docs_of(blocks.eval)
    assert docs_of(blocks.train).isdisjoint(eval_docs) and docs_of(blocks.train)
    # every block is consecutive text of the documents in order, joined by EOS
    train_ids = [i for i in range(len(corpus)) if i not in eval_docs]
    stream = []
    for i in train_ids:
        stream += tok(corpus["text"][i], add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    assert blocks.train.reshape(-1).tolist() == stream[: 30 * 16]


def test_bpe_tokenizer_never_sees_eval_text():
    """A word repeated only in eval documents must not become one token; the same in train must."""
    import datasets

    ids = [f"doc-{i}" for i in range(60)]
    eval_ids = [i for i in ids if data.is_eval_document(i, 15)]
    train_ids = [i for i in ids if not data.is_eval_document(i, 15)]
    text = {i: "plain words of a document. " * 5 for i in ids}
    for i in eval_ids:
        text[i] += " zqxwvkj" * 200
    for i in train_ids:
        text[i] += " ghfmbpl" * 200
    corpus = datasets.Dataset.from_dict({"id": ids, "text": [text[i] for i in ids]})
    tok = data.bpe_tokenizer(corpus, vocab_size=400)
    assert len(tok.tokenize(" ghfmbpl")) == 1
    assert len(tok.tokenize(" zqxwvkj")) > 2
