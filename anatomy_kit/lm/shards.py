"""Splitting a grid of training runs over machines: shard ``i`` of ``n`` runs its share (chapter 5 at full scale).

A full-scale grid (rules × seeds × sizes) is a list of independent :func:`~anatomy_kit.lm.train.train`
jobs, each checkpointing into its own folder. With a shard setting, :func:`anatomy_kit.lm.train_many`
runs only the jobs whose position ``k`` in the list satisfies ``k mod n == i`` (round robin, so
shards get equal shares of a rules × seeds grid) and returns ``None`` for the others. Shards are
0-based, ``i`` in ``0 … n−1``: the form of a Slurm job array's ``$SLURM_ARRAY_TASK_ID``.

The setting comes from an explicit ``shard=`` argument or from the environment variable
``ANATOMY_KIT_SHARD="i/n"`` (which ``python -m anatomy_kit shard`` exports to the chapter's
kernel). Once every shard has run, an unsharded run over the same folders finds every
checkpoint finished and only collects the results.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from ..validate import AnatomyKitError

__all__ = ["SHARD_ENV", "Shard", "parse_shard", "current_shard"]

SHARD_ENV = "ANATOMY_KIT_SHARD"
_FORM = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` (0-based)."""

    index: int
    count: int

    def owns(self, position: int) -> bool:
        """Whether the job at ``position`` of the job list is this shard's."""
        return position % self.count == self.index

    def positions(self, n_jobs: int) -> list[int]:
        return [k for k in range(n_jobs) if self.owns(k)]

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(value: str | Shard | None) -> Shard | None:
    """``"i/n"`` (0 ≤ i < n) → :class:`Shard`; ``None`` or ``""`` → ``None``."""
    if value is None or isinstance(value, Shard):
        return value
    if not isinstance(value, str):
        raise AnatomyKitError(f"shard={value!r} must be a string 'i/n' (0 <= i < n), e.g. '0/4'")
    if not value.strip():
        return None
    m = _FORM.match(value)
    if not m:
        raise AnatomyKitError(f"shard={value!r} is not of the form 'i/n' (0 <= i < n), e.g. '0/4' for the first "
                              "of four shards")
    i, n = int(m.group(1)), int(m.group(2))
    if n < 1 or not 0 <= i < n:
        raise AnatomyKitError(f"shard={value!r}: the index must lie in 0..n-1 and n >= 1 (shards are 0-based, as "
                              "Slurm array task ids are)")
    return Shard(i, n)


def current_shard(explicit: str | Shard | None = None) -> Shard | None:
    """The shard this process works on: ``explicit`` if given, else ``$ANATOMY_KIT_SHARD``, else ``None`` (all jobs)."""
    if explicit is not None:
        return parse_shard(explicit)
    return parse_shard(os.environ.get(SHARD_ENV))
