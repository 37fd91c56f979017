"""Progress bars: one for people at a terminal or in a notebook, none in the rendered book.

Every bar in the kit comes from :func:`progress_bar`. It is off when the caller asks
(``enabled=False``) *or* when the environment says so: ``TQDM_DISABLE=1`` (set by the book's
runner for every chapter it executes) or ``ANATOMY_KIT_PROGRESS=0``. tqdm's own handling of
``TQDM_DISABLE`` does not apply when ``disable=`` is passed explicitly, which is why the kit
decides here.
"""

from __future__ import annotations

import os
from typing import Any, Iterable

__all__ = ["progress_enabled", "progress_bar"]


def progress_enabled(enabled: bool = True) -> bool:
    """Whether a bar would be shown: the caller's wish, unless the environment turns bars off."""
    env_off = os.environ.get("TQDM_DISABLE", "").strip().lower() in ("1", "true", "yes") \
        or os.environ.get("ANATOMY_KIT_PROGRESS", "").strip().lower() in ("0", "false", "no")
    return bool(enabled) and not env_off


def progress_bar(iterable: Iterable | None = None, *, enabled: bool = True, **kwargs: Any):
    """A ``tqdm.auto`` bar (``leave=False`` by default) that is disabled as :func:`progress_enabled` says."""
    from tqdm.auto import tqdm

    kwargs.setdefault("leave", False)
    return tqdm(iterable, disable=not progress_enabled(enabled), **kwargs)
