"""Every chapter decides its claims by the registry's rules: a rule changed in a chapter without an amendment
fails here, as a unit test, before any book build. Each ``Claim(...)`` in a chapter's code takes its rule from
the run's registered design (``d = run.design(id)``; ``Claim(id, ours, d.rule, design=d)``), never a rule built
in the chapter, and every registered claim of a chapter is decided by that chapter."""

from __future__ import annotations

import ast
import re

import pytest

from anatomy_kit.verdicts.registry import rule_registry
from chapter_source import IDS, notebook

RULE_CLASSES = {"Close", "DifferenceSign", "IntervalBelow", "IntervalAbove", "IntervalContains", "Equivalent",
                "SetOverlap", "RankCorrelation", "BeyondNull", "AllOf", "EveryOf", "OnePartPerSignal", "NotComparable",
                "ByConstruction", "Precondition", "Requires", "Magnitude", "RankAtMost"}


def _code(chapter: str) -> str:
    return "\n".join(c.source for c in notebook(chapter).cells if c.cell_type == "code"
                     and not c.source.lstrip().startswith(("%", "!")))


def _claim_calls(code: str) -> list[ast.Call]:
    tree = ast.parse(code)
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "Claim"]


def _problems(code: str) -> list[str]:
    """What is wrong with the Claim calls of one chapter's code (empty: every claim takes the registry's rule)."""
    problems = []
    for call in _claim_calls(code):
        where = f"line {call.lineno}"
        rule = call.args[2] if len(call.args) > 2 else next((k.value for k in call.keywords if k.arg == "rule"), None)
        if not (isinstance(rule, ast.Attribute) and rule.attr == "rule"):
            problems.append(f"{where}: the rule is {ast.unparse(rule) if rule is not None else 'missing'}, not a "
                            "registered design's .rule")
        if not any(k.arg == "design" for k in call.keywords):
            problems.append(f"{where}: no design= (the run's registered design)")
        built = [n.func.id for n in ast.walk(call) if isinstance(n, ast.Call) and getattr(n.func, "id", None)
                 in RULE_CLASSES]
        if built:
            problems.append(f"{where}: builds {', '.join(built)} inside the claim")
    return problems


def test_the_check_finds_a_rule_built_in_a_chapter():
    good = 'd = run.design("p1.x")\nc = Claim("p1.x", 1.0, d.rule, design=d)\n'
    assert _problems(good) == []
    assert "not a registered design's .rule" in _problems('c = Claim("p1.x", 1.0, IntervalBelow(0.0))')[0]
    assert any("no design=" in p for p in _problems('c = Claim("p1.x", 1.0, d.rule)'))
    assert any("builds Precondition" in p for p in
               _problems('c = Claim("p1.x", {"v": 1}, d.rule, design=d, note=str(Precondition(d.rule, c)))'))


@pytest.mark.parametrize("chapter", IDS)
def test_every_claim_of_a_chapter_takes_its_rule_from_the_registry(chapter):
    assert _problems(_code(chapter)) == []


@pytest.mark.parametrize("chapter", IDS)
def test_every_registered_claim_is_decided_by_its_chapter(chapter):
    code = _code(chapter)
    registered = {cid for cid, e in rule_registry().entries.items() if e.chapter == chapter}
    literals = set(re.findall(r"""["']([a-z0-9_.]+)["']""", code))
    prefixes = set(re.findall(r"""f["']([a-z0-9]+)\.\{""", code))          # f"p1.{key}" with key a literal

    def decided(cid: str) -> bool:
        family, key = cid.split(".", 1)
        return cid in literals or (family in prefixes and key in literals)

    assert all(decided(c) for c in registered), f"{chapter} never decides {sorted(c for c in registered if not decided(c))}"
