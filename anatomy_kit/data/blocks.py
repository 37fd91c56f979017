"""Fixed-length token blocks with a train/eval split by document (chapter 1).

:func:`token_blocks` tokenises documents, joins them with the EOS token, and cuts
non-overlapping blocks. The train/eval split is by *document*, decided by a stable hash of
the document id, so no eval text is ever seen in training.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch

from ..validate import AnatomyKitError, check_int
from .corpora import load_corpus

__all__ = ["TokenBlocks", "is_eval_document", "token_blocks"]


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
