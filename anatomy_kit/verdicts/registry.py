"""What a claim's decision is, as data, and the registry that freezes it (rules and designs fixed before
the confirmatory data).

A rule is registered as data (:mod:`.specs`: :func:`~.specs.rule_spec`, its inverse
:func:`~.specs.build_rule`, and :func:`~.specs.fingerprint`, which hashes a spec canonically, leaving out
purely descriptive text and keeping everything that can change a verdict).

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
is never edited: :class:`RuleRegistry` refuses a registry whose frozen fingerprints do not match. The
records (:class:`~.registration.Form`, :class:`~.registration.Registration`, :class:`~.registration.Design`, …)
live in :mod:`.registration`; reading and checking the files, in :mod:`.registry_files`. This module matches
rules against them; every name above stays importable from here.

:func:`RuleRegistry.match` is what every :class:`~.claims.Claim` calls: an unknown id, or a rule whose
fingerprint (with the run's :class:`~.registration.Design`) matches neither the registered form of its
scale nor an amendment, is an error that names the difference; a bare ``NotComparable`` is a rule like any other
(no free pass). An amendment may make a verdict stricter, never more favourable (:func:`standing`, by
the order :data:`FAVOUR`, in which "not comparable" and "holds by construction" rank above "not
reproduced"): the claim is decided under both forms, and the registered verdict stands when the
amended one would be more favourable.

Command line: ``python -m anatomy_kit.verdicts check | show [CLAIM]`` (:mod:`.registry_cli`);
nothing ever writes the registry.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping

from ..validate import AnatomyKitError
# _forms, _role (the command line), _design_value and _is_spec (the tests) are read from here too
from .registration import (ROLES, SCALES, Amendment, Design, Form, Freeze, Match, Registration, _design_value,
                           _form, claim_fingerprint)
from .registry_files import REGISTRY_DIR, _forms, _freeze, _registration, _role, _text
from .specs import DESCRIPTIVE_PARAMS, _is_spec, _short, build_rule, fingerprint, rule_spec, spec_difference

__all__ = ["rule_spec", "build_rule", "fingerprint", "spec_difference", "Form", "Amendment", "Registration",
           "Freeze", "Design", "RuleRegistry", "Match", "rule_registry", "match", "standing", "FAVOUR",
           "DESCRIPTIVE_PARAMS", "REGISTRY_DIR", "SCALES", "ROLES", "claim_fingerprint"]

#: How favourable a verdict is to the paper's claim (larger = more favourable). "Not comparable" and
#: "holds by construction" speak for nothing, but they do not contradict the claim either: they rank with
#: "not established", above "not reproduced", so an amendment that moves a "not reproduced" there is a
#: more favourable one and never stands.
FAVOUR = {"reproduced": 4, "partly reproduced": 3, "mixed": 2, "not established": 1, "not comparable": 1,
          "holds by construction": 1, "not reproduced": 0}


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
