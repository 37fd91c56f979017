"""How one value reads in a claims table's cell (:mod:`.tables`): a number to three significant digits
(:func:`number`), a paper's value as the paper gives it (:func:`paper_text`), our value by what it is (a paired
difference as ``Δ = +0.0123 nats``, Spearman as ``ρ = −0.52``, an interval or null by its centre:
:func:`value_text`) and a reason cut to one line (:func:`one_line`)."""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from ..stats import Interval, PairedComparison, PermutationNull, SpearmanResult

__all__ = ["SUMMARY_CHARS", "number", "paper_text", "value_text", "one_line"]

#: The longest "why" line a row shows; the rest is in the folded details.
SUMMARY_CHARS = 120
_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def _minus(text: str) -> str:
    return text.replace("-", "−")


def number(x: Any, digits: int = 3, *, sign: bool = False) -> str:
    """``x`` to ``digits`` significant digits for a table cell (chapters' and the report's claims tables).

    Integers stay exact (``63,419``); from 1,000 up a rounded float gets thousands separators
    (``63,400``), below 0.001 and from 10⁹ it reads ``6.63 × 10⁻⁵``; a true minus, ``±∞``, ``NaN``.
    ``sign`` writes ``+`` before a positive number."""
    if isinstance(x, (bool, np.bool_)):
        return "yes" if x else "no"
    plus = "+" if sign else ""
    if isinstance(x, (int, np.integer)):
        return _minus(f"{int(x):{plus},}")
    x = float(x)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return ("+∞" if sign else "∞") if x > 0 else "−∞"
    if x == 0:
        return "0"
    rounded = float(f"{x:.{digits - 1}e}")
    exp = math.floor(math.log10(abs(rounded)))
    if -3 <= exp < 3:
        return _minus(f"{rounded:{plus}.{max(digits - 1 - exp, 0)}f}")
    if 3 <= exp < 9:
        return _minus(f"{rounded:{plus},.0f}")
    mantissa = f"{rounded / 10 ** exp:{plus}.{digits - 1}f}"
    return _minus(f"{mantissa} × 10{str(exp).translate(_SUPERSCRIPT)}")


def paper_text(value: Any, max_items: int = 4) -> str:
    """A paper's value as the paper gives it (no rounding; ``10⁷`` for 1e7), mappings and lists shortened."""
    if isinstance(value, float) and math.isfinite(value) and value != 0:
        exp = math.floor(math.log10(abs(value)))
        if -3 <= exp < 6:
            return _minus(f"{int(value):,}" if value.is_integer() else f"{value:,.12g}")
        mantissa = float(f"{value / 10 ** exp:.12g}")
        power = f"10{str(exp).translate(_SUPERSCRIPT)}"
        return _minus(power if mantissa == 1 else f"{mantissa:.12g} × {power}")
    if isinstance(value, (Mapping, list, tuple)):
        return _items(value, paper_text, max_items if isinstance(value, Mapping) else max(max_items, 12))
    return number(value) if isinstance(value, (int, np.integer, float)) else str(value)


def _items(value: Any, fmt, max_items: int) -> str:
    if isinstance(value, Mapping):
        parts = [f"{k}: {fmt(v)}" for k, v in value.items()]
    else:
        parts = [fmt(v) for v in value]
    more = f", … (+{len(parts) - max_items})" if len(parts) > max_items else ""
    text = ", ".join(parts[:max_items]) + more
    return text if isinstance(value, Mapping) else f"[{text}]"


def _paired(mean: float, unit: str | None) -> str:
    return f"Δ = {number(mean, sign=True)}" + (f" {unit}" if unit else "")


def value_text(x: Any, max_items: int = 4) -> str:
    """Our value for a table cell, three significant digits: a paired comparison as ``Δ = +0.0123 nats``,
    Spearman as ``ρ = −0.52``, an interval or permutation null by its centre; also their ``to_dict`` forms."""
    if isinstance(x, PairedComparison):
        return _paired(x.mean, x.unit)
    if isinstance(x, SpearmanResult):
        return f"ρ = {number(x.rho, 2, sign=True)}"
    if isinstance(x, Interval):
        return number(x.mean)
    if isinstance(x, PermutationNull):
        return number(x.observed)
    if isinstance(x, Mapping):
        keys = set(x)
        if {"mean", "low", "high", "sign_flip_p"} <= keys:
            return _paired(x["mean"], x.get("unit"))
        if {"mean", "low", "high", "method"} <= keys:
            return number(x["mean"]) if x["mean"] is not None else "—"
        if {"rho", "p", "method"} <= keys:
            return f"ρ = {number(x['rho'], 2, sign=True)}" if x["rho"] is not None else "ρ undefined"
        if {"observed", "p", "null_mean"} <= keys:
            return number(x["observed"])
        return _items(x, lambda v: value_text(v, max_items), max_items)
    if isinstance(x, tuple) and len(x) == 2 and all(isinstance(v, (int, float)) for v in x):
        return f"[{number(x[0])}, {number(x[1])}]"
    if (isinstance(x, (list, tuple)) and len(x) == 2 and isinstance(x[0], (int, float))
            and isinstance(x[1], (list, tuple)) and len(x[1]) == 2):
        # BeyondNull's (observed, null band): one number beside its null, never an interval inside an interval
        return f"{number(x[0])} vs null {number(x[1][0])} to {number(x[1][1])}"
    if isinstance(x, (list, tuple)):
        return _items(x, lambda v: value_text(v, max_items), max(max_items, 12))
    if x is None:
        return "—"
    return number(x) if isinstance(x, (int, float, np.integer, np.floating, np.bool_)) else str(x)


def one_line(text: str, limit: int = SUMMARY_CHARS) -> str:
    """``text`` on one line of at most ``limit`` characters, cut at a word with ``…``."""
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return text
    cut = text[:limit - 1].rsplit(" ", 1)[0].rstrip(",;:")
    return cut + "…"
