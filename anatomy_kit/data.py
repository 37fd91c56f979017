"""Corpora through Hugging Face ``datasets``, cut into fixed-length token blocks.

Named corpora live in ``data_manifest/corpora.yaml``:

- ``python-docs`` (offline default): the topic help texts of the Python documentation that
  CPython ships in ``pydoc_data/topics.py`` (real English technical prose with code
  snippets, PSF licence), one document per topic;
- hub corpora for full scale (``fineweb-edu``, ``openwebtext``, ``wikitext-103``), streamed
  by hub id when the internet is reachable.

:func:`token_blocks` tokenises documents, joins them with the EOS token, and cuts
non-overlapping blocks. The train/eval split is by *document*, decided by a stable hash of
the document id, so no eval text is ever seen in training.

Introduced in chapter 1 (*The ablation map*).
"""

from __future__ import annotations

import hashlib
import platform
import warnings
from dataclasses import dataclass

import torch

from .manifest import corpus_entries
from .validate import AnatomyKitError, check_choice, check_int


@dataclass
class TokenBlocks:
    """Token blocks of one corpus: ``train`` (N_train, T) and ``eval`` (N_eval, T), int64."""

    corpus: str
    block_size: int
    train: torch.Tensor
    eval: torch.Tensor
    available_train: int   # blocks the train split could provide
    available_eval: int    # blocks the eval split could provide

    def describe(self) -> str:
        t = self.block_size
        return (f"{self.corpus}: {len(self.train)} train + {len(self.eval)} eval blocks of {t} tokens "
                f"({len(self.train) * t:,} + {len(self.eval) * t:,} tokens; "
                f"available {self.available_train} + {self.available_eval} blocks)")


def python_docs_text() -> tuple[list[str], list[str]]:
    """(ids, texts) of the Python documentation topics shipped with CPython, in sorted order."""
    from pydoc_data.topics import topics

    ids = sorted(topics)
    return ids, [topics[k] for k in ids]


def corpus_sha256(texts: list[str]) -> str:
    """sha256 of the documents joined by blank lines (UTF-8): the manifest's checksum."""
    h = hashlib.sha256()
    for i, t in enumerate(texts):
        h.update((("\n\n" if i else "") + t).encode("utf-8"))
    return h.hexdigest()


def load_corpus(name: str = "python-docs", *, max_documents: int | None = None):
    """Load a named corpus as a ``datasets.Dataset`` with columns ``id`` and ``text``.

    ``python-docs`` is verified against the sha256 recorded for the Python version named in
    the manifest (another Python version ships other text: a warning, not an error).
    Hub corpora stream ``max_documents`` documents (default from the manifest).
    """
    import datasets

    entries = corpus_entries()
    check_choice("corpus", name, entries)
    entry = entries[name]
    if entry["kind"] == "stdlib":
        ids, texts = python_docs_text()
        digest = corpus_sha256(texts)
        if platform.python_version() == entry["python_version"]:
            if digest != entry["sha256"]:
                raise AnatomyKitError(
                    f"corpus {name!r} text has sha256 {digest}, manifest records {entry['sha256']} "
                    f"for Python {entry['python_version']}")
        else:
            warnings.warn(f"corpus {name!r}: Python {platform.python_version()} ships other text than "
                          f"Python {entry['python_version']} (sha256 {digest})", stacklevel=2)
        if max_documents is not None:
            ids, texts = ids[:max_documents], texts[:max_documents]
        return datasets.Dataset.from_dict({"id": ids, "text": texts})
    # Hub corpus: stream by id, keep the first documents (deterministic order of the hub split).
    n = max_documents or entry["default_documents"]
    try:
        stream = datasets.load_dataset(entry["hub_id"], entry.get("config"), split=entry["split"], streaming=True)
        rows = [r for _, r in zip(range(n), stream)]
    except Exception as err:  # network, auth, or missing cache
        raise AnatomyKitError(
            f"corpus {name!r} ({entry['hub_id']}) could not be loaded: {err.__class__.__name__}: "
            f"{str(err).splitlines()[0] if str(err) else ''}; offline, use corpus='python-docs'") from err
    key = entry.get("text_field", "text")
    texts = [r[key] for r in rows if r[key].strip()]
    ids = [str(r.get("id", i)) for i, r in enumerate(rows) if r[key].strip()]
    return datasets.Dataset.from_dict({"id": ids, "text": texts})


def is_eval_document(doc_id: str, eval_percent: int) -> bool:
    """Whether a document belongs to the eval split: a stable hash of its id, ``eval_percent`` % of ids."""
    bucket = int(hashlib.sha256(doc_id.encode("utf-8")).hexdigest()[:8], 16) % 100
    return bucket < eval_percent


def _blocks(token_lists: list[list[int]], eos: int, block_size: int) -> torch.Tensor:
    flat: list[int] = []
    for ids in token_lists:
        flat.extend(ids)
        flat.append(eos)
    n = len(flat) // block_size
    return torch.tensor(flat[: n * block_size], dtype=torch.long).view(n, block_size)


def token_blocks(tokenizer, corpus, *, block_size: int, n_train: int, n_eval: int,
                 eval_percent: int = 15, name: str | None = None) -> TokenBlocks:
    """Tokenise a corpus into non-overlapping blocks and split train/eval by document.

    Parameters
    ----------
    tokenizer: a Hugging Face tokenizer (its EOS token separates documents).
    corpus: a ``datasets.Dataset`` with ``id`` and ``text`` (see :func:`load_corpus`), or a
        corpus name.
    block_size: tokens per block, T.
    n_train, n_eval: blocks requested in each split (0 allowed for train).
    eval_percent: share of documents (by stable hash of their id) that go to eval.

    Raises :class:`AnatomyKitError` if the corpus holds fewer blocks than requested, saying how
    many tokens and blocks exist.
    """
    if isinstance(corpus, str):
        name = name or corpus
        corpus = load_corpus(corpus)
    name = name or "corpus"
    check_int("block_size", block_size, minimum=2)
    check_int("n_train", n_train, minimum=0)
    check_int("n_eval", n_eval, minimum=1)
    check_int("eval_percent", eval_percent, minimum=1, maximum=99)
    eos = tokenizer.eos_token_id
    if eos is None:
        raise AnatomyKitError("the tokenizer has no eos_token_id to separate documents")
    split = {"train": [], "eval": []}
    for doc_id, text in zip(corpus["id"], corpus["text"]):
        part = "eval" if is_eval_document(str(doc_id), eval_percent) else "train"
        split[part].append(text)
    encoded = {k: tokenizer(v, add_special_tokens=False)["input_ids"] if v else [] for k, v in split.items()}
    blocks = {k: _blocks(v, eos, block_size) for k, v in encoded.items()}
    for part, want in (("train", n_train), ("eval", n_eval)):
        have = len(blocks[part])
        if want > have:
            tokens = sum(len(x) + 1 for x in encoded[part])
            raise AnatomyKitError(
                f"corpus {name!r} is too short: its {part} split has {tokens:,} tokens = {have} blocks of "
                f"{block_size}, but n_{part}={want} blocks ({want * block_size:,} tokens) were requested")
    return TokenBlocks(corpus=name, block_size=block_size, train=blocks["train"][:n_train],
                       eval=blocks["eval"][:n_eval], available_train=len(blocks["train"]),
                       available_eval=len(blocks["eval"]))
