"""Corpora as :class:`Documents` (``id`` and ``text`` columns), each checked against ``data_manifest/corpora.yaml``.

Named corpora:

- ``python-docs`` (offline default): the topic help texts of the Python documentation that
  CPython ships in ``pydoc_data/topics.py`` (real English technical prose with code
  snippets, PSF licence), one document per topic, read directly (no package beyond Python);
- hub corpora for full scale (``fineweb-edu``, ``openwebtext``, ``wikitext-103``), streamed
  by hub id through Hugging Face ``datasets`` when the internet (or a populated Hugging Face
  cache) is reachable; without ``datasets`` they are a named error that says so.

Introduced in chapter 1 (*The ablation map*).
"""

from __future__ import annotations

import hashlib
import platform
import warnings
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from ..manifest import corpus_entries
from ..validate import AnatomyKitError, check_choice

__all__ = ["Documents", "as_documents", "python_docs_text", "corpus_sha256", "load_corpus", "hub_stream"]

COLUMNS = ("id", "text")


@dataclass(frozen=True)
class Documents:
    """A corpus in memory, in order: parallel columns ``ids`` and ``texts`` (what :func:`load_corpus` returns).

    Read as the chapters read a ``datasets.Dataset``: ``docs["id"]`` and ``docs["text"]`` (lists),
    ``len(docs)``, ``docs[i]`` (a row ``{"id", "text"}``), iteration over rows,
    ``docs.select(indices)`` and ``docs.column_names``.
    """

    ids: list[str]
    texts: list[str] = field(repr=False)

    def __post_init__(self) -> None:
        if len(self.ids) != len(self.texts):
            raise AnatomyKitError(f"a corpus needs one id per text; got {len(self.ids)} ids and "
                                  f"{len(self.texts)} texts")

    column_names = list(COLUMNS)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, key):
        if key == "id":
            return list(self.ids)
        if key == "text":
            return list(self.texts)
        if isinstance(key, int):
            return {"id": self.ids[key], "text": self.texts[key]}
        raise KeyError(f"a corpus has the columns {list(COLUMNS)} and integer rows; got {key!r}")

    def __iter__(self) -> Iterator[dict]:
        return ({"id": i, "text": t} for i, t in zip(self.ids, self.texts))

    def select(self, indices: Iterable[int]) -> "Documents":
        """The documents at ``indices``, in that order (``datasets.Dataset.select``)."""
        rows = [int(i) for i in indices]
        bad = [i for i in rows if not 0 <= i < len(self)]
        if bad:
            raise AnatomyKitError(f"select: rows {bad[:5]} are outside this corpus of {len(self)} documents")
        return Documents([self.ids[i] for i in rows], [self.texts[i] for i in rows])


def as_documents(corpus) -> Documents:
    """``corpus`` as :class:`Documents`: itself, a mapping ``{"id": [...], "text": [...]}``, or any table with
    those columns (a ``datasets.Dataset``); the ids become strings. A stream (no length) is refused by name."""
    if isinstance(corpus, Documents):
        return corpus
    if isinstance(corpus, Mapping) or (hasattr(corpus, "__getitem__") and hasattr(corpus, "__len__")):
        try:
            ids, texts = corpus["id"], corpus["text"]
        except (KeyError, TypeError, IndexError, ValueError):
            ids = texts = None
        if ids is not None:
            return Documents([str(i) for i in ids], list(texts))
    raise AnatomyKitError(f"a corpus must have 'id' and 'text' columns (Documents, a datasets.Dataset or a dict "
                          f"of lists); got {type(corpus).__name__}")


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


def load_corpus(name: str = "python-docs", *, max_documents: int | None = None) -> Documents:
    """Load a named corpus as :class:`Documents` (columns ``id`` and ``text``).

    ``python-docs`` is read directly from ``pydoc_data`` and verified against the sha256 recorded
    for the Python version named in the manifest (another Python version ships other text: a
    warning, not an error). Hub corpora stream ``max_documents`` documents (default from the
    manifest) through ``datasets`` (:func:`hub_stream`).
    """
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
        return Documents(ids, texts)
    # Hub corpus: stream by id, keep the first documents (deterministic order of the hub split).
    n = max_documents or entry["default_documents"]
    try:
        rows = list(hub_stream(name, max_rows=n))
    except AnatomyKitError:
        raise
    except Exception as err:  # network, auth, or missing cache
        raise _unreachable(name, entry, err) from err
    return Documents([r["id"] for r in rows], [r["text"] for r in rows])


def _unreachable(name: str, entry: dict, err: Exception) -> AnatomyKitError:
    first = str(err).splitlines()[0] if str(err) else ""
    return AnatomyKitError(f"corpus {name!r} ({entry['hub_id']}) could not be loaded: {err.__class__.__name__}: "
                           f"{first}; offline, use corpus='python-docs' or populate the Hugging Face cache")


def hub_stream(name: str, *, max_rows: int | None = None):
    """A hub corpus as a streamed ``datasets.IterableDataset`` of ``{"id", "text"}`` rows (chapters 1, 5).

    ``datasets.load_dataset(hub_id, config, split=..., streaming=True)`` with the manifest's id,
    config and split: online it reads the hub's files as it goes; with ``HF_HUB_OFFLINE=1`` it
    reads the copy in the ``datasets`` cache (``HF_DATASETS_CACHE``) that an earlier
    ``load_dataset`` left there. ``max_rows`` takes the first rows of the split; a row's ``id`` is
    the corpus's own id column or, where it has none (OpenWebText, WikiText), the row's index in
    the split; empty texts are dropped. Without the ``datasets`` package: a named error.
    """
    entries = corpus_entries()
    check_choice("corpus", name, entries)
    entry = entries[name]
    if entry["kind"] != "hub":
        raise AnatomyKitError(f"corpus {name!r} is not a hub corpus; load it with load_corpus({name!r})")
    try:
        import datasets
    except ImportError:
        raise AnatomyKitError(f"corpus {name!r} ({entry['hub_id']}) streams from the hub through the `datasets` "
                              "package, which is not installed here: pip install datasets, or read the offline "
                              "corpus='python-docs'") from None
    key = entry.get("text_field", "text")
    try:
        stream = datasets.load_dataset(entry["hub_id"], entry.get("config"), split=entry["split"], streaming=True)
    except Exception as err:  # network, auth, or missing cache
        raise _unreachable(name, entry, err) from err
    if max_rows is not None:
        stream = stream.take(int(max_rows))

    def as_document(row: dict, index: int) -> dict:
        return {"id": str(row.get("id", index)), "text": row[key]}

    stream = stream.map(as_document, with_indices=True, remove_columns=list(stream.column_names or []) or None)
    return stream.filter(lambda row: bool(row["text"].strip()))
