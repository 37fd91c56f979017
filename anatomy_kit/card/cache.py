"""Where a card keeps its partial results, so that an interrupted run resumes and gives the same card.

Layout (``cache_dir`` is ``<build>/card`` for the book, ``<out>/cache`` for the command line)::

    <cache_dir>/<key>/progress.json   every finished piece: per evaluation batch the signal sums, the
                                      intact model's per-block NLL and every causal edit's; each greedy
                                      step; each batch's pruned-set NLLs; the work profiles; timings
    <cache_dir>/<key>/card.json       the finished card (written last; its presence means "done")

``key`` is a sha256 (16 hex digits) of the model's identity (name, revision or checksum), the token
ids' sha256, the resolved settings, the device type and the schema version: a card with any of them
changed is computed afresh, never mixed with another. Every write is atomic (:mod:`anatomy_kit.jsonio`).
Used by the book page *Your model's report card*.
"""

from __future__ import annotations

import hashlib
import json
import resource
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ..store import Store
from ..jsonio import read_json
from .errors import OutputFolderConflict
from .schema import SCHEMA

__all__ = ["card_key", "CardCache", "StageClock", "check_out_folder", "peak_rss_mb"]


def card_key(identity: dict, token_sha256: str, settings: dict, device_type: str) -> str:
    """The cache key (module docstring)."""
    doc = {"model": {k: identity.get(k) for k in ("name", "source", "revision", "checksum")},
           "tokens": token_sha256, "settings": settings, "device": device_type, "schema": SCHEMA}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:16]


def peak_rss_mb() -> float:
    """This process's peak resident memory so far, MiB (``ru_maxrss``: KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024


class CardCache:
    """The folder of one card's partial results: a :class:`~anatomy_kit.store.Store` and the finished card."""

    def __init__(self, cache_dir: str | Path, key: str):
        self.folder = Path(cache_dir) / key
        self.folder.mkdir(parents=True, exist_ok=True)
        self.key = key
        self.store = Store(self.folder / "progress.json")

    @property
    def card_path(self) -> Path:
        return self.folder / "card.json"

    def finished(self) -> dict | None:
        """The finished card's document, or ``None``."""
        return read_json(self.card_path, what="layer card") if self.card_path.exists() else None


class StageClock:
    """Wall and CPU seconds per stage, added up across resumed runs (kept in the store under ``timing/``)."""

    def __init__(self, store: Store | None = None):
        self.store = store
        self.seconds: dict[str, dict] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            key = f"timing/{name}"
            before = self.store.get(key, {"wall_s": 0.0, "cpu_s": 0.0}) if self.store is not None else \
                self.seconds.get(name, {"wall_s": 0.0, "cpu_s": 0.0})
            now = {"wall_s": round(before["wall_s"] + time.perf_counter() - wall, 3),
                   "cpu_s": round(before["cpu_s"] + time.process_time() - cpu, 3)}
            self.seconds[name] = now
            if self.store is not None:
                self.store[key] = now

    def to_dict(self) -> dict:
        """Seconds of every stage: this run's, and those a resumed run finished before (from the store)."""
        out = dict(self.seconds)
        if self.store is not None:
            data = getattr(self.store, "data", self.store)
            out.update({k[len("timing/"):]: v for k, v in data.items() if k.startswith("timing/")})
        return out


def check_out_folder(out: str | Path, identity: dict) -> None:
    """Refuse an output folder that holds the card of another model (:class:`OutputFolderConflict`).

    "Another model": its name, checksum or revision differs (each compared when ``identity`` knows it).
    """
    path = Path(out) / "card.json"
    if not path.exists():
        return
    try:
        other = read_json(path, what="layer card").get("model", {})
    except AttributeError:
        other = {}
    same = all(other.get(k) == identity[k] for k in ("name", "checksum", "revision") if identity.get(k) is not None)
    if not same:
        raise OutputFolderConflict(f"{Path(out)} holds the card of model {other.get('name')!r} "
                                   f"(checksum {str(other.get('checksum'))[:12]}…); this card is of "
                                   f"{identity.get('name')!r}: choose another --out folder or empty this one")
