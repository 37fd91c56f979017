"""Fixed-length token blocks with a train/eval split by document (chapter 1).

:func:`token_blocks` tokenises documents, joins them with the EOS token, and cuts
non-overlapping blocks. The train/eval split is by *document*, decided by a stable hash of
the document id (its bucket, 0–99), so no eval text is ever seen in training. Two splits:

- ``"standard"``: a document is evaluation text when its bucket is below ``eval_percent`` (every
  exploratory run of the book evaluated on these: buckets 0–14 in the chapters, 0–49 in the card);
- ``"held-out"``: a document is evaluation text when its bucket lies in :data:`HELD_OUT_BUCKETS`
  (15–29), documents no exploratory run evaluated on (they were training text, or unused); everything
  else is training text. The confirmatory run (``phase="confirmatory"``) evaluates on these only; the
  registry's freeze plan declares the same buckets.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch

from ..validate import AnatomyKitError, check_choice, check_int
from .corpora import load_corpus

__all__ = ["TokenBlocks", "is_eval_document", "document_bucket", "token_blocks", "TEXT_SPLITS", "HELD_OUT_BUCKETS",
           "text_split_of"]

#: The evaluation texts: ``"standard"`` (buckets below ``eval_percent``) and ``"held-out"`` (:data:`HELD_OUT_BUCKETS`).
TEXT_SPLITS = ("standard", "held-out")
#: The hash buckets ``[first, last + 1)`` of the held-out evaluation documents (15 % of the documents).
HELD_OUT_BUCKETS = (15, 30)


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



def document_bucket(doc_id: str) -> int:
    """A document's stable bucket, 0–99: the first 32 bits of the sha256 of its id, modulo 100."""
    return int(hashlib.sha256(doc_id.encode("utf-8")).hexdigest()[:8], 16) % 100


def is_eval_document(doc_id: str, eval_percent: int, split: str = "standard") -> bool:
    """Whether a document is evaluation text: ``split="standard"``, its bucket is below ``eval_percent`` (that share of
    ids); ``"held-out"``, its bucket lies in :data:`HELD_OUT_BUCKETS` (``eval_percent`` is then not used)."""
    check_choice("split", split, TEXT_SPLITS)
    bucket = document_bucket(doc_id)
    if split == "held-out":
        return HELD_OUT_BUCKETS[0] <= bucket < HELD_OUT_BUCKETS[1]
    return bucket < eval_percent


def text_split_of(phase: str) -> str:
    """The evaluation text of a phase: ``"standard"`` for the exploratory data, ``"held-out"`` for the confirmatory."""
    return {"exploratory": "standard", "confirmatory": "held-out"}[check_choice("phase", phase,
                                                                               ("exploratory", "confirmatory"))]


def _blocks(token_lists: list[list[int]], eos: int, block_size: int) -> torch.Tensor:
    flat: list[int] = []
    for ids in token_lists:
        flat.extend(ids)
        flat.append(eos)
    n = len(flat) // block_size
    return torch.tensor(flat[: n * block_size], dtype=torch.long).view(n, block_size)


def token_blocks(tokenizer, corpus, *, block_size: int, n_train: int, n_eval: int,
                 eval_percent: int = 15, name: str | None = None, split: str = "standard") -> TokenBlocks:
    """Tokenise a corpus into non-overlapping blocks and split train/eval by document.

    Parameters
    ----------
    tokenizer: a Hugging Face tokenizer (its EOS token separates documents).
    corpus: a ``datasets.Dataset`` with ``id`` and ``text`` (see :func:`load_corpus`), or a
        corpus name.
    block_size: tokens per block, T.
    n_train, n_eval: blocks requested in each split (0 allowed for train).
    eval_percent: share of documents (by stable hash of their id) that go to eval.
    split: ``"standard"`` or ``"held-out"`` (module docstring; the confirmatory run's evaluation text).

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
    check_choice("split", split, TEXT_SPLITS)
    eos = tokenizer.eos_token_id
    if eos is None:
        raise AnatomyKitError("the tokenizer has no eos_token_id to separate documents")
    documents: dict[str, list[str]] = {"train": [], "eval": []}
    for doc_id, text in zip(corpus["id"], corpus["text"]):
        part = "eval" if is_eval_document(str(doc_id), eval_percent, split) else "train"
        documents[part].append(text)
    encoded = {k: tokenizer(v, add_special_tokens=False)["input_ids"] if v else [] for k, v in documents.items()}
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
