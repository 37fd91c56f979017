"""Chapters: paired and output-free in git, in the table of contents, and every parameter reaches the run."""

import ast
import json
from dataclasses import asdict

import jupytext
import pytest
import yaml

from anatomy_kit.book.chapters import chapter_manifest
from anatomy_kit.book.runner import declared_parameters, to_notebook

from conftest import ROOT

CHAPTERS = chapter_manifest()
IDS = [c["id"] for c in CHAPTERS]


@pytest.mark.parametrize("entry", CHAPTERS, ids=IDS)
def test_chapter_is_paired_and_has_no_outputs(entry):
    md = ROOT / "notebooks" / entry["file"]
    ipynb = md.with_suffix(".ipynb")
    assert md.exists() and ipynb.exists(), f"{entry['id']} needs both {md.name} and {ipynb.name}"
    raw = json.loads(ipynb.read_text())
    for cell in raw["cells"]:
        assert not cell.get("outputs"), f"{ipynb.name} has outputs committed"
        assert cell.get("execution_count") is None, f"{ipynb.name} has execution counts committed"
    text = jupytext.read(md)
    paired = jupytext.read(ipynb)
    assert [(c.cell_type, c.source.strip()) for c in text.cells] == [(c.cell_type, c.source.strip()) for c in paired.cells], \
        f"{ipynb.name} and {md.name} differ: run `jupytext --sync notebooks/{md.name}`"
    assert "md:myst" in text.metadata["jupytext"]["formats"]


def _registered_kernel() -> str:
    import re

    names = set(re.findall(r"ipykernel install [^\n`]*--name ([\w-]+)", (ROOT / "README.md").read_text()))
    names |= set(re.findall(r"ipykernel install [^\n]*--name ([\w-]+)", (ROOT / "Makefile").read_text()))
    assert len(names) == 1, f"the README and the Makefile register {sorted(names)}: one kernel name, please"
    return names.pop()


@pytest.mark.parametrize("entry", CHAPTERS, ids=IDS)
def test_the_notebook_names_the_kernel_the_readme_registers_and_the_book_runs_its_own(entry):
    """A hub opens a notebook with the kernel its kernelspec names (the one where the kit is installed); the
    book's papermill run names its kernel itself (python3: the interpreter that runs it), whatever the file says."""
    name = _registered_kernel()
    md = ROOT / "notebooks" / entry["file"]
    for path in (md, md.with_suffix(".ipynb")):
        assert jupytext.read(path).metadata["kernelspec"]["name"] == name, path.name
    assert to_notebook(md).metadata["kernelspec"]["name"] == "python3"


#: Columns of code the book's page shows without scrolling (book/_static/anatomy.css sets the width).
CODE_COLUMNS = 88


def _columns(line):
    """Rendered width of a line: combining marks (the hat of x̂) take no column."""
    import unicodedata
    return sum(1 for ch in line if not unicodedata.combining(ch))


@pytest.mark.parametrize("entry", CHAPTERS, ids=IDS)
def test_code_fits_the_page(entry):
    """The browser check measures the same thing on the built page; this finds it in a second."""
    text = jupytext.read(ROOT / "notebooks" / entry["file"])
    wide = [(i, line) for i, cell in enumerate(text.cells) if cell.cell_type == "code"
            for line in cell.source.splitlines() if _columns(line) > CODE_COLUMNS]
    assert not wide, f"{entry['file']}: {len(wide)} code line(s) wider than {CODE_COLUMNS} columns, e.g. {wide[0]}"


#: Pages of the book that are not chapters, in the order the table of contents lists them after the chapters.
BOOK_PAGES = ["running", "glossary", "sources", "chapters/report"]


def test_table_of_contents_matches_the_manifest():
    toc = yaml.safe_load((ROOT / "book" / "_toc.yml").read_text())
    files = [c["file"] for part in toc["parts"] for c in part["chapters"]]
    assert files == [f"chapters/{i}" for i in IDS] + BOOK_PAGES
    for page in BOOK_PAGES[:-1]:
        assert (ROOT / "book" / f"{page}.md").exists(), f"book/{page}.md is listed but missing"


def _resolve_cells(nb):
    code = [c for c in nb.cells if c.cell_type == "code"]
    params = next(i for i, c in enumerate(code) if "parameters" in c.metadata.get("tags", []))
    resolve = next(i for i, c in enumerate(code) if "resolve_run(" in c.source)
    return code, params, resolve


def _run_resolution(nb, overrides, tmp_path):
    code, p, r = _resolve_cells(nb)
    ns = {}
    exec(compile(code[p].source, "parameters", "exec"), ns)
    ns.setdefault("build_dir", str(tmp_path))
    ns.update(overrides)
    for c in code[p + 1:r + 1]:
        exec(compile(c.source, "resolve", "exec"), ns)
    run = asdict(ns["run"])
    run.pop("started")
    return run


def _other_value(name, default, resolved):
    fixed = {"scale": "full", "device": "cpu" if default != "cpu" else "auto", "model": "someone/other-model",
             "corpus": "wikitext-103", "build_dir": "another-build",
             "phase": "exploratory" if resolved["phase"] == "confirmatory" else "confirmatory"}
    if name in fixed:
        return fixed[name]
    value = resolved["sizes"].get(name, default) if default is None else default
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value * 2
    if isinstance(value, (list, tuple)):
        return list(value[:-1]) if len(value) > 1 else list(value) * 2
    if isinstance(value, str):
        return value + "-other"
    raise AssertionError(f"no alternative value for parameter {name}={value!r}")


@pytest.mark.parametrize("entry", CHAPTERS, ids=IDS)
def test_every_declared_parameter_changes_the_run(entry, tmp_path, monkeypatch):
    """papermill injects names a notebook never reads without a word: prove each one is read."""
    # the confirmatory phase starts at the frozen registry's seed offset; a stand-in offset proves `phase` is read
    monkeypatch.setattr("anatomy_kit.book.run.phase_seed_offset", lambda phase: 1000 * (phase == "confirmatory"))
    nb = to_notebook(ROOT / "notebooks" / entry["file"])
    declared = declared_parameters(nb)
    assert {"scale", "device", "build_dir"} <= set(declared)
    base = _run_resolution(nb, {}, tmp_path)
    for name, default in declared.items():
        changed = _run_resolution(nb, {name: _other_value(name, default, base)}, tmp_path)
        assert changed != base, f"{entry['id']}: parameter {name!r} does not change what the chapter runs"


@pytest.mark.parametrize("entry", CHAPTERS, ids=IDS)
def test_parameters_are_only_read_through_the_run(entry):
    """After the resolve cell, code uses run.<field>, never a raw parameter (which may be None)."""
    nb = to_notebook(ROOT / "notebooks" / entry["file"])
    declared = set(declared_parameters(nb))
    code, _, r = _resolve_cells(nb)
    later = ast.parse("\n".join(c.source for c in code[r + 1:] if not c.source.lstrip().startswith("%")))
    stored = {n.id for n in ast.walk(later) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    loaded = {n.id for n in ast.walk(later) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    assert not (loaded & declared) - stored, f"{entry['id']} reads raw parameters {sorted((loaded & declared) - stored)}"


@pytest.mark.parametrize("entry", CHAPTERS, ids=IDS)
def test_papermill_reads_every_parameter_line(entry):
    """papermill parses `name = value  # help`; a line it cannot parse is dropped from `--help-notebook`."""
    from papermill.translators import PythonTranslator

    nb = to_notebook(ROOT / "notebooks" / entry["file"])
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    parsed = {p.name for p in PythonTranslator.inspect(cell)}
    assert parsed == set(declared_parameters(nb))


@pytest.mark.parametrize("entry", CHAPTERS, ids=IDS)
def test_readme_lists_the_chapter_with_its_budget(entry):
    readme = (ROOT / "README.md").read_text()
    rows = [line for line in readme.splitlines() if f"(`{entry['id']}`)" in line]
    assert rows, f"the README's chapter table does not list {entry['id']}"
    minutes = entry["budget_s"] / 60
    assert f"| {minutes:g} min |" in rows[0], f"README gives {rows[0]!r}; chapters.yaml budgets {minutes:g} min"


@pytest.mark.parametrize("page", ["intro", "running", "glossary", "sources"])
def test_book_pages_code_fits_the_page(page):
    """Fenced code on the book's own pages (commands to copy) stays within the code column too."""
    fenced, wide = False, []
    for n, line in enumerate((ROOT / "book" / f"{page}.md").read_text().splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif fenced and _columns(line) > CODE_COLUMNS:
            wide.append((n, line))
    assert not wide, f"book/{page}.md: {len(wide)} code line(s) wider than {CODE_COLUMNS} columns, e.g. {wide[0]}"
