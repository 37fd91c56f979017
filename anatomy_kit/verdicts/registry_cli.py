"""The rule registry's command line: ``python -m anatomy_kit.verdicts check | show [CLAIM]``.

``check`` reads ``data_manifest/registry/`` and verifies every fingerprint against its entry and, once
frozen, against the freeze; ``show`` prints each claim's role, registered rule and design by scale and its
amendments (with ``CLAIM``: the history line and the differences too).
Nothing here writes the registry: a changed rule is an amendment entered by hand, with its reason.
"""

from __future__ import annotations

import sys

from ..validate import AnatomyKitError
from .designs import design_problems
from .registry import RuleRegistry, rule_registry, spec_difference


def _show(registry: RuleRegistry, claim: str | None) -> str:
    ids = [claim] if claim else sorted(registry.entries)
    lines = []
    for cid in ids:
        if cid not in registry.entries:
            raise AnatomyKitError(f"claim {cid!r} is not registered; known: {', '.join(sorted(registry.entries))}")
        r = registry.entries[cid]
        smoke = r.forms["smoke"]
        lines.append(f"{cid} ({r.chapter}): {r.role}, {smoke.spec['rule']}, fingerprint {r.fingerprint}; smoke design "
                     f"{smoke.design}")
        if claim:
            lines.append(f"  history: {r.history}")
            lines += [f"  {scale}: {f.spec['rule']}, design {f.design}" for scale, f in r.forms.items() if scale != "smoke"]
        for a in r.amendments:
            lines.append(f"  amended {a.date} ({a.role}, {a.fingerprint}): {a.what} "
                         f"({'after' if a.seen_before else 'before'} confirmatory numbers were seen). Why: {a.why}")
            if claim:
                lines += [f"    {d}" for d in spec_difference(smoke.spec, a.forms["smoke"].spec)]
    return "\n".join(lines)


def _fingerprints() -> str:
    """Every claim's stored and computed fingerprint, read from the files without checking them (a draft's entries
    are being written; once frozen, a mismatch is an edit that needs an amendment instead)."""
    from ..manifest import rule_registry_docs
    from .registry import _forms, _role, claim_fingerprint

    rule_registry_docs.cache_clear()
    chapters, _ = rule_registry_docs()
    lines = []
    for doc in chapters:
        for cid, entry in (doc.get("claims") or {}).items():
            try:
                fp = claim_fingerprint(_role(cid, entry.get("role")), _forms(cid, entry.get("forms")))
            except AnatomyKitError as err:
                fp = f"(cannot compute: {err})"
            mark = "" if str(entry.get("fingerprint")) == fp else "   ← differs"
            lines.append(f"{doc.get('chapter')} {cid}: stored {entry.get('fingerprint')}, computed {fp}{mark}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``check``: read and verify the registry; ``show [CLAIM]``: print it; ``fingerprints``: stored beside computed
    fingerprints (for writing an entry or an amendment by hand). Never writes."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["fingerprints"]:
        print(_fingerprints())
        return 0
    if not args or args[0] not in ("check", "show") or len(args) > 2 or (args[0] == "check" and len(args) > 1):
        print("usage: python -m anatomy_kit.verdicts check | show [CLAIM] | fingerprints", file=sys.stderr)
        return 2
    try:
        registry = rule_registry()
        if args[0] == "check":
            n_amended = sum(bool(r.amendments) for r in registry.entries.values())
            n_primary = sum(r.current[0] == "primary" for r in registry.entries.values())
            state = (f"frozen {registry.freeze.date}; every entry matches the freeze" if registry.freeze
                     else "not frozen yet (a draft)")
            print(f"{len(registry.entries)} claims registered ({n_primary} primary), {n_amended} amended; every "
                  f"fingerprint matches its entry; {state}")
            problems = design_problems(registry)
            for p in problems:
                print(f"design: {p}", file=sys.stderr)
            if problems and registry.freeze is not None:
                print(f"error: {len(problems)} frozen design(s) cannot decide", file=sys.stderr)
                return 1
            if problems:
                print(f"{len(problems)} design problem(s) to fix before the freeze")
        else:
            print(_show(registry, args[1] if len(args) > 1 else None))
    except AnatomyKitError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0
