"""Holm's correction over each family's primary claims (the report and chapter 7's verdict table).

A family is the claims of one paper (``p1``, ``p2``, ``p3``, ``tlm``) or the book's own questions
(``book``). The frozen registry names at most :data:`MAX_PRIMARIES` **primary** claims per family;
every other claim is **secondary**: shown with its unadjusted p and labelled secondary, never
corrected and never counted as a finding of the family.

The hypotheses of a family are every *tested part* of its primaries (:func:`~.decision.tested_parts`:
an :class:`~.combine.AllOf` part, one interval of several, or the claim itself as one part), each
with its own p. A part that could not be judged (not comparable, no test) has no p: it is reported as
such and its claim stays in the family; it is never dropped, and the family size m counts the parts
that were tested. Holm's step-down procedure at level α over the m p-values ``p_(1) ≤ … ≤ p_(m)``:
the adjusted ``p̃_(i) = max_{j ≤ i} min(1, (m − j + 1) · p_(j))``. A primary with a positive verdict
(reproduced, partly reproduced) **survives** when every part that supports it (its reproduced and
partly reproduced parts) has an adjusted p ≤ α; a supporting part without a p cannot survive a
correction, so such a claim does not survive either. The claim's adjusted p is the largest adjusted p
of its supporting parts (of all its tested parts when none supports it).

A design can survive only if its smallest attainable p, times the family's number of tested parts,
is at most α (:func:`design_can_survive`; a sign-flip test on n seeds: ``2/2ⁿ``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from ..validate import AnatomyKitError

__all__ = ["HOLM_ALPHA", "MAX_PRIMARIES", "NO_TEST", "holm_adjusted", "HolmResult", "holm_by_family", "family",
           "design_can_survive", "fails_correction"]

HOLM_ALPHA = 0.05
#: The most primary claims a family may name in the frozen registry.
MAX_PRIMARIES = 3
#: Why a claim has no p: its rule is no test.
NO_TEST = "no test: the rule judges a band, a magnitude, a bare interval or a point, not a p-value"
_POSITIVE = ("reproduced", "partly reproduced")
#: The verdict of a part whose data contradict the claim: it enters Holm with p = 1 (no rejection of the claim's null).
CONTRADICTS = "not reproduced"


def holm_adjusted(ps: list[float]) -> list[float]:
    """Holm's adjusted p-values, in the order given: ``p̃_(i) = max_{j ≤ i} min(1, (m − j + 1) p_(j))``."""
    for p in ps:
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p <= 1 or math.isnan(p):
            raise AnatomyKitError(f"p={p!r} must be a probability in [0, 1]")
    m, order = len(ps), sorted(range(len(ps)), key=lambda i: ps[i])
    out, running = [0.0] * m, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * ps[i]))
        out[i] = running
    return out


def design_can_survive(smallest_p: float, tested_parts: int, alpha: float = HOLM_ALPHA) -> bool:
    """Whether a part whose design's smallest attainable p is ``smallest_p`` can survive Holm in a family of
    ``tested_parts`` hypotheses: ``smallest_p · tested_parts ≤ alpha`` (Holm's first step, its best case)."""
    if not 0 < smallest_p <= 1 or isinstance(tested_parts, bool) or not isinstance(tested_parts, int) \
            or tested_parts < 1:
        raise AnatomyKitError(f"smallest_p={smallest_p!r} must lie in (0, 1] and tested_parts={tested_parts!r} be ≥ 1")
    return smallest_p * tested_parts <= alpha


@dataclass(frozen=True)
class HolmResult:
    """One claim under Holm within its family.

    ``role``: primary or secondary. A primary: ``p`` (the claim's own p, ``None``: no test), ``adjusted``
    (its adjusted p as the module docstring defines it, ``None`` when no part was tested), ``m`` (tested
    parts in the family), ``survives`` (``None`` when the verdict is not positive), ``parts``
    (``[(name, verdict, p, adjusted)]``). A secondary: its unadjusted ``p``, ``adjusted``/``m``/``survives``
    ``None``. ``why`` says which."""
    role: str
    p: float | None
    adjusted: float | None
    m: int | None
    survives: bool | None
    why: str = ""
    parts: tuple = field(default=())

    def to_dict(self) -> dict:
        return {"role": self.role, "p": self.p, "adjusted": self.adjusted, "m": self.m, "survives": self.survives,
                "why": self.why, "parts": [list(x) for x in self.parts]}


def fails_correction(holm: Any) -> bool:
    """Whether a claim's Holm result (a :class:`HolmResult`, its dict as ``report.json`` keeps it, or ``None``)
    says the claim holds but fails the correction: the one test the report, the held-up box and every chapter's
    "What we learned" apply before listing a claim as not claimed."""
    if not holm:
        return False
    return (holm.to_dict() if hasattr(holm, "to_dict") else holm).get("survives") is False


def family(claim_id: str) -> str:
    """A claim's family: its paper prefix (``p1.critical_core`` → ``p1``)."""
    return str(claim_id).split(".", 1)[0]


def _get(claim: Any, key: str, default: Any = None) -> Any:
    return claim.get(key, default) if isinstance(claim, Mapping) else getattr(claim, key, default)


def _parts(claim: Any) -> list[tuple[str, str, float | None]]:
    parts = [tuple(x) for x in (_get(claim, "parts") or ())]
    return parts or [("", _get(claim, "verdict"), _get(claim, "p"))]


def holm_by_family(claims: Iterable[Any], alpha: float = HOLM_ALPHA) -> dict[str, HolmResult]:
    """``{claim id: HolmResult}`` over claims (Claim objects or ``report.json`` dicts with ``id``, ``verdict``,
    ``p``, ``parts`` and ``role``; a claim without a role is secondary). A family with more than
    :data:`MAX_PRIMARIES` primaries is an error."""
    if not 0 < alpha < 1:
        raise AnatomyKitError(f"alpha={alpha!r} must lie strictly between 0 and 1")
    claims = list(claims)
    out: dict[str, HolmResult] = {}
    for fam in dict.fromkeys(family(_get(c, "id")) for c in claims):
        members = [c for c in claims if family(_get(c, "id")) == fam]
        primaries = [c for c in members if _get(c, "role") == "primary"]
        if len(primaries) > MAX_PRIMARIES:
            raise AnatomyKitError(f"family {fam} names {len(primaries)} primary claims "
                                  f"({', '.join(_get(c, 'id') for c in primaries)}); at most {MAX_PRIMARIES}")
        # a part that contradicts the paper enters with p = 1: its p measures the effect against the claim, which is
        # no rejection of the claim's null, and counting it as one would lower the other parts' multipliers
        tested = [(_get(c, "id"), name, 1.0 if v == CONTRADICTS else p) for c in primaries
                  for name, v, p in _parts(c) if p is not None]
        adjusted = dict(zip([(cid, name) for cid, name, _ in tested], holm_adjusted([p for *_, p in tested])))
        m = len(tested)
        for c in members:
            cid, verdict = _get(c, "id"), _get(c, "verdict")
            if _get(c, "role") != "primary":
                p = _get(c, "p")
                why = ("secondary: unadjusted p, not corrected and not a finding of the family" if p is not None
                       else f"secondary; {NO_TEST if verdict not in ('not comparable', 'holds by construction') else verdict + ': no test'}")
                out[cid] = HolmResult("secondary", p, None, None, None, why)
                continue
            parts = [(name, v, p, adjusted.get((cid, name))) for name, v, p in _parts(c)]
            support = [x for x in parts if x[1] in _POSITIVE]
            basis = support or [x for x in parts if x[3] is not None]
            adj = max((x[3] for x in basis if x[3] is not None), default=None)
            if verdict in _POSITIVE:
                survives = bool(support) and all(x[3] is not None and x[3] <= alpha for x in support)
            else:
                survives = None
            untested = [x[0] or cid for x in parts if x[2] is None]
            why = (f"Holm over the {m} tested parts of family {fam}'s primaries: adjusted p = {adj:.3g}"
                   if adj is not None else f"no tested part (family {fam}: {m} tested parts)")
            if untested:
                why += f"; not tested: {', '.join(untested)}"
            if verdict in _POSITIVE and not survives:
                why += f"; fails Holm at α = {alpha:g}"
            out[cid] = HolmResult("primary", _get(c, "p"), adj, m, survives, why, tuple(parts))
    return out
