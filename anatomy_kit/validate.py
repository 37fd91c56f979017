"""Argument checks shared by every public function.

Each check raises :class:`AnatomyKitError` (a ``ValueError``) whose message names the
offending value and says what would be accepted.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

import numpy as np


class AnatomyKitError(ValueError):
    """Bad input to an ``anatomy_kit`` function or chapter parameter."""


def check_choice(name: str, value: Any, allowed: Iterable[Any]) -> Any:
    """Return ``value`` if it is one of ``allowed``; otherwise raise naming both."""
    allowed = list(allowed)
    if value not in allowed:
        raise AnatomyKitError(
            f"{name}={value!r} is not accepted; choose one of {', '.join(map(repr, allowed))}"
        )
    return value


def check_int(name: str, value: Any, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """Return ``value`` as ``int`` if it is an integer within ``[minimum, maximum]``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise AnatomyKitError(f"{name}={value!r} must be an integer")
    value = int(value)
    if minimum is not None and value < minimum:
        raise AnatomyKitError(f"{name}={value} must be >= {minimum}")
    if maximum is not None and value > maximum:
        raise AnatomyKitError(f"{name}={value} must be <= {maximum}")
    return value


def check_positive(name: str, value: Any, *, allow_zero: bool = False) -> float:
    """Return ``value`` as ``float`` if it is finite and > 0 (or >= 0 with ``allow_zero``)."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise AnatomyKitError(f"{name}={value!r} must be a number") from None
    if not math.isfinite(x) or x < 0 or (x == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise AnatomyKitError(f"{name}={value!r} must be a finite number {bound}")
    return x


def check_layer_index(name: str, value: Any, n_layers: int) -> int:
    """Return ``value`` if it is a valid layer index in ``0 .. n_layers-1``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= int(value) < n_layers:
        raise AnatomyKitError(
            f"{name}={value!r} is out of range; this model has layers 0..{n_layers - 1}"
        )
    return int(value)


def check_finite(name: str, array: Any) -> Any:
    """Raise if a tensor or array holds NaN or infinity; return it unchanged otherwise."""
    try:
        import torch

        if isinstance(array, torch.Tensor):
            if bool(torch.isfinite(array).all()):
                return array
            bad = int((~torch.isfinite(array)).sum())
            if bad:
                raise AnatomyKitError(f"{name} holds {bad} non-finite values (NaN or inf) out of {array.numel()}")
            return array
    except ImportError:  # pragma: no cover - torch is a hard dependency
        pass
    arr = np.asarray(array)
    bad = int((~np.isfinite(arr)).sum())
    if bad:
        raise AnatomyKitError(f"{name} holds {bad} non-finite values (NaN or inf) out of {arr.size}")
    return array


def as_vector(name: str, value: Any, n: int | None, *, positive: bool = True, allow_zero: bool = False) -> np.ndarray:
    """A finite float vector of length ``n`` (a scalar is broadcast when ``n`` is given); positivity checked.

    Per-layer inputs (work profiles, exponents, bounds) go through this check.
    """
    arr = np.asarray(value, dtype=float)
    if arr.ndim == 0:
        if n is None:
            raise AnatomyKitError(f"{name}={value!r} must be a sequence of per-layer values")
        arr = np.full(n, float(arr))
    if arr.ndim != 1:
        raise AnatomyKitError(f"{name} must be a scalar or a 1-D sequence; got shape {arr.shape}")
    if n is not None and arr.shape[0] != n:
        raise AnatomyKitError(f"{name} has {arr.shape[0]} entries; expected one per layer ({n})")
    if arr.shape[0] == 0:
        raise AnatomyKitError(f"{name} is empty; expected at least one layer")
    check_finite(name, arr)
    if positive:
        bad = arr < 0 if allow_zero else arr <= 0
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            bound = ">= 0" if allow_zero else "> 0"
            raise AnatomyKitError(f"{name}[{i}]={arr[i]:g} must be {bound} (every entry must be)")
    return arr
