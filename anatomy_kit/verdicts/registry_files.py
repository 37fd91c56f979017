"""Reading the registry's files (``data_manifest/registry/``): a chapter file's entries into
:class:`~.registration.Registration` s (every form's spec must build a rule, every stored fingerprint must be its
role's and forms'), and ``freeze.yaml`` into the :class:`~.registration.Freeze` (which must list every claim
with the fingerprint it has). Every error names the file's entry and what is accepted."""

from __future__ import annotations

from typing import Any, Mapping

from ..validate import AnatomyKitError
from .registration import ROLES, SCALES, Amendment, Form, Freeze, Registration, _design_value, claim_fingerprint
from .specs import _is_spec, build_rule

REGISTRY_DIR = "data_manifest/registry"


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
