"""Rules built from other rules, and the rules that never judge a number (used through :mod:`anatomy_kit.verdicts.rules`).

- ``AllOf``: a claim with several parts, each decided by its own rule, combined by one fixed table
  (:func:`~.decision.combine_verdicts`: "mixed" when some parts hold and others are contradicted);
- ``Requires``: a rule applied only when a precondition of our setting holds (else not comparable);
- ``NotComparable``: our setting cannot test the claim; the one-sentence reason is shown;
- ``ByConstruction``: the claim (or a part) holds because of how the experiment is built; shown as
  "holds by construction" with the reason, never counted towards "reproduced".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ..validate import AnatomyKitError
from .decision import VERDICTS, Decision, _g, _number, combine_verdicts, joint_p, near_threshold, shorten

COMBINATION_TEXT = ("The claim is reproduced if every counted part is; mixed if one part is reproduced (or partly) "
                    "and another not reproduced, or a part is mixed; partly reproduced if some part is reproduced or "
                    "partly and none is contradicted; otherwise not reproduced if any part is, else not established "
                    "if any part is, else not comparable. Parts that hold by construction are shown but not "
                    "counted (if all do: holds by construction).")


def _is_rule(rule: Any) -> bool:
    return callable(getattr(rule, "decide", None)) and callable(getattr(rule, "describe", None))


@dataclass(frozen=True, init=False)
class AllOf:
    """Several parts, each judged by its own rule; ``AllOf({name: rule})``, ``ours`` = ``{name: value}``.
    Combined by :func:`~.decision.combine_verdicts`; near its threshold when a counted part is."""
    parts: tuple[tuple[str, Any], ...]

    def __init__(self, parts: Mapping[str, Any]):
        if not isinstance(parts, Mapping) or not parts:
            raise AnatomyKitError("AllOf needs a non-empty mapping {part name: rule}")
        bad = [str(k) for k, v in parts.items() if not _is_rule(v)]
        if bad:
            raise AnatomyKitError(f"AllOf parts {bad} are not rules (each needs decide and describe)")
        object.__setattr__(self, "parts", tuple((str(k), v) for k, v in parts.items()))

    def describe(self, reference: Mapping) -> str:
        inner = " ".join(f"({name}) {rule.describe(reference)}" for name, rule in self.parts)
        return f"All of {len(self.parts)} parts: {inner} {COMBINATION_TEXT}"

    def decide(self, ours: Any, reference: Mapping) -> Decision:
        names = [name for name, _ in self.parts]
        if not isinstance(ours, Mapping) or sorted(map(str, ours)) != sorted(names):
            raise AnatomyKitError(f"AllOf needs ours as a mapping with exactly the parts {names}")
        ours = {str(k): v for k, v in ours.items()}
        done = [(name, rule.decide(ours[name], reference)) for name, rule in self.parts]
        verdicts = [d.verdict for _, d in done]
        n_built = verdicts.count("holds by construction")
        built = f"; {n_built} hold{'s' * (n_built == 1)} by construction (not counted)" if n_built else ""
        reason = (f"{verdicts.count('reproduced')} of {len(done) - n_built} counted parts reproduced{built}: "
                  + "; ".join(f"{name}: {d.verdict} ({d.reason})" for name, d in done))
        interval, null = ("; ".join(f"{n}: {getattr(d, w)}" for n, d in done if getattr(d, w)) or None
                          for w in ("interval", "null"))
        counts = ", ".join(f"{verdicts.count(v)} {v}" for v in VERDICTS if v in verdicts)
        near = any(d.near_threshold for _, d in done if d.verdict != "holds by construction")
        p = joint_p([d.p for _, d in done if d.verdict != "holds by construction"])
        return Decision(combine_verdicts(verdicts), reason, interval, null,
                        shorten(f"{len(done)} part{'s' * (len(done) != 1)}: {counts}"), near, p=p)


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
        return Decision("not comparable", self.why, summary=shorten(self.why))


@dataclass(frozen=True)
class ByConstruction:
    """The claim (or a part of it) holds because of how our experiment is built, so our number is no
    evidence for it; ``why`` (one sentence) says how, e.g. "the trainable-layer-step saving is fixed by
    the schedule's shape before any training" or "zero-padded directions get zero gradient, so they stay
    dead exactly". Verdict "holds by construction" whatever ``ours``; inside :class:`AllOf` the part is
    shown but not counted, so it can never make a claim "reproduced". Chapters 3 and 6."""
    why: str

    def __post_init__(self) -> None:
        if not str(self.why).strip():
            raise AnatomyKitError("ByConstruction needs a one-sentence why: how the construction makes it hold")

    def describe(self, reference: Mapping) -> str:
        return ("Holds by construction, whatever our number: the experiment is built so that it holds (the reason "
                "follows), so it is no evidence for the claim and never counts towards reproduced.")

    def decide(self, ours: Any, reference: Mapping) -> Decision:
        return Decision("holds by construction", self.why, summary=shorten(f"by construction: {self.why}"))


@dataclass(frozen=True)
class Requires:
    """Judge by ``rule`` only when a precondition of our setting reaches ``minimum``; otherwise not comparable.

    ``ours = {"precondition": x, "value": v}``: with ``x < minimum`` (say a prediction's held-out
    R² of 0.01 when the claim needs a prediction with skill, or a step cap of 2 when the claim
    is about 200 steps) our number cannot speak to the claim; with ``x ≥ minimum`` ``rule``
    decides ``v``. ``what`` names the precondition in the text (e.g. "the prediction's held-out R²").
    Near its threshold when the inner decision is, or when ``x`` is within 5 % of ``minimum``.
    """
    rule: Any
    minimum: float
    what: str

    def __post_init__(self) -> None:
        if not _is_rule(self.rule):
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
        gate_near = near_threshold(x, x, [self.minimum])
        if x < self.minimum:
            return Decision("not comparable", f"{self.what} is {_g(x)}, below the {_g(self.minimum)} the claim "
                            "needs, so our number cannot speak to it",
                            summary=shorten(f"{self.what} {_g(x)} < {_g(self.minimum)}: cannot speak to the claim"),
                            near_threshold=gate_near)
        inner = self.rule.decide(ours["value"], reference)
        return Decision(inner.verdict, f"{self.what} is {_g(x)} ≥ {_g(self.minimum)}; {inner.reason}",
                        inner.interval, inner.null, inner.summary or shorten(inner.reason),
                        inner.near_threshold or gate_near, inner.shown, p=inner.p)
