"""What a claim's decision is, as data: the canonical description of a rule that a registry can fingerprint.

:func:`rule_spec` turns a rule (a frozen dataclass of :mod:`.rules`, :mod:`.combine`, :mod:`.equivalence`
or :mod:`.magnitude`, possibly nested) into plain JSON-ready data: ``{"rule": class name, "params":
{field: value}}``, nested rules described the same way. Every claim records it beside its verdict
(``Claim.to_dict()["rule_spec"]``), so the rule that decided a verdict can be compared with the one
registered before the data.
"""

from __future__ import annotations

import math
from dataclasses import fields, is_dataclass
from typing import Any

import numpy as np

from ..validate import AnatomyKitError


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
