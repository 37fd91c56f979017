"""Rules built from other rules, and the rule that never judges (used through :mod:`anatomy_kit.book.rules`).

- ``AllOf``: a claim with several parts, each decided by its own rule, combined by a fixed table;
- ``Requires``: a rule applied only when a precondition of our setting holds (else not comparable);
- ``NotComparable``: our setting cannot test the claim; the one-sentence reason is shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ..validate import AnatomyKitError
from .decision import Decision, _g, _number


@dataclass(frozen=True, init=False)
class AllOf:
    """Several parts, each judged by its own rule; ``AllOf({name: rule})``, ``ours`` = ``{name: value}``."""
    parts: tuple[tuple[str, Any], ...]

    def __init__(self, parts: Mapping[str, Any]):
        if not isinstance(parts, Mapping) or not parts:
            raise AnatomyKitError("AllOf needs a non-empty mapping {part name: rule}")
        object.__setattr__(self, "parts", tuple((str(k), v) for k, v in parts.items()))

    def describe(self, reference: Mapping) -> str:
        inner = " ".join(f"({name}) {rule.describe(reference)}" for name, rule in self.parts)
        return (f"All of {len(self.parts)} parts: {inner} The claim is reproduced if every part is; partly reproduced "
                "if at least one is reproduced or partly; otherwise not reproduced if any part is, else not "
                "established if any part is, else not comparable.")

    def decide(self, ours: Any, reference: Mapping) -> Decision:
        names = [name for name, _ in self.parts]
        if not isinstance(ours, Mapping) or sorted(map(str, ours)) != sorted(names):
            raise AnatomyKitError(f"AllOf needs ours as a mapping with exactly the parts {names}")
        ours = {str(k): v for k, v in ours.items()}
        done = [(name, rule.decide(ours[name], reference)) for name, rule in self.parts]
        verdicts = [d.verdict for _, d in done]
        if all(v == "reproduced" for v in verdicts):
            verdict = "reproduced"
        elif {"reproduced", "partly reproduced"} & set(verdicts):
            verdict = "partly reproduced"
        else:
            verdict = next(v for v in ("not reproduced", "not established", "not comparable") if v in verdicts)
        reason = f"{verdicts.count('reproduced')} of {len(done)} parts reproduced: " + "; ".join(
            f"{name}: {d.verdict} ({d.reason})" for name, d in done)
        interval, null = ("; ".join(f"{n}: {getattr(d, w)}" for n, d in done if getattr(d, w)) or None
                          for w in ("interval", "null"))
        return Decision(verdict, reason, interval, null)


@dataclass(frozen=True)
class NotComparable:
    """Our setting cannot test the claim; ``why`` (one sentence) is the reason shown."""
    why: str

    def __post_init__(self) -> None:
        if not str(self.why).strip():
            raise AnatomyKitError("NotComparable needs a one-sentence why")

    def describe(self, reference: Mapping) -> str:
        return "Not comparable, whatever our number: our setting cannot test the claim (the reason follows)."

    def decide(self, ours: Any, reference: Mapping) -> Decision:
        return Decision("not comparable", self.why)


@dataclass(frozen=True)
class Requires:
    """Judge by ``rule`` only when a precondition of our setting reaches ``minimum``; otherwise not comparable.

    ``ours = {"precondition": x, "value": v}``: with ``x < minimum`` (say a prediction's held-out
    R² of 0.01 when the claim needs a prediction with skill, or a step cap of 2 when the claim
    is about 200 steps) our number cannot speak to the claim; with ``x ≥ minimum`` ``rule``
    decides ``v``. ``what`` names the precondition in the text (e.g. "the prediction's held-out R²").
    """
    rule: Any
    minimum: float
    what: str

    def __post_init__(self) -> None:
        if not (callable(getattr(self.rule, "decide", None)) and callable(getattr(self.rule, "describe", None))):
            raise AnatomyKitError(f"Requires needs a rule to apply, got {self.rule!r}")
        _number("minimum", self.minimum)
        if not str(self.what).strip():
            raise AnatomyKitError("Requires needs `what`: a few words naming the precondition")

    def describe(self, reference: Mapping) -> str:
        return (f"Not comparable unless {self.what} is at least {_g(self.minimum)}; then: "
                f"{self.rule.describe(reference)}")

    def decide(self, ours: Any, reference: Mapping) -> Decision:
        if not isinstance(ours, Mapping) or set(ours) != {"precondition", "value"}:
            raise AnatomyKitError('Requires needs ours as {"precondition": number, "value": what the rule judges}')
        x = _number(self.what, ours["precondition"])
        if x < self.minimum:
            return Decision("not comparable", f"{self.what} is {_g(x)}, below the {_g(self.minimum)} the claim "
                            "needs, so our number cannot speak to it")
        inner = self.rule.decide(ours["value"], reference)
        return Decision(inner.verdict, f"{self.what} is {_g(x)} ≥ {_g(self.minimum)}; {inner.reason}",
                        inner.interval, inner.null)
