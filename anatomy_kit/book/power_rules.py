"""What a claim's rule decides, for :mod:`anatomy_kit.book.power`: the boundaries of a rule that decides by an
interval's side (Close, Magnitude, IntervalBelow/Above, DifferenceSign, Equivalent, IntervalContains), whether
the rule decides anything at the smoke estimate, how far an interval may reach before its verdict changes
(probing the rule itself), and the size of a primary's Holm family."""

from __future__ import annotations

from ..validate import AnatomyKitError
from ..verdicts import power as P
from .power_spread import _number


def _paper(claim: dict, key: str | None) -> float | None:
    paper = claim.get("paper")
    if isinstance(paper, dict) and key is not None:
        paper = paper.get(key)
    return _number(paper)


def _boundaries(spec: dict, claim: dict) -> tuple[list[float], str, str] | None:
    """``(boundaries, what, method)`` of a rule that decides by an interval's side, else ``None``."""
    rule, p = spec["rule"], spec["params"]
    method = p.get("method") if p.get("method") in P.METHODS else "t"
    if rule in ("IntervalBelow", "IntervalAbove"):
        return [float(p["threshold"])], f"interval vs {p['threshold']:g}", method
    if rule == "DifferenceSign":
        return [0.0], "sign of the paired difference", method
    if rule == "Equivalent":
        v, m = float(p.get("value", 0.0)), float(p["margin"])
        return [v - m, v + m], f"equivalence within ±{m:g}", method
    if rule == "IntervalContains":
        return [float(p.get("value", 0.0))], f"interval contains {p.get('value', 0.0):g}", method
    paper = _paper(claim, p.get("key"))
    if paper is None or paper == 0:
        return None
    if rule == "Magnitude":
        f, g = float(p["within_factor"]), float(p["partly_factor"])
        return [paper / f, paper * f, paper / g, paper * g], f"within a factor {f:g} of the paper's {paper:g}", "t"
    if rule == "Close":
        bands = []
        if p.get("abs_tol") is not None:
            bands += [paper - p["abs_tol"], paper + p["abs_tol"]]
        if p.get("rel_tol") is not None:
            bands += [paper * (1 - p["rel_tol"]), paper * (1 + p["rel_tol"])]
        if p.get("partly_factor") is not None:
            bands += [paper / p["partly_factor"], paper * p["partly_factor"]]
        return (bands, f"close to the paper's {paper:g}", "t") if bands else None
    return None


def _reference(claim: dict) -> dict:
    """The claim's paper entry as a rule reads it (``{"value": ...}``): report.json's ``paper`` dict, or a
    :meth:`Claim.to_dict`'s value with its unit."""
    paper = claim.get("paper")
    return dict(paper) if isinstance(paper, dict) and "value" in paper else {"value": paper, "unit": claim.get("unit")}


def _decides_at(spec: dict, claim: dict, iv: dict, confidence: float) -> bool:
    """Whether the rule decides anything (a verdict other than "not established") on an interval shrunk to the
    smoke estimate ``iv["mean"]``: a boundary decides only where crossing it decides the rule."""
    from ..stats import Interval
    from ..verdicts.registry import build_rule

    mean = _number(iv.get("mean"))
    if mean is None:
        return True
    eps = 1e-9 * max(1.0, abs(mean))
    method = spec["params"].get("method") if spec["params"].get("method") in P.METHODS else "t"
    narrow = Interval(mean, mean - eps, mean + eps, 60, eps, 59, confidence, method)   # 60 units: any floor met
    try:
        decision = build_rule(spec).decide(narrow, _reference(claim))
    except AnatomyKitError:
        return True                       # a rule that cannot judge a bare interval: leave it to the units
    return decision.verdict != "not established"


def _probe(spec: dict, claim: dict, low: float, high: float, confidence: float, method: str) -> str | None:
    """The rule's verdict on an interval ``[low, high]`` of many units (``None``: the rule cannot judge one)."""
    from ..stats import Interval
    from ..verdicts.registry import build_rule

    mean = (low + high) / 2
    try:
        return build_rule(spec).decide(Interval(mean, low, high, 60, max(high - low, 1e-12), 59, confidence, method),
                                       _reference(claim)).verdict
    except (AnatomyKitError, ValueError, OverflowError):
        return None


def _deciding_distance(spec: dict, claim: dict, scale: tuple, confidence: float, method: str,
                       nearest: float) -> float:
    """How far an interval centred on the smoke estimate may reach, on the interval's own scale, before the rule's
    verdict changes: the half-width the units must get below. Found by widening the interval until the rule
    says something else (bisection); a boundary whose crossing does not change the verdict (a magnitude's inner
    band when the outer band decides) does not count. ``nearest`` (the distance to the nearest listed boundary)
    where the rule cannot be probed."""
    m, fwd, inv = scale
    h0 = 1e-9 * max(1.0, abs(m))
    try:
        at = _probe(spec, claim, inv(m - h0), inv(m + h0), confidence, method)
    except (OverflowError, ValueError):
        return nearest
    if at is None:
        return nearest

    def same(h: float) -> bool:
        try:
            return _probe(spec, claim, inv(m - h), inv(m + h), confidence, method) == at
        except (OverflowError, ValueError):
            return False

    lo, hi = h0, max(nearest, 2 * h0)
    while same(hi) and hi < 1e6 * max(1.0, abs(m)):
        lo, hi = hi, 2 * hi
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if same(mid) else (lo, mid)
    return lo if lo > 0 else nearest


def _family_size(claim_id: str) -> int | None:
    """The number of tested parts of the claim's family's primaries at smoke, from the registry (``None``: the
    registry does not know the claim or names no test)."""
    from ..verdicts.designs import part_count
    from ..verdicts.multiplicity import family
    from ..verdicts.registry import rule_registry

    registry = rule_registry()
    m = 0
    for cid, entry in registry.entries.items():
        role, forms = entry.current
        if role == "primary" and family(cid) == family(claim_id) and "smoke" in forms:
            try:
                m += part_count(forms["smoke"].design, cid)
            except AnatomyKitError:
                m += 1
    return m or None
