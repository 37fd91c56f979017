"""The rules that decide verdicts on paper claims (used through :mod:`anatomy_kit.verdicts.claims`).

Each rule is a frozen dataclass with ``decide(ours, reference) -> Decision`` and
``describe(reference) -> str``; the text the report shows is generated from the same fields that
decide, so a changed threshold changes both. Every rule, by what the claim says:

- a difference has a sign: ``DifferenceSign`` (paired seeds; the paper's sign read from the reference);
- every interval lies below/above a threshold: ``IntervalBelow``, ``IntervalAbove``;
- no difference is established (not equality!): ``IntervalContains``;
- two things are *equal*: ``Equivalent(margin=..., basis=...)`` (:mod:`.equivalence`; TOST, margin declared first);
- a number matches the paper's: ``Close`` (absolute/relative band);
- an order of magnitude: ``Magnitude`` (judged on the whole interval); a rank: ``RankAtMost`` (:mod:`.magnitude`);
- a set of layers matches the paper's: ``SetOverlap`` (it must beat chance: ``null="exchangeable"``
  or ``"edge"``, :mod:`.nulls`);
- a rank correlation has the paper's sign: ``RankCorrelation``; a statistic beats a null model: ``BeyondNull``;
- several parts: ``AllOf`` (mixed when some hold and others are contradicted); a claim about every
  member: ``EveryOf`` (each member one tested part, all must hold); a precondition first:
  ``Precondition`` (named ``Condition`` s); cannot be tested here: ``NotComparable``; holds because of how the experiment is
  built: ``ByConstruction`` (:mod:`.combine`).

Rules take ``ours`` as: a :class:`~anatomy_kit.stats.PairedComparison` or a list of paired
differences (t interval recomputed at the rule's confidence), an :class:`~anatomy_kit.stats.Interval`,
a ``(low, high)`` tuple, or a plain number, which counts as a zero-width point (use it only for
deterministic measurements; the reason then says "a point, no interval"). One primary statistic
decides; other readings go in the claim's ``secondary`` (shown, never judged). Every decision has a
one-line ``summary`` and says whether it is ``near_threshold`` (:mod:`.decision`).

Attainable p: a rule that judges through a null or an exact test (``SetOverlap``, ``RankAtMost``,
``RankCorrelation``, ``BeyondNull`` on a permutation null, every interval rule on an exact sign-flip
interval) knows the smallest p its design can give (``smallest_p``; a sign-flip test on n seeds:
``2/2**n``); when that exceeds alpha the verdict is "not comparable" whatever the data, with that p in
the reason (:func:`~.decision.unattainable`): the design, not the data, cannot speak.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from ..stats import PermutationNull, SpearmanResult, format_p, format_spearman, spearman
from ..validate import AnatomyKitError, check_choice
from .combine import (AllOf, ByConstruction, Condition, EveryOf, NotComparable, OnePartPerSignal, Precondition,
                      Requires)
from .decision import (VERDICT_MEANINGS, VERDICTS, Decision, _brief, _g, _judge_each, _number, _pct, _side, _span,
                       combine_verdicts, monte_carlo_at_alpha, near_threshold, p_near_alpha, paper_value, shorten,
                       unattainable)
from .equivalence import Equivalent
from .magnitude import Magnitude, RankAtMost
from .sets import SetOverlap

__all__ = ["VERDICTS", "VERDICT_MEANINGS", "Decision", "Magnitude", "RankAtMost", "Close", "DifferenceSign",
           "IntervalBelow", "IntervalAbove", "IntervalContains", "Equivalent", "SetOverlap", "RankCorrelation",
           "BeyondNull", "AllOf", "EveryOf", "OnePartPerSignal", "NotComparable", "Precondition", "Condition", "Requires",
           "ByConstruction", "combine_verdicts", "paper_value"]


_SIGN_FLIP_FLOOR = (" A sign-flip interval on n paired values whose smallest attainable p, 2/2ⁿ, exceeds the "
                    "level (n ≤ 5 at 95 %) gives not comparable: the design cannot speak.")


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
        near = near_threshold(low, high, [paper + s * b for b, _ in bands for s in (-1, 1)])
        brief = _brief(ours, low, high)
        for band, verdict in bands:
            if paper - band <= low and high <= paper + band:
                return Decision(verdict, f"ours {text} is within ±{_g(band)} of the paper's {_g(paper)}", text,
                                summary=shorten(f"{brief} lies within ±{_g(band)} of the paper's {_g(paper)}"),
                                near_threshold=near)
        outer = bands[-1][0]
        if high < paper - outer or low > paper + outer:
            return Decision("not reproduced", f"ours {text} lies outside ±{_g(outer)} of {_g(paper)}", text,
                            summary=shorten(f"{brief} lies outside ±{_g(outer)} of the paper's {_g(paper)}"),
                            near_threshold=near)
        return Decision("not established", f"ours {text} overlaps the edge of ±{_g(outer)} around {_g(paper)}", text,
                        summary=shorten(f"{brief} reaches across the edge of ±{_g(outer)} around the paper's "
                                        f"{_g(paper)}, so it cannot tell"),
                        near_threshold=near)


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
                f"some do and the others contain {t}; mixed if some lie entirely {side} {t} and others {other} it; not "
                f"established if all contain {t}; not reproduced if none lies {side} {t} and some lie {other} it "
                "(a point on the threshold counts as not beyond it)." + _SIGN_FLIP_FLOOR * (self.method == "sign-flip"))

    def decide(self, ours: Any, reference: Mapping) -> Decision:
        side, t = "below" if self._below else "above", _g(self.threshold)
        verdicts = {"beyond": ("reproduced", f"lies entirely {side} {t}"),
                    "wrong": ("not reproduced", f"does not lie {side} {t}"),
                    "straddles": ("not established", f"reaches both sides of {t}, so it cannot tell")}

        def classify(low: float, high: float) -> tuple[str, str]:
            return verdicts[_side((low, high, ""), self.threshold, self._below)]

        return _judge_each(ours, self.confidence, self.method, classify, [self.threshold], f"entirely {side} {t}",
                           test="two-sided")


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
        best = self.smallest_p(r)
        if best is not None and (no := unattainable(best, self.alpha, f"Spearman's exact test on n = {r.n}")):
            return Decision(no.verdict, f"ρ = {_g(r.rho)}; {no.reason}", text, summary=no.summary)
        near = r.n >= self.min_n and p_near_alpha(r.p, self.alpha)
        if r.n < self.min_n or math.isnan(r.rho) or r.p > self.alpha:
            why = f"fewer than {self.min_n} points" if r.n < self.min_n else f"p > {self.alpha:g} or ρ undefined"
            verdict = "not established"
        elif (r.rho < 0) == (sign == "negative"):
            verdict, why = "reproduced", f"{sign}, as the paper says"
        else:
            verdict, why = "not reproduced", f"the opposite of the paper's {sign} sign"
        p = r.p if r.n >= self.min_n and not math.isnan(r.p) else None
        return Decision(verdict, f"{text}: {why}", text, summary=shorten(f"{text}: {why}"), near_threshold=near, p=p)

    @staticmethod
    def smallest_p(r: SpearmanResult) -> float | None:
        """The smallest p of the exact test on ``r.n`` untied points: a perfect order, ``2/n!`` two-sided
        (``1/n!`` one-sided); ``None`` for the permutation test (n > 9: below 1e-5 either way)."""
        if r.method != "exact":
            return None
        return (2 if r.alternative == "two-sided" else 1) / math.factorial(r.n)


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
            return Decision("not established", f"ours {_g(low)} {why}", text, null_text,
                            summary=shorten(f"ours {_g(low)} {why}"))
        beyond, wrong = (low > nhi, high < nlo) if self.direction == "greater" else (high < nlo, low > nhi)
        verdict, what = (("reproduced", "beyond the null in the paper's direction") if beyond else
                         ("not reproduced", "beyond the null on the other side") if wrong else
                         ("not established", "not separated from the null"))
        return Decision(verdict, f"ours {text} vs {null_text}: {what}", text, null_text,
                        summary=shorten(f"{_brief(ours[0], low, high)} vs {null_text}: {what}"),
                        near_threshold=near_threshold(low, high, [nlo, nhi]))

    @staticmethod
    def smallest_p(r: PermutationNull) -> float:
        """The smallest p the null can give: ours beyond every null value, ``1/n`` with all ``n`` values
        enumerated (ours among them), ``1/(1 + n)`` from ``n`` Monte Carlo draws."""
        return 1 / r.n_perm if r.method == "exact" else 1 / (1 + r.n_perm)

    def _permutation(self, r: PermutationNull) -> Decision:
        p, q = r.p_value(self.direction), r.p_value("less" if self.direction == "greater" else "greater")
        if r.null_sd == 0 and math.isclose(r.observed, r.null_mean, rel_tol=1e-9, abs_tol=1e-12):
            return Decision("not established", f"ours {_g(r.observed)} equals the null model's value "
                            "(every shuffled order gives it)", None, r.describe(),
                            summary=f"ours {_g(r.observed)} equals the null model's value")
        best = self.smallest_p(r)
        null = f"{r.n_perm:,} {'enumerated null values' if r.method == 'exact' else 'null draws'}"
        if no := unattainable(best, self.alpha, null):
            return Decision(no.verdict, f"observed {_g(r.observed)}; {no.reason}", None, r.describe(),
                            summary=no.summary)
        verdict = "reproduced" if p <= self.alpha else "not reproduced" if q <= self.alpha else "not established"
        draws = getattr(r, "draws", None) or ("distinct orders" if r.method == "exact" else "shuffles")
        reason = f"observed {_g(r.observed)}, {self.direction} {format_p(p)} against {r.n_perm:,} {draws}"
        at = p if verdict == "reproduced" else q
        if r.method != "exact" and verdict != "not established" and monte_carlo_at_alpha(at, self.alpha):
            verdict, reason = "not established", reason + f" (a Monte Carlo p at exactly α = {self.alpha:g} does not decide)"
        near = p_near_alpha(p, self.alpha) or p_near_alpha(q, self.alpha)
        return Decision(verdict, reason, None, r.describe(),
                        summary=shorten(f"{reason} (null mean {_g(r.null_mean)})"), near_threshold=near, p=p)


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
                "(no difference established, as the paper says); mixed if some do and others exclude it; not "
                "reproduced if none does. This is no test of equality: that needs Equivalent and its margin."
                + _SIGN_FLIP_FLOOR * (self.method == "sign-flip"))

    def decide(self, ours: Any, reference: Mapping) -> Decision:
        v = _g(self.value)

        def classify(low: float, high: float) -> tuple[str, str]:
            inside = low <= self.value <= high
            return ("reproduced", f"contains {v}") if inside else ("not reproduced", f"excludes {v}")

        return _judge_each(ours, self.confidence, self.method, classify, [self.value], f"contain {v}")
