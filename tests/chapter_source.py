"""Read the chapters' MyST sources the way the convention tests need them (notebooks/README.md).

Shared by tests/test_exercises.py, tests/test_chapter_conventions.py and tests/test_book.py:
the exercise sections with their stub cells and Solution dropdowns, the import statements of a
chapter and the names they bind, and the README's table of import names.
"""

from __future__ import annotations

import ast
import importlib
import re
from dataclasses import dataclass, field
from functools import lru_cache

import pytest

from anatomy_kit.book.chapters import chapter_manifest
from anatomy_kit.book.runner import to_notebook

from conftest import ROOT

CHAPTERS = chapter_manifest()
IDS = [c["id"] for c in CHAPTERS]

#: Chapters not yet converted to the conventions of notebooks/README.md ("Import names",
#: "Exercises"). Their convention tests are expected to fail (xfail, not strict). A chapter
#: helper removes its chapter from this set when it has converted it; at the end it is empty.
PENDING: set[str] = set()

#: ``### Exercise 2 (implement, ★★, 15 min): the neighbour-mean ablation``
EXERCISE_HEADING = re.compile(r"^###\s+Exercise\s+(\d+)\s+\((predict|implement|explore),\s*(★{1,3}),\s*"
                              r"(\d+)\s*min\):\s*\S.*$")
ANY_EXERCISE_HEADING = re.compile(r"^#{2,4}\s+Exercise\b.*$", re.I)
#: ``:::{dropdown} Solution`` … ``:::`` (a colon fence of three or more colons)
SOLUTION_DROPDOWN = re.compile(r"^(:{3,})\{dropdown\}\s+Solution\b[^\n]*\n(.*?)^\1\s*$", re.M | re.S)
PYTHON_FENCE = re.compile(r"^(`{3,})python[^\n]*\n(.*?)^\1\s*$", re.M | re.S)
HIDDEN_TAGS = {"remove-input", "remove-cell", "hide-input", "hide-cell"}


def pending(chapter_id: str):
    """``pytest.param`` marks for a chapter that is not converted yet."""
    return [pytest.mark.xfail(strict=False, reason="chapter conversion pending")] if chapter_id in PENDING else []


def chapter_params():
    """One ``pytest.param`` per chapter, xfail while it is in :data:`PENDING`."""
    return [pytest.param(c, id=c["id"], marks=pending(c["id"])) for c in CHAPTERS]


@lru_cache(maxsize=None)
def notebook(chapter_id: str):
    entry = next(c for c in CHAPTERS if c["id"] == chapter_id)
    return to_notebook(ROOT / "notebooks" / entry["file"])


def tags(cell) -> set[str]:
    return set(cell.metadata.get("tags", []))


def solution_blocks(markdown: str) -> list[str]:
    """The Python code of every ``Solution`` dropdown in ``markdown`` (fenced ``python`` blocks, joined)."""
    return ["\n".join(m.group(2) for m in PYTHON_FENCE.finditer(d.group(2)))
            for d in SOLUTION_DROPDOWN.finditer(markdown)]


def check_calls(code: str) -> list[ast.stmt]:
    """Statements of ``code`` that call an exercise check: ``chNN.check_…(…)``."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    out = []
    for stmt in tree.body:
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) \
                and call.func.attr.startswith("check_") and isinstance(call.func.value, ast.Name) \
                and re.fullmatch(r"(ch\d\d|ex)", call.func.value.id):
            out.append(stmt)
    return out


def is_stub_cell(code: str) -> bool:
    """A code cell the reader fills: it calls a check and holds an untouched stub (``raise
    NotImplementedError``, a body of ``...``, or ``name = ...``)."""
    if not check_calls(code):
        return False
    tree = ast.parse(code)
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and node.exc is not None:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(exc, ast.Name) and exc.id == "NotImplementedError":
                return True
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and node.value.value is Ellipsis:
            return True
        if isinstance(node, ast.FunctionDef) and all(
                isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) for s in node.body) \
                and any(s.value.value is Ellipsis for s in node.body):
            return True
    return False


@dataclass
class Exercise:
    """One ``### Exercise`` section of a chapter: its heading, stub cells and solution code."""
    heading: str
    stubs: list[str] = field(default_factory=list)
    solutions: list[str] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)

    @property
    def kind(self) -> str | None:
        m = EXERCISE_HEADING.match(self.heading)
        return m.group(2) if m else None


def exercises(chapter_id: str) -> list[Exercise]:
    """The chapter's exercise sections in order (a section ends at the next heading of level ≤ 3)."""
    return exercises_in(notebook(chapter_id))


def exercises_in(nb) -> list[Exercise]:
    """The exercise sections of notebook ``nb`` (see :func:`exercises`)."""
    out: list[Exercise] = []
    current: Exercise | None = None
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            segment: list[str] = []            # lines since the last heading: they belong to `current`
            fence = ""                         # inside a ``` block a line "# …" is code, not a heading
            for line in cell.source.splitlines():
                marker = re.match(r"^\s*(`{3,}|~{3,})", line)
                if marker and (not fence or marker.group(1).startswith(fence)):
                    fence = "" if fence else marker.group(1)
                if not fence and re.match(r"^#{1,3}\s", line):
                    if current is not None:
                        current.solutions += solution_blocks("\n".join(segment) + "\n")
                    segment = []
                    current = Exercise(line.strip()) if ANY_EXERCISE_HEADING.match(line) else None
                    if current is not None:
                        out.append(current)
                else:
                    segment.append(line)
            if current is not None:
                current.solutions += solution_blocks("\n".join(segment) + "\n")
        elif current is not None and cell.cell_type == "code":
            calls = check_calls(cell.source)
            current.checks += [s.value.func.attr for s in calls]
            if is_stub_cell(cell.source):
                current.stubs.append(cell.source)
    return out


def all_solution_blocks(chapter_id: str) -> list[str]:
    return [s for c in notebook(chapter_id).cells if c.cell_type == "markdown" for s in solution_blocks(c.source)]


def import_nodes(code: str) -> list[ast.stmt]:
    """Every ``import``/``from … import`` statement in ``code``, at any depth (magics skipped)."""
    lines = [ln for ln in code.splitlines() if not ln.lstrip().startswith(("%", "!"))]
    try:
        tree = ast.parse("\n".join(lines))
    except SyntaxError:
        return []
    return [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]


def import_source(chapter_id: str) -> str:
    """The chapter's top-level imports, one statement per line, to run before a stub or a solution."""
    return imports_in(notebook(chapter_id))


def imports_in(nb) -> str:
    """The top-level imports of notebook ``nb`` (see :func:`import_source`)."""
    stmts = []
    for cell in nb.cells:
        if cell.cell_type == "code" and "parameters" not in tags(cell):
            lines = [ln for ln in cell.source.splitlines() if not ln.lstrip().startswith(("%", "!"))]
            try:
                tree = ast.parse("\n".join(lines))
            except SyntaxError:
                continue
            stmts += [ast.unparse(n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    return "\n".join(dict.fromkeys(stmts))


@dataclass(frozen=True)
class Binding:
    """One name an import binds: ``target`` is the module or ``module.attribute`` it refers to."""
    name: str
    target: str
    is_module: bool
    line: str


def _is_module(qualified: str) -> bool:
    try:
        return importlib.util.find_spec(qualified) is not None
    except (ImportError, ValueError, AttributeError):
        return False


def bindings(code: str) -> list[Binding]:
    """The names the imports of ``code`` bind (``import a.b`` binds ``a``)."""
    out = []
    for node in import_nodes(code):
        line = ast.unparse(node)
        if isinstance(node, ast.Import):
            for a in node.names:
                target = a.name if a.asname else a.name.split(".")[0]
                out.append(Binding(a.asname or target, target, True, line))
        elif node.level == 0 and node.module:
            for a in node.names:
                qualified = f"{node.module}.{a.name}"
                out.append(Binding(a.asname or a.name, qualified, _is_module(qualified), line))
    return out


def chapter_bindings(chapter_id: str) -> list[Binding]:
    return [b for c in notebook(chapter_id).cells if c.cell_type == "code" for b in bindings(c.source)]


def alias_table() -> dict[str, str]:
    """``{module: name}`` from the table under "Import names" in notebooks/README.md."""
    text = (ROOT / "notebooks" / "README.md").read_text()
    section = text.split("## Import names", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\|\s*`([\w.]+)`\s*\|\s*`([\w]+)`\s*\|", section, flags=re.M)
    return dict(rows)
