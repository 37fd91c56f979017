"""The rule registry's command line: ``python -m anatomy_kit.verdicts check | show [CLAIM]``.

``check`` reads ``data_manifest/rule_registry.yaml`` and verifies every fingerprint against its spec;
``show`` prints each claim's registered rule and its amendments (with ``CLAIM``: the differences too).
Nothing here writes the registry: a changed rule is an amendment entered by hand, with its reason.
"""

from __future__ import annotations

import sys

from ..validate import AnatomyKitError
from .registry import RuleRegistry, rule_registry, spec_difference


def _show(registry: RuleRegistry, claim: str | None) -> str:
    ids = [claim] if claim else sorted(registry.entries)
    lines = []
    for cid in ids:
        if cid not in registry.entries:
            raise AnatomyKitError(f"claim {cid!r} is not registered; known: {', '.join(sorted(registry.entries))}")
        r = registry.entries[cid]
        lines.append(f"{cid}: {r.spec['rule']} {r.fingerprint} registered {r.date}")
        for a in r.amendments:
            lines.append(f"  amended {a.date} → {a.spec['rule']} {a.fingerprint}: {a.what} "
                         f"({'after' if a.seen_before else 'before'} the numbers were seen). Why: {a.why}")
            if claim:
                lines += [f"    {d}" for d in spec_difference(r.spec, a.spec)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``check``: read and verify the registry; ``show [CLAIM]``: print it. Never writes."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in ("check", "show") or len(args) > 2 or (args[0] == "check" and len(args) > 1):
        print("usage: python -m anatomy_kit.verdicts check | show [CLAIM]", file=sys.stderr)
        return 2
    try:
        registry = rule_registry()
        if args[0] == "check":
            n_amended = sum(bool(r.amendments) for r in registry.entries.values())
            print(f"{len(registry.entries)} claims registered, {n_amended} amended; every fingerprint matches its spec")
        else:
            print(_show(registry, args[1] if len(args) > 1 else None))
    except AnatomyKitError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0
