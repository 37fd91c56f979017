"""The registry's records: a claim's :class:`Form` at each scale (rule spec and design), its
:class:`Registration` and :class:`Amendment` s, the :class:`Freeze`, the :class:`Design` a run declares and the
:class:`Match` of a claim's rule to its registration, with :func:`claim_fingerprint` (the hash of a claim's role
and every form). :mod:`.registry_files` reads them from the registry's files; :mod:`.registry` matches rules
against them."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Mapping

from ..validate import AnatomyKitError
from .specs import _HEX, _decisive, _value, build_rule

__all__ = ["Form", "Amendment", "Registration", "Freeze", "Design", "Match", "claim_fingerprint", "SCALES", "ROLES"]

SCALES = ("smoke", "hour", "full")
ROLES = ("primary", "secondary")


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
