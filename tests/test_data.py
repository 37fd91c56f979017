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


# --- the offline corpus without `datasets`: the same documents, blocks and token files as through it ----------

@pytest.fixture(scope="module")
def through_datasets():
    """The offline corpus as the kit built it through ``datasets`` before it read it directly:
    ``datasets.Dataset.from_dict`` of the topics in sorted key order (computed here from ``pydoc_data``)."""
    import datasets
    from pydoc_data.topics import topics

    ids = sorted(topics)
    return datasets.Dataset.from_dict({"id": ids, "text": [topics[k] for k in ids]})


@pytest.fixture(scope="module")
def smollm2_tokenizer(tmp_path_factory):
    """SmolLM2's real tokenizer (committed stand-in files): the tokenizer of the GPU check's token file."""
    import standins
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(standins.smollm2_folder(tmp_path_factory.mktemp("smollm2")))


def test_the_offline_corpus_read_directly_is_the_datasets_corpus_document_for_document(through_datasets):
    docs = data.load_corpus("python-docs")
    assert isinstance(docs, data.Documents) and len(docs) == len(through_datasets) == 79
    assert docs["id"] == list(through_datasets["id"]) and docs["text"] == list(through_datasets["text"])
    few = data.load_corpus("python-docs", max_documents=10)
    assert few["id"] == list(through_datasets["id"])[:10] and few["text"] == list(through_datasets["text"])[:10]
    picked = docs.select([5, 2, 70])                                  # chapter 6's docs.select, in the order given
    assert picked == data.Documents(*(list(c) for c in zip(*[(through_datasets[i]["id"], through_datasets[i]["text"])
                                                             for i in (5, 2, 70)])))


@pytest.mark.parametrize("eval_percent", [15, 50])
def test_token_blocks_of_the_offline_corpus_are_those_of_the_datasets_corpus(through_datasets, smollm2_tokenizer,
                                                                          eval_percent):
    args = dict(block_size=64, n_train=1, n_eval=1, eval_percent=eval_percent)
    probe = data.token_blocks(smollm2_tokenizer, through_datasets, **args)      # every block each split holds
    args.update(n_train=probe.available_train, n_eval=probe.available_eval)
    old = data.token_blocks(smollm2_tokenizer, through_datasets, **args)
    new = data.token_blocks(smollm2_tokenizer, "python-docs", **args)
    assert new.available_train == old.available_train and new.available_eval == old.available_eval
    assert (old.available_train + old.available_eval) * 64 > 100_000      # the whole corpus (about 113,000 tokens)
    assert torch.equal(new.train, old.train) and torch.equal(new.eval, old.eval)


def test_the_token_file_of_the_offline_corpus_is_the_one_datasets_map_wrote(through_datasets, smollm2_tokenizer,
                                                                           tmp_path):
    """Byte for byte: the file the kit wrote with ``Dataset.map(batched=True)`` before, and the one it writes now
    (in one process and in two worker processes)."""
    from anatomy_kit.data import tokenfile

    eos = smollm2_tokenizer.eos_token_id
    mapped = through_datasets.map(tokenfile._tokenise_batch, batched=True, batch_size=1000,
                                  fn_kwargs={"tokenizer": smollm2_tokenizer, "eos": eos, "eval_percent": 15},
                                  remove_columns=through_datasets.column_names)
    old = data.write_token_file(tmp_path / "old", ((r["split"], r["ids"]) for r in mapped), corpus="python-docs",
                                tokenizer_name="smol", vocab_size=len(smollm2_tokenizer), eos_token_id=eos)
    for folder, num_proc, batch_size in (("new", None, 1000), ("parallel", 2, 7)):
        new = data.build_token_file(data.load_corpus("python-docs"), smollm2_tokenizer, tmp_path / folder,
                                    corpus_name="python-docs", tokenizer_name="smol", num_proc=num_proc,
                                    batch_size=batch_size)
        assert new.manifest["sha256"] == old.manifest["sha256"] and new.manifest["tokens"] == old.manifest["tokens"]
    assert old.manifest["tokens"]["train"] > 90_000


def test_the_offline_data_path_needs_no_datasets_and_a_hub_corpus_says_it_does(monkeypatch, tokenizer, tmp_path):
    import sys

    monkeypatch.setitem(sys.modules, "datasets", None)                 # `import datasets` now raises ImportError
    docs = data.load_corpus("python-docs", max_documents=30)
    blocks = data.token_blocks(tokenizer, docs, block_size=32, n_train=2, n_eval=1)
    tf = data.build_token_file(docs, tokenizer, tmp_path / "tf", corpus_name="python-docs", tokenizer_name="tiny")
    bpe = data.bpe_tokenizer(docs.select(range(20)), 300)
    assert blocks.train.shape == (2, 32) and tf.n_tokens("train") > 0 and len(bpe) == 300
    for call in (lambda: data.load_corpus("fineweb-edu", max_documents=3), lambda: data.hub_stream("openwebtext"),
                 lambda: data.stream_token_file("wikitext-103", tokenizer, tmp_path / "s", max_tokens=10)):
        with pytest.raises(AnatomyKitError, match=r"streams from the hub through the `datasets` package, which is "
                                                  r"not installed here: pip install datasets"):
            call()


def test_documents_refuse_what_is_not_a_corpus():
    with pytest.raises(AnatomyKitError, match="one id per text; got 2 ids and 1 texts"):
        data.Documents(["a", "b"], ["x"])
    with pytest.raises(AnatomyKitError, match=r"rows \[3\] are outside this corpus of 2 documents"):
        data.Documents(["a", "b"], ["x", "y"]).select([0, 3])
    with pytest.raises(AnatomyKitError, match="must have 'id' and 'text' columns.*got list"):
        data.build_token_file([1, 2], None, "unused")
    assert data.as_documents({"id": [1, 2], "text": ["x", "y"]}) == data.Documents(["1", "2"], ["x", "y"])


def test_the_data_package_imports_without_datasets():
    """Module level: no ``import datasets`` outside the hub functions (the lent GPU machine has none)."""
    import subprocess
    import sys

    code = ("import sys; sys.modules['datasets'] = None\n"
            "from anatomy_kit import data\n"
            "print(len(data.load_corpus('python-docs')))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.split() == ["79"], proc.stderr[-2000:]
