"""Verdicts, the decision a rule returns, and the helpers rules share (read a paper value, an interval,
combine the verdicts of several parts, mark a verdict near its threshold, shorten a line).

Every rule returns a :class:`Decision`. Rules that judge several parts or intervals at once
(:class:`~.combine.AllOf`, :class:`~.rules.IntervalBelow` over a mapping, ...) combine them with
:func:`combine_verdicts`, one table for all: "mixed" when some parts hold and some are contradicted.
Every decision carries a one-line ``summary`` (≤ 120 characters) and ``near_threshold``: an interval
end within 5 % of the interval's width of a threshold that decides the verdict (a point: within 5 %
of the larger of its magnitude and the threshold's; a p-value: within 5 % of alpha), the verdicts a
last-digit difference on another machine could flip.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from scipy import stats as _sps

from ..stats import (Interval, PairedComparison, format_p, paired_t_interval, sign_flip_interval, sign_flip_test,
                     signed)
from ..validate import AnatomyKitError, check_choice

__all__ = ["VERDICTS", "VERDICT_MEANINGS", "Decision", "paper_value", "combine_verdicts", "near_threshold",
           "p_near_alpha", "shorten", "unattainable", "sign_flip_floor", "SUMMARY_MAX", "NEAR_FRACTION",
           "tested_parts", "monte_carlo_at_alpha", "sign_count"]

SUMMARY_MAX = 120      # characters of Decision.summary (one line of a compact table)
NEAR_FRACTION = 0.05   # an interval end this fraction of the width from a deciding threshold is "near" it


VERDICTS = ("reproduced", "partly reproduced", "mixed", "not reproduced", "not established", "holds by construction",
            "not comparable")
VERDICT_MEANINGS = {
    "reproduced": "The paper's claim holds in our setting by the declared rule (the same claim, not a coinciding number).",
    "partly reproduced": "Some parts of the claim, or the weaker form named by the rule's partial threshold, hold, and no part is contradicted.",
    "mixed": "Some parts of the claim hold and others are contradicted by our data.",
    "not reproduced": "Our data contradict the claim: an interval on the wrong side, or a number beyond the partial threshold.",
    "not established": "Our data cannot decide: the interval includes 0 or the null.",
    "holds by construction": "It holds because of how the experiment is built (the reason says how), so it is no evidence for the claim.",
    "not comparable": "Our setting cannot test the claim (another model, scale or measurement, an unmet precondition, or a test whose smallest attainable p exceeds alpha), so no number of ours speaks to it.",
}


@dataclass(frozen=True)
class Decision:
    """A rule's verdict, its reason, and the uncertainty (interval, null) it was decided on.

    ``summary``: one line (≤ :data:`SUMMARY_MAX` characters, no line break) a reader takes in at a
    glance, e.g. "Δ = −0.21 nats, 95 % t interval below 0"; ``None``: tables shorten ``reason``.
    ``near_threshold``: a number that decides the verdict lies close to a threshold that decides it
    (see :func:`near_threshold`), so another machine (another CPU kernel path: last-digit
    differences in trained losses) may flip the verdict.
    ``shown``: ours as a table shows it, where the input is a structure.
    """
    verdict: str
    reason: str
    interval: str | None = None
    null: str | None = None
    summary: str | None = None
    near_threshold: bool = False
    shown: str | None = None
    """What a table shows as "ours" when the rule's input is a structure (a set with the map it was
    picked from, intervals per layer): the set, the rank; ``None``: the table formats the input."""
    p: float | None = None
    """The p-value of the test that decides, where the rule is a test (a null's chance, a sign-flip,
    permutation or Spearman p, a t-test p from the same data as the interval; several parts: the
    largest, an intersection-union test); ``None`` when the rule is no test (a band around the
    paper's number, a magnitude, a bare interval or point)."""
    parts: tuple = ()
    """``((name, verdict, p), ...)``: every counted part of a claim judged in several parts (an
    :class:`~.combine.AllOf` part, one interval of several), each with its own verdict and its own
    test's p (``None``: that part is no test, or it could not be judged). Holm's correction
    (:mod:`.multiplicity`) counts each tested part as one hypothesis of its family; ``()``: the
    decision is one part (:func:`tested_parts` gives ``(("", verdict, p),)``)."""
    saw: str | None = None
    """What our run saw where the verdict is "not comparable" although our run measured something (a
    precondition unmet, a scale we do not run): the verdict and one line the rule would give on our
    numbers, e.g. "not reproduced: Δ = +0.075, 6 of 6 seeds against the paper's sign". Shown beside
    the verdict, never counted."""

    def __post_init__(self) -> None:
        check_choice("verdict", self.verdict, VERDICTS)
        if self.summary is not None and (len(self.summary) > SUMMARY_MAX or "\n" in self.summary):
            raise AnatomyKitError(f"a Decision summary is one line of at most {SUMMARY_MAX} characters; got "
                                  f"{len(self.summary)}: {self.summary!r} (use shorten())")
        if not isinstance(self.near_threshold, (bool, np.bool_)):
            raise AnatomyKitError(f"near_threshold={self.near_threshold!r} must be True or False")
        object.__setattr__(self, "near_threshold", bool(self.near_threshold))
        if self.p is not None:
            object.__setattr__(self, "p", _probability(self.p))
        parts = []
        for part in self.parts:
            if not (isinstance(part, tuple) and len(part) == 3 and isinstance(part[0], str)):
                raise AnatomyKitError(f"a Decision part is (name, verdict, p), got {part!r}")
            check_choice("part verdict", part[1], VERDICTS)
            parts.append((part[0], part[1], None if part[2] is None else _probability(part[2])))
        object.__setattr__(self, "parts", tuple(parts))


def _probability(p: Any) -> float:
    if isinstance(p, bool) or not isinstance(p, (int, float, np.floating)) or not 0 <= p <= 1:
        raise AnatomyKitError(f"p={p!r} must be a probability in [0, 1] or None")
    return float(p)


def tested_parts(decision: Decision) -> tuple[tuple[str, str, float | None], ...]:
    """Every counted part of a decision as ``(name, verdict, p)``: its ``parts``, or the decision itself as one
    unnamed part. What Holm's correction (:mod:`.multiplicity`) counts, one hypothesis per part with a p."""
    return decision.parts or (("", decision.verdict, decision.p),)


_SUPPORT = ("reproduced", "partly reproduced")


def combine_verdicts(verdicts: list[str] | tuple[str, ...]) -> str:
    """The verdict of a claim from its parts' verdicts (:class:`~.combine.AllOf` and every rule that judges
    several intervals or items at once). Chapters 1–6 (through their rules).

    "holds by construction" parts are left out (no evidence either way; all of them: "holds by
    construction"); then: every part reproduced → "reproduced"; a "mixed" part, or some part
    reproduced or partly while another is "not reproduced" → "mixed"; some reproduced or partly and
    none contradicted → "partly reproduced"; otherwise the first of "not reproduced", "not
    established", "not comparable" that occurs.
    """
    if not verdicts:
        raise AnatomyKitError("combine_verdicts needs at least one part verdict")
    for v in verdicts:
        check_choice("part verdict", v, VERDICTS)
    counted = [v for v in verdicts if v != "holds by construction"]
    if not counted:
        return "holds by construction"
    if all(v == "reproduced" for v in counted):
        return "reproduced"
    support = any(v in _SUPPORT for v in counted)
    if "mixed" in counted or (support and "not reproduced" in counted):
        return "mixed"
    if support:
        return "partly reproduced"
    return next(v for v in ("not reproduced", "not established", "not comparable") if v in counted)


def near_threshold(low: float, high: float, thresholds: Any) -> bool:
    """Whether an end of ``[low, high]`` lies within ``NEAR_FRACTION`` (5 %) of the interval's width of a
    threshold that decides the verdict (any of ``thresholds``). Chapters 1–6 (through their rules).

    A point (``low == high``) is near when within 5 % of ``max(|x|, |threshold|)`` of it. Infinite
    ends (one seed, an unbounded sign-flip interval) are never near; neither are infinite thresholds.
    A change of the data much smaller than the interval's width (a last digit on another kernel
    path) can flip a verdict only when this is True.
    """
    ends = [e for e in (low, high) if math.isfinite(e)]
    width = high - low
    for t in thresholds:
        if not math.isfinite(t):
            continue
        # a finite width scales the margin; a point, or a half-open interval (whose width says
        # nothing about its finite end), is judged as a point at that end
        if any(abs(e - t) <= NEAR_FRACTION * (width if 0 < width < math.inf else max(abs(e), abs(t)))
               for e in ends):
            return True
    return False


def p_near_alpha(p: float, alpha: float) -> bool:
    """A p-value within 5 % of ``alpha`` (relative) is near the threshold that decides it (:func:`near_threshold`
    for a point). Chapters 1, 2, 4 (through their rules)."""
    return math.isfinite(p) and abs(p - alpha) <= NEAR_FRACTION * max(p, alpha)


def sign_flip_floor(n: int) -> float:
    """The smallest two-sided p an exact sign-flip test on ``n`` paired values can give: ``2 / 2**n``
    (every value on one side); at 95 % it reaches 0.05 from n = 6 (1/32), never with n ≤ 5 (n = 5: 1/16)."""
    return 2.0 / 2 ** n


def unattainable(smallest_p: float, alpha: float, test: str) -> Decision | None:
    """"not comparable" when ``test`` cannot reach ``alpha`` even in its best case (its smallest attainable
    p, ``smallest_p``, exceeds ``alpha``: 6 layers with a one-in-six null give 1/6, a sign-flip test on 3
    seeds 2/2³); ``None`` when it can (``smallest_p ≤ alpha``: a p equal to alpha counts as reaching it).
    Every rule that judges through such a null asks this first, so the design, not the data, is named."""
    if not (math.isfinite(smallest_p) and 0 < smallest_p <= 1):
        raise AnatomyKitError(f"smallest_p={smallest_p!r} must be a probability in (0, 1]")
    if smallest_p <= alpha:
        return None
    why = (f"{test}: its smallest attainable p is {smallest_p:.3g} > α = {alpha:g}, so no outcome could "
           "reach significance: the design cannot speak to the claim")
    return Decision("not comparable", why, summary=shorten(f"{test}: smallest attainable p {smallest_p:.3g} > "
                                                          f"{alpha:g}, cannot decide"))


def monte_carlo_at_alpha(p: float, alpha: float) -> bool:
    """Whether a Monte Carlo p (``(1 + hits) / (1 + draws)``) sits exactly at ``alpha``: such a p does not
    decide (a few more draws would move it either way), so every rule that judges a Monte Carlo p gives
    "not established" there and says why. An exact (enumerated) p at alpha still counts as reaching it."""
    return math.isclose(p, alpha, rel_tol=1e-12, abs_tol=0.0)


def shorten(text: str, limit: int = SUMMARY_MAX) -> str:
    """``text`` on one line, cut at a word boundary with "…" to at most ``limit`` characters (the compact
    claims tables of every chapter and the report)."""
    line = " ".join(str(text).split())
    if len(line) <= limit:
        return line
    cut = line[:limit - 1]
    return (cut[:cut.rfind(" ")] if " " in cut[limit // 2:] else cut).rstrip(" ,;:") + "…"


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


def _brief(ours: Any, low: float, high: float) -> str:
    """The subject of a summary sentence: ``our Δ = −0.21 nats (interval −0.3 to −0.12)``, ``our interval 743 to
    7,201``, ``our 0.85 (a point)``: one interval, never one printed inside another."""
    if low == high:
        return f"our {_g(low)} (a point)"
    span = f"{_g(low)} to {_g(high)}"
    if isinstance(ours, PairedComparison):
        return f"our Δ = {_g(ours.mean)}{' ' + ours.unit if ours.unit else ''} (interval {span})"
    if isinstance(ours, Interval):
        return f"our {_g(ours.mean)} (interval {span})"
    return f"our interval {span}"


def _side(span: tuple[float, float, str], threshold: float, below: bool) -> str:
    """``beyond`` (entirely on the claimed side), ``wrong`` (entirely off it, or a point on it), ``straddles``."""
    lo, hi, t = (span[0], span[1], threshold) if below else (-span[1], -span[0], -threshold)
    return "beyond" if hi < t else "wrong" if lo > t or lo == hi == t else "straddles"


def _items(ours: Any) -> list[tuple[str, Any]]:
    """``[(name, one interval's data)]``: a mapping or a list of intervals, or one (``name`` ""; a list of
    numbers is one comparison's paired differences)."""
    if isinstance(ours, Mapping) or (isinstance(ours, list) and not all(isinstance(v, (int, float)) for v in ours)):
        return [(str(k), v) for k, v in (ours.items() if isinstance(ours, Mapping) else enumerate(ours))]
    return [("", ours)]


def _sign_flip_n(value: Any, method: str | None) -> int | None:
    """The number of paired values when ``value`` is judged by an exact sign-flip interval, else ``None``."""
    if isinstance(value, Interval):
        return value.n if value.method == "sign-flip" else None
    if method != "sign-flip":
        return None
    return value.n if isinstance(value, PairedComparison) else len(value)


def _data(value: Any) -> tuple[np.ndarray | None, Interval | None]:
    """The paired differences behind ``value`` (a PairedComparison or a list of numbers), else a t Interval."""
    if isinstance(value, PairedComparison):
        return np.asarray(value.deltas, dtype=float), None
    if isinstance(value, list) and value and all(isinstance(v, (int, float)) for v in value):
        return np.asarray(value, dtype=float), None
    return None, value if isinstance(value, Interval) and value.method == "t" else None


def _one_sided_p(value: Any, threshold: float, method: str | None, side: str) -> float | None:
    """P-value of "the centre lies ``side`` (``less``/``greater``) ``threshold``" from the same data and method
    as the interval: the exact sign-flip test of ``d − threshold``, or the t test (also from a t Interval's
    mean, sd and n); ``None`` without data (a point, a bare interval, a sign-flip Interval)."""
    d, iv = _data(value)
    if d is not None and method == "sign-flip":
        return sign_flip_test(d - threshold, side).p
    if d is not None:
        iv = paired_t_interval(d) if d.size > 1 else None
    if iv is None or not iv.n > 1 or not iv.sd > 0:
        return None
    t = (iv.mean - threshold) / (iv.sd / math.sqrt(iv.n))
    return float(_sps.t.cdf(t, iv.n - 1) if side == "less" else _sps.t.sf(t, iv.n - 1))


def interval_test_p(value: Any, thresholds: list[float], method: str | None, test: str | None) -> float | None:
    """The p of the test an interval rule performs on one interval's data: ``"two-sided"`` (the interval
    excludes the one threshold ⇔ p < 1 − confidence), ``"tost"`` (equivalence: the larger of the two
    one-sided p's against the lower and upper margin), ``None`` (the rule is no test)."""
    if test is None:
        return None
    if test == "two-sided":
        ps = [_one_sided_p(value, thresholds[0], method, side) for side in ("less", "greater")]
        return None if None in ps else min(1.0, 2 * min(ps))
    lower, upper = thresholds
    ps = [_one_sided_p(value, lower, method, "greater"), _one_sided_p(value, upper, method, "less")]
    return None if None in ps else max(ps)


def sign_count(value: Any, threshold: float = 0.0) -> str | None:
    """``"6 of 6 values above 0"``: how many paired values (seeds, blocks) lie on each side of ``threshold``,
    the direction a run saw whatever its interval; ``None`` without paired values (a point, an interval)."""
    d, _ = _data(value)
    if d is None or d.size == 0:
        return None
    above, below = int((d > threshold).sum()), int((d < threshold).sum())
    side, k = ("above", above) if above >= below else ("below", below)
    return f"{k} of {d.size} values {side} {_g(threshold)}"


def joint_p(ps: list[float | None]) -> float | None:
    """The p of a claim that needs every part (an intersection-union test): the largest part's p; ``None`` if
    any part has none."""
    return None if not ps or any(p is None for p in ps) else max(ps)


def _judge_each(ours: Any, confidence: float, method: str | None, classify: Callable[[float, float], tuple[str, str]],
                thresholds: list[float], counted: str, test: str | None = None) -> Decision:
    """Judge one interval or each of several (:func:`_items`) by ``classify(low, high) -> (verdict, words)``,
    combine by :func:`combine_verdicts`; ``counted`` names the reproduced outcome ("entirely below 0")."""
    judged = []
    for name, value in _items(ours):
        low, high, text = _span(value, confidence, method)
        n = _sign_flip_n(value, method)
        floor = None if n is None else unattainable(sign_flip_floor(n), 1 - confidence + 1e-12,
                                                    f"sign-flip test on n = {n}")
        words = (("not comparable", f"smallest attainable sign-flip p {_g(sign_flip_floor(n))} > "
                  f"{1 - confidence:.3g}: cannot decide") if floor else classify(low, high))
        signs = sign_count(value, thresholds[0]) if len(thresholds) == 1 else None
        judged.append((name, value, low, high, text + (f"; {signs}" if signs else ""), *words))
    verdict = combine_verdicts([j[5] for j in judged])
    item_ps = [interval_test_p(value, thresholds, method, test) if test and j[5] != "not comparable" else None
               for (_, value, *_), j in zip(judged, judged)]
    p = joint_p(item_ps) if test else None
    parts = tuple((name, j[5], q) for (name, *_), j, q in zip(judged, judged, item_ps)) if len(judged) > 1 else ()
    interval = "; ".join(f"{name + ': ' if name else ''}{text}" for name, _, _, _, text, _, _ in judged)
    body = "; ".join(f"{name + ': ' if name else ''}{text}: {words}" for name, _, _, _, text, _, words in judged)
    near = any(near_threshold(low, high, thresholds) for _, _, low, high, *_, v, _ in judged if v != "not comparable")
    if len(judged) == 1:
        _, value, low, high, _, _, words = judged[0]
        kind = f" ({_pct(confidence)} {method})" if method and low != high else ""
        signs = sign_count(value, thresholds[0]) if len(thresholds) == 1 else None
        tail = f"; {signs}" if signs else ""            # the direction seen is kept whole; the rest is shortened
        return Decision(verdict, body, interval,
                        summary=shorten(f"{_brief(value, low, high)} {words}{kind}", SUMMARY_MAX - len(tail)) + tail,
                        near_threshold=near, p=p)
    groups: dict[str, list[str]] = {}
    for name, *_, words in judged:
        groups.setdefault(words, []).append(name)
    n_counted = sum(j[5] == "reproduced" for j in judged)
    summary = "; ".join(f"{words}: {', '.join(names)}" for words, names in groups.items())
    return Decision(verdict, f"{n_counted} of {len(judged)} {counted}: {body}", interval,
                    summary=shorten(summary), near_threshold=near, p=p, parts=parts)
