"""What a claim's decision is, as data, and the registry that freezes it (rules and designs fixed before
the confirmatory data).

:func:`rule_spec` turns a rule (a frozen dataclass of :mod:`.rules`, :mod:`.combine`, :mod:`.equivalence`
or :mod:`.magnitude`, possibly nested) into plain JSON-ready data: ``{"rule": class name, "params":
{field: value}}``, nested rules described the same way; :func:`build_rule` is its inverse.
:func:`fingerprint` hashes a spec canonically (sorted keys), leaving out purely descriptive text
(:data:`DESCRIPTIVE_PARAMS`) and keeping everything that can change a verdict.

The registry (``data_manifest/registry/``: one file per chapter, and ``freeze.yaml``) holds, per claim:
its ``role`` (``primary``: one of at most three per family, corrected by Holm together; ``secondary``:
shown with its unadjusted p), one line of ``history`` (the commits where its rule was written and
changed: every rule of this book was written after the exploratory smoke data of 2026-12-02 … 12-04
had been seen), and its ``forms``: per scale (``smoke``, ``hour``, ``full``) the rule's ``spec`` (the
smoke spec where a scale gives none) and the ``design`` that decides it (the run sizes, seed counts,
blocks, null draws, arms compared, K, a precondition's threshold, the test and the number of units
its smallest attainable p comes from). The claim's ``fingerprint`` hashes its role and every form
(spec and design), so a change of either is a change of the claim. ``freeze.yaml`` records the freeze
(``frozen``: the date and every claim's fingerprint at the freeze) and the confirmatory ``plan``
(seed offset, held-out text). After the freeze every change is an ``amendment`` (date, what, why,
``seen_before``: whether confirmatory numbers had been seen, and the new forms), and a frozen entry
is never edited: :class:`RuleRegistry` refuses a registry whose frozen fingerprints do not match.

:func:`RuleRegistry.match` is what every :class:`~.claims.Claim` calls: an unknown id, or a rule whose
fingerprint (with the run's :class:`Design`) matches neither the registered form of its scale nor an
amendment, is an error that names the difference; a bare ``NotComparable`` is a rule like any other
(no free pass). An amendment may make a verdict stricter, never more favourable (:func:`standing`, by
the order :data:`FAVOUR`, in which "not comparable" and "holds by construction" rank above "not
reproduced"): the claim is decided under both forms, and the registered verdict stands when the
amended one would be more favourable.

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

__all__ = ["rule_spec", "build_rule", "fingerprint", "spec_difference", "Form", "Amendment", "Registration",
           "Freeze", "Design", "RuleRegistry", "Match", "rule_registry", "match", "standing", "FAVOUR",
           "DESCRIPTIVE_PARAMS", "REGISTRY_DIR", "SCALES", "ROLES", "claim_fingerprint"]

REGISTRY_DIR = "data_manifest/registry"
SCALES = ("smoke", "hour", "full")
ROLES = ("primary", "secondary")
#: Parameters that are text for the reader only, left out of a fingerprint (per rule class). A rule
#: class may declare its own with a class attribute ``descriptive_params`` (a tuple of field names).
DESCRIPTIVE_PARAMS = {"NotComparable": ("why",), "ByConstruction": ("why",), "Requires": ("what",),
                      "Equivalent": ("basis",), "Condition": ("needs",)}
#: How favourable a verdict is to the paper's claim (larger = more favourable). "Not comparable" and
#: "holds by construction" speak for nothing, but they do not contradict the claim either: they rank with
#: "not established", above "not reproduced", so an amendment that moves a "not reproduced" there is a
#: more favourable one and never stands.
FAVOUR = {"reproduced": 4, "partly reproduced": 3, "mixed": 2, "not established": 1, "not comparable": 1,
          "holds by construction": 1, "not reproduced": 0}
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



def _canonical(x: Any) -> str:
    return json.dumps(x, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _design_value(x: Any) -> Any:
    """A design as plain data (tuples as lists, NumPy scalars as numbers), so a design read back from YAML equals
    the one a chapter built."""
    return json.loads(_canonical(_value(x)))


@dataclass(frozen=True)
class Form:
    """A claim's rule and design at one scale: ``spec`` (:func:`rule_spec`) and ``design`` (``{name: value}``:
    the run sizes, seeds, blocks, null draws, arms, K or thresholds that decide the claim)."""
    spec: dict
    design: dict

    def decisive(self) -> dict:
        """What a fingerprint hashes: the spec without its descriptive text, and the design."""
        return {"spec": _decisive(self.spec), "design": self.design}


def claim_fingerprint(role: str, forms: Mapping[str, Form]) -> str:
    """A short sha256 (16 hex digits) of a claim's role and every form (spec and design, by scale)."""
    canonical = _canonical({"role": role, "forms": {k: f.decisive() for k, f in sorted(forms.items())}})
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:_HEX]


@dataclass(frozen=True)
class Amendment:
    """A rule or design changed after the freeze: when, what, why, whether confirmatory numbers had been seen
    (``seen_before``), the new ``forms`` and their fingerprint (with the role, which an amendment may change).

    ``statistic_changed``: the amendment changed the primary statistic itself, so the claim must pass the
    statistic the registered rule judged (``Claim(..., registered_ours=...)``)."""
    date: str
    what: str
    why: str
    seen_before: bool
    role: str
    forms: Mapping[str, Form]
    fingerprint: str
    statistic_changed: bool = False

    def to_dict(self) -> dict:
        return {"date": self.date, "fingerprint": self.fingerprint, "what": self.what, "why": self.why,
                "seen_before": self.seen_before, "statistic_changed": self.statistic_changed, "role": self.role}


@dataclass(frozen=True)
class Registration:
    """A claim's registered role and forms (:class:`Form` by scale), its history line and amendments, oldest
    first. Every registration of this book is exploratory in origin: the rule was written after the
    exploratory smoke data had been seen (``history`` names the commits); only data collected after the
    freeze can confirm it."""
    claim: str
    chapter: str
    role: str
    history: str
    forms: Mapping[str, Form]
    fingerprint: str
    amendments: tuple[Amendment, ...] = ()

    @property
    def current(self) -> tuple[str, Mapping[str, Form]]:
        """``(role, forms)`` in force: the latest amendment's, else the registered ones."""
        if self.amendments:
            return self.amendments[-1].role, self.amendments[-1].forms
        return self.role, self.forms


@dataclass(frozen=True)
class Freeze:
    """The freeze (``freeze.yaml``): its ``date``, every claim's fingerprint at the freeze, and the confirmatory
    ``plan`` (``{"seed_offset": int, "text": what the held-out evaluation text is}``)."""
    date: str
    fingerprints: Mapping[str, str]
    plan: Mapping[str, Any]


@dataclass(frozen=True)
class Design:
    """What a run declares of one claim's design (``anatomy_kit.book.run.Run.design`` builds it).

    ``scale``: the scale whose registered form applies; ``values``: the design (the registered one, read
    by the chapter); ``on_plan``: the run is the registered one (no parameter set away from the scale's
    default that the design or the data depend on); ``off_plan``: why not (empty when on plan);
    ``phase``: ``"exploratory"`` or ``"confirmatory"`` (the seeds and text the run used); ``spec``: the registered
    rule's spec at this scale (:attr:`rule` builds it)."""
    claim: str
    scale: str
    values: Mapping[str, Any]
    on_plan: bool = True
    off_plan: str = ""
    phase: str = "exploratory"
    spec: Mapping | None = None

    def __post_init__(self) -> None:
        if self.scale not in SCALES:
            raise AnatomyKitError(f"Design scale={self.scale!r} must be one of {list(SCALES)}")
        object.__setattr__(self, "values", _design_value(dict(self.values)))

    def __getitem__(self, key: str) -> Any:
        if key not in self.values:
            raise AnatomyKitError(f"claim {self.claim!r}: its registered design at scale {self.scale!r} has no "
                                  f"{key!r}; it has {sorted(self.values)}")
        return self.values[key]

    @property
    def rule(self) -> Any:
        """The registered rule at this scale (built from the form's spec; ``None`` when the design was made by hand
        without one): chapters decide every claim with it, so a rule lives in the registry alone."""
        return None if self.spec is None else build_rule(self.spec)

    def to_dict(self) -> dict:
        return {"scale": self.scale, "values": dict(self.values), "on_plan": self.on_plan, "off_plan": self.off_plan,
                "phase": self.phase}


@dataclass(frozen=True)
class Match:
    """How a claim's rule and design relate to its registration: ``status`` is ``"registered"`` (the form in force
    at the run's scale), ``"amended"`` (``amendment`` names which; ``registered_form`` the frozen one at that
    scale) or ``"off plan"`` (the registered rule on a run that is not the registered one: exploratory)."""
    status: str
    registration: Registration
    amendment: Amendment | None = None
    scale: str | None = None

    def registered_rule(self) -> Any:
        """The frozen (registered) rule at the matched scale."""
        return build_rule(_form(self.registration.forms, self.scale, self.registration.claim).spec)

    def to_dict(self) -> dict:
        """What a claim records of its registration (the report shows it)."""
        r = self.registration
        done = r.amendments[:r.amendments.index(self.amendment)] if self.amendment is not None else ()
        return {"status": self.status, "role": self.role, "fingerprint": r.fingerprint, "history": r.history,
                "scale": self.scale, "amendment": self.amendment.to_dict() if self.amendment is not None else None,
                "earlier_amendments": [a.to_dict() for a in done]}

    @property
    def role(self) -> str:
        return self.amendment.role if self.amendment is not None else self.registration.role


def _form(forms: Mapping[str, Form], scale: str | None, claim: str) -> Form:
    key = scale or "smoke"
    if key not in forms:
        raise AnatomyKitError(f"claim {claim!r} has no registered form at scale {key!r}; it has {sorted(forms)}")
    return forms[key]


def _text(where: str, key: str, x: Any) -> str:
    if not isinstance(x, str) or not x.strip():
        raise AnatomyKitError(f"{REGISTRY_DIR}: {where}: {key}={x!r} must be a non-empty text")
    return x


def _forms(where: str, raw: Any) -> dict[str, Form]:
    """``{scale: Form}`` from ``{scale: {spec?, design}}``; a scale without ``spec`` takes the smoke spec."""
    if not isinstance(raw, Mapping) or "smoke" not in raw or not set(raw) <= set(SCALES):
        raise AnatomyKitError(f"{REGISTRY_DIR}: {where}: forms must map scales {list(SCALES)} (smoke at least) to "
                              f"{{spec, design}}, got {sorted(raw) if isinstance(raw, Mapping) else raw!r}")
    out: dict[str, Form] = {}
    for scale in SCALES:
        if scale not in raw:
            continue
        entry = raw[scale]
        if not isinstance(entry, Mapping) or not set(entry) <= {"spec", "design"}:
            raise AnatomyKitError(f"{REGISTRY_DIR}: {where}, {scale}: a form is {{spec, design}}, got {entry!r}")
        spec = entry.get("spec", out["smoke"].spec if "smoke" in out else None)
        if not _is_spec(spec):
            raise AnatomyKitError(f"{REGISTRY_DIR}: {where}, {scale}: spec must be {{rule: class name, params: {{...}}}}")
        build_rule(spec)                          # the spec must describe a rule
        design = entry.get("design")
        if not isinstance(design, Mapping):
            raise AnatomyKitError(f"{REGISTRY_DIR}: {where}, {scale}: design must be a mapping {{name: value}}")
        out[scale] = Form(dict(spec), _design_value(dict(design)))
    return out


def _role(where: str, x: Any) -> str:
    if x not in ROLES:
        raise AnatomyKitError(f"{REGISTRY_DIR}: {where}: role={x!r} must be one of {list(ROLES)}")
    return x


def _checked(where: str, role: str, forms: Mapping[str, Form], stored: Any) -> str:
    actual = claim_fingerprint(role, forms)
    if str(stored) != actual:
        raise AnatomyKitError(f"{REGISTRY_DIR}: {where}: the stored fingerprint {stored} is not its role's and "
                              f"forms' ({actual}); a registered entry is never edited: add an amendment instead")
    return actual


@dataclass(frozen=True)
class RuleRegistry:
    """Every registered claim (``{claim id: Registration}``) and the freeze (``None`` before it)."""
    entries: Mapping[str, Registration]
    freeze: Freeze | None = None

    @classmethod
    def from_docs(cls, chapters: list[Mapping], freeze: Mapping | None = None) -> "RuleRegistry":
        """From the parsed chapter files (``{chapter, claims: {id: entry}}``) and ``freeze.yaml``'s mapping; every
        fingerprint is checked against its entry, and, once frozen, against the freeze."""
        entries: dict[str, Registration] = {}
        for doc in chapters:
            if not isinstance(doc, Mapping) or not isinstance(doc.get("claims"), Mapping):
                raise AnatomyKitError(f"{REGISTRY_DIR}: a chapter file holds {{chapter, claims: {{id: entry}}}}")
            chapter = _text("a chapter file", "chapter", doc.get("chapter"))
            for claim, entry in doc["claims"].items():
                if claim in entries:
                    raise AnatomyKitError(f"{REGISTRY_DIR}: claim {claim!r} is registered twice")
                entries[str(claim)] = _registration(str(claim), chapter, entry)
        frozen = None
        if freeze is not None:
            frozen = _freeze(freeze, entries)
        return cls(entries, frozen)

    def match(self, claim_id: str, rule: Any, design: Design | None = None) -> Match:
        """The claim's registration and how ``rule`` (with the run's ``design``) relates to it; an error when the id
        is unknown or the rule matches neither the registered form of the run's scale nor an amendment."""
        if claim_id not in self.entries:
            raise AnatomyKitError(f"claim {claim_id!r} has no registered rule in {REGISTRY_DIR}; register it "
                                  f"(role, history, forms: {{smoke: {{spec, design}}}}) with spec "
                                  f"{json.dumps(rule_spec(rule), ensure_ascii=False)}")
        reg = self.entries[claim_id]
        scale = design.scale if design is not None else None
        fp = fingerprint(rule)

        def fits(forms: Mapping[str, Form]) -> bool:
            candidates = [forms[scale]] if scale is not None and scale in forms else \
                [] if scale is not None else list(forms.values())
            return any(fingerprint(f.spec) == fp and (design is None or dict(design.values) == f.design)
                       for f in candidates)

        for a in reversed(reg.amendments):
            if fits(a.forms):
                return Match("amended" if design is None or design.on_plan else "off plan", reg, a, scale)
        if fits(reg.forms):
            return Match("registered" if design is None or design.on_plan else "off plan", reg, None, scale)
        role, forms = reg.current
        want = _form(forms, scale, claim_id)
        diff = spec_difference(want.spec, rule_spec(rule))
        if design is not None and dict(design.values) != want.design:
            diff += [f"design.{k}: {_short(want.design.get(k, '(absent)'))} → {_short(design.values.get(k, '(absent)'))}"
                     for k in sorted(set(want.design) | set(design.values))
                     if want.design.get(k) != design.values.get(k)]
        raise AnatomyKitError(
            f"claim {claim_id!r}: its rule (fingerprint {fp}) and design at scale {scale or 'smoke'!r} are neither "
            f"the registered form nor an amendment. Differences: {'; '.join(diff) or 'none in the spec'}. A rule "
            f"or design changed after the freeze is an amendment: add to {claim_id}'s amendments in "
            f"{REGISTRY_DIR}/{reg.chapter}.yaml an entry {{date, what, why, seen_before, role, forms, fingerprint}}")


def _registration(claim: str, chapter: str, entry: Any) -> Registration:
    if not isinstance(entry, Mapping):
        raise AnatomyKitError(f"{REGISTRY_DIR}: {claim}: an entry must be a mapping")
    unknown = set(entry) - {"role", "history", "forms", "fingerprint", "amendments"}
    if unknown:
        raise AnatomyKitError(f"{REGISTRY_DIR}: {claim}: unknown field(s) {sorted(unknown)}")
    role, forms = _role(claim, entry.get("role")), _forms(claim, entry.get("forms"))
    fp = _checked(claim, role, forms, entry.get("fingerprint"))
    amendments = []
    for i, a in enumerate(entry.get("amendments") or []):
        where = f"{claim}, amendment {i + 1}"
        if not isinstance(a, Mapping) or not isinstance(a.get("seen_before"), bool):
            raise AnatomyKitError(f"{REGISTRY_DIR}: {where}: an amendment needs seen_before: true or false")
        a_role, a_forms = _role(where, a.get("role", role)), _forms(where, a.get("forms"))
        amendments.append(Amendment(_text(where, "date", str(a.get("date"))), _text(where, "what", a.get("what")),
                                    _text(where, "why", a.get("why")), a["seen_before"], a_role, a_forms,
                                    _checked(where, a_role, a_forms, a.get("fingerprint")),
                                    bool(a.get("statistic_changed", False))))
    return Registration(claim, chapter, role, _text(claim, "history", entry.get("history")), forms, fp,
                        tuple(amendments))


def _freeze(doc: Mapping, entries: Mapping[str, Registration]) -> Freeze | None:
    frozen = doc.get("frozen") if isinstance(doc, Mapping) else None
    plan = doc.get("plan") if isinstance(doc, Mapping) else None
    if frozen is None:
        return None
    if not isinstance(frozen, Mapping) or not isinstance(frozen.get("fingerprints"), Mapping):
        raise AnatomyKitError(f"{REGISTRY_DIR}/freeze.yaml: frozen must hold date and fingerprints {{claim: fp}}")
    fps = {str(k): str(v) for k, v in frozen["fingerprints"].items()}
    if set(fps) != set(entries):
        raise AnatomyKitError(f"{REGISTRY_DIR}/freeze.yaml: the freeze lists {sorted(set(fps) ^ set(entries))} "
                              "differently from the chapter files; a claim cannot be added or removed after the freeze")
    edited = [c for c, fp in fps.items() if entries[c].fingerprint != fp]
    if edited:
        raise AnatomyKitError(f"{REGISTRY_DIR}: {', '.join(sorted(edited))} differ from the frozen registry (their "
                              "role, spec or design was edited): a frozen entry is never edited; restore it and add "
                              "an amendment")
    if not isinstance(plan, Mapping):
        raise AnatomyKitError(f"{REGISTRY_DIR}/freeze.yaml: plan must say the confirmatory seeds and text")
    return Freeze(_text("freeze.yaml", "date", str(frozen.get("date"))), fps, dict(plan))


def rule_registry() -> RuleRegistry:
    """The registry installed with the kit (``data_manifest/registry/``, read once)."""
    from ..manifest import rule_registry_docs

    chapters, freeze = rule_registry_docs()
    return _from_docs_cached(id(chapters), chapters, freeze)


_CACHE: dict[int, RuleRegistry] = {}


def _from_docs_cached(key: int, chapters: list, freeze: Mapping | None) -> RuleRegistry:
    if key not in _CACHE:
        _CACHE.clear()
        _CACHE[key] = RuleRegistry.from_docs(chapters, freeze)
    return _CACHE[key]


def match(claim_id: str, rule: Any, registry: RuleRegistry | None = None, design: Design | None = None) -> Match:
    """:meth:`RuleRegistry.match` on ``registry`` (default: the installed one)."""
    return (registry or rule_registry()).match(claim_id, rule, design)


def standing(registered: str, amended: str) -> str:
    """Which verdict stands when an amendment gives ``amended`` and the registered rule ``registered``:
    ``"amended"`` unless it is more favourable (:data:`FAVOUR`) than the registered one, then ``"registered"``."""
    for v in (registered, amended):
        if v not in FAVOUR:
            raise AnatomyKitError(f"verdict {v!r} is not one of {list(FAVOUR)}")
    return "registered" if FAVOUR[amended] > FAVOUR[registered] else "amended"
