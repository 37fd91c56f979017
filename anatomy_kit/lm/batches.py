"""Which token rows a training step reads, and checks on token blocks (chapters 3, 5 and 6).

The data order is an endless stream of seeded per-epoch permutations of the training blocks; a
step's batch depends only on ``(seed, position)``, so a resumed run continues the same sequence.
Blocks may be tensors or NumPy arrays / memmaps (read a batch at a time, never loaded whole).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import torch

from ..validate import AnatomyKitError

__all__ = ["batch_indices", "check_blocks", "rows_of"]


@functools.lru_cache(maxsize=4)
def _epoch_perm(n: int, seed: int, epoch: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed * 1_000_003 + epoch + 1)
    return torch.randperm(n, generator=g)


def batch_indices(position: int, batch_size: int, n: int, seed: int) -> torch.Tensor:
    """Rows of the training blocks for the batch starting at data ``position``.

    The data order is an endless stream of seeded per-epoch permutations; a batch takes the
    next ``batch_size`` entries, crossing epochs when needed. The order depends only on
    ``(seed, position)``, so a resumed run continues the same sequence.
    """
    out = []
    while len(out) < batch_size:
        epoch, offset = divmod(position, n)
        take = min(batch_size - len(out), n - offset)
        out.extend(_epoch_perm(n, seed, epoch)[offset:offset + take].tolist())
        position += take
    return torch.tensor(out, dtype=torch.long)


def check_blocks(name: str, blocks: Any, vocab: int, max_len: int) -> Any:
    """A (N, T+1) integer torch tensor, or a numpy array / memmap (read a batch at a time)."""
    is_np = isinstance(blocks, np.ndarray)
    ok_dtype = (np.issubdtype(blocks.dtype, np.integer) if is_np else
                isinstance(blocks, torch.Tensor) and blocks.dtype in (torch.int64, torch.int32, torch.int16, torch.uint8))
    if not (is_np or isinstance(blocks, torch.Tensor)) or not ok_dtype:
        raise AnatomyKitError(f"{name} must be an integer torch tensor (or numpy array) of shape (N, T+1); got "
                              f"{type(blocks).__name__}" + (f" of dtype {blocks.dtype}" if hasattr(blocks, "dtype") else ""))
    if blocks.ndim != 2 or blocks.shape[0] < 1 or blocks.shape[1] < 2:
        raise AnatomyKitError(f"{name} must have shape (N>=1, T+1>=2); got {tuple(blocks.shape)}")
    if blocks.shape[1] - 1 > max_len:
        raise AnatomyKitError(f"{name} blocks hold {blocks.shape[1] - 1} inputs per row but max_seq_len={max_len}")
    lo, hi = None, None
    rows = max(1, 10_000_000 // blocks.shape[1])  # chunked, so a memmap is scanned without loading it
    for start in range(0, blocks.shape[0], rows):
        chunk = blocks[start:start + rows]
        c_lo, c_hi = int(chunk.min()), int(chunk.max())
        lo = c_lo if lo is None else min(lo, c_lo)
        hi = c_hi if hi is None else max(hi, c_hi)
    if lo < 0 or hi >= vocab:
        raise AnatomyKitError(f"{name} holds token ids in [{lo}, {hi}] but vocab_size={vocab}")
    return blocks if is_np else blocks.long()


def rows_of(blocks: Any, rows: torch.Tensor) -> torch.Tensor:
    if isinstance(blocks, np.ndarray):
        return torch.from_numpy(np.asarray(blocks[rows.numpy()], dtype=np.int64))
    return blocks[rows]
