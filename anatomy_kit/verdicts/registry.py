"""What a claim's decision is, as data, and the registry that holds it (pre-registration with an amendment log).

:func:`rule_spec` turns a rule (a frozen dataclass of :mod:`.rules`, :mod:`.combine`, :mod:`.equivalence`
or :mod:`.magnitude`, possibly nested) into plain JSON-ready data: ``{"rule": class name, "params":
{field: value}}``, nested rules described the same way; :func:`build_rule` is its inverse.
:func:`fingerprint` hashes a spec canonically (sorted keys), leaving out purely descriptive text
(:data:`DESCRIPTIVE_PARAMS`: a ``NotComparable.why``, a ``Requires.what``, an ``Equivalent.basis``)
and keeping everything that can change a verdict (thresholds, nulls, margins, alpha, confidence,
method, parts, the seeds and draws of a null, the number of seeds a rule demands).

``data_manifest/rule_registry.yaml`` holds, per claim id, the rule registered for it (its spec,
fingerprint and the date of the commit that first declared it) and a list of amendments (date,
spec, fingerprint, ``what`` changed, ``why``, ``seen_before``: whether the numbers had been seen
before the change, ``statistic_changed``: whether the amendment changed the primary statistic
itself). Where the chapter declares the same rule in another form at another scale (one part per
model, and full scale measures seven models), the registration and each amendment list that
form under ``variants`` (``{label: {spec, fingerprint}}``, e.g. ``full``); a variant of an
amendment is judged against the registration's variant of the same label. :func:`match` is what every :class:`~.claims.Claim` calls at construction: an unknown id,
or a rule whose fingerprint matches neither the registered rule nor an amendment, is an error
that names the difference and how to add an amendment. A claim decided by a bare
:class:`~.combine.NotComparable` (the run cannot speak) is not judged under its registered rule
and says so; it can never be positive.

An amendment may make a verdict stricter, never more favourable (:func:`standing`, by the order
:data:`FAVOUR`): the claim is decided under both rules, and when the amended verdict would be more
favourable than the registered one the registered verdict stands, with the amended one shown beside it.

Command line: ``python -m anatomy_kit.verdicts check | show [CLAIM]`` (:mod:`.registry_cli`);
nothing ever writes the registry.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
from dataclasses import dataclass, field, fields, is_dataclass
from functools import lru_cache
from typing import Any, Mapping

import numpy as np

from ..validate import AnatomyKitError

__all__ = ["rule_spec", "build_rule", "fingerprint", "spec_difference", "Amendment", "Registration",
           "RuleRegistry", "Match", "rule_registry", "match", "standing", "FAVOUR", "DESCRIPTIVE_PARAMS",
           "REGISTRY_FILE"]

REGISTRY_FILE = "data_manifest/rule_registry.yaml"
#: Parameters that are text for the reader only, left out of a fingerprint (per rule class). A rule
#: class may declare its own with a class attribute ``descriptive_params`` (a tuple of field names).
DESCRIPTIVE_PARAMS = {"NotComparable": ("why",), "ByConstruction": ("why",), "Requires": ("what",),
                      "Equivalent": ("basis",), "Condition": ("needs",)}
#: How favourable a verdict is to the paper's claim (larger = more favourable). "Not comparable" and
#: "holds by construction" speak for nothing, so they rank with "not reproduced" at the bottom; "not
#: established" is above "not reproduced" (it does not contradict the claim).
FAVOUR = {"reproduced": 4, "partly reproduced": 3, "mixed": 2, "not established": 1, "not reproduced": 0,
          "not comparable": 0, "holds by construction": 0}
_HEX = 16                                   # hex digits of a fingerprint (64 bits)


def rule_spec(rule: Any) -> dict:
    """``{"rule": class name, "params": {field: value}}`` of a rule, nested rules described alike.

    >>> from anatomy_kit.verdicts.rules import IntervalBelow
    >>> rule_spec(IntervalBelow(0.0, method="t"))["params"]["method"]
    't'
    """
    if not (is_dataclass(rule) and not isinstance(rule, type)):
        raise AnatomyKitError(f"rule={rule!r} is not a rule (a dataclass of anatomy_kit.verdicts.rules)")
    return {"rule": type(rule).__name__, "params": {f.name: _value(getattr(rule, f.name)) for f in fields(rule)}}


def _value(x: Any) -> Any:
    if is_dataclass(x) and not isinstance(x, type):
        return rule_spec(x)
    if isinstance(x, dict):
        return {str(k): _value(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, np.ndarray)):
        return [_value(v) for v in x]
    if isinstance(x, (set, frozenset)):
        return sorted(_value(v) for v in x)
    x = x.item() if isinstance(x, np.generic) else x
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if x is None or isinstance(x, (str, int, float, bool)):
        return x
    if callable(x):
        return f"{getattr(x, '__module__', '?')}.{getattr(x, '__qualname__', repr(x))}"
    return repr(x)


@lru_cache(maxsize=None)
def _rule_classes() -> dict[str, type]:
    """``{class name: class}`` of every rule class and of the dataclasses rules are declared with."""
    from . import combine, equivalence, magnitude, rules, sets

    out: dict[str, type] = {}
    for module in (rules, combine, equivalence, magnitude, sets):
        for name, obj in vars(module).items():
            # the rules and the data they are declared with (a Precondition's Condition)
            if isinstance(obj, type) and is_dataclass(obj) and obj.__module__ == module.__name__:
                out[name] = obj
    return out


def _is_spec(x: Any) -> bool:
    return isinstance(x, Mapping) and set(x) == {"rule", "params"} and isinstance(x["params"], Mapping)


def build_rule(spec: Mapping) -> Any:
    """The rule a spec describes (the inverse of :func:`rule_spec`): ``build_rule(rule_spec(r)) == r``."""
    if not _is_spec(spec):
        raise AnatomyKitError(f"spec={spec!r} is not a rule spec {{'rule': class name, 'params': {{...}}}}")
    classes = _rule_classes()
    if spec["rule"] not in classes:
        raise AnatomyKitError(f"rule {spec['rule']!r} is not a rule class; known: {', '.join(sorted(classes))}")
    cls = classes[spec["rule"]]
    params = {str(k): _restore(v) for k, v in spec["params"].items()}
    # a constructor that takes a field as *args (Precondition(rule, *conditions)) gets it unpacked
    signature = list(inspect.signature(cls).parameters.values())
    star = next((p for p in signature if p.kind is p.VAR_POSITIONAL), None)
    try:
        if star is not None and star.name in params:
            args = [params.pop(p.name) for p in signature[:signature.index(star)]] + list(params.pop(star.name))
            return cls(*args, **params)
        return cls(**params)
    except TypeError as err:
        raise AnatomyKitError(f"cannot build {spec['rule']} from {dict(spec['params'])}: {err}") from None


def _restore(x: Any) -> Any:
    if _is_spec(x):
        return build_rule(x)
    if isinstance(x, Mapping):
        return {k: _restore(v) for k, v in x.items()}
    if isinstance(x, list):
        items = tuple(_restore(v) for v in x)
        # AllOf's parts: (name, rule) pairs, given back as the mapping its constructor takes
        if items and all(isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str)
                         and callable(getattr(p[1], "decide", None)) for p in items):
            return dict(items)
        return items
    if x in ("inf", "-inf", "nan"):
        return float(x)
    return x


def _descriptive(name: str) -> tuple[str, ...]:
    cls = _rule_classes().get(name)
    own = tuple(getattr(cls, "descriptive_params", ()) or ()) if cls is not None else ()
    return DESCRIPTIVE_PARAMS.get(name, ()) + own


def _decisive(x: Any) -> Any:
    """A spec without its descriptive text (what a fingerprint hashes)."""
    if _is_spec(x):
        skip = _descriptive(str(x["rule"]))
        return {"rule": x["rule"], "params": {k: _decisive(v) for k, v in x["params"].items() if k not in skip}}
    if isinstance(x, Mapping):
        return {str(k): _decisive(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_decisive(v) for v in x]
    return x


def fingerprint(rule_or_spec: Any) -> str:
    """A short sha256 (16 hex digits) of the canonical JSON of the rule's spec (sorted keys), its descriptive
    text left out: equal for the same decision whatever the dict order or wording, different when any
    parameter that can change a verdict differs."""
    spec = rule_or_spec if _is_spec(rule_or_spec) else rule_spec(rule_or_spec)
    canonical = json.dumps(_decisive(spec), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:_HEX]


def spec_difference(old: Mapping, new: Mapping) -> list[str]:
    """``["params.null: 'exchangeable' → 'edge'", ...]``: where two specs differ in what decides (text left out)."""
    out: list[str] = []

    def walk(a: Any, b: Any, path: str) -> None:
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            for k in sorted(set(a) | set(b), key=str):
                walk(a.get(k, "(absent)"), b.get(k, "(absent)"), f"{path}.{k}" if path else str(k))
        elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            for i, (u, v) in enumerate(zip(a, b)):
                walk(u, v, f"{path}[{i}]")
        elif a != b:
            out.append(f"{path or 'spec'}: {_short(a)} → {_short(b)}")

    walk(_decisive(old), _decisive(new), "")
    return out


def _short(x: Any, limit: int = 160) -> str:
    text = json.dumps(x, ensure_ascii=False, sort_keys=True) if not isinstance(x, str) else repr(x)
    return text if len(text) <= limit else text[:limit - 1] + "…"


@dataclass(frozen=True)
class Amendment:
    """A rule changed after its registration: when, to what, what changed, why, whether the numbers had been seen.

    ``statistic_changed``: the amendment changed the primary statistic itself, so the claim must pass
    the statistic the registered rule judged (``Claim(..., registered_ours=...)``)."""
    date: str
    spec: dict
    fingerprint: str
    what: str
    why: str
    seen_before: bool
    statistic_changed: bool = False
    variants: Mapping[str, tuple[dict, str]] = field(default_factory=dict)
    """``{label: (spec, fingerprint)}``: the amended rule as the chapter declares it at another scale."""

    def to_dict(self) -> dict:
        return {"date": self.date, "fingerprint": self.fingerprint, "what": self.what, "why": self.why,
                "seen_before": self.seen_before, "statistic_changed": self.statistic_changed}


@dataclass(frozen=True)
class Registration:
    """A claim's registered rule (spec, fingerprint, the date first declared) and its amendments, oldest first.

    ``seen_before``: the rule was first declared after some of the claim's numbers had been seen (the
    history shows them earlier), said in ``note``; such a registration is weaker evidence of a rule
    fixed before the data, and the report says so."""
    claim: str
    date: str
    spec: dict
    fingerprint: str
    amendments: tuple[Amendment, ...] = ()
    seen_before: bool = False
    note: str = ""
    variants: Mapping[str, tuple[dict, str]] = field(default_factory=dict)
    """``{label: (spec, fingerprint)}``: the registered rule as the chapter declares it at another scale."""


@dataclass(frozen=True)
class Match:
    """How a claim's rule relates to its registration: ``status`` is ``"registered"`` (the registered rule),
    ``"amended"`` (``amendment`` names which) or ``"not judged"`` (a bare NotComparable: the run cannot speak)."""
    status: str
    registration: Registration
    amendment: Amendment | None = None
    variant: str | None = None
    """The label of the form matched (``None``: the registered spec itself)."""

    def registered_rule(self) -> Any:
        """The registered rule in the form of the matched variant (the same scale's form)."""
        if self.variant is None:
            return build_rule(self.registration.spec)
        if self.variant not in self.registration.variants:
            raise AnatomyKitError(f"claim {self.registration.claim!r}: its amendment has a {self.variant!r} form but "
                                  f"its registration does not; add it under the registration's variants")
        return build_rule(self.registration.variants[self.variant][0])

    def to_dict(self) -> dict:
        """What a claim records of its registration (the report shows it)."""
        r = self.registration
        return {"status": self.status, "date": r.date, "fingerprint": r.fingerprint,
                "seen_before": r.seen_before, "note": r.note, "variant": self.variant,
                "amendment": self.amendment.to_dict() if self.amendment is not None else None,
                "earlier_amendments": [a.to_dict() for a in r.amendments[:r.amendments.index(self.amendment)]]
                if self.amendment is not None else []}


def _text(where: str, key: str, x: Any) -> str:
    if not isinstance(x, str) or not x.strip():
        raise AnatomyKitError(f"{REGISTRY_FILE}: {where}: {key}={x!r} must be a non-empty text")
    return x


def _variants(where: str, entry: Mapping) -> dict[str, tuple[dict, str]]:
    raw = entry.get("variants") or {}
    if not isinstance(raw, Mapping):
        raise AnatomyKitError(f"{REGISTRY_FILE}: {where}: variants must be a mapping {{label: {{spec, fingerprint}}}}")
    return {str(label): _checked_fp(f"{where}, variant {label}", v) for label, v in raw.items()}


def _checked_fp(where: str, entry: Mapping) -> tuple[dict, str]:
    spec, stored = entry.get("spec"), str(entry.get("fingerprint"))
    if not _is_spec(spec):
        raise AnatomyKitError(f"{REGISTRY_FILE}: {where}: spec must be {{rule: class name, params: {{...}}}}")
    actual = fingerprint(spec)
    if actual != stored:
        raise AnatomyKitError(f"{REGISTRY_FILE}: {where}: the stored fingerprint {stored} is not its spec's "
                              f"({actual}); a registered spec is never edited: add an amendment instead")
    build_rule(spec)                          # the spec must still describe a rule
    return dict(spec), actual


@dataclass(frozen=True)
class RuleRegistry:
    """Every registered claim (``{claim id: Registration}``), read from ``rule_registry.yaml``."""
    entries: Mapping[str, Registration]

    @classmethod
    def from_doc(cls, doc: Mapping) -> "RuleRegistry":
        """From the parsed YAML: ``{"rule_registry": {claim id: {date, spec, fingerprint, amendments}}}``; every
        fingerprint is checked against its spec."""
        if not isinstance(doc, Mapping) or not isinstance(doc.get("rule_registry"), Mapping):
            raise AnatomyKitError(f"{REGISTRY_FILE} must hold a mapping under the key 'rule_registry'")
        entries = {}
        for claim, entry in doc["rule_registry"].items():
            if not isinstance(entry, Mapping):
                raise AnatomyKitError(f"{REGISTRY_FILE}: {claim}: an entry must be a mapping")
            spec, fp = _checked_fp(claim, entry)
            amendments = []
            for i, a in enumerate(entry.get("amendments") or []):
                where = f"{claim}, amendment {i + 1}"
                a_spec, a_fp = _checked_fp(where, a)
                if not isinstance(a.get("seen_before"), bool):
                    raise AnatomyKitError(f"{REGISTRY_FILE}: {where}: seen_before must be true or false")
                amendments.append(Amendment(_text(where, "date", str(a.get("date"))), a_spec, a_fp,
                                            _text(where, "what", a.get("what")), _text(where, "why", a.get("why")),
                                            a["seen_before"], bool(a.get("statistic_changed", False)),
                                            _variants(where, a)))
            seen = entry.get("seen_before", False)
            if not isinstance(seen, bool) or (seen and not str(entry.get("note") or "").strip()):
                raise AnatomyKitError(f"{REGISTRY_FILE}: {claim}: seen_before must be true or false, and true needs "
                                      "a note saying which numbers had been seen")
            entries[str(claim)] = Registration(str(claim), _text(claim, "date", str(entry.get("date"))), spec, fp,
                                               tuple(amendments), seen, str(entry.get("note") or ""),
                                               _variants(claim, entry))
        return cls(entries)

    def match(self, claim_id: str, rule: Any) -> Match:
        """The claim's registration and how ``rule`` relates to it; an error when the id is unknown or the rule
        matches neither the registered rule nor an amendment."""
        if claim_id not in self.entries:
            raise AnatomyKitError(f"claim {claim_id!r} has no registered rule in {REGISTRY_FILE}; register its rule "
                                  f"before the data: an entry {claim_id}: {{date, spec, fingerprint, amendments: []}} "
                                  f"with spec {json.dumps(rule_spec(rule), ensure_ascii=False)} and fingerprint "
                                  f"{fingerprint(rule)}")
        reg = self.entries[claim_id]
        if type(rule).__name__ == "NotComparable" and reg.spec["rule"] != "NotComparable":
            return Match("not judged", reg)
        fp = fingerprint(rule)
        if fp == reg.fingerprint:
            return Match("registered", reg)
        for label, (_, variant_fp) in reg.variants.items():
            if fp == variant_fp:
                return Match("registered", reg, None, label)
        for a in reversed(reg.amendments):
            if fp == a.fingerprint:
                return Match("amended", reg, a)
            for label, (_, variant_fp) in a.variants.items():
                if fp == variant_fp:
                    return Match("amended", reg, a, label)
        latest = reg.amendments[-1].spec if reg.amendments else reg.spec
        diff = "; ".join(spec_difference(latest, rule_spec(rule)))
        raise AnatomyKitError(
            f"claim {claim_id!r}: its rule (fingerprint {fp}) is neither the one registered on {reg.date} "
            f"({reg.fingerprint}) nor an amendment. Differences from the "
            f"{'latest amendment' if reg.amendments else 'registered rule'}: {diff}. A rule changed after its "
            f"numbers were seen is an amendment: add to {claim_id}'s amendments in {REGISTRY_FILE} an entry "
            f"{{date, what, why, seen_before, statistic_changed, spec: "
            f"{json.dumps(rule_spec(rule), ensure_ascii=False)}, fingerprint: {fp}}}")


def rule_registry() -> RuleRegistry:
    """The registry installed with the kit (``data_manifest/rule_registry.yaml``, read once)."""
    from ..manifest import rule_registry_doc

    return _from_doc_cached(id(rule_registry_doc()), rule_registry_doc())


_CACHE: dict[int, RuleRegistry] = {}


def _from_doc_cached(key: int, doc: Mapping) -> RuleRegistry:
    if key not in _CACHE:
        _CACHE.clear()
        _CACHE[key] = RuleRegistry.from_doc(doc)
    return _CACHE[key]


def match(claim_id: str, rule: Any, registry: RuleRegistry | None = None) -> Match:
    """:meth:`RuleRegistry.match` on ``registry`` (default: the installed one)."""
    return (registry or rule_registry()).match(claim_id, rule)


def standing(registered: str, amended: str) -> str:
    """Which verdict stands when an amendment gives ``amended`` and the registered rule ``registered``:
    ``"amended"`` unless it is more favourable (:data:`FAVOUR`) than the registered one, then ``"registered"``."""
    for v in (registered, amended):
        if v not in FAVOUR:
            raise AnatomyKitError(f"verdict {v!r} is not one of {list(FAVOUR)}")
    return "registered" if FAVOUR[amended] > FAVOUR[registered] else "amended"
