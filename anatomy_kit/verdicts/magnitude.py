"""Order of magnitude and rank, judged with the interval (used through :mod:`anatomy_kit.verdicts.rules`).

A paper's "+63,419 %" makes two claims a referee judges apart: a magnitude (:class:`Magnitude`: is
ours within a factor of it, for the whole interval?) and a rank (:class:`RankAtMost`: is that layer
among our top k, for every order the intervals allow, and more often than chance would put it there?).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from ..stats import format_p
from ..validate import AnatomyKitError, check_choice, check_int
from .decision import (Decision, _brief, _g, _number, _span, monte_carlo_at_alpha, near_threshold, p_near_alpha,
                       paper_value, shorten, unattainable)
from .nulls import EDGE_NULL_TEXT, edge_rank_chance


@dataclass(frozen=True)
class Magnitude:
    """Order of magnitude: ``f = max(r, 1/r)``, ``r = ours / paper``, same sign required.

    A point (a deterministic measurement; the reason says "a point, no interval"): reproduced within
    ``within_factor``, partly within ``partly_factor``, else not reproduced. An interval
    (:class:`~anatomy_kit.stats.Interval`, ``(low, high)``, :class:`~anatomy_kit.stats.PairedComparison`
    at ``confidence``) counts for a band only when it lies *wholly* inside it (as :class:`~.rules.Close`
    judges its bands): reproduced if the whole interval lies within ``within_factor`` of the paper's
    value; partly reproduced if it lies wholly within ``partly_factor`` but not wholly within
    ``within_factor``; not reproduced if it lies wholly beyond ``partly_factor`` (which includes the
    wrong sign); otherwise (it reaches across the ``partly_factor`` edge) not established. Each band
    can be reached, and each is refuted by an interval wholly outside it. Chapter 1 (``p1.l11_ablation``).
    """
    within_factor: float = 10.0
    partly_factor: float = 100.0
    key: str | None = None
    confidence: float = 0.95

    def __post_init__(self) -> None:
        if not 1 <= self.within_factor <= self.partly_factor:
            raise AnatomyKitError(f"Magnitude needs 1 ≤ within_factor ≤ partly_factor, got {self.within_factor}, "
                                  f"{self.partly_factor}")

    def describe(self, reference: Mapping) -> str:
        w, p = _g(self.within_factor), _g(self.partly_factor)
        return (f"Reproduced if ours has the sign of the paper's {_g(paper_value(reference, self.key))} and lies "
                f"within a factor {w} of it; partly reproduced within a factor {p}; otherwise not reproduced. "
                f"With an interval: reproduced only if the whole {100 * self.confidence:g} % interval lies within a "
                f"factor {w}; partly reproduced if it lies wholly within a factor {p} but not wholly within {w}; "
                f"not reproduced if it lies wholly beyond a factor {p} (or on the wrong side of 0); otherwise (it "
                f"reaches across the factor-{p} edge) not established.")

    def decide(self, ours: Any, reference: Mapping) -> Decision:
        paper = _number("paper value", paper_value(reference, self.key))
        if paper == 0:
            raise AnatomyKitError("Magnitude cannot compare with a paper value of 0; use Close")
        low, high, text = _span(ours, self.confidence)
        s, p = (1.0 if paper > 0 else -1.0), abs(paper)          # mirrored so that the paper's value is positive
        lo, hi = sorted((s * low, s * high))
        bands = (self.within_factor, self.partly_factor)
        near = near_threshold(lo, hi, [0.0] + [p * f ** e for f in bands for e in (-1, 1)])
        if low == high:
            return self._point(lo, paper, text, near)
        inside = p / self.within_factor <= lo and hi <= p * self.within_factor
        partly = p / self.partly_factor <= lo and hi <= p * self.partly_factor
        beyond = hi < p / self.partly_factor or lo > p * self.partly_factor
        verdict = ("reproduced" if inside else "partly reproduced" if partly else "not reproduced" if beyond
                   else "not established")
        where = ("lies on the wrong side of 0 from" if hi <= 0 else "reaches 0 (the wrong sign) against" if lo <= 0 else
                 f"lies a factor {_factor(lo, hi, p)} {'below' if hi < p else 'above' if lo > p else 'around'}")
        words = {"reproduced": f"wholly within a factor {_g(self.within_factor)}",
                 "partly reproduced": f"wholly within a factor {_g(self.partly_factor)}, not wholly within "
                                      f"{_g(self.within_factor)}",
                 "not reproduced": f"wholly beyond a factor {_g(self.partly_factor)}",
                 "not established": f"reaches across the edge of a factor {_g(self.partly_factor)}"}[verdict]
        reason = f"ours {text} {where} the paper's {_g(paper)}: {words}"
        return Decision(verdict, reason, text, summary=shorten(f"{_brief(ours, low, high)} {where} the paper's "
                                                               f"{_g(paper)}: {words}"), near_threshold=near)

    def _point(self, x: float, paper: float, text: str, near: bool) -> Decision:
        """``x`` mirrored so that the paper's value is positive."""
        shown = text.replace(" (a point, no interval)", "")
        if x <= 0:
            why = f"ours {text} does not have the sign of the paper's {_g(paper)}"
            return Decision("not reproduced", why, summary=shorten(why), near_threshold=near)
        f = max(x / abs(paper), abs(paper) / x)
        verdict = ("reproduced" if f <= self.within_factor else
                   "partly reproduced" if f <= self.partly_factor else "not reproduced")
        return Decision(verdict, f"ours {text} is a factor {f:.3g} from the paper's {_g(paper)}",
                        summary=shorten(f"ours {shown} (a point) is a factor {f:.3g} from the paper's {_g(paper)}"),
                        near_threshold=near)


def _factor(lo: float, hi: float, p: float) -> str:
    """The range of ``max(r, 1/r)`` over a positive interval ``[lo, hi]``: ``8.81–85.4``."""
    if lo <= p <= hi:
        return f"1–{max(p / lo, hi / p):.3g}"
    ends = sorted(max(e / p, p / e) for e in (lo, hi))
    return f"{ends[0]:.3g}–{ends[1]:.3g}"


@dataclass(frozen=True)
class RankAtMost:
    """Layer ``item`` is among our top ``k`` (rank 1 = the most important; larger values rank higher).

    ``ours``: ``{layer: interval or value}`` over the candidate layers (intervals as :func:`~.decision._span`
    takes them; numbers are points), or a plain rank (an int, with ``of`` the number of candidates).
    From intervals, the best rank ``item`` can take is 1 + the layers whose interval lies wholly above
    its interval, the worst 1 + the layers whose interval does not lie wholly below it: reproduced if
    the worst rank is ≤ ``k``, not reproduced if the best is > ``k``, otherwise not established.
    A rank that chance gives as often counts for nothing: reproduced only if the chance that ``item``
    ranks in the top ``k`` is ≤ ``alpha`` under ``null``: ``"exchangeable"`` (``k / n``) or ``"edge"``
    (:mod:`.nulls`' edge-structured null on the map's centres, ``draws`` seeded draws; a map needed).
    Chapter 1 (L11's rank, judged apart from its magnitude).
    """
    k: int
    item: int | None = None
    of: int | None = None
    alpha: float = 0.05
    null: str = "exchangeable"
    draws: int = 10_000
    seed: int = 0
    confidence: float = 0.95

    def __post_init__(self) -> None:
        check_int("k", self.k, minimum=1)
        if self.item is not None:
            check_int("item", self.item)
        if self.of is not None and check_int("of", self.of, minimum=1) < self.k:
            raise AnatomyKitError(f"RankAtMost needs k ≤ of, got k={self.k}, of={self.of}")
        check_choice("null", self.null, ("exchangeable", "edge"))
        check_int("draws", self.draws, minimum=100)

    def _name(self) -> str:
        return f"layer {self.item}" if self.item is not None else "the layer"

    def describe(self, reference: Mapping) -> str:
        null = EDGE_NULL_TEXT + f", {self.draws:,} draws" if self.null == "edge" else "layers exchangeable: k / n"
        return (f"Reproduced if {self._name()} ranks among our top {self.k}"
                + (f" of {self.of}" if self.of else "")
                + f" for every order the {100 * self.confidence:g} % intervals allow, and chance ({null}) puts it "
                f"there with probability ≤ {self.alpha:g}; not reproduced if it surely ranks below {self.k}; "
                "otherwise not established.")

    def decide(self, ours: Any, reference: Mapping) -> Decision:
        best, worst, n, text, near = self._ranks(ours)
        if self.null == "exchangeable" and (no := unattainable(self.k / n, self.alpha,
                                                               f"top {self.k} of {n} layers exchangeable")):
            return Decision(no.verdict, f"{self._name()} is our rank {best}–{worst} of {n}; {no.reason}",
                            summary=no.summary, shown=f"rank {best}–{worst} of {n}")
        chance = (edge_rank_chance(ours, self.item, self.k, draws=self.draws, seed=self.seed).p
                  if self.null == "edge" else self.k / n)
        verdict = "reproduced" if worst <= self.k else "not reproduced" if best > self.k else "not established"
        where = f"rank {best}" if best == worst else f"rank {best}–{worst}"
        reason = f"{self._name()} is our {where} of {n} ({text}); top {self.k} claimed"
        reason += (f"; chance puts it there with {format_p(chance)} "
                   f"({'edge-structured null' if self.null == 'edge' else 'layers exchangeable'})")
        if verdict == "reproduced" and chance > self.alpha:
            verdict, reason = "not established", reason + f" (> {self.alpha:g}: no better than chance)"
        elif verdict == "reproduced" and self.null == "edge" and monte_carlo_at_alpha(chance, self.alpha):
            verdict, reason = "not established", reason + f" (a Monte Carlo p at exactly α = {self.alpha:g} does not decide)"
        near = near or (verdict != "not reproduced" and p_near_alpha(chance, self.alpha))
        if verdict == "not established" and best <= self.k < worst:      # the intervals straddle k
            why = f"the intervals allow ranks past {self.k} (chance {format_p(chance)})"
        elif verdict == "not established":
            why = f"no better than chance ({format_p(chance)} > {self.alpha:g})"
        else:
            why = f"chance {format_p(chance)}"
        return Decision(verdict, reason, summary=shorten(f"{self._name()}: our {where} of {n}, top {self.k} claimed; "
                                                         + why), near_threshold=near,
                        shown=f"{where} of {n}", p=chance)

    def _ranks(self, ours: Any) -> tuple[int, int, int, str, bool]:
        """``(best, worst, n, how, near)``; ``near``: a comparison that moves a rank across ``k`` is within 5 %."""
        if not isinstance(ours, Mapping):
            if self.null == "edge" or self.of is None:
                raise AnatomyKitError("RankAtMost needs ours as {layer: interval or value}; a plain rank needs `of` "
                                      "and the exchangeable null")
            rank = check_int("rank", ours, minimum=1, maximum=self.of)
            return rank, rank, self.of, "a plain rank, no interval", False
        if self.item is None or self.item not in ours:
            raise AnatomyKitError(f"RankAtMost needs item (the layer the claim names) among ours' layers {list(ours)}")
        if self.of is not None and self.of != len(ours):
            raise AnatomyKitError(f"of={self.of} but ours ranks {len(ours)} layers")
        spans = {k: _span(v, self.confidence)[:2] for k, v in ours.items()}
        lo, hi = spans[self.item]
        others = [s for k, s in spans.items() if k != self.item]
        best = 1 + sum(o_lo > hi for o_lo, _ in others)
        worst = 1 + sum(not o_hi < lo for _, o_hi in others)
        points = all(a == b for a, b in spans.values())
        near = (best in (self.k, self.k + 1) or worst in (self.k, self.k + 1)) and any(
            near_threshold(o_lo, o_hi, [lo, hi]) or near_threshold(lo, hi, [o_lo, o_hi]) for o_lo, o_hi in others)
        how = "points, no intervals" if points else f"by the {100 * self.confidence:g} % intervals"
        return best, worst, len(ours), how, near and math.isfinite(hi - lo)
