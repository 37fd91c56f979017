"""The rules that decide verdicts on paper claims (used through :mod:`anatomy_kit.book.claims`).

The rules built from other rules (``AllOf``, ``Requires``) and ``NotComparable`` live in
:mod:`.combine` and are re-exported here. Each rule is a frozen dataclass with ``decide(ours, reference) -> Decision`` and
``describe(reference) -> str``; the text the report shows is generated from the same fields that
decide, so a changed threshold changes both. Rules take ``ours`` as: a
:class:`~anatomy_kit.stats.PairedComparison` or a list of paired differences (t interval recomputed
at the rule's confidence), an :class:`~anatomy_kit.stats.Interval`, a ``(low, high)`` tuple, or a
plain number, which counts as a zero-width point (use it only for deterministic measurements; the
reason then says "a point, no interval").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from scipy import stats as _sps

from ..stats import PermutationNull, SpearmanResult, format_p, format_spearman, spearman
from ..validate import AnatomyKitError, check_choice, check_int
from .combine import AllOf, NotComparable, Requires
from .decision import VERDICT_MEANINGS, VERDICTS, Decision, _g, _number, _pct, _side, _span, paper_value


__all__ = ["VERDICTS", "VERDICT_MEANINGS", "Decision", "Magnitude", "Close", "DifferenceSign", "IntervalBelow",
           "IntervalAbove", "SetOverlap", "RankCorrelation", "BeyondNull", "AllOf", "NotComparable", "Requires",
           "IntervalContains", "paper_value"]


@dataclass(frozen=True)
class Magnitude:
    """Order of magnitude: ``f = max(r, 1/r)``, ``r = ours / paper``, same sign required."""
    within_factor: float = 10.0
    partly_factor: float = 100.0
    key: str | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.within_factor <= self.partly_factor:
            raise AnatomyKitError(f"Magnitude needs 1 ≤ within_factor ≤ partly_factor, got {self.within_factor}, "
                                  f"{self.partly_factor}")

    def describe(self, reference: Mapping) -> str:
        return (f"Reproduced if ours has the sign of the paper's {_g(paper_value(reference, self.key))} and lies "
                f"within a factor {_g(self.within_factor)} of it; partly reproduced within a factor "
                f"{_g(self.partly_factor)}; otherwise not reproduced.")

    def decide(self, ours: Any, reference: Mapping) -> Decision:
        paper, x = _number("paper value", paper_value(reference, self.key)), _number("ours", ours)
        if paper == 0:
            raise AnatomyKitError("Magnitude cannot compare with a paper value of 0; use Close")
        if x == 0 or (x > 0) != (paper > 0):
            return Decision("not reproduced", f"ours {_g(x)} does not have the sign of the paper's {_g(paper)}")
        f = max(x / paper, paper / x)
        verdict = ("reproduced" if f <= self.within_factor else
                   "partly reproduced" if f <= self.partly_factor else "not reproduced")
        return Decision(verdict, f"ours {_g(x)} is a factor {f:.3g} from the paper's {_g(paper)}")


@dataclass(frozen=True)
class Close:
    """Within ``tol = max(abs_tol, rel_tol·|paper|)`` of the paper's number; partly within ``partly_factor·tol``."""
    abs_tol: float | None = None
    rel_tol: float | None = None
    partly_factor: float | None = None
    key: str | None = None
    confidence: float = 0.95

    def __post_init__(self) -> None:
        if self.abs_tol is None and self.rel_tol is None:
            raise AnatomyKitError("Close needs abs_tol or rel_tol (or both)")
        if self.partly_factor is not None and self.partly_factor <= 1:
            raise AnatomyKitError(f"partly_factor={self.partly_factor} must be > 1")

    def _bands(self, paper: float) -> list[tuple[float, str]]:
        tol = max(self.abs_tol or 0.0, (self.rel_tol or 0.0) * abs(paper))
        return [(tol, "reproduced")] + ([(self.partly_factor * tol, "partly reproduced")] if self.partly_factor else [])

    def describe(self, reference: Mapping) -> str:
        paper = _number("paper value", paper_value(reference, self.key))
        bands = self._bands(paper)
        partly = f"; partly reproduced within ±{_g(bands[1][0])}" if len(bands) > 1 else ""
        return (f"Reproduced if ours is within ±{_g(bands[0][0])} of the paper's {_g(paper)}{partly}; otherwise not "
                f"reproduced. A {_pct(self.confidence)} interval must lie wholly inside a band to count for it and "
                "wholly outside the widest band to refute; otherwise not established.")

    def decide(self, ours: Any, reference: Mapping) -> Decision:
        paper = _number("paper value", paper_value(reference, self.key))
        (low, high, text), bands = _span(ours, self.confidence), self._bands(paper)
        for band, verdict in bands:
            if paper - band <= low and high <= paper + band:
                return Decision(verdict, f"ours {text} is within ±{_g(band)} of the paper's {_g(paper)}", text)
        outer = bands[-1][0]
        if high < paper - outer or low > paper + outer:
            return Decision("not reproduced", f"ours {text} lies outside ±{_g(outer)} of {_g(paper)}", text)
        return Decision("not established", f"ours {text} overlaps the edge of ±{_g(outer)} around {_g(paper)}", text)


@dataclass(frozen=True)
class IntervalBelow:
    """Every interval (one, a list, or a ``{name: interval}`` mapping) lies entirely below ``threshold``.
    A list of plain numbers is one comparison's paired differences, not several points; ``method``
    (``t``/``sign-flip``) forbids points and fixes the interval type."""
    threshold: float = 0.0
    confidence: float = 0.95
    method: str | None = None
    _below = True

    def __post_init__(self) -> None:
        _number("threshold", self.threshold)
        check_choice("method", self.method, (None, "t", "sign-flip"))

    def describe(self, reference: Mapping) -> str:
        side, other, t = ("below", "above", _g(self.threshold)) if self._below else ("above", "below", _g(self.threshold))
        kind = f"{self.method} interval" if self.method else "interval (or point)"
        return (f"Reproduced if every {_pct(self.confidence)} {kind} lies entirely {side} {t}; partly reproduced if "
                f"some do; not established if none does and some contain {t}; not reproduced if all lie {other} it.")

    def decide(self, ours: Any, reference: Mapping) -> Decision:
        spans = [(name, _span(v, self.confidence, self.method)) for name, v in _items(ours)]
        outcomes = [_side(span, self.threshold, self._below) for _, span in spans]
        side, t = "below" if self._below else "above", _g(self.threshold)
        words = {"beyond": f"entirely {side} {t}", "wrong": f"not {side} {t}", "straddles": f"contains {t}"}
        texts = "; ".join(f"{name}{span[2]}" for name, span in spans)
        n_in = outcomes.count("beyond")
        verdict = ("reproduced" if n_in == len(outcomes) else "partly reproduced" if n_in else
                   "not established" if "straddles" in outcomes else "not reproduced")
        reason = "; ".join(f"{name}{span[2]}: {words[o]}" for (name, span), o in zip(spans, outcomes))
        return Decision(verdict, reason if len(spans) == 1 else f"{n_in} of {len(spans)} {words['beyond']}: {reason}",
                        texts)


def _items(ours: Any) -> list[tuple[str, Any]]:
    """``[(label, one interval's data)]``: a mapping or a list of intervals, or one (a list of numbers is one)."""
    if isinstance(ours, Mapping) or (isinstance(ours, list) and not all(isinstance(v, (int, float)) for v in ours)):
        return [(f"{k}: ", v) for k, v in (ours.items() if isinstance(ours, Mapping) else enumerate(ours))]
    return [("", ours)]


@dataclass(frozen=True)
class IntervalAbove(IntervalBelow):
    """As :class:`IntervalBelow`, with every interval entirely above ``threshold``."""
    _below = False


def _expected_sign(expected: str | None, reference: Mapping, keys: tuple[str, str] | None = None) -> str:
    """The claimed sign: given, the sign of ``value[a] − value[b]``, or the reference value itself."""
    if expected is None and keys is not None:
        diff = _number("paper difference", paper_value(reference, keys[0]) - paper_value(reference, keys[1]))
        expected = "negative" if diff < 0 else "positive" if diff > 0 else None
    return check_choice("expected sign", reference.get("value") if expected is None else expected,
                        ("negative", "positive"))


@dataclass(frozen=True)
class DifferenceSign:
    """A paired difference over seeds has the paper's sign: ``expected``, or read from the reference
    (the sign of ``value[a] − value[b]`` for ``paper_keys=(a, b)``, else the value's sign word).
    Decided as :class:`IntervalBelow`/:class:`IntervalAbove` of 0 with ``method`` ``t`` or ``sign-flip``."""
    expected: str | None = None
    confidence: float = 0.95
    method: str = "t"
    paper_keys: tuple[str, str] | None = None

    def __post_init__(self) -> None:
        check_choice("method", self.method, ("t", "sign-flip"))

    def _rule(self, reference: Mapping) -> IntervalBelow:
        below = _expected_sign(self.expected, reference, self.paper_keys) == "negative"
        return (IntervalBelow if below else IntervalAbove)(0.0, self.confidence, self.method)

    def describe(self, reference: Mapping) -> str:
        a, b = self.paper_keys or (None, None)
        paper = f" (paper: {a} − {b} = {_g(paper_value(reference, a) - paper_value(reference, b))})" if a else ""
        sign = _expected_sign(self.expected, reference, self.paper_keys)
        return (f"The paired difference over seeds must be {sign}{paper}. {self._rule(reference).describe(reference)} "
                "A point estimate never decides.")

    def decide(self, ours: Any, reference: Mapping) -> Decision:
        return self._rule(reference).decide(ours, reference)


@dataclass(frozen=True)
class SetOverlap:
    """Our set (e.g. critical layers) shares ≥ ``full`` members with the paper's; ≥ ``partly``: partly.

    With ``n_layers`` the overlap must also beat chance: the hypergeometric probability that a random
    set of our size, drawn from ``n_layers``, shares as many must be ≤ ``alpha``; an overlap that
    chance gives as often is "not established" (it equals what a null model gives).
    """
    full: int = 3
    partly: int = 1
    n_layers: int | None = None
    key: str | None = None
    alpha: float = 0.05

    def __post_init__(self) -> None:
        check_int("full", self.full, minimum=check_int("partly", self.partly, minimum=1))

    def describe(self, reference: Mapping) -> str:
        text = (f"Reproduced if ours shares at least {self.full} of the paper's "
                f"{sorted(paper_value(reference, self.key))}; partly reproduced if at least {self.partly}; "
                "otherwise not reproduced.")
        if self.n_layers:
            text += (f" Either counts only if a random set of our size from {self.n_layers} layers shares as "
                     f"many with probability ≤ {self.alpha:g}; otherwise not established.")
        return text

    def decide(self, ours: Any, reference: Mapping) -> Decision:
        paper, mine = set(paper_value(reference, self.key)), {int(v) for v in ours}
        if self.full > len(paper):
            raise AnatomyKitError(f"full={self.full} exceeds the paper's {len(paper)} members")
        shared = sorted(mine & paper)
        verdict = ("reproduced" if len(shared) >= self.full else
                   "partly reproduced" if len(shared) >= self.partly else "not reproduced")
        reason = f"ours {sorted(mine)} shares {len(shared)} of the paper's {sorted(paper)} {shared}"
        if self.n_layers:
            chance = float(_sps.hypergeom.sf(len(shared) - 1, self.n_layers, len(paper), len(mine)))
            reason += f"; a random {len(mine)} of {self.n_layers} layers share as many with {format_p(chance)}"
            if verdict != "not reproduced" and chance > self.alpha:
                verdict, reason = "not established", reason + f" (> {self.alpha:g}: no better than chance)"
        return Decision(verdict, reason)


@dataclass(frozen=True)
class RankCorrelation:
    """Spearman ρ has the paper's sign (``expected_sign`` or the reference's sign word); ``ours`` is a
    :class:`~anatomy_kit.stats.SpearmanResult` or an ``(x, y)`` pair."""
    expected_sign: str | None = None
    alpha: float = 0.05
    min_n: int = 6

    def describe(self, reference: Mapping) -> str:
        sign = _expected_sign(self.expected_sign, reference)
        return (f"Reproduced if Spearman ρ is {sign} with two-sided p ≤ {self.alpha:g} (exact for n ≤ 9, permutation "
                f"above); not reproduced if of the other sign with p ≤ {self.alpha:g}; not established otherwise or "
                f"with fewer than {self.min_n} points.")

    def decide(self, ours: Any, reference: Mapping) -> Decision:
        sign = _expected_sign(self.expected_sign, reference)
        r = ours if isinstance(ours, SpearmanResult) else spearman(*ours)
        text = format_spearman(r, min_n=self.min_n, noun="points")
        if r.n < self.min_n or math.isnan(r.rho) or r.p > self.alpha:
            why = f"fewer than {self.min_n} points" if r.n < self.min_n else f"p > {self.alpha:g} or ρ undefined"
            return Decision("not established", f"{text}: {why}", text)
        if (r.rho < 0) == (sign == "negative"):
            return Decision("reproduced", f"{text}: {sign}, as the paper says", text)
        return Decision("not reproduced", f"{text}: the opposite of the paper's {sign} sign", text)


@dataclass(frozen=True)
class BeyondNull:
    """Our statistic lies beyond a null model in ``direction`` (``greater``/``less``).

    ``ours``: a :class:`~anatomy_kit.stats.PermutationNull`, or ``(observed, null)`` with ``null`` the
    null model's value or a ``(low, high)`` null band and ``observed`` anything :func:`_span` takes.
    """
    direction: str
    alpha: float = 0.05
    confidence: float = 0.95

    def __post_init__(self) -> None:
        check_choice("direction", self.direction, ("greater", "less"))

    def describe(self, reference: Mapping) -> str:
        side = "above" if self.direction == "greater" else "below"
        return (f"Reproduced only if ours lies {side} the null model: permutation p ≤ {self.alpha:g} in that "
                f"direction, or the whole {_pct(self.confidence)} interval {side} the null's value or band; not "
                "reproduced if beyond it on the other side; not established inside it, or if ours equals the null's.")

    def decide(self, ours: Any, reference: Mapping) -> Decision:
        if isinstance(ours, PermutationNull):
            return self._permutation(ours)
        if not (isinstance(ours, tuple) and len(ours) == 2):
            raise AnatomyKitError("BeyondNull needs a PermutationNull or a tuple (observed, null)")
        (low, high, text), null = _span(ours[0], self.confidence), ours[1] if isinstance(ours[1], tuple) else (ours[1],) * 2
        nlo, nhi = _number("null low", null[0]), _number("null high", null[1])
        null_text = f"null {_g(nlo)}" if nlo == nhi else f"null band [{_g(nlo)}, {_g(nhi)}]"
        if low == high and nlo == nhi:
            why = ("equals the null model's value" if math.isclose(low, nlo, rel_tol=1e-9, abs_tol=1e-12) else
                   f"is a point against a point {null_text}: neither carries an uncertainty, so nothing is decided")
            return Decision("not established", f"ours {_g(low)} {why}", text, null_text)
        beyond, wrong = (low > nhi, high < nlo) if self.direction == "greater" else (high < nlo, low > nhi)
        verdict, what = (("reproduced", "beyond the null in the paper's direction") if beyond else
                         ("not reproduced", "beyond the null on the other side") if wrong else
                         ("not established", "not separated from the null"))
        return Decision(verdict, f"ours {text} vs {null_text}: {what}", text, null_text)

    def _permutation(self, r: PermutationNull) -> Decision:
        p, q = r.p_value(self.direction), r.p_value("less" if self.direction == "greater" else "greater")
        if r.null_sd == 0 and math.isclose(r.observed, r.null_mean, rel_tol=1e-9, abs_tol=1e-12):
            return Decision("not established", f"ours {_g(r.observed)} equals the null model's value "
                            "(every shuffled order gives it)", None, r.describe())
        verdict = "reproduced" if p <= self.alpha else "not reproduced" if q <= self.alpha else "not established"
        return Decision(verdict, f"observed {_g(r.observed)}, {self.direction} {format_p(p)} against "
                        f"{r.n_perm:,} {'distinct orders' if r.method == 'exact' else 'shuffles'}", None, r.describe())


@dataclass(frozen=True)
class IntervalContains:
    """A claim that a difference is *not* established: every interval contains ``value`` (inputs and
    ``method`` as in :class:`IntervalBelow`). Fewer seeds make it easier to meet; the reason names them."""
    value: float = 0.0
    confidence: float = 0.95
    method: str | None = "t"

    def __post_init__(self) -> None:
        _number("value", self.value)
        check_choice("method", self.method, (None, "t", "sign-flip"))

    def describe(self, reference: Mapping) -> str:
        return (f"Reproduced if every {_pct(self.confidence)} {self.method or 'plain'} interval contains {_g(self.value)} "
                "(no difference established, as the paper says); partly reproduced if some do; not reproduced if none does.")

    def decide(self, ours: Any, reference: Mapping) -> Decision:
        spans = [(name, _span(v, self.confidence, self.method)) for name, v in _items(ours)]
        inside = [lo <= self.value <= hi for _, (lo, hi, _) in spans]
        n_in, v = sum(inside), _g(self.value)
        verdict = "reproduced" if n_in == len(spans) else "partly reproduced" if n_in else "not reproduced"
        reason = "; ".join(f"{name}{span[2]}: {'contains' if ok else 'excludes'} {v}"
                           for (name, span), ok in zip(spans, inside))
        return Decision(verdict, reason if len(spans) == 1 else f"{n_in} of {len(spans)} contain {v}: {reason}",
                        "; ".join(f"{name}{span[2]}" for name, span in spans))
