"""Token files: round trip, windows, checksums, dtype choice, streaming budget, and reading without loading."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch

from anatomy_kit import data
from anatomy_kit.data import tokenfile
from anatomy_kit.validate import AnatomyKitError


@pytest.fixture(scope="module")
def docs():
    return data.load_corpus("python-docs", max_documents=30)


def _expected(docs, tokenizer, split, eval_percent=15):
    out = []
    for i, text in zip(docs["id"], docs["text"]):
        if data.is_eval_document(str(i), eval_percent) == (split == "eval"):
            out.append(tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id])
    return out


def test_round_trip_keeps_every_document_in_order_and_splits_like_token_blocks(docs, tokenizer, tmp_path):
    tf = data.build_token_file(docs, tokenizer, tmp_path / "one", corpus_name="python-docs", tokenizer_name="tiny")
    for split in tokenfile.SPLITS:
        got = [d.tolist() for d in tokenfile.iter_documents(tf, split)]
        assert got == _expected(docs, tokenizer, split)
        assert tf.manifest["documents"][split] == len(got)
        assert tf.n_tokens(split) == sum(map(len, got))
    assert tf.dtype == np.uint16 and tf.manifest["tokenizer"] == {"name": "tiny", "vocab_size": len(tokenizer),
                                                                  "eos_token_id": tokenizer.eos_token_id}
    # the train/eval split is token_blocks' split: the same flat stream, cut the same way
    blocks = data.token_blocks(tokenizer, docs, block_size=33, n_train=4, n_eval=1)
    assert np.array_equal(np.asarray(tf.tokens("train"))[:4 * 33].reshape(4, 33), blocks.train.numpy())
    # tokenising in worker processes gives byte-identical files
    par = data.build_token_file(docs, tokenizer, tmp_path / "two", corpus_name="python-docs", tokenizer_name="tiny",
                                num_proc=2, batch_size=7)
    assert par.manifest["sha256"] == tf.manifest["sha256"]


def test_windows_start_at_multiples_of_t_and_never_cross_the_end(tmp_path):
    for n_tokens, T in [(1, 4), (2, 1), (9, 4), (10, 3), (101, 10), (4097, 64)]:
        ids = np.arange(n_tokens) % 1000
        tf = data.write_token_file(tmp_path / f"w{n_tokens}-{T}", [("train", ids), ("eval", ids[:5])],
                                   corpus="count", tokenizer_name="ids", vocab_size=1000, eos_token_id=0)
        n = tf.n_windows("train", T)
        assert n == (n_tokens - 1) // T
        if n == 0:
            with pytest.raises(AnatomyKitError, match="windows of"):
                tf.windows("train", T)
            continue
        w = tf.windows("train", T)
        assert w.shape == (n, T + 1) and not w.flags.writeable
        for k in range(n):
            assert np.array_equal(w[k], ids[k * T:k * T + T + 1])
        assert (n - 1) * T + T <= n_tokens - 1          # the last window ends inside the file
        with pytest.raises(AnatomyKitError, match=f"{n + 1} were requested"):
            tf.windows("train", T, n=n + 1)


def test_checksum_is_recorded_and_a_corrupted_file_is_refused(tmp_path):
    ids = np.arange(5000) % 300
    tf = data.write_token_file(tmp_path / "tf", [("train", ids), ("eval", ids[:100])], corpus="count",
                               tokenizer_name="ids", vocab_size=300, eos_token_id=0)
    for split in tokenfile.SPLITS:
        raw = (tmp_path / "tf" / f"{split}.bin").read_bytes()
        assert tf.manifest["sha256"][split] == hashlib.sha256(raw).hexdigest()
    data.open_token_file(tmp_path / "tf")                    # intact: opens
    path = tmp_path / "tf" / "train.bin"
    raw = bytearray(path.read_bytes())
    raw[1234] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(AnatomyKitError, match="train.bin does not match the sha256"):
        data.open_token_file(tmp_path / "tf")
    path.write_bytes(bytes(raw[:-2]))
    with pytest.raises(AnatomyKitError, match="train.bin is missing or has the wrong size"):
        data.open_token_file(tmp_path / "tf", verify=False)
    (tmp_path / "tf" / "manifest.json").unlink()
    with pytest.raises(AnatomyKitError, match="holds no token file"):
        data.open_token_file(tmp_path / "tf")


def test_uint16_when_the_vocabulary_fits_else_uint32(tmp_path):
    assert tokenfile.token_dtype(50257) == np.uint16 and tokenfile.token_dtype(65536) == np.uint16
    assert tokenfile.token_dtype(65537) == np.uint32 and tokenfile.token_dtype(128256) == np.uint32
    big = np.array([0, 65535, 65536, 128255])
    tf = data.write_token_file(tmp_path / "big", [("train", big), ("eval", big)], corpus="ids", tokenizer_name="llama3",
                               vocab_size=128256, eos_token_id=0)
    assert tf.dtype == np.uint32 and (tmp_path / "big" / "train.bin").stat().st_size == 16
    assert np.asarray(tf.tokens("train")).tolist() == big.tolist()
    with pytest.raises(AnatomyKitError, match="does not fit the token file's uint16"):
        data.write_token_file(tmp_path / "bad", [("train", big)], corpus="ids", tokenizer_name="small",
                              vocab_size=50000, eos_token_id=0)


def test_a_streamed_corpus_stops_at_the_token_budget(docs, tokenizer, tmp_path):
    import datasets                                         # a hub corpus streams as an IterableDataset

    stream = datasets.Dataset.from_dict({"id": docs["id"], "text": docs["text"]}).to_iterable_dataset()
    tf = data.build_token_file(stream, tokenizer, tmp_path / "s", corpus_name="python-docs", tokenizer_name="tiny",
                               max_tokens=3000, batch_size=4)
    train_docs = _expected(docs, tokenizer, "train")
    lengths = np.cumsum([len(d) for d in train_docs])
    stop = int(np.searchsorted(lengths, 3000)) + 1          # documents up to the one that crosses the budget
    assert tf.manifest["documents"]["train"] == stop and tf.n_tokens("train") == lengths[stop - 1] >= 3000
    assert [d.tolist() for d in tokenfile.iter_documents(tf, "train")] == train_docs[:stop]
    assert tf.manifest["max_tokens"] == 3000


def test_an_existing_file_is_reused_and_a_foreign_one_refused(docs, tokenizer, tmp_path):
    first = data.build_token_file(docs, tokenizer, tmp_path / "r", corpus_name="python-docs", tokenizer_name="tiny")
    stamp = (tmp_path / "r" / "train.bin").stat().st_mtime_ns
    again = data.build_token_file(docs, tokenizer, tmp_path / "r", corpus_name="python-docs", tokenizer_name="tiny")
    assert again.manifest == first.manifest and (tmp_path / "r" / "train.bin").stat().st_mtime_ns == stamp
    with pytest.raises(AnatomyKitError, match="holds a token file of corpus 'python-docs' with tokenizer 'tiny'"):
        data.build_token_file(docs, tokenizer, tmp_path / "r", corpus_name="python-docs", tokenizer_name="other")


def _rss_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(field)


def test_training_reads_windows_without_loading_the_file(tmp_path, one_torch_thread):
    """Train on a token file whose int64 copy would take 192 MB: peak memory grows by far less than that."""
    from anatomy_kit.lm import LMConfig, TrainConfig, build_lm, train

    n_tokens = 24_000_000                                   # 48 MB on disk as uint16
    chunks = (("train", (np.arange(i, i + 1_000_000) % 97)) for i in range(0, n_tokens, 1_000_000))
    tf = data.write_token_file(tmp_path / "big", chunks, corpus="count", tokenizer_name="ids", vocab_size=97,
                               eos_token_id=0)
    data.write_token_file(tmp_path / "ev", [("eval", np.arange(2000) % 97)], corpus="count", tokenizer_name="ids",
                          vocab_size=97, eos_token_id=0)
    view = tf.windows("train", 32)
    ev = data.open_token_file(tmp_path / "ev").windows("eval", 32)
    cfg = LMConfig(vocab_size=97, n_layers=1, d_model=16, n_heads=2, ffn_widths=[32], max_seq_len=32)
    config = TrainConfig(steps=3, batch_size=4, eval_batches=1, progress=False)
    train(build_lm(cfg), torch.as_tensor(ev[:8].astype(np.int64)), ev, config)   # warm up allocations
    with open("/proc/self/clear_refs", "w") as f:            # reset the peak (VmHWM) to the current RSS
        f.write("5")
    before = _rss_kb("VmHWM")
    result = train(build_lm(cfg), view, ev, config)
    grown_mb = (_rss_kb("VmHWM") - before) / 1024
    assert result.completed and math_isfinite(result.final_eval_loss)
    # the scan of the file maps its 48 MB of pages; a copy as int64 would add 192 MB more
    assert grown_mb < 48 + 64, f"peak memory grew by {grown_mb:.0f} MB while training on a 48 MB token file"


def math_isfinite(x: float) -> bool:
    return bool(np.isfinite(x))
