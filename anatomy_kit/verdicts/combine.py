"""Rules built from other rules, and the rules that never judge a number (used through :mod:`anatomy_kit.verdicts.rules`).

- ``AllOf``: a claim with several parts, each decided by its own rule, combined by one fixed table
  (:func:`~.decision.combine_verdicts`: "mixed" when some parts hold and others are contradicted);
- ``Precondition``: a rule applied only when our run meets the claim's named ``Condition`` s (else not
  comparable, with the unmet conditions named): the one way every chapter says a run cannot speak
  (``Requires``, one numeric condition, is its spelling in rules registered before it);
- ``OnePartPerSignal``: an ``AllOf`` whose parts are signals, where signals that are one ranking in
  two names (groups the chapter finds by a rule declared with it) count as one part;
- ``EveryOf``: a claim about every member (every model): each part one member, and the claim holds
  only if every member does, is refuted if any member is, and is otherwise undecided;
- ``NotComparable``: our setting cannot test the claim; the one-sentence reason is shown;
- ``ByConstruction``: the claim (or a part) holds because of how the experiment is built; shown as
  "holds by construction" with the reason, never counted towards "reproduced".
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping

from ..validate import AnatomyKitError
from .decision import (VERDICTS, Decision, _g, _number, combine_verdicts, joint_p, near_threshold, shorten,
                       tested_parts)

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

    def _inner(self, reference: Mapping) -> str:
        return " ".join(f"({name}) {rule.describe(reference)}" for name, rule in self.parts)

    def _decide_parts(self, ours: Any, reference: Mapping) -> list[tuple[str, Decision]]:
        """``[(part name, its rule's decision)]`` after checking that ``ours`` names exactly the parts."""
        names = [name for name, _ in self.parts]
        if not isinstance(ours, Mapping) or sorted(map(str, ours)) != sorted(names):
            raise AnatomyKitError(f"{type(self).__name__} needs ours as a mapping with exactly the parts {names}")
        ours = {str(k): v for k, v in ours.items()}
        return [(name, rule.decide(ours[name], reference)) for name, rule in self.parts]

    @staticmethod
    def _joined(done: list[tuple[str, Decision]]) -> tuple[str | None, str | None]:
        """Every part's interval, and every part's null, named and joined (``None`` where no part has one)."""
        return tuple("; ".join(f"{n}: {getattr(d, w)}" for n, d in done if getattr(d, w)) or None
                     for w in ("interval", "null"))

    def describe(self, reference: Mapping) -> str:
        return f"All of {len(self.parts)} parts: {self._inner(reference)} {COMBINATION_TEXT}"

    def decide(self, ours: Any, reference: Mapping) -> Decision:
        done = self._decide_parts(ours, reference)
        verdicts = [d.verdict for _, d in done]
        n_built = verdicts.count("holds by construction")
        built = f"; {n_built} hold{'s' * (n_built == 1)} by construction (not counted)" if n_built else ""
        reason = (f"{verdicts.count('reproduced')} of {len(done) - n_built} counted parts reproduced{built}: "
                  + "; ".join(f"{name}: {d.verdict} ({d.reason})" for name, d in done))
        interval, null = self._joined(done)
        counts = ", ".join(f"{verdicts.count(v)} {v}" for v in VERDICTS if v in verdicts)
        near = any(d.near_threshold for _, d in done if d.verdict != "holds by construction")
        counted = [(name, d) for name, d in done if d.verdict != "holds by construction"]
        p = joint_p([d.p for _, d in counted])
        parts = tuple((f"{name}: {sub}" if sub else name, v, q) for name, d in counted
                      for sub, v, q in tested_parts(d))
        return Decision(combine_verdicts(verdicts), reason, interval, null,
                        shorten(f"{len(done)} part{'s' * (len(done) != 1)}: {counts}"), near, p=p, parts=parts)


EVERY_TEXT = ("A claim about every member: reproduced only if every part is reproduced; not reproduced if any "
              "part is contradicted (its rule gives not reproduced or mixed); otherwise not established (not "
              "comparable if no part can be judged). Each part is one tested part: a part judged on several "
              "intervals holds only if all of them do, and its p is the largest of theirs (an intersection-union "
              "test).")


def _member_verdict(verdict: str) -> str:
    """A member's verdict in an :class:`EveryOf`: held, refuted, undecided or not comparable."""
    if verdict in ("not reproduced", "mixed"):
        return "not reproduced"
    if verdict in ("reproduced", "not comparable"):
        return verdict
    return "not established"           # partly reproduced, not established, holds by construction


@dataclass(frozen=True, init=False)
class EveryOf(AllOf):
    """A claim about every member (``EveryOf({member: rule})``, ``ours = {member: value}``): each member is one
    part, judged by its rule, and counts as one tested part whatever the rule judges inside it (its p: the
    rule's, the largest p of its intervals). Reproduced only if every member is; not reproduced if any member
    is contradicted; otherwise not established, never "partly": a claim about every model is not partly true of
    the models that were judged (:data:`EVERY_TEXT`). Chapter 7's ``book.edges_everywhere``."""

    def describe(self, reference: Mapping) -> str:
        return f"Every one of {len(self.parts)} parts: {self._inner(reference)} {EVERY_TEXT}"

    def decide(self, ours: Any, reference: Mapping) -> Decision:
        done = self._decide_parts(ours, reference)
        members = [(name, _member_verdict(d.verdict), d) for name, d in done]
        verdicts = [v for _, v, _ in members]
        if "not reproduced" in verdicts:
            verdict = "not reproduced"
        elif all(v == "reproduced" for v in verdicts):
            verdict = "reproduced"
        elif all(v == "not comparable" for v in verdicts):
            verdict = "not comparable"
        else:
            verdict = "not established"
        counts = ", ".join(f"{verdicts.count(v)} {v}" for v in VERDICTS if v in verdicts)
        reason = (f"every part must hold; {verdicts.count('reproduced')} of {len(members)} do: "
                  + "; ".join(f"{name}: {v} ({d.reason})" for name, v, d in members))
        interval, null = self._joined(done)
        failing = [name for name, v, _ in members if v == verdict] if verdict != "reproduced" else []
        summary = shorten(f"{len(members)} parts: {counts}" + (f"; {verdict}: {', '.join(failing)}"
                                                                if failing else ""))
        near = any(d.near_threshold for _, d in done)
        return Decision(verdict, reason, interval, null, summary, near, p=joint_p([d.p for _, _, d in members]),
                        parts=tuple((name, v, d.p) for name, v, d in members))


@dataclass(frozen=True)
class OnePartPerSignal:
    """An :class:`AllOf` over signals in which signals that are one signal in two names count once.

    ``rule``: the ``AllOf`` with a part per signal (fixed before the data); ``same``: the declared rule
    that makes two signals one (text, e.g. "the same one-shot sets at every k, or ρ ≥ 0.95"), and
    ``min_rho``, its threshold, part of the rule. ``ours = {"groups": [[name, ...], ...], "value":
    {name: value}}``: the groups (every part in exactly one, found by that rule on the data) and
    every part's value. Each group is judged once, by its first member's rule and value, as one part
    named by all its members; the others are named in the reason and never counted. Chapter 7."""
    rule: AllOf
    same: str
    min_rho: float

    def __post_init__(self) -> None:
        if not isinstance(self.rule, AllOf):
            raise AnatomyKitError(f"OnePartPerSignal needs an AllOf over signals, got {self.rule!r}")
        if not str(self.same).strip():
            raise AnatomyKitError("OnePartPerSignal needs `same`: the rule that makes two signals one")
        _number("min_rho", self.min_rho)

    def describe(self, reference: Mapping) -> str:
        return (f"Signals that are one ({self.same}; ρ ≥ {_g(self.min_rho)}) count as one part, judged by "
                f"the first of them. {self.rule.describe(reference)}")

    def decide(self, ours: Any, reference: Mapping) -> Decision:
        names = [n for n, _ in self.rule.parts]
        if not isinstance(ours, Mapping) or set(ours) != {"groups", "value"}:
            raise AnatomyKitError('OnePartPerSignal needs ours as {"groups": [[names]], "value": {name: value}}')
        groups = [[str(n) for n in g] for g in ours["groups"]]
        flat = [n for g in groups for n in g]
        if sorted(flat) != sorted(names) or any(not g for g in groups):
            raise AnatomyKitError(f"the groups {groups} must hold every part {names} exactly once")
        rules, value = dict(self.rule.parts), {str(k): v for k, v in ours["value"].items()}
        merged = AllOf({" = ".join(g): rules[g[0]] for g in groups})
        inner = merged.decide({" = ".join(g): value[g[0]] for g in groups}, reference)
        ones = [g for g in groups if len(g) > 1]
        said = "; ".join(f"{' and '.join(g)} are one signal, counted once" for g in ones)
        return replace(inner, reason=(f"{said}: " if said else "") + inner.reason)


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
class Condition:
    """One condition a claim needs of our run, declared with the rule (before the run's values):
    ``name`` (a few words: "model size"), ``needs`` (what the claim needs, one phrase: "at least
    128M parameters, where the paper sees a difference") and ``minimum``: a number our run must
    reach (a step cap, a held-out R²), or ``None`` for a yes/no the chapter states (the paper's
    corpus, a precondition claim that held)."""
    name: str
    needs: str
    minimum: float | None = None

    def __post_init__(self) -> None:
        for what in ("name", "needs"):
            if not isinstance(getattr(self, what), str) or not getattr(self, what).strip():
                raise AnatomyKitError(f"Condition needs `{what}`: a few words, got {getattr(self, what)!r}")
        if self.minimum is not None:
            _number(f"minimum of {self.name!r}", self.minimum)

    def judge(self, value: Any) -> tuple[bool, str, bool]:
        """``(met, what ours is, near)`` for our run's ``value``: a number (with ``minimum``), or
        ``True``/``False`` or ``(met, what ours is)`` (yes/no)."""
        if self.minimum is not None:
            x = _number(self.name, value)
            return x >= self.minimum, _g(x), near_threshold(x, x, [self.minimum])
        met, text = value if isinstance(value, tuple) and len(value) == 2 else (value, "")
        if not isinstance(met, bool) or not isinstance(text, str):
            raise AnatomyKitError(f"condition {self.name!r} is a yes/no: pass True/False or (met, 'what ours is'), "
                                  f"got {value!r}")
        return met, text or ("yes" if met else "no"), False

    def text(self) -> str:
        return f"{self.name}: {self.needs}" + (f" (≥ {_g(self.minimum)})" if self.minimum is not None else "")


@dataclass(frozen=True, init=False)
class Precondition:
    """Judge by ``rule`` only when our run meets every named condition; otherwise not comparable.

    ``Precondition(rule, Condition(...), ...)``: the conditions are declared with the rule (a model
    size, the paper's corpus, a step cap, a precondition claim that must hold); the chapter passes
    what its run has: ``ours = {"conditions": {name: value}, "value": what the rule judges}`` (see
    :meth:`Condition.judge`; ``value`` may be ``None`` when a condition is unmet, e.g. an arm that
    was not trained). With any condition unmet the verdict is "not comparable" and the reason names
    every unmet condition, what ours is and what the claim needs; with all met ``rule`` decides.
    Every chapter puts a claim its run cannot speak to through this one rule.
    """
    rule: Any
    conditions: tuple[Condition, ...]

    def __init__(self, rule: Any, *conditions: Condition):
        if not _is_rule(rule):
            raise AnatomyKitError(f"Precondition needs a rule to apply, got {rule!r}")
        if not conditions or not all(isinstance(c, Condition) for c in conditions):
            raise AnatomyKitError(f"Precondition needs at least one Condition, got {conditions!r}")
        names = [c.name for c in conditions]
        if len(set(names)) != len(names):
            raise AnatomyKitError(f"Precondition condition names must differ, got {names}")
        object.__setattr__(self, "rule", rule)
        object.__setattr__(self, "conditions", tuple(conditions))

    def describe(self, reference: Mapping) -> str:
        needs = "; ".join(c.text() for c in self.conditions)
        return f"Not comparable unless our run meets every condition ({needs}); then: {self.rule.describe(reference)}"

    def decide(self, ours: Any, reference: Mapping) -> Decision:
        names = [c.name for c in self.conditions]
        if (not isinstance(ours, Mapping) or set(ours) != {"conditions", "value"}
                or not isinstance(ours["conditions"], Mapping) or sorted(ours["conditions"]) != sorted(names)):
            raise AnatomyKitError(f'Precondition needs ours as {{"conditions": {{name: value}} for exactly {names}, '
                                  f'"value": what the rule judges}}, got {ours!r}')
        judged = [(c, *c.judge(ours["conditions"][c.name])) for c in self.conditions]
        near = any(n for *_, n in judged)
        unmet = [(c, text) for c, met, text, _ in judged if not met]
        if unmet:
            why = "; ".join(f"{c.name}: ours {text}, the claim needs {c.needs}"
                            + (f" (≥ {_g(c.minimum)})" if c.minimum is not None else "") for c, text in unmet)
            short = "; ".join(f"{c.name} {text}" for c, text in unmet)
            saw = self._saw(ours["value"], reference)
            return Decision("not comparable", f"{why}: our run cannot speak to the claim"
                            + (f". What our run saw, not judged: {saw}" if saw else ""),
                            summary=shorten(f"not met: {short}; cannot speak to the claim"), near_threshold=near,
                            saw=saw)
        inner = self.rule.decide(ours["value"], reference)
        met = ", ".join(f"{c.name} {text}" for c, _, text, _ in judged)
        return Decision(inner.verdict, f"conditions met ({met}); {inner.reason}", inner.interval, inner.null,
                        inner.summary or shorten(inner.reason), inner.near_threshold or near, inner.shown,
                        p=inner.p, parts=inner.parts, saw=inner.saw)

    def _saw(self, value: Any, reference: Mapping) -> str | None:
        """What the rule would say on our numbers (``None``: no value, or one the rule cannot judge)."""
        if value is None:
            return None
        try:
            inner = self.rule.decide(value, reference)
        except AnatomyKitError:
            return None
        return f"{inner.verdict}: {inner.summary or shorten(inner.reason)}"


@dataclass(frozen=True)
class Requires:
    """One numeric precondition, the spelling the registry holds for claims registered before
    :class:`Precondition` (``data_manifest/rule_registry.yaml`` rebuilds their rules by class name): a
    :class:`Precondition` with the one :class:`Condition` ``what`` ≥ ``minimum``, decided by it.
    ``ours = {"precondition": x, "value": v}``. New claims use :class:`Precondition`."""
    rule: Any
    minimum: float
    what: str

    def __post_init__(self) -> None:
        if not str(self.what).strip():
            raise AnatomyKitError("Requires needs `what`: a few words naming the precondition")
        self._as_precondition()

    def _as_precondition(self) -> Precondition:
        return Precondition(self.rule, Condition(str(self.what), f"at least {_g(_number('minimum', self.minimum))}",
                                                 self.minimum))

    def describe(self, reference: Mapping) -> str:
        return self._as_precondition().describe(reference)

    def decide(self, ours: Any, reference: Mapping) -> Decision:
        if not isinstance(ours, Mapping) or set(ours) != {"precondition", "value"}:
            raise AnatomyKitError('Requires needs ours as {"precondition": number, "value": what the rule judges}')
        return self._as_precondition().decide({"conditions": {str(self.what): ours["precondition"]},
                                               "value": ours["value"]}, reference)
