"""The book's conventions, read from the chapters' sources in a second (notebooks/README.md):
visible imports under one name per module across the book, exercises in the stub + check +
Solution format, claims shown as compact tables. A chapter listed in chapter_source.PENDING is
expected to fail these (xfail) until it is converted; a small notebook written here shows that a
converted chapter passes and that each rule catches what it is for."""

from __future__ import annotations

import ast
import contextlib
import importlib
import io
import re
from collections import defaultdict

import jupytext
import pytest

from anatomy_kit.exercises import all_checks
from anatomy_kit.exercises.core import AGREES, NOT_ATTEMPTED
from chapter_source import (EXERCISE_HEADING, HIDDEN_TAGS, IDS, PENDING, alias_table, bindings, chapter_params,
                            exercises_in, import_nodes, imports_in, notebook, tags)
from conftest import ROOT


def _parse(code: str) -> ast.AST:
    lines = [ln for ln in code.splitlines() if not ln.lstrip().startswith(("%", "!"))]
    try:
        return ast.parse("\n".join(lines))
    except SyntaxError:
        return ast.parse("")


def _code(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def _nb_bindings(nb):
    return [b for c in _code(nb) for b in bindings(c.source)]


# ---------------------------------------------------------------------------- the rules, on one notebook

def hidden_imports(nb) -> list[str]:
    """Imports in cells the page hides (the parameters cell aside)."""
    hidden = []
    for cell in _code(nb):
        nodes = import_nodes(cell.source)
        if nodes and "parameters" not in tags(cell) and tags(cell) & HIDDEN_TAGS:
            hidden.append(f"import in a hidden cell {sorted(tags(cell) & HIDDEN_TAGS)}: {ast.unparse(nodes[0])}")
    return hidden


def _resolve(target: str):
    module, _, attr = target.rpartition(".")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError):
        return target


def meanings(notebooks) -> dict[str, set[str]]:
    """``{name: {what it refers to}}`` over ``notebooks``; an object re-exported under one name counts once."""
    seen: dict[str, dict[int, str]] = defaultdict(dict)
    for nb in notebooks:
        for b in _nb_bindings(nb):
            obj = importlib.import_module(b.target) if b.is_module else _resolve(b.target)
            seen[b.name].setdefault(id(obj), b.target)
    return {name: set(targets.values()) for name, targets in seen.items()}


def name_problems(nb, book_meanings: dict[str, set[str]]) -> list[str]:
    """Module names against the README's table and own-name rule; single letters; reassigned module
    names; a name meaning two things across the book."""
    table, problems = alias_table(), []
    assigned = {n.id for c in _code(nb) for n in ast.walk(_parse(c.source))
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    for b in _nb_bindings(nb):
        if len(b.name) == 1:
            problems.append(f"single-letter name {b.name!r} in `{b.line}`")
        if b.is_module:
            want = table.get(b.target, b.target.rsplit(".", 1)[-1])
            if b.name != want:
                problems.append(f"`{b.line}` binds {b.target} as {b.name!r}; the book calls it {want!r}")
            if b.name in assigned:
                problems.append(f"the module name {b.name!r} is assigned to in the chapter")
        if len(book_meanings.get(b.name, ())) > 1:
            problems.append(f"{b.name!r} means {sorted(book_meanings[b.name])} in different chapters")
    return sorted(set(problems))


def exercise_problems(nb, chapter_prefix: str) -> list[str]:
    """Headings with kind, stars and minutes; implement exercises with a stub cell, a Solution dropdown
    and a known check that has a hint; no executed solution cells; checks called as ``chNN.check_…``."""
    problems, known = [], all_checks()
    for ex in exercises_in(nb):
        if not EXERCISE_HEADING.match(ex.heading):
            problems.append(f"heading {ex.heading!r} is not '### Exercise N (kind, ★…, M min): title'")
            continue
        if ex.kind == "implement" and not ex.stubs:
            problems.append(f"{ex.heading!r}: an implement exercise needs a stub cell that calls its check")
        if len(ex.solutions) < len(ex.stubs):
            problems.append(f"{ex.heading!r}: {len(ex.stubs)} stub cell(s), {len(ex.solutions)} Solution dropdown(s)")
        for name in ex.checks:
            check = known.get(name)
            if check is None:
                problems.append(f"{ex.heading!r} calls an unknown check {name}")
            elif len(getattr(check, "hint", "")) < 20:
                problems.append(f"{ex.heading!r}: check {name} has no hint (give hint= or a docstring)")
    solved = [c for c in _code(nb) if "solution" in tags(c)]
    if solved:
        problems.append(f"{len(solved)} code cell(s) tagged 'solution': the book would run them and say 'agrees'")
    if any(re.search(r"\bex\.check_", c.source) for c in _code(nb)):
        problems.append(f"checks are called as ex.check_…; use `from anatomy_kit.exercises import {chapter_prefix}`")
    return problems


def claims_problems(nb) -> list[str]:
    """A chapter that judges claims (``Claim(``) shows them in its folded Evidence section
    (``evidence_view(run, claims)``, which holds the compact claims table) or with ``claims_view``, never as a
    DataFrame."""
    source = "\n".join(c.source for c in _code(nb))
    if "Claim(" not in source:
        return []
    shown = "claims_view(" in source or "evidence_view(" in source
    problems = [] if shown else ["the claims are not shown with evidence_view(run, claims)"]
    if re.search(r"DataFrame\(\s*claims_table\(", source):
        problems.append("the claims are shown as a DataFrame (too wide for the page); use claims_view(claims)")
    return problems


# ---------------------------------------------------------------------------- the chapters

@pytest.mark.parametrize("entry", chapter_params())
def test_every_import_is_in_a_visible_cell(entry):
    problems = hidden_imports(notebook(entry["id"]))
    assert not problems, f"{entry['id']} uses names its page never shows:\n" + "\n".join(problems)


@pytest.mark.parametrize("entry", chapter_params())
def test_one_name_per_module_across_the_book(entry):
    """Against this chapter and every converted one (a pending chapter does not fail a converted one)."""
    others = [notebook(i) for i in IDS if i == entry["id"] or i not in PENDING]
    problems = name_problems(notebook(entry["id"]), meanings(others))
    assert not problems, f"{entry['id']}:\n" + "\n".join(problems)


@pytest.mark.parametrize("entry", chapter_params())
def test_exercises_are_stubs_with_a_hint_and_a_solution(entry):
    problems = exercise_problems(notebook(entry["id"]), entry["id"][:4])
    assert not problems, f"{entry['id']}:\n" + "\n".join(problems)


@pytest.mark.parametrize("entry", chapter_params())
def test_claims_are_shown_as_compact_tables(entry):
    problems = claims_problems(notebook(entry["id"]))
    assert not problems, f"{entry['id']}: " + "; ".join(problems)


def test_the_alias_table_names_each_module_once():
    table = alias_table()
    assert len(table) >= 15, "notebooks/README.md lost its table of import names"
    names = defaultdict(list)
    for module, name in table.items():
        names[name].append(module)
        assert len(name) > 1, f"{module} has a single-letter name"
    assert not {n: m for n, m in names.items() if len(m) > 1}, "one name for two modules in the table"


# ---------------------------------------------------------------------------- the rules themselves

def _worked_example():
    text = (ROOT / "notebooks" / "README.md").read_text()
    block = text.split("<!-- worked-example -->", 1)[1].split("<!-- end worked-example -->", 1)[0]
    body = block.strip().split("\n", 1)[1].rsplit("\n", 1)[0]          # inside the ````markdown fence
    return jupytext.reads(body, fmt="md:myst")


def test_the_readmes_worked_example_follows_the_conventions():
    nb = _worked_example()
    found = exercises_in(nb)
    assert len(found) == 1 and found[0].kind == "implement" and found[0].stubs and found[0].solutions
    assert not exercise_problems(nb, "ch01") and not hidden_imports(nb) and not name_problems(nb, meanings([nb]))
    imports = imports_in(nb)
    stub_ns, solved_ns = {}, {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(imports, stub_ns)
        exec(found[0].stubs[0], stub_ns)
    assert NOT_ATTEMPTED in out.getvalue() and AGREES not in out.getvalue()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(imports, solved_ns)
        exec(found[0].solutions[0], solved_ns)
        exec(found[0].stubs[0].rsplit("\n\n\n", 1)[-1], solved_ns)      # the stub cell's check call
    assert AGREES in out.getvalue(), out.getvalue()


_GOOD = '''```{code-cell} ipython3
:tags: [parameters, remove-cell]

scale = "smoke"
```

```{code-cell} ipython3
import numpy as np

from anatomy_kit import geometry
from anatomy_kit.verdicts.tables import claims_view
from anatomy_kit.phased_training import phases
```

```{code-cell} ipython3
:tags: [remove-input]

claims = [Claim("p1.baseline_ppl", 24.3, NotComparable("another text"))]
claims_view(claims)
```
'''
_BAD = '''```{code-cell} ipython3
import numpy as np

from anatomy_kit import geometry as G
from anatomy_kit.phased_training import phases as G2
from scipy import stats
```

```{code-cell} ipython3
:tags: [remove-input]

from matplotlib.ticker import MaxNLocator
import anatomy_kit.exercises.ch01 as ex
phases = 3
claims = [Claim("p1.baseline_ppl", 24.3, NotComparable("another text"))]
pd.DataFrame(claims_table(claims))
```

### Exercise 1 (implement): no stars, no minutes

### Exercise 2 (implement, ★★, 10 min): a stub without its solution

```{code-cell} ipython3
def f(x):
    raise NotImplementedError


ch01.check_delta_interval(f)
```
'''


def test_a_converted_notebook_passes_and_each_rule_catches_its_slip():
    good = jupytext.reads(_GOOD, fmt="md:myst")
    assert not hidden_imports(good) and not name_problems(good, meanings([good])) and not claims_problems(good)
    bad = jupytext.reads(_BAD, fmt="md:myst")
    scipy_stats = jupytext.reads("```{code-cell} ipython3\nfrom anatomy_kit import stats\n```\n", fmt="md:myst")
    hidden, names = hidden_imports(bad), " | ".join(name_problems(bad, meanings([bad, scipy_stats])))
    assert "MaxNLocator" in hidden[0]
    assert "single-letter name 'G'" in names and "the book calls it 'geometry'" in names
    assert "'G2'; the book calls it 'phases'" in names and "'ex'; the book calls it 'ch01'" in names
    assert "'stats' means ['anatomy_kit.stats', 'scipy.stats']" in names
    exercise = " | ".join(exercise_problems(bad, "ch01"))
    assert "no stars, no minutes" in exercise and "1 stub cell(s), 0 Solution dropdown(s)" in exercise
    assert "ex.check_" not in exercise                     # ex is only imported here, not called
    assert len(claims_problems(bad)) == 2
