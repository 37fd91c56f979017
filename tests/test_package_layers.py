"""The kit's subpackages by idea: the two growth ideas live apart, import nothing above them, and no
module of the kit imports itself back through a circle (issue: one name, two ideas)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

KIT = Path(__file__).resolve().parents[1] / "anatomy_kit"
#: Packages that read the finished results of others (chapters, the card, the report): nothing the
#: growth ideas build may import them.
ABOVE = ("book", "card", "synthesis", "exercises")


def _module(path: Path) -> str:
    rel = path.relative_to(KIT.parent).with_suffix("")
    parts = list(rel.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """The kit modules a file imports (relative imports resolved), at any depth of the file."""
    here = _module(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            if not target.startswith("anatomy_kit"):
                continue
            out.add(target)
            out.update(f"{target}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("anatomy_kit"))
    return out


def _graph() -> dict[str, set[str]]:
    files = {_module(p): p for p in KIT.rglob("*.py")}
    graph = {}
    for name, path in files.items():
        graph[name] = {t for t in _imports(path) if t in files and t != name}
    return graph


def test_the_import_reader_resolves_relative_imports(tmp_path):
    # a hand-worked case: ``from ..lm.model import X`` inside anatomy_kit/width_growth/gpt.py
    graph = _graph()
    assert "anatomy_kit.lm.model" in graph["anatomy_kit.phased_training.cost"]
    assert "anatomy_kit.phased_training.phases" in graph["anatomy_kit.phased_training.cost"]


@pytest.mark.parametrize("package", ["width_growth", "phased_training"])
def test_a_growth_idea_imports_nothing_above_it(package):
    graph = _graph()
    bad = {m: sorted(t for t in ts if t.split(".")[1] in ABOVE)
           for m, ts in graph.items() if m.split(".")[1:2] == [package]}
    bad = {m: ts for m, ts in bad.items() if ts}
    assert not bad, f"{package} imports packages above it: {bad}"


def test_the_two_growth_ideas_do_not_import_each_other():
    graph = _graph()
    for a, b in (("width_growth", "phased_training"), ("phased_training", "width_growth")):
        crossing = {m: sorted(t for t in ts if t.split(".")[1:2] == [b])
                    for m, ts in graph.items() if m.split(".")[1:2] == [a]}
        assert not any(crossing.values()), f"{a} imports {b}: {crossing}"


def test_no_import_circle_in_the_kit():
    graph = _graph()
    seen, stack, circles = set(), [], []

    def visit(node: str) -> None:
        if node in stack:
            circles.append(stack[stack.index(node):] + [node])
            return
        if node in seen:
            return
        seen.add(node)
        stack.append(node)
        for nxt in sorted(graph[node]):
            # a package's __init__ importing its own modules is its face, not a circle
            if not (nxt.startswith(node + ".")):
                visit(nxt)
        stack.pop()

    for n in sorted(graph):
        visit(n)
    assert not circles, f"import circles: {circles[:3]}"
