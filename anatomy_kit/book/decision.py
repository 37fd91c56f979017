"""Verdicts, the decision a rule returns, and the helpers rules share (read a paper value, an interval)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ..stats import Interval, PairedComparison, format_p, paired_t_interval, sign_flip_interval, signed
from ..validate import AnatomyKitError, check_choice

__all__ = ["VERDICTS", "VERDICT_MEANINGS", "Decision", "paper_value"]


VERDICTS = ("reproduced", "partly reproduced", "not reproduced", "not established", "not comparable")
VERDICT_MEANINGS = {
    "reproduced": "The paper's claim holds in our setting by the declared rule (the same claim, not a coinciding number).",
    "partly reproduced": "Some parts of the claim, or the weaker form named by the rule's partial threshold, hold.",
    "not reproduced": "Our data contradict the claim: an interval on the wrong side, or a number beyond the partial threshold.",
    "not established": "Our data cannot decide: the interval includes 0 or the null, or too few seeds or layers for a test.",
    "not comparable": "Our setting cannot test the claim (another model, scale or measurement), so no number of ours speaks to it.",
}


@dataclass(frozen=True)
class Decision:
    """A rule's verdict, its reason, and the uncertainty (interval, null) it was decided on."""
    verdict: str
    reason: str
    interval: str | None = None
    null: str | None = None

    def __post_init__(self) -> None:
        check_choice("verdict", self.verdict, VERDICTS)


def paper_value(reference: Mapping, key: str | None = None) -> Any:
    """``reference['value']``, or its entry ``key`` when the value is a mapping."""
    value = reference["value"]
    if key is not None and (not isinstance(value, Mapping) or key not in value):
        keys = sorted(value) if isinstance(value, Mapping) else "none (the value is not a mapping)"
        raise AnatomyKitError(f"key={key!r} is not in the reference value; its keys are {keys}")
    return value if key is None else value[key]


def _g(x: float) -> str:
    """Four significant digits (thousands separated from 10,000 up), a true minus; ``±∞``."""
    if math.isinf(x):
        return signed(x)
    return (f"{x:,.0f}" if 1e4 <= abs(x) < 1e15 else f"{x:.4g}").replace("-", "−")


def _number(name: str, x: Any) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)) or not math.isfinite(x):
        raise AnatomyKitError(f"{name}={x!r} must be a finite number")
    return float(x)


def _pct(confidence: float) -> str:
    return f"{100 * confidence:g} %"


def _span(ours: Any, confidence: float, method: str | None = None) -> tuple[float, float, str]:
    """``(low, high, text)`` for ``ours`` (see the module docstring). With ``method`` (``t``,
    ``sign-flip``) only paired data or an :class:`Interval` of that method are accepted."""
    text = ""
    if isinstance(ours, PairedComparison):
        ours, text = list(ours.deltas), f" seeds, sign-flip {format_p(ours.sign_flip.p)}"
    if isinstance(ours, list):
        ours = (sign_flip_interval if method == "sign-flip" else paired_t_interval)(ours, confidence)
    if isinstance(ours, Interval):
        if abs(ours.confidence - confidence) > 1e-12 or (method and ours.method != method):
            raise AnatomyKitError(f"the rule needs a {_pct(confidence)} {method or ''} interval, got a "
                                  f"{_pct(ours.confidence)} {ours.method} one; pass the PairedComparison instead")
        text = f"{_pct(confidence)} {ours.method} interval [{_g(ours.low)}, {_g(ours.high)}], n = {ours.n}{text}"
        return ours.low, ours.high, text + (" (one value: no interval)" if ours.n < 2 else "")
    if method:
        raise AnatomyKitError(f"this rule needs a PairedComparison, paired differences (a list) or an Interval, "
                              f"not {ours!r}: a point estimate cannot establish a difference")
    if isinstance(ours, tuple) and len(ours) == 2:
        low, high = _number("interval low", ours[0]), _number("interval high", ours[1])
        return low, high, f"interval [{_g(low)}, {_g(high)}]"
    x = _number("ours", ours)
    return x, x, f"{_g(x)} (a point, no interval)"


def _side(span: tuple[float, float, str], threshold: float, below: bool) -> str:
    """``beyond`` (entirely on the claimed side), ``wrong`` (entirely off it, or a point on it), ``straddles``."""
    lo, hi, t = (span[0], span[1], threshold) if below else (-span[1], -span[0], -threshold)
    return "beyond" if hi < t else "wrong" if lo > t or lo == hi == t else "straddles"
