"""A rule as data: :func:`rule_spec` turns a rule (a frozen dataclass of :mod:`.rules`, :mod:`.combine`,
:mod:`.equivalence`, :mod:`.magnitude` or :mod:`.sets`, possibly nested) into plain JSON-ready data
(``{"rule": class name, "params": {field: value}}``, nested rules described the same way), :func:`build_rule` is
its inverse, :func:`fingerprint` hashes a spec canonically (sorted keys), leaving out purely descriptive text
(:data:`DESCRIPTIVE_PARAMS`) and keeping everything that can change a verdict, and :func:`spec_difference` says
where two specs differ. :mod:`.registry` registers and matches rules by these specs."""

from __future__ import annotations

import hashlib
import inspect
import json
import math
from dataclasses import fields, is_dataclass
from functools import lru_cache
from typing import Any, Mapping

import numpy as np

from ..validate import AnatomyKitError

__all__ = ["rule_spec", "build_rule", "fingerprint", "spec_difference", "DESCRIPTIVE_PARAMS"]

#: Parameters that are text for the reader only, left out of a fingerprint (per rule class). A rule
#: class may declare its own with a class attribute ``descriptive_params`` (a tuple of field names).
DESCRIPTIVE_PARAMS = {"NotComparable": ("why",), "ByConstruction": ("why",), "Requires": ("what",),
                      "Equivalent": ("basis",), "Condition": ("needs",)}
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
