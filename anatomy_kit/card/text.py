"""The card's text: a corpus by name, file or ``datasets`` id, cut into evaluation and calibration blocks.

``corpus`` may be

- a name in ``data_manifest/corpora.yaml`` (``python-docs`` offline; hub corpora streamed);
- a local ``.txt`` file (documents separated by blank lines) or ``.jsonl`` file (one JSON object per
  line with a ``"text"`` field and, optionally, an ``"id"``);
- a Hugging Face ``datasets`` id (``owner/name``, optionally ``owner/name:config``), streamed from its
  ``train`` split, column ``text``.

Documents are split in two halves by a stable hash of their id (:func:`anatomy_kit.data.token_blocks`
with ``eval_percent=50``): evaluation blocks from one half, calibration blocks (where greedy removal
chooses its layers) from the other, so the two never share a document. With ``split="held-out"`` (the
book's confirmatory run) the evaluation blocks come from the held-out documents
(:data:`anatomy_kit.data.HELD_OUT_BUCKETS`) and the calibration blocks from every other document. The sha256 of the token ids
of both goes into the card's provenance and cache key. Used by the book page *Your model's report card*.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from ..data import TEXT_SPLITS, corpus_sha256, token_blocks
from ..data.corpora import hub_stream, load_corpus
from ..manifest import corpus_entries
from ..validate import AnatomyKitError, check_choice
from .errors import CorpusTooShort

__all__ = ["CardText", "card_text", "corpus_kind", "read_documents"]

_DATASET_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*(:[A-Za-z0-9._-]+)?$")
_SHORT = re.compile(r"its (train|eval) split has ([0-9,]+) tokens = (\d+) blocks")
_CHARS_PER_TOKEN_MARGIN = 12     # characters streamed per token needed (≈ 4 per token, both halves, margin)


@dataclass(frozen=True)
class CardText:
    """Evaluation blocks (N, T) and calibration blocks (M, T), int64, and where they came from."""

    corpus: str
    kind: str                 # "manifest", "file" or "datasets"
    eval_blocks: torch.Tensor
    calibration_blocks: torch.Tensor
    text_sha256: str | None   # of the documents read (manifest corpora: the manifest's checksum)
    available_eval: int
    available_calibration: int
    split: str = "standard"   # which documents are evaluation text (anatomy_kit.data.TEXT_SPLITS)

    @property
    def block_size(self) -> int:
        return int(self.eval_blocks.shape[1])

    @property
    def token_sha256(self) -> str:
        """sha256 of the evaluation then the calibration token ids (int64, little-endian bytes)."""
        h = hashlib.sha256()
        for blocks in (self.eval_blocks, self.calibration_blocks):
            h.update(blocks.to(torch.int64).contiguous().numpy().astype("<i8").tobytes())
        return h.hexdigest()

    def describe(self) -> dict:
        return {"corpus": self.corpus, "kind": self.kind, "block_size": self.block_size,
                "n_eval_blocks": int(self.eval_blocks.shape[0]),
                "n_calibration_blocks": int(self.calibration_blocks.shape[0]),
                "eval_tokens": int(self.eval_blocks.numel()),
                "calibration_tokens": int(self.calibration_blocks.numel()),
                "available_eval_blocks": self.available_eval,
                "available_calibration_blocks": self.available_calibration,
                "text_sha256": self.text_sha256, "token_sha256": self.token_sha256}


def corpus_kind(corpus: str) -> str:
    """``"manifest"``, ``"file"`` or ``"datasets"`` for a corpus argument, or a named error saying what is accepted."""
    if not isinstance(corpus, str) or not corpus:
        raise AnatomyKitError(f"corpus={corpus!r} must be a non-empty string")
    if corpus in corpus_entries():
        return "manifest"
    path = Path(corpus).expanduser()
    if path.suffix in (".txt", ".jsonl"):
        if not path.is_file():
            raise AnatomyKitError(f"corpus file {corpus!r} does not exist")
        return "file"
    if _DATASET_ID.match(corpus):
        return "datasets"
    raise AnatomyKitError(f"corpus={corpus!r} is not accepted; give a corpus of data_manifest/corpora.yaml "
                          f"({', '.join(sorted(corpus_entries()))}), a local .txt or .jsonl file, "
                          "or a datasets id like 'owner/name' or 'owner/name:config'")


def _file_documents(path: Path) -> tuple[list[str], list[str]]:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".txt":
        docs = [d.strip() for d in re.split(r"\n\s*\n", text) if d.strip()]
        return [f"{path.name}:{i}" for i in range(len(docs))], docs
    ids, docs = [], []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise AnatomyKitError(f"{path.name} line {n} is not JSON ({err.msg}); a .jsonl corpus holds one "
                                  'object per line, like {"text": "..."}') from None
        if not isinstance(row, dict) or not isinstance(row.get("text"), str):
            raise AnatomyKitError(f'{path.name} line {n} has no string field "text"')
        ids.append(str(row.get("id", f"{path.name}:{n}")))
        docs.append(row["text"])
    return ids, docs


def _streamed(rows, chars_needed: int) -> tuple[list[str], list[str]]:
    ids, docs, total = [], [], 0
    for i, row in enumerate(rows):
        text = row.get("text") if isinstance(row, dict) else None
        if not isinstance(text, str) or not text.strip():
            continue
        ids.append(str(row.get("id", i)))
        docs.append(text)
        total += len(text)
        if total >= chars_needed:
            break
    return ids, docs


def read_documents(corpus: str, tokens_needed: int) -> tuple[str, list[str], list[str], str | None]:
    """``(kind, ids, texts, text sha256)`` of a corpus; streamed corpora stop once they hold enough text."""
    kind = corpus_kind(corpus)
    chars = tokens_needed * _CHARS_PER_TOKEN_MARGIN
    if kind == "manifest":
        entry = corpus_entries()[corpus]
        if entry["kind"] == "stdlib":
            ds = load_corpus(corpus)
            return kind, list(ds["id"]), list(ds["text"]), entry.get("sha256")
        ids, docs = _streamed(hub_stream(corpus), chars)
        return kind, ids, docs, corpus_sha256(docs)
    if kind == "file":
        ids, docs = _file_documents(Path(corpus).expanduser())
        return kind, ids, docs, corpus_sha256(docs)
    name, _, config = corpus.partition(":")
    try:
        import datasets

        stream = datasets.load_dataset(name, config or None, split="train", streaming=True)
        ids, docs = _streamed(stream, chars)
    except Exception as err:   # network, missing cache, no such dataset
        first = str(err).splitlines()[0] if str(err) else ""
        raise AnatomyKitError(f"corpus {corpus!r} could not be streamed with datasets ({err.__class__.__name__}: "
                              f"{first}); offline, use corpus='python-docs' or a local .txt/.jsonl file") from None
    return kind, ids, docs, corpus_sha256(docs)


def card_text(tokenizer, corpus: str, *, block_size: int, n_eval: int, n_calibration: int,
              split: str = "standard") -> CardText:
    """Evaluation and calibration blocks of ``corpus`` (module docstring); too little text is :class:`CorpusTooShort`."""
    check_choice("split", split, TEXT_SPLITS)
    kind, ids, docs, digest = read_documents(corpus, (n_eval + n_calibration) * block_size)
    if not docs:
        raise CorpusTooShort(f"corpus {corpus!r} holds no text; the card needs {(n_eval + n_calibration) * block_size:,} "
                             "tokens")
    dataset = {"id": ids, "text": docs}
    try:
        blocks = token_blocks(tokenizer, dataset, block_size=block_size, n_train=n_calibration, n_eval=n_eval,
                              eval_percent=50, name=corpus, split=split)
    except AnatomyKitError as err:
        found = _SHORT.search(str(err))
        if found is None:
            raise
        part, tokens, have = found.group(1), found.group(2), found.group(3)
        half, budget, want = (("evaluation", "tokens", n_eval) if part == "eval"
                              else ("calibration", "calibration_tokens", n_calibration))
        raise CorpusTooShort(f"corpus {corpus!r} is too short: its {half} half (the documents the card "
                             f"{'measures on' if part == 'eval' else 'chooses greedy’s layers on'}) holds {tokens} "
                             f"tokens = {have} blocks of {block_size}, but {budget}={want * block_size:,} asks for "
                             f"{want} blocks; every document goes to one half by a hash of its id, so lower "
                             "--tokens / --calibration-tokens or give a longer corpus") from None
    return CardText(corpus=corpus, kind=kind, eval_blocks=blocks.eval, calibration_blocks=blocks.train,
                    text_sha256=digest, available_eval=blocks.available_eval,
                    available_calibration=blocks.available_train, split=split)
