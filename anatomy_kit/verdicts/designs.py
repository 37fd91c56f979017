"""Designs that can decide: the smallest p a registered design can give, and the check that every claim's
design can reach its level (a primary: after Holm's correction over its family).

Every registered form (:mod:`.registry`) declares, beside the run sizes that decide the claim, the test
its verdict rests on: ``test`` (one of :data:`TESTS`), ``units`` (what the test's smallest attainable p
comes from: paired seeds or blocks, enumerated orders, Monte Carlo draws, points of a rank correlation)
and ``parts`` (how many tested parts the claim has; default 1). :func:`smallest_attainable_p` turns that
into the best p the design can give whatever the data; :func:`design_problems` lists every design that
cannot decide: a family with more than three primaries, a primary part whose best p times the number of
tested parts of its family's primaries exceeds α (Holm's first step), a primary without a test, a
secondary whose best p exceeds α, or a Monte Carlo null whose p could land on α itself.
Used by the registry's tests and ``python -m anatomy_kit.verdicts check``.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from ..validate import AnatomyKitError
from .multiplicity import HOLM_ALPHA, MAX_PRIMARIES, design_can_survive, family

__all__ = ["TESTS", "smallest_attainable_p", "part_count", "design_problems"]

#: The tests a design may name, with how its smallest attainable p follows from ``units`` (n):
#: ``sign-flip`` 2/2ⁿ (exact, two-sided, n paired values); ``t`` 0 (a continuous test: any p is
#: attainable); ``permutation-exact`` 1/n (n enumerated orders or sets, ours among them);
#: ``monte-carlo`` 1/(1 + n) (n seeded draws); ``spearman-exact`` 2/n! (n untied points, two-sided);
#: ``floor`` the declared ``floor`` itself (a null whose best case the chapter computes, e.g. the
#: hypergeometric chance of the best overlap); ``none`` (a band, a magnitude: no p at all).
TESTS = ("sign-flip", "t", "permutation-exact", "monte-carlo", "spearman-exact", "floor", "none")


def _units(design: Mapping, claim: str) -> int:
    n = design.get("units")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise AnatomyKitError(f"claim {claim!r}: design units={n!r} must be a positive whole number (the seeds, "
                              "blocks, orders, draws or points the test's smallest p comes from)")
    return n


def smallest_attainable_p(design: Mapping, claim: str = "?") -> float | None:
    """The smallest p the design's test can give whatever the data (``None``: the design names no test)."""
    test = design.get("test")
    if test not in TESTS:
        raise AnatomyKitError(f"claim {claim!r}: design test={test!r} must be one of {list(TESTS)}")
    if test == "none":
        return None
    if test == "t":
        return 0.0
    if test == "floor":
        floor = design.get("floor")
        if isinstance(floor, bool) or not isinstance(floor, (int, float)) or not 0 < floor <= 1:
            raise AnatomyKitError(f"claim {claim!r}: design floor={floor!r} must be a probability in (0, 1]")
        return float(floor)
    n = _units(design, claim)
    return {"sign-flip": lambda: 2.0 / 2 ** n, "permutation-exact": lambda: 1.0 / n,
            "monte-carlo": lambda: 1.0 / (1 + n), "spearman-exact": lambda: 2.0 / math.factorial(n)}[test]()


def part_count(design: Mapping, claim: str = "?") -> int:
    """How many tested parts the claim has (``parts``, default 1)."""
    parts = design.get("parts", 1)
    if isinstance(parts, bool) or not isinstance(parts, int) or parts < 1:
        raise AnatomyKitError(f"claim {claim!r}: design parts={parts!r} must be a positive whole number")
    return parts


def design_problems(registry: Any, scale: str = "smoke", alpha: float = HOLM_ALPHA) -> list[str]:
    """Every reason a registered design at ``scale`` cannot decide (empty: every design can), over the forms in
    force (an amendment's where one exists). ``registry``: a :class:`~.registry.RuleRegistry`."""
    problems: list[str] = []
    current = {cid: r.current for cid, r in registry.entries.items()}
    families: dict[str, list[str]] = {}
    for cid, (role, _) in current.items():
        if role == "primary":
            families.setdefault(family(cid), []).append(cid)
    for fam, ids in families.items():
        if len(ids) > MAX_PRIMARIES:
            problems.append(f"family {fam} names {len(ids)} primary claims ({', '.join(sorted(ids))}); at most "
                            f"{MAX_PRIMARIES}")
    for cid, (role, forms) in sorted(current.items()):
        if scale not in forms:
            continue
        design = forms[scale].design
        try:
            floor = smallest_attainable_p(design, cid)
            parts = part_count(design, cid)
        except AnatomyKitError as err:
            problems.append(str(err))
            continue
        if design.get("test") == "monte-carlo" and float(alpha * (1 + design["units"])).is_integer():
            problems.append(f"{cid}: {design['units']} Monte Carlo draws can give p = α = {alpha:g} exactly "
                            f"((1 + k)/(1 + {design['units']})); choose a number of draws that cannot")
        if role == "primary":
            if floor is None:
                problems.append(f"{cid}: a primary claim needs a test (its design names none): it cannot survive "
                                "a correction")
                continue
            m = sum(part_count(current[o][1][scale].design, o) for o in families.get(family(cid), [])
                    if scale in current[o][1])
            if floor > 0 and not design_can_survive(floor, m, alpha):
                problems.append(f"{cid}: its smallest attainable p {floor:.3g} × {m} tested parts of family "
                                f"{family(cid)}'s primaries = {floor * m:.3g} > α = {alpha:g}: it can never "
                                "survive Holm")
        elif floor is not None and floor > alpha:
            problems.append(f"{cid}: its smallest attainable p {floor:.3g} > α = {alpha:g}: the design cannot decide")
    return problems
