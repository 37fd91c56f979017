"""Verdicts on paper claims, decided by declared rules.

A :class:`Claim` names its entry of ``data_manifest/references.yaml`` (the paper's value is read
from there) and a rule. The rule decides (``rule.decide(ours, reference)``) and writes the text the
report shows (``rule.describe(reference)``) from the same fields, so a changed threshold changes
both; each rule's ``describe`` is its full specification. No verdict can be passed by hand.

Rules take ``ours`` as: a :class:`~anatomy_kit.stats.PairedComparison` or a list of paired
differences (t interval recomputed at the rule's confidence), an :class:`~anatomy_kit.stats.Interval`,
a ``(low, high)`` tuple, or a plain number, which counts as a zero-width point (use it only for
deterministic measurements; the reason then says "a point, no interval").

One primary statistic decides: ``ours`` is the only thing the rule sees. Other readings (another
module, a best-of-seven, the same effect by another measure) go in ``secondary``: shown in the
report and the "why" text, never passed to the rule, so they can never upgrade a verdict. Each
claim carries the decision's one-line ``summary`` (≤ 120 characters, for compact tables) and
``near_threshold`` (a number that decides the verdict lies close to its threshold: another
machine may flip it). The full list of rules is in :mod:`.rules`.

Every claim's rule, with the run's design (:class:`~.registration.Design`: the registered design at the
run's scale, and whether the run is the registered one), is checked against the registry
(:mod:`.registry`, ``data_manifest/registry/``) at construction: a rule or design the registry does
not hold is an error, a bare ``NotComparable`` included. Under an amendment the claim is decided under
the registered rule too (``registered_verdict``); the amended verdict stands unless it is more
favourable than the registered one (an amendment may make a verdict stricter, never more favourable),
and both are shown. A claim is **confirmatory** only when the registry was frozen, the run used the
plan's confirmatory seeds and text, and it is the registered run (``design.on_plan``); otherwise it is
exploratory and says so.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, is_dataclass
from typing import Any, Mapping

import numpy as np

from ..manifest import references
from ..stats import Interval, PairedComparison, PermutationNull, SpearmanResult, format_spearman, signed
from ..validate import AnatomyKitError
from .decision import _g, shorten
from .registry import Design, Match, RuleRegistry, fingerprint, rule_registry, rule_spec, standing
from .rules import (VERDICT_MEANINGS, VERDICTS, AllOf, BeyondNull, ByConstruction, Close, Decision, DifferenceSign,
                    Equivalent, EveryOf, IntervalAbove, IntervalBelow, IntervalContains, Magnitude, NotComparable, RankAtMost,
                    RankCorrelation, Precondition, Condition, SetOverlap, paper_value)

__all__ = ["VERDICTS", "VERDICT_MEANINGS", "Decision", "Magnitude", "RankAtMost", "Close", "DifferenceSign",
           "IntervalBelow", "IntervalAbove", "IntervalContains", "Equivalent", "SetOverlap", "RankCorrelation",
           "BeyondNull", "AllOf", "EveryOf", "NotComparable", "Precondition", "Condition", "ByConstruction", "Claim",
           "claims_table", "explanation", "paper_value", "Unmeasured"]

RULE_NAMES = ("Magnitude, RankAtMost, Close, DifferenceSign, IntervalBelow, IntervalAbove, IntervalContains, "
              "Equivalent, SetOverlap, RankCorrelation, BeyondNull, AllOf, EveryOf, Precondition, NotComparable or "
              "ByConstruction")


class _Unset:
    """No ``registered_ours`` given (``None`` is a valid statistic)."""

    def __repr__(self) -> str:
        return "unset"


UNSET = _Unset()
#: ``Claim(registry=...)`` default: the registry installed with the kit (:func:`.registry.rule_registry`).
INSTALLED = "installed"


@dataclass(frozen=True)
class Claim:
    """Our verdict on one paper claim, decided at construction by ``rule``; there is no verdict argument.

    ``id`` names an entry of ``data_manifest/references.yaml`` (the paper's value comes from it);
    ``ours`` is the primary statistic, the only input of ``rule``; ``secondary`` (``{name: value or
    interval}``) holds other readings, shown beside the verdict and never judged; ``evidence``
    (JSON-ready: metric keys, figure names) and ``note`` go into the report. After construction:
    ``verdict``, ``reason``, ``summary`` (one line ≤ 120 characters: the rule's, else the reason
    shortened), ``near_threshold``, ``shown`` (ours as a table shows it, when the rule says), ``interval``,
    ``null``, ``rule_text``, ``paper``, ``unit``.

    Registry (:mod:`.registry`): ``registry`` is the rule registry to check against (default: the
    installed one; ``None`` only in unit tests of rules: the claim is then ``"unchecked"``);
    ``design``: the run's :class:`~.registration.Design` of this claim (``Run.design(claim_id)``; ``None``
    only in unit tests: any registered scale's form may match). ``role`` (``primary`` or ``secondary``)
    and ``phase`` (``confirmatory`` or ``exploratory``) are read from the registry and the design.
    ``registered_ours``: the statistic the registered rule judged, required when the matching
    amendment changed the primary statistic (ignored otherwise: at another scale the same chapter
    may declare the registered rule itself). After construction: ``fingerprint``,
    ``registry_status`` (``"registered"``, ``"amended"``, ``"off plan"`` or ``"unchecked"``),
    ``amendment`` (its date, what, why, ``seen_before``, or ``None``), ``registered_verdict`` /
    ``registered_reason`` (under the registered rule; ``None`` unless amended), ``amended_verdict`` /
    ``amended_reason`` (under the amendment) and ``standing`` (which of the two is ``verdict``);
    ``p``: the deciding test's p-value (``None`` when the rule is no test), for Holm's correction.
    ``same_data_every_phase``: why this claim's statistic reads the same data in every phase (e.g. a pretrained
    model's weights, which new seeds and text do not change): its phase is then always ``"exploratory"``, since the
    rule was written after those very data were seen, and no confirmatory run can confirm it.
    """
    id: str
    ours: Any
    rule: Any
    evidence: Any = field(default=None, kw_only=True)
    note: str = field(default="", kw_only=True)
    secondary: Mapping[str, Any] | None = field(default=None, kw_only=True)
    registered_ours: Any = field(default=UNSET, kw_only=True, repr=False)
    registry: Any = field(default=INSTALLED, kw_only=True, repr=False, compare=False)
    design: Design | None = field(default=None, kw_only=True)
    same_data_every_phase: str = field(default="", kw_only=True)
    verdict: str = field(init=False)
    reason: str = field(init=False)
    summary: str = field(init=False)
    near_threshold: bool = field(init=False)
    shown: str | None = field(init=False)
    rule_text: str = field(init=False)
    interval: str | None = field(init=False)
    null: str | None = field(init=False)
    paper: Any = field(init=False)
    unit: str | None = field(init=False)
    fingerprint: str = field(init=False)
    registry_status: str = field(init=False)
    amendment: dict | None = field(init=False)
    registered_verdict: str | None = field(init=False)
    registered_reason: str | None = field(init=False)
    amended_verdict: str | None = field(init=False)
    amended_reason: str | None = field(init=False)
    standing: str | None = field(init=False)
    p: float | None = field(init=False)
    parts: tuple = field(init=False)
    saw: str | None = field(init=False)
    role: str = field(init=False)
    phase: str = field(init=False)
    registered: dict | None = field(init=False)

    def __post_init__(self) -> None:
        refs = references()
        if self.id not in refs:
            raise AnatomyKitError(f"claim id {self.id!r} is not in data_manifest/references.yaml; add an entry there "
                                  f"(claim, value, unit, source) first. Known ids: {', '.join(sorted(refs))}")
        if not (callable(getattr(self.rule, "decide", None)) and callable(getattr(self.rule, "describe", None))):
            raise AnatomyKitError(f"rule={self.rule!r} is not a rule; use {RULE_NAMES}")
        if self.secondary is not None and (not isinstance(self.secondary, Mapping) or not self.secondary):
            raise AnatomyKitError(f"secondary={self.secondary!r} must be a non-empty mapping {{name: value or "
                                  "interval}} (or None)")
        if self.design is not None and (not isinstance(self.design, Design) or self.design.claim != self.id):
            raise AnatomyKitError(f"design={self.design!r} must be the Design of claim {self.id!r} (Run.design)")
        ref = refs[self.id]
        found = self._match()
        decision, rule = _decide(self.rule, self.ours, ref), self.rule
        registered = amended = which = None
        if found is not None and found.status == "amended":
            registered_ours = self.ours
            if found.amendment.statistic_changed:
                if self.registered_ours is UNSET:
                    raise AnatomyKitError(
                        f"claim {self.id!r}: its amendment of {found.amendment.date} changed the primary statistic, "
                        "so pass registered_ours= (the statistic the registered rule judged) to decide it under "
                        "the registered rule too")
                registered_ours = self.registered_ours
            registered_rule = found.registered_rule()
            registered, amended = _decide_registered(registered_rule, registered_ours, ref), decision
            which = standing(registered.verdict, amended.verdict)
            if which == "registered":
                decision, rule = registered, registered_rule
        for name, value in (("verdict", decision.verdict), ("reason", decision.reason),
                            ("summary", decision.summary or shorten(decision.reason)),
                            ("near_threshold", decision.near_threshold), ("shown", decision.shown),
                            ("rule_text", rule.describe(ref)), ("interval", decision.interval),
                            ("null", decision.null), ("paper", ref["value"]), ("unit", ref.get("unit")),
                            ("fingerprint", fingerprint(self.rule) if _is_dataclass_rule(self.rule) else None),
                            ("registry_status", found.status if found is not None else "unchecked"),
                            ("amendment", _amendment(found)),
                            ("registered_verdict", registered and registered.verdict),
                            ("registered_reason", registered and registered.reason),
                            ("amended_verdict", amended and amended.verdict),
                            ("amended_reason", amended and amended.reason), ("standing", which), ("p", decision.p),
                            ("parts", decision.parts), ("saw", decision.saw),
                            ("role", found.role if found is not None else "secondary"),
                            ("phase", self._phase(found)),
                            ("registered", found.to_dict() if found is not None else None)):
            object.__setattr__(self, name, value)

    def _match(self) -> Match | None:
        """The claim's registration (``None``: a unit test's claim, checked against no registry)."""
        if self.registry is None:
            return None
        if self.registry != INSTALLED and not isinstance(self.registry, RuleRegistry):
            raise AnatomyKitError(f"registry={self.registry!r} must be a RuleRegistry (default: the installed one)")
        registry = installed_registry() if self.registry == INSTALLED else self.registry
        return None if registry is None else registry.match(self.id, self.rule, self.design)

    def _phase(self, found: Match | None) -> str:
        """``"confirmatory"``: the registry was frozen, the run used the plan's confirmatory seeds and text and is the
        registered run, and its rule is the frozen one or an amendment written before confirmatory numbers were
        seen; otherwise ``"exploratory"``."""
        registry = installed_registry() if self.registry == INSTALLED else self.registry
        frozen = isinstance(registry, RuleRegistry) and registry.freeze is not None
        late = found is not None and found.amendment is not None and found.amendment.seen_before
        ok = (frozen and found is not None and found.status in ("registered", "amended") and not late
              and self.design is not None and self.design.on_plan and self.design.phase == "confirmatory"
              and not self.same_data_every_phase)
        return "confirmatory" if ok else "exploratory"


    def secondary_text(self) -> dict[str, Any]:
        """``{name: what the report shows}`` of the secondary readings (intervals as text); ``{}`` if none."""
        return {str(k): _shown(v) for k, v in (self.secondary or {}).items()}

    def to_dict(self) -> dict:
        """JSON-ready: ``ours`` as shown, ``ours_data`` in full, ``secondary`` as shown and ``secondary_data``
        in full; NumPy scalars converted, inf/NaN → None."""
        return {"id": self.id, "ours": _jsonable(_summary(self.ours)), "ours_data": _jsonable(self.ours),
                "verdict": self.verdict, "summary": self.summary, "near_threshold": self.near_threshold,
                "shown": self.shown, "reason": self.reason, "rule": self.rule_text, "interval": self.interval,
                "null": self.null, "p": self.p, "paper": _jsonable(self.paper), "unit": self.unit,
                "rule_spec": rule_spec(self.rule), "fingerprint": self.fingerprint, "role": self.role,
                "phase": self.phase, "parts": [list(x) for x in self.parts], "saw": self.saw,
                "design": self.design.to_dict() if self.design is not None else None,
                "registry": {"status": self.registry_status, "amendment": self.amendment,
                             "registered": self.registered,
                             "registered_verdict": self.registered_verdict,
                             "registered_reason": self.registered_reason, "amended_verdict": self.amended_verdict,
                             "amended_reason": self.amended_reason, "standing": self.standing},
                "secondary": _jsonable(self.secondary_text()), "secondary_data": _jsonable(self.secondary),
                "evidence": _jsonable(self.evidence), "note": self.note}


def installed_registry() -> RuleRegistry | None:
    """The registry a claim is checked against by default: the installed one (the unit tests of rules
    replace this lookup in ``tests/conftest.py``; every chapter and the report use it)."""
    return rule_registry()


def _is_dataclass_rule(rule: Any) -> bool:
    return is_dataclass(rule) and not isinstance(rule, type)


@dataclass(frozen=True)
class Unmeasured:
    """What a chapter passes as a claim's statistic when its run could not measure it (``why``: what was missing,
    e.g. "the text resolves no second effect"): any rule then gives "not comparable" with that reason, never an
    error and never a verdict on a stand-in value."""
    why: str

    def to_dict(self) -> dict:
        return {"unmeasured": self.why}


def _decide(rule: Any, ours: Any, reference: Mapping) -> Decision:
    if isinstance(ours, Unmeasured):
        why = f"this run could not measure the statistic: {ours.why}"
        return Decision("not comparable", why, summary=shorten(why))
    decision = rule.decide(ours, reference)
    if not isinstance(decision, Decision):
        raise AnatomyKitError(f"{type(rule).__name__}.decide must return a Decision")
    return decision


def _decide_registered(rule: Any, ours: Any, reference: Mapping) -> Decision:
    """The registered rule's decision on this run's statistic; "not comparable" (with why) when this run holds
    nothing that rule can judge (e.g. no part measured: an empty mapping), so an amendment never hides it."""
    try:
        return _decide(rule, ours, reference)
    except AnatomyKitError as err:
        why = f"the registered rule cannot be decided on this run's data ({err})"
        return Decision("not comparable", why, summary=shorten(why))


def _amendment(found: Match | None) -> dict | None:
    return found.amendment.to_dict() if found is not None and found.amendment is not None else None


def _shown(x: Any) -> Any:
    """A secondary reading as the report shows it: intervals and tests as one line of text."""
    if isinstance(x, (PairedComparison, PermutationNull)):
        return x.describe()
    if isinstance(x, SpearmanResult):
        return format_spearman(x)
    if isinstance(x, Interval):
        return (f"{_g(x.mean)} ({100 * x.confidence:g} % {x.method} interval [{_g(x.low)}, {_g(x.high)}], "
                f"n = {x.n})")
    if isinstance(x, Mapping):
        return {str(k): _shown(v) for k, v in x.items()}
    return _summary(x)


def _summary(x: Any) -> Any:
    """What the report's "ours" column shows."""
    if isinstance(x, PairedComparison):
        return f"Δ = {signed(x.mean)}" + (f" {x.unit}" if x.unit else "")
    if isinstance(x, SpearmanResult):
        return f"ρ = {signed(x.rho, 2)}"
    if isinstance(x, (PermutationNull, Interval)):
        value = x.observed if isinstance(x, PermutationNull) else x.mean
        return float(f"{value:.4g}")             # the interval beside it shows the precision
    if isinstance(x, Mapping):
        return {str(k): _summary(v) for k, v in x.items()}
    return [_summary(v) for v in x] if isinstance(x, (list, tuple)) else x


def _jsonable(x: Any) -> Any:
    if hasattr(x, "to_dict") or (is_dataclass(x) and not isinstance(x, type)):
        return _jsonable(x.to_dict() if hasattr(x, "to_dict") else asdict(x))
    if isinstance(x, Mapping):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, set, frozenset, np.ndarray)):
        return [_jsonable(v) for v in (sorted(x) if isinstance(x, (set, frozenset)) else x)]
    x = x.item() if isinstance(x, np.generic) else x
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x if x is None or isinstance(x, (str, int, float, bool)) else str(x)


def explanation(reason: str, note: str | None = "", secondary: Mapping[str, Any] | None = None,
                near_threshold: bool = False) -> str:
    """Why a claim got its verdict, as tables show it: the rule's reason, then the claim's note, then the
    secondary readings (shown, not judged) and whether the verdict sits near its threshold."""
    text = reason + (f" Note: {note}." if note else "")
    if secondary:
        text += " Secondary, not judged: " + "; ".join(f"{k} = {_fmt(v)}" for k, v in secondary.items()) + "."
    return text + (" Near its threshold: another machine may flip this verdict." if near_threshold else "")


def _fmt(x: Any) -> str:
    if isinstance(x, float):
        return _g(x)
    if isinstance(x, Mapping):
        return "{" + ", ".join(f"{k}: {_fmt(v)}" for k, v in x.items()) + "}"
    return str(x)


def claims_table(claims: list[Claim]) -> list[dict]:
    """One row per claim for ``pandas.DataFrame``: id, paper value and unit, ours, interval/null, verdict,
    why (the rule's reason for this verdict, the claim's note, its secondary readings, a near-threshold mark)
    and the rule."""
    return [{"claim": c.id, "paper": _jsonable(c.paper), "unit": c.unit, "ours": _jsonable(_summary(c.ours)),
             "interval / null": "; ".join(t for t in (c.interval, c.null) if t) or "—", "verdict": c.verdict,
             "why": explanation(c.reason, c.note, c.secondary_text(), c.near_threshold), "rule": c.rule_text}
            for c in claims]
