"""Progress for people at a terminal, none in a notebook or the rendered book (every chapter).

Every bar in the kit comes from :func:`progress_bar` and every "run k of n finished" line from
:func:`progress_line`. Both show only where :func:`progress_enabled` says so: the caller asks for
it, standard error is a terminal, and the environment does not turn progress off
(``TQDM_DISABLE=1``, set by the book's runner for every chapter it executes, or
``ANATOMY_KIT_PROGRESS=0``). A notebook kernel's standard error is not a terminal, so an executed
chapter never carries a progress line into its page; ``ANATOMY_KIT_PROGRESS=1`` shows progress in
a live notebook anyway (never set it for a book build). tqdm's own handling of ``TQDM_DISABLE``
does not apply when ``disable=`` is passed explicitly, which is why the kit decides here.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Iterable, TextIO

__all__ = ["progress_enabled", "progress_bar", "progress_line"]

_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _is_terminal(stream: TextIO | None) -> bool:
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError, OSError):      # closed or unusual streams
        return False


def progress_enabled(enabled: bool = True, stream: TextIO | None = None) -> bool:
    """Whether progress would be shown: the caller's wish, on a terminal (``stream``, default standard
    error), unless ``TQDM_DISABLE`` or ``ANATOMY_KIT_PROGRESS=0`` turns it off; ``ANATOMY_KIT_PROGRESS=1``
    shows it off a terminal too. Used by every chapter that trains or sweeps."""
    if not enabled or os.environ.get("TQDM_DISABLE", "").strip().lower() in _TRUE:
        return False
    setting = os.environ.get("ANATOMY_KIT_PROGRESS", "").strip().lower()
    if setting in _FALSE:
        return False
    return setting in _TRUE or _is_terminal(sys.stderr if stream is None else stream)


def progress_bar(iterable: Iterable | None = None, *, enabled: bool = True, **kwargs: Any):
    """A ``tqdm.auto`` bar (``leave=False`` by default) that is disabled as :func:`progress_enabled` says
    (chapters 1–6: ablation sweeps, recovery, training, geometric work)."""
    from tqdm.auto import tqdm

    kwargs.setdefault("leave", False)
    return tqdm(iterable, disable=not progress_enabled(enabled, kwargs.get("file")), **kwargs)


def progress_line(text: str, *, enabled: bool = True) -> bool:
    """Print one progress line (``[3/15] run …: eval loss 4.2``) to standard error where
    :func:`progress_enabled` allows it, else nothing; returns whether it printed (chapters 3, 5, 6)."""
    if not progress_enabled(enabled):
        return False
    print(text, file=sys.stderr, flush=True)
    return True
