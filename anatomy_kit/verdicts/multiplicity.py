"""Holm's correction within a paper's family of claims (the report and chapter 7's verdict table).

Each claim whose rule is a test carries the p-value that decided it (``Decision.p``: a null's
chance, a sign-flip, permutation or Spearman p, a t-test p from the interval's own data; a claim of
several parts: the largest part's p). Within one family (the claims of one paper: ``p1``, ``p2``,
``p3``, ``tlm``, the book's own ``book``), Holm's step-down procedure at level α: order the m
p-values ``p_(1) ≤ … ≤ p_(m)``; the adjusted ``p̃_(i) = max_{j ≤ i} min(1, (m − j + 1) · p_(j))``;
a claim survives when ``p̃ ≤ α``. A positive verdict (reproduced, partly reproduced) survives
Holm only if its p does; a claim without a p (its rule is no test) shows "—" and why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from ..validate import AnatomyKitError

__all__ = ["HOLM_ALPHA", "NO_TEST", "holm_adjusted", "HolmResult", "holm_by_family", "family"]

HOLM_ALPHA = 0.05
#: Why a claim has no p: its rule is no test.
NO_TEST = "no test: the rule judges a band, a magnitude, a bare interval or a point, not a p-value"
_POSITIVE = ("reproduced", "partly reproduced")


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


@dataclass(frozen=True)
class HolmResult:
    """One claim under Holm within its family: ``p`` (``None``: no test, ``why`` says so), ``adjusted``,
    ``m`` (tests in the family) and ``survives`` (a positive verdict whose adjusted p ≤ α; ``None`` when
    the verdict is not positive or there is no p)."""
    p: float | None
    adjusted: float | None
    m: int
    survives: bool | None
    why: str = ""

    def to_dict(self) -> dict:
        return {"p": self.p, "adjusted": self.adjusted, "m": self.m, "survives": self.survives, "why": self.why}


def family(claim_id: str) -> str:
    """A claim's family: its paper prefix (``p1.critical_core`` → ``p1``)."""
    return str(claim_id).split(".", 1)[0]


def _get(claim: Any, key: str) -> Any:
    return claim.get(key) if isinstance(claim, Mapping) else getattr(claim, key, None)


def holm_by_family(claims: Iterable[Any], alpha: float = HOLM_ALPHA) -> dict[str, HolmResult]:
    """``{claim id: HolmResult}`` over claims (Claim objects or ``report.json`` dicts with ``id``, ``verdict``, ``p``)."""
    if not 0 < alpha < 1:
        raise AnatomyKitError(f"alpha={alpha!r} must lie strictly between 0 and 1")
    claims = list(claims)
    out: dict[str, HolmResult] = {}
    for fam in dict.fromkeys(family(_get(c, "id")) for c in claims):
        members = [c for c in claims if family(_get(c, "id")) == fam]
        tested = [c for c in members if _get(c, "p") is not None]
        adjusted = dict(zip((_get(c, "id") for c in tested), holm_adjusted([float(_get(c, "p")) for c in tested])))
        for c in members:
            cid, positive = _get(c, "id"), _get(c, "verdict") in _POSITIVE
            if cid not in adjusted:
                verdict = _get(c, "verdict")
                why = (f"{verdict}: no test, nothing to correct" if verdict in ("not comparable", "holds by construction")
                       else NO_TEST)
                out[cid] = HolmResult(None, None, len(tested), None, why)
                continue
            a = adjusted[cid]
            out[cid] = HolmResult(float(_get(c, "p")), a, len(tested), (a <= alpha) if positive else None,
                                  f"Holm over the {len(tested)} tests of family {fam}: adjusted p = {a:.3g}")
    return out
