"""Token files: a corpus tokenised once into flat token arrays on disk (chapter 5 at full scale).

Training at the papers' scale reads billions of tokens; tokenising them again for every run, or
holding them in memory as int64 blocks, does not scale. A *token file* is a folder with

- ``train.bin`` and ``eval.bin``: every document's token ids followed by the EOS id, one document
  after another, as raw ``uint16`` (when every id fits: vocabularies up to 65,536, GPT-2's 50,257
  included) or ``uint32`` — the flat layout nanoGPT made common;
- ``manifest.json``: the corpus, the tokenizer (name, vocabulary size, EOS id), the dtype, the
  document and token counts of each split, the sha256 of each file and the kit version. It is
  written last, so a folder with a manifest is complete.

Documents go to train or eval by the same stable hash of their id as
:func:`anatomy_kit.data.blocks.is_eval_document`, so a token file and :func:`token_blocks` split
a corpus the same way. :func:`build_token_file` tokenises :class:`~anatomy_kit.data.corpora.Documents`
(or a ``datasets.Dataset``) batch by batch, in worker processes with ``num_proc``, or a stream of
rows (a streamed hub corpus, ``datasets.IterableDataset``) up to a token budget;
:func:`stream_token_file` streams a named hub corpus.

:func:`open_token_file` checks the files against the manifest (size and sha256) and returns a
:class:`TokenFile`; :meth:`TokenFile.windows` is a read-only ``(N, T+1)`` view of a split (a
``numpy.memmap`` seen through ``as_strided``: window ``k`` holds tokens ``k·T … k·T+T``, so
consecutive windows share one token and none crosses the end). :func:`anatomy_kit.lm.train`
takes such a view directly and reads only the rows of each batch.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np

from ..jsonio import read_json, require_fields, write_json
from ..validate import AnatomyKitError, check_choice, check_int
from .blocks import is_eval_document
from .corpora import as_documents
from ..checksums import sha256_of

__all__ = ["TOKEN_FILE_FORMAT", "SPLITS", "TokenFile", "token_dtype", "build_token_file", "stream_token_file",
           "open_token_file", "write_token_file", "iter_documents"]

TOKEN_FILE_FORMAT = "anatomy_kit.tokenfile/1"
SPLITS = ("train", "eval")
MANIFEST = "manifest.json"
_FIELDS = ("format", "corpus", "tokenizer", "dtype", "eval_percent", "documents", "tokens", "files", "sha256",
           "kit_version")


def token_dtype(vocab_size: int) -> np.dtype:
    """``uint16`` when every id ``< vocab_size`` fits (vocab ≤ 65,536), else ``uint32``."""
    check_int("vocab_size", vocab_size, minimum=2)
    if vocab_size > 2**32:
        raise AnatomyKitError(f"vocab_size={vocab_size} does not fit uint32 token files")
    return np.dtype(np.uint16) if vocab_size <= 2**16 else np.dtype(np.uint32)


@dataclass
class TokenFile:
    """An opened token file: its folder and manifest; the splits as memmaps or window views."""

    folder: Path
    manifest: dict

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.manifest["dtype"])

    @property
    def vocab_size(self) -> int:
        return int(self.manifest["tokenizer"]["vocab_size"])

    def n_tokens(self, split: str) -> int:
        check_choice("split", split, SPLITS)
        return int(self.manifest["tokens"][split])

    def tokens(self, split: str) -> np.ndarray:
        """The split's flat token array ``(n_tokens,)``, memory-mapped read-only (nothing is loaded)."""
        n = self.n_tokens(split)
        if n == 0:
            return np.zeros(0, dtype=self.dtype)
        return np.memmap(self.folder / self.manifest["files"][split], dtype=self.dtype, mode="r", shape=(n,))

    def n_windows(self, split: str, block_size: int) -> int:
        """How many ``block_size + 1``-token windows (starting at multiples of ``block_size``) the split holds."""
        check_int("block_size", block_size, minimum=1)
        return max(0, (self.n_tokens(split) - 1) // block_size)

    def windows(self, split: str, block_size: int, n: int | None = None) -> np.ndarray:
        """Read-only view ``(N, block_size + 1)`` of the split: row ``k`` is tokens ``k·T … k·T + T``.

        Inputs are ``row[:-1]`` and targets ``row[1:]`` (what :func:`anatomy_kit.lm.train` expects);
        the last token of a row is the first of the next. ``n`` takes the first ``n`` windows (an
        error if the split has fewer). No token is copied.
        """
        have = self.n_windows(split, block_size)
        want = have if n is None else check_int("n", n, minimum=1)
        if want > have or have == 0:
            raise AnatomyKitError(f"the {split} split of {self.folder} holds {self.n_tokens(split):,} tokens = {have} "
                                  f"windows of {block_size}+1, but {want or 1} were requested")
        flat = self.tokens(split)
        view = np.lib.stride_tricks.as_strided(flat, shape=(want, block_size + 1),
                                               strides=(block_size * flat.itemsize, flat.itemsize), writeable=False)
        return view

    def describe(self) -> str:
        m = self.manifest
        return (f"token file {self.folder.name}: corpus {m['corpus']!r}, tokenizer {m['tokenizer']['name']!r} "
                f"(vocab {self.vocab_size:,}, {m['dtype']}); {m['tokens']['train']:,} train + "
                f"{m['tokens']['eval']:,} eval tokens from {m['documents']['train']:,} + {m['documents']['eval']:,} "
                "documents")


class _SplitWriter:
    """Appends token arrays to ``<split>.bin.partial`` files, counting and hashing as it goes."""

    def __init__(self, folder: Path, dtype: np.dtype):
        self.folder, self.dtype = folder, dtype
        self.limit = int(np.iinfo(dtype).max)
        self.files = {s: open(folder / f"{s}.bin.partial", "wb") for s in SPLITS}
        self.hash = {s: hashlib.sha256() for s in SPLITS}
        self.tokens = dict.fromkeys(SPLITS, 0)
        self.documents = dict.fromkeys(SPLITS, 0)

    def add(self, split: str, ids: Any) -> None:
        arr = np.asarray(ids, dtype=np.int64)
        if arr.size and (arr.min() < 0 or arr.max() > self.limit):
            raise AnatomyKitError(f"token id {int(arr.max())} does not fit the token file's {self.dtype} "
                                  "(the tokenizer's vocabulary is larger than it says)")
        data = arr.astype(self.dtype).tobytes()
        self.files[split].write(data)
        self.hash[split].update(data)
        self.tokens[split] += int(arr.size)
        self.documents[split] += 1

    def finish(self) -> dict[str, str]:
        for s in SPLITS:
            self.files[s].close()
            os.replace(self.folder / f"{s}.bin.partial", self.folder / f"{s}.bin")
        return {s: self.hash[s].hexdigest() for s in SPLITS}


def write_token_file(folder: str | os.PathLike, documents: Iterable[tuple[str, Any]], *, corpus: str,
                     tokenizer_name: str, vocab_size: int, eos_token_id: int, eval_percent: int = 15,
                     max_tokens: int | None = None) -> "TokenFile":
    """Write ``(split, token ids with the EOS appended)`` pairs into a token file at ``folder``.

    The low-level writer under :func:`build_token_file`; ``max_tokens`` stops after the document
    that brings the train split to that many tokens. Returns the opened file.
    """
    from .. import __version__

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MANIFEST).unlink(missing_ok=True)          # no manifest = not complete
    dtype = token_dtype(vocab_size)
    writer = _SplitWriter(folder, dtype)
    try:
        for split, ids in documents:
            writer.add(split, ids)
            if max_tokens is not None and writer.tokens["train"] >= max_tokens:
                break
    except BaseException:
        for f in writer.files.values():
            f.close()
        raise
    digests = writer.finish()
    manifest = {"format": TOKEN_FILE_FORMAT, "corpus": corpus,
                "tokenizer": {"name": tokenizer_name, "vocab_size": int(vocab_size), "eos_token_id": int(eos_token_id)},
                "dtype": dtype.name, "eval_percent": int(eval_percent), "documents": writer.documents,
                "tokens": writer.tokens, "files": {s: f"{s}.bin" for s in SPLITS}, "sha256": digests,
                "kit_version": __version__, "max_tokens": max_tokens}
    write_json(folder / MANIFEST, manifest)
    return TokenFile(folder=folder, manifest=manifest)


def _tokenise_batch(batch: dict, tokenizer, eos: int, eval_percent: int) -> dict:
    """Ids (with EOS appended) and split of each document of a batch ``{"id": [...], "text": [...]}``."""
    ids = tokenizer(list(batch["text"]), add_special_tokens=False)["input_ids"]
    return {"ids": [x + [eos] for x in ids],
            "split": ["eval" if is_eval_document(str(i), eval_percent) else "train" for i in batch["id"]]}


def _is_stream(corpus) -> bool:
    """A stream of rows (an iterable without a length: a ``datasets.IterableDataset``, a generator), not a table."""
    return isinstance(corpus, Iterable) and not isinstance(corpus, Mapping) and not hasattr(corpus, "__len__")


def _batches(corpus, batch_size: int) -> Iterator[dict]:
    """``{"id": [...], "text": [...]}`` batches of ``batch_size`` documents, in corpus order: slices of a
    table (:func:`~anatomy_kit.data.corpora.as_documents`), or rows of a stream gathered as they come."""
    if not _is_stream(corpus):
        docs = as_documents(corpus)
        for start in range(0, len(docs), batch_size):
            yield {"id": docs.ids[start:start + batch_size], "text": docs.texts[start:start + batch_size]}
        return
    batch: dict[str, list] = {"id": [], "text": []}
    for row in corpus:
        batch["id"].append(row["id"])
        batch["text"].append(row["text"])
        if len(batch["id"]) == batch_size:
            yield batch
            batch = {"id": [], "text": []}
    if batch["id"]:
        yield batch


def _tokenised(corpus, batch_size: int, num_proc: int | None, **kwargs) -> Iterator[tuple[str, list[int]]]:
    """``(split, ids)`` of every document in corpus order. ``num_proc`` > 1 tokenises a table's batches in
    worker processes (a stream is read in this process, so that a token budget stops it early)."""
    batches = _batches(corpus, batch_size)
    if num_proc is not None and num_proc > 1 and not _is_stream(corpus):
        from concurrent.futures import ProcessPoolExecutor
        from functools import partial

        with ProcessPoolExecutor(max_workers=num_proc) as pool:         # map keeps the batches' order
            for out in pool.map(partial(_tokenise_batch, **kwargs), batches):
                yield from zip(out["split"], out["ids"])
        return
    for batch in batches:
        out = _tokenise_batch(batch, **kwargs)
        yield from zip(out["split"], out["ids"])


def _tokenizer_facts(tokenizer, tokenizer_name: str | None) -> tuple[str, int, int]:
    eos = tokenizer.eos_token_id
    if eos is None:
        raise AnatomyKitError("the tokenizer has no eos_token_id to separate documents")
    name = tokenizer_name or getattr(tokenizer, "name_or_path", None) or type(tokenizer).__name__
    return str(name), int(len(tokenizer)), int(eos)


def build_token_file(corpus: Any, tokenizer, folder: str | os.PathLike, *, corpus_name: str | None = None,
                     tokenizer_name: str | None = None, eval_percent: int = 15, num_proc: int | None = None,
                     batch_size: int = 1000, max_tokens: int | None = None) -> TokenFile:
    """Tokenise ``corpus`` once into a token file at ``folder`` and return it opened (chapter 5).

    ``corpus``: :class:`~anatomy_kit.data.corpora.Documents` (:func:`anatomy_kit.data.load_corpus` makes
    one), any table with ``id`` and ``text`` columns (a ``datasets.Dataset``), a stream of ``{"id", "text"}``
    rows (a ``datasets.IterableDataset``: a streamed hub corpus), or a corpus name. Documents are tokenised
    ``batch_size`` at a time, in ``num_proc`` worker processes when it is above 1 (``None``: this process;
    documents keep their order whatever the process count). ``max_tokens`` stops once the train split
    holds that many tokens. If ``folder`` already holds a complete token file of the same corpus,
    tokenizer and split, it is opened instead.
    """
    from .corpora import load_corpus

    if isinstance(corpus, str):
        corpus_name = corpus_name or corpus
        corpus = load_corpus(corpus)
    if not _is_stream(corpus):
        corpus = as_documents(corpus)                  # a table without id and text columns: refused here
    check_int("eval_percent", eval_percent, minimum=1, maximum=99)
    check_int("batch_size", batch_size, minimum=1)
    if num_proc is not None:
        check_int("num_proc", num_proc, minimum=1)
    if max_tokens is not None:
        check_int("max_tokens", max_tokens, minimum=1)
    name, vocab, eos = _tokenizer_facts(tokenizer, tokenizer_name)
    corpus_name = corpus_name or "corpus"
    existing = _reusable(folder, corpus_name, name, vocab, eval_percent, max_tokens)
    if existing is not None:
        return existing
    docs = _tokenised(corpus, batch_size, num_proc, tokenizer=tokenizer, eos=eos, eval_percent=eval_percent)
    return write_token_file(folder, docs, corpus=corpus_name, tokenizer_name=name, vocab_size=vocab,
                            eos_token_id=eos, eval_percent=eval_percent, max_tokens=max_tokens)


def _reusable(folder, corpus: str, tokenizer: str, vocab: int, eval_percent: int, max_tokens) -> TokenFile | None:
    if not (Path(folder) / MANIFEST).exists():
        return None
    tf = open_token_file(folder)
    m = tf.manifest
    same = (m["corpus"], m["tokenizer"]["name"], m["tokenizer"]["vocab_size"], m["eval_percent"], m.get("max_tokens"))
    if same != (corpus, tokenizer, vocab, eval_percent, max_tokens):
        raise AnatomyKitError(f"{folder} holds a token file of corpus {m['corpus']!r} with tokenizer "
                              f"{m['tokenizer']['name']!r} (vocab {m['tokenizer']['vocab_size']}, eval_percent "
                              f"{m['eval_percent']}, max_tokens {m.get('max_tokens')}); use another folder or delete it")
    return tf


def stream_token_file(name: str, tokenizer, folder: str | os.PathLike, *, max_tokens: int, eval_percent: int = 15,
                      tokenizer_name: str | None = None, batch_size: int = 1000) -> TokenFile:
    """Stream hub corpus ``name`` (``datasets.load_dataset(..., streaming=True)``) into a token file,
    stopping once the train split holds ``max_tokens`` tokens: for corpora too large to download whole."""
    from ..manifest import corpus_entries
    from .corpora import hub_stream

    entries = corpus_entries()
    check_choice("corpus", name, entries)
    if entries[name]["kind"] != "hub":
        raise AnatomyKitError(f"corpus {name!r} is not a hub corpus; use build_token_file for it")
    check_int("max_tokens", max_tokens, minimum=1)
    return build_token_file(hub_stream(name), tokenizer, folder, corpus_name=name, tokenizer_name=tokenizer_name,
                            eval_percent=eval_percent, batch_size=batch_size, max_tokens=max_tokens)


def open_token_file(folder: str | os.PathLike, *, verify: bool = True) -> TokenFile:
    """Open the token file at ``folder``; with ``verify`` check each file's size and sha256 against the manifest.

    A missing manifest, a missing or truncated file or a checksum mismatch is an
    :class:`AnatomyKitError` naming the file (reading a corrupted file silently would train on it).
    """
    folder = Path(folder)
    path = folder / MANIFEST
    if not path.exists():
        raise AnatomyKitError(f"{folder} holds no token file ({MANIFEST} is missing; an interrupted build leaves "
                              "none): build it with anatomy_kit.data.build_token_file")
    m = require_fields(read_json(path, what="token file manifest"), _FIELDS, path=path, what="token file manifest")
    if m["format"] != TOKEN_FILE_FORMAT:
        raise AnatomyKitError(f"{path} has format {m['format']!r}; this kit reads {TOKEN_FILE_FORMAT!r}")
    itemsize = np.dtype(m["dtype"]).itemsize
    for s in SPLITS:
        f = folder / m["files"][s]
        if not f.exists() or f.stat().st_size != int(m["tokens"][s]) * itemsize:
            raise AnatomyKitError(f"token file {f} is missing or has the wrong size (manifest: {m['tokens'][s]:,} "
                                  f"{m['dtype']} tokens); rebuild the token file")
        if verify and sha256_of(f) != m["sha256"][s]:
            raise AnatomyKitError(f"token file {f} does not match the sha256 in {path} (corrupted or changed); "
                                  "rebuild the token file")
    return TokenFile(folder=folder, manifest=m)


def iter_documents(tf: TokenFile, split: str) -> Iterator[np.ndarray]:
    """The documents of a split, each with its EOS, read back from the file (for checks; not fast)."""
    flat = tf.tokens(split)
    eos = int(tf.manifest["tokenizer"]["eos_token_id"])
    ends = np.flatnonzero(flat == eos)
    start = 0
    for e in ends:
        yield np.asarray(flat[start:e + 1])
        start = int(e) + 1
