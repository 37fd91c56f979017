"""Equality claims judged by an equivalence test (used through :mod:`anatomy_kit.verdicts.rules`).

"The ε = 0 control equals the full recipe" cannot be concluded from an interval that contains 0:
that is absence of evidence (:class:`~.rules.IntervalContains` says only "no difference
established"). :class:`Equivalent` concludes "equal" only when the whole interval of the difference
lies inside ``±margin``, a margin declared with the rule before the data are seen.

Choosing the margin: the smallest difference that would matter (the smallest effect of interest,
e.g. a tenth of the effect the paper reports) or, at least, the smallest difference the design can
resolve, :func:`resolvable_difference` from the seed count and a between-seed
spread measured *before* (a pilot run, an earlier chapter, another comparison of the same design).
Never derive the margin from the comparison it judges: a margin fitted to the data it judges
makes "equal" true by construction. The rule prints the margin and its ``basis``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from scipy import stats as _sps

from ..validate import AnatomyKitError, check_choice, check_int
from .decision import Decision, _g, _judge_each, _number, _pct

__all__ = ["Equivalent", "resolvable_difference"]


def _fraction(name: str, x: Any) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not 0 < x < 1:
        raise AnatomyKitError(f"{name}={x!r} must lie strictly between 0 and 1 (e.g. 0.90)")
    return float(x)


@dataclass(frozen=True, kw_only=True)
class Equivalent:
    """A claimed equality: the difference (ours) lies within ``±margin`` of ``value`` (default 0).

    Two one-sided tests (TOST) at level ``(1 − confidence) / 2`` each, i.e. the ``confidence``
    interval (default 90 %: TOST at 5 %) of the difference lies *strictly* inside
    ``(value − margin, value + margin)`` → "reproduced" (equal within the margin); it lies wholly
    outside (``low ≥ value + margin`` or ``high ≤ value − margin``) → "not reproduced" (surely
    different by at least the margin); otherwise (it touches or crosses a margin) → "not established",
    said plainly when the interval is wider than the whole band (the run cannot resolve ±margin).
    ``ours`` as for :class:`~.rules.IntervalBelow` (one interval, a list or a ``{name: interval}``
    mapping, combined by :func:`~.decision.combine_verdicts`); ``method`` ``t`` (default) or
    ``sign-flip`` refuses point estimates. ``basis`` says where the margin comes from (printed).
    Chapters 5 and 6 (ε = 0 control, SRIO vs parameter-matched NRIO).
    """
    margin: float
    basis: str
    value: float = 0.0
    confidence: float = 0.90
    method: str | None = "t"

    def __post_init__(self) -> None:
        if _number("margin", self.margin) <= 0:
            raise AnatomyKitError(f"margin={self.margin!r} must be > 0: the equivalence band is ±margin")
        if not str(self.basis).strip():
            raise AnatomyKitError("Equivalent needs basis: a few words saying where the margin comes from "
                                  "(declared before the data, e.g. the smallest difference the design resolves)")
        _number("value", self.value)
        check_choice("method", self.method, (None, "t", "sign-flip"))
        _fraction("confidence", self.confidence)

    def _band(self) -> str:
        return f"±{_g(self.margin)}" + (f" around {_g(self.value)}" if self.value else "")

    def describe(self, reference: Mapping) -> str:
        kind = f"{_pct(self.confidence)} {self.method + ' ' if self.method else ''}interval"
        level = _pct((1 - self.confidence) / 2)
        return (f"Equal (reproduced) only if the whole {kind} of the difference lies strictly inside {self._band()} "
                f"(two one-sided tests at {level} each; margin declared before the data: {self.basis}); not "
                "reproduced if it lies wholly outside; otherwise not established: an interval that contains the "
                "value is absence of evidence, not equality.")

    def decide(self, ours: Any, reference: Mapping) -> Decision:
        lower, upper, band = self.value - self.margin, self.value + self.margin, self._band()

        def classify(low: float, high: float) -> tuple[str, str]:
            if lower < low and high < upper:
                return "reproduced", f"inside {band}: equal within the margin"
            if low >= upper or high <= lower:
                return "not reproduced", f"wholly outside {band}"
            wide = " (wider than the whole band: this run cannot resolve it)" if high - low >= upper - lower else ""
            return "not established", f"reaches beyond {band}{wide}"

        return _judge_each(ours, self.confidence, self.method, classify, [lower, upper], f"inside {band}", test="tost")


def resolvable_difference(sd: float, n: int, confidence: float = 0.90, *, power: float | None = None) -> float:
    """The smallest paired difference a design of ``n`` seeds resolves, for an equivalence margin
    (:class:`Equivalent`) declared before the data. Chapters 5 and 6.

    ``sd``: the between-seed standard deviation of the paired differences, known *before* the
    comparison it will judge (a pilot run, an earlier chapter, another comparison of the same
    design), never estimated from that comparison. Returns ``t_{(1+c)/2, n−1} · sd / √n``, the
    half-width the ``confidence`` t interval is expected to have: an equivalence margin below it
    cannot be met even when the two conditions are identical. With ``power``: the margin that a
    true difference of 0 meets with about that probability,
    ``(t_{(1+c)/2, n−1} + t_{(1+power)/2, n−1}) · sd / √n`` (the mean's own spread added).
    """
    sd, n, c = _number("sd", sd), check_int("n", n, minimum=2), _fraction("confidence", confidence)
    if sd <= 0:
        raise AnatomyKitError(f"sd={sd!r} must be a finite spread > 0 (from a pilot or an earlier run)")
    factor = float(_sps.t.ppf(0.5 + c / 2, n - 1))
    if power is not None:
        factor += float(_sps.t.ppf(0.5 + _fraction("power", power) / 2, n - 1))
    return factor * sd / math.sqrt(n)
