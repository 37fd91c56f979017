"""The card's measurements, stage by stage, each piece kept in the cache's store as soon as it is done.

- :func:`stream_batches` — one pass per evaluation batch: the prefix-cache capture (which gives the
  intact model's per-block NLL) with the cheap-signal hooks on, then every causal edit of every layer
  replayed on that batch; nothing of a batch outlives it, so memory does not grow with the token budget;
- :func:`measure_work` — chapter 4's shift and GW at a small token count;
- :func:`measure_pruned` — every proposed pruned model on every evaluation batch, again one batch at a time.

Each returns plain lists (JSON-ready) and reads finished pieces back from ``store`` first, so an
interrupted card resumes exactly where it stopped and gives the same numbers (the same computation on
the same batches; the stored floats are read back bit for bit). Used by the book page *Your model's report card*.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ..hf.evaluation import Batch, capture_prefix
from ..progress import progress_bar
from .causal import CAUSAL_SIGNALS, causal_rows
from .pruning import measure_sets
from .signals import SignalTotals, state_hooks
from .work import geometry_blocks, work_signals

__all__ = ["BatchResults", "stream_batches", "measure_work", "measure_pruned"]


class BatchResults:
    """Everything the streamed pass produced, added over batches."""

    def __init__(self, entries: list[dict]):
        self.totals = SignalTotals.from_dict(entries[0]["signals"])
        for e in entries[1:]:
            self.totals = self.totals + SignalTotals.from_dict(e["signals"])
        self.base_nll = np.concatenate([np.asarray(e["base_rows"], float) for e in entries])
        self.n_targets = np.concatenate([np.asarray(e["n_targets"], float) for e in entries])
        self.causal = None
        if entries[0].get("causal") is not None:
            # {kind: (L, B)}: per layer, the NLL of every block of every batch in order
            self.causal = {k: np.concatenate([np.asarray(e["causal"][k], float) for e in entries], axis=1)
                           for k in CAUSAL_SIGNALS}


@torch.no_grad()
def _one_batch(model: nn.Module, batch: Batch, n_offsets: int, causal: bool, clock) -> dict:
    with clock.stage("capture + cheap signals"):
        with state_hooks(model, n_offsets, weight_of=lambda: batch.attention_mask) as sums:
            cache = capture_prefix(model, [batch])
        sums.finish_batch()
        entry = {"signals": sums.to_numpy().to_dict(), "base_rows": cache.baseline_block_nll().tolist(),
                 "n_targets": (batch.labels[:, 1:] != -100).sum(dim=1).tolist()}
    if causal:
        with clock.stage("causal sweep"):
            entry["causal"] = causal_rows(model, cache)
    return entry


def stream_batches(model: nn.Module, batches: list[Batch], *, n_offsets: int, causal: bool, store, clock,
                   progress: bool = True) -> BatchResults:
    """The streamed pass (module docstring); batch ``i`` is kept in ``store["batch/i"]``."""
    entries = []
    for i, batch in enumerate(progress_bar(batches, desc="card: signals and causal sweep", enabled=progress)):
        key = f"batch/{i}"
        entry = store.get(key)
        if entry is None or (causal and entry.get("causal") is None):
            entry = _one_batch(model, batch, n_offsets, causal, clock)
            store[key] = entry
        entries.append(entry)
    return BatchResults(entries)


def measure_work(model: nn.Module, blocks: torch.Tensor, *, n_tokens: int, seed: int, batch_size: int, store,
                 clock) -> dict[str, np.ndarray]:
    """Shift and GW per layer (:mod:`.work`) on the first evaluation blocks; kept in ``store["work"]``."""
    if store.get("work") is None:
        with clock.stage("geometric work"):
            use = blocks[:geometry_blocks(n_tokens, blocks.shape[1], blocks.shape[0])]
            work = work_signals(model, use, n_tokens=n_tokens, seed=seed, batch_size=batch_size)
        store["work"] = {k: v.tolist() for k, v in work.items()}
    return {k: np.asarray(v, float) for k, v in store["work"].items()}


def measure_pruned(model: nn.Module, batches: list[Batch], sets: dict[str, tuple[int, ...]], *, store, clock,
                   progress: bool = True) -> dict[str, np.ndarray]:
    """Per-block NLL (B,) of every pruned model in ``sets`` ``{key: layers}``; batch ``i`` kept in ``store["prune/i"]``."""
    per_batch = []
    for i, batch in enumerate(progress_bar(batches, desc="card: pruned models", enabled=progress)):
        key = f"prune/{i}"
        entry = store.get(key)
        if entry is None or set(entry) != set(sets):
            with clock.stage("pruned models"), torch.no_grad():
                cache = capture_prefix(model, [batch])
                entry = measure_sets(model, cache, sets)
            store[key] = entry
        per_batch.append(entry)
    return {k: np.concatenate([np.asarray(e[k], float) for e in per_batch]) for k in sets}
