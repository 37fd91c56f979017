"""The prose of the chapters and book pages, read from their sources in a second (the browser checks
in tests/test_book.py see the same faults on the built pages, after a build)."""

import builtins
import copy
import re
import symtable

import jupytext
import pytest

from chapter_source import CHAPTERS, IDS, notebook, tags

from conftest import ROOT

BOOK_PAGES = sorted(p.stem for p in (ROOT / "book").glob("*.md"))
TABLE_LINE = re.compile(r"^\s*\|.*\|\s*$")


def table_followed_by_text(markdown: str) -> list[str]:
    """Lines written right under a Markdown table: the table takes them in as rows (a table ends
    only at a blank line), so the paragraph shows as bogus rows of the table."""
    out, fence = [], ""
    lines = markdown.splitlines()
    for above, line in zip(lines, lines[1:]):
        marker = re.match(r"^\s*(`{3,}|~{3,})", above)
        if marker and (not fence or marker.group(1).startswith(fence)):
            fence = "" if fence else marker.group(1)
        if not fence and TABLE_LINE.match(above) and line.strip() and not TABLE_LINE.match(line):
            out.append(line.strip()[:80])
    return out


def _markdown_of(path) -> str:
    if path.parent.name == "notebooks":
        return "\n\n".join(c.source for c in jupytext.read(path).cells if c.cell_type == "markdown")
    return path.read_text()


@pytest.mark.parametrize("path", [ROOT / "notebooks" / c["file"] for c in CHAPTERS]
                         + [ROOT / "book" / f"{p}.md" for p in BOOK_PAGES] + [ROOT / "README.md"],
                         ids=IDS + BOOK_PAGES + ["README"])
def test_every_markdown_table_ends_at_a_blank_line(path):
    swallowed = table_followed_by_text(_markdown_of(path))
    assert not swallowed, f"{path.name}: text right under a table becomes its rows; leave a blank line: {swallowed}"


def test_a_table_without_a_blank_line_after_it_is_caught():
    table = "| signal | what it is |\n|---|---|\n| skip | ΔPPL % |\n"
    assert table_followed_by_text(table + "Two causal signals appear twice.") == ["Two causal signals appear twice."]
    assert not table_followed_by_text(table + "\nTwo causal signals appear twice.")
    assert not table_followed_by_text("```text\n| a | b |\nnot a table\n```\n")


#: Tags that take a cell's code off the page (``hide-input`` folds it: still on the page).
OFF_THE_PAGE = {"remove-cell", "remove-input"}
#: Names IPython gives every notebook.
IPYTHON_NAMES = {"display", "get_ipython", "In", "Out", "_"}


def reads_and_binds(code: str) -> tuple[set[str], set[str]]:
    """(global names the cell reads without binding them itself, names it binds at top level).

    ``symtable`` scopes them as Python does: a function's arguments and locals, a comprehension's
    variable and a class body are not global reads; ``global x`` in a function binds ``x``."""
    lines = [ln for ln in code.splitlines() if not ln.lstrip().startswith(("%", "!"))]
    top = symtable.symtable("\n".join(lines), "cell", "exec")
    binds = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported() or s.is_namespace()}
    reads = set()

    def walk(table, is_top):
        for sym in table.get_symbols():
            name = sym.get_name()
            if is_top and sym.is_referenced() and name not in binds:
                reads.add(name)
            elif not is_top and sym.is_declared_global() and sym.is_assigned():
                binds.add(name)
            elif not is_top and sym.is_referenced() and sym.is_global():
                reads.add(name)
        for child in table.get_children():
            walk(child, False)

    walk(top, True)
    return reads - binds, binds


def names_from_nowhere(nb) -> dict[str, int]:
    """``{name: index of the first code cell on the page that reads it}`` for every name a cell on
    the page reads that no earlier cell on the page (or the same cell) binds, no import brings and
    Python or IPython does not provide: the reader meets it without a definition."""
    known = set(dir(builtins)) | IPYTHON_NAMES
    missing: dict[str, int] = {}
    for i, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
        reads, binds = reads_and_binds(cell.source)
        if tags(cell) & OFF_THE_PAGE:
            continue
        for name in sorted(reads - known):
            missing.setdefault(name, i)
        known |= binds
    return missing


@pytest.mark.parametrize("chapter", IDS)
def test_every_name_on_the_page_is_defined_on_the_page(chapter):
    missing = names_from_nowhere(notebook(chapter))
    assert not missing, (f"{chapter}: code on the page reads names defined only in removed cells or nowhere "
                         f"(name: code cell): {missing}; show the cell that binds them (hide-input folds it)")


def test_a_removed_parameters_cell_leaves_its_names_undefined():
    nb = copy.deepcopy(notebook("ch01_ablation_map"))
    cell = next(c for c in nb.cells if "parameters" in tags(c))
    assert not names_from_nowhere(nb)
    cell.metadata["tags"] = ["parameters", "remove-cell"]
    assert {"scale", "n_eval", "build_dir"} <= set(names_from_nowhere(nb))


def test_scopes_are_read_as_python_reads_them():
    reads, binds = reads_and_binds(
        "import math as m\n%matplotlib inline\ndef f(x, k=K):\n    y = [z for z in x]\n"
        "    return m.pi * y[0] + w\nclass C:\n    a = 1\n    b = a\nv = f([1]) + C.b + u\n")
    assert reads == {"K", "w", "u"}
    assert binds == {"m", "f", "C", "v"}
    assert reads_and_binds("def g():\n    global q\n    q = 1\n") == (set(), {"g", "q"})


def _claim(near: bool, verdict: str = "not established") -> dict:
    return {"id": "p1.l11_ablation", "ours": 0.4, "verdict": verdict, "reason": "straddles 0",
            "rule": "Reproduced if …", "near_threshold": near,
            "paper": {"claim": "c", "value": 0.5, "unit": "nats", "source": "ours"}}


def test_the_near_threshold_mark_is_explained_in_the_table_that_shows_it():
    from anatomy_kit.verdicts.tables import NEAR_THRESHOLD_NOTE, claims_html

    marked = claims_html([_claim(True), _claim(False, "reproduced")])
    assert "≈ near threshold</span>" in marked and NEAR_THRESHOLD_NOTE in marked
    assert marked.index(NEAR_THRESHOLD_NOTE) > marked.rindex('<tr class="ak-row">')   # a footnote
    assert NEAR_THRESHOLD_NOTE not in claims_html([_claim(False), _claim(False, "reproduced")])


def test_the_report_shows_no_empty_table_for_a_page_without_claims():
    from anatomy_kit.book.report import NO_CLAIMS, report_markdown

    run = {"scale": "smoke", "model": "m", "corpus": "c", "seed": 0}
    md = report_markdown({"chapters": [{"chapter": "card_report", "run": run, "claims": []},
                                       {"chapter": "ch01_ablation_map", "run": run, "claims": [_claim(False)]}]})
    card, chapter = md.split("\n## ")[1:]
    assert NO_CLAIMS in card and "<table" not in card
    assert NO_CLAIMS not in chapter and chapter.count('<tr class="ak-row">') == 1


#: ``T. Wietrzykowski``, ``M. d'Errico``: an initial and a surname.
AUTHOR = re.compile(r"(?<![\w.])([A-Z])\. ((?:[a-z]')?[A-Z][\w'’-]+)")


def author_initials(texts: dict[str, str]) -> dict[str, set[str]]:
    """``{surname: {initial: pages}}`` of every "X. Surname" in ``texts`` (``{page: text}``)."""
    seen: dict[str, dict[str, set[str]]] = {}
    for page, text in texts.items():
        for initial, surname in AUTHOR.findall(text):
            seen.setdefault(surname, {}).setdefault(initial, set()).add(page)
    return seen


def test_an_author_has_one_initial_across_the_book():
    pages = {p.name: p.read_text() for p in [*(ROOT / "notebooks").glob("*.md"), *(ROOT / "book").glob("*.md"),
                                             ROOT / "README.md"]}
    seen = author_initials(pages)
    assert "Wietrzykowski" in seen
    two = {s: i for s, i in seen.items() if len(i) > 1}
    assert not two, f"authors cited with different initials (initial: pages): {two}"
    slip = author_initials({"a.md": "- T. Wietrzykowski, *Anatomical*", "b.md": "- M. Wietrzykowski, *Anatomical*"})
    assert seen != slip and set(slip["Wietrzykowski"]) == {"T", "M"}


# ---- numbers in the prose pages come from the build or the kit (issue 29 item 5) ----

#: Numbers a prose page may type, each a name, a label or a definition rather than a result:
ALLOWED_NUMBERS = [
    r"(?<![\d.,])20\d\d(?![\d.,])",                 # a year (the papers are of 2026)
    r"\b\d{4}\.\d{4,5}\b",                          # an arXiv identifier
    r"[A-Za-z][\w-]*\d[\w.-]*|\b\d+(?:\.\d+)?[A-Za-z][\w-]*",   # a name: SmolLM2-135M, H100, ch01, 8B, 2x
    r"\b\d+-bit\b",                                 # a weight format in a model's name (4-bit)
    r"(?i:chapters?|papers?|exercise|appendix|section|item|issue|rank|part)\s+\d+"
    r"(?:\s*(?:–|-|,|and|or)\s*\d+)*",              # the label of a chapter, paper, exercise, rank
    r"★+, \d+ min",                                 # an exercise heading shown as an example
    r"\b2 (?:CPU )?cores\b",                        # the machine the book is built on, a setting
    r"\b95 %",                                      # the confidence level the rules declare
    r"(?<![\w.,])[01](?![\w.,])",                   # zero and one in a definition ("one side of 0")
    r"[≥≤] ?\d+(?:\.\d+)*",                         # a version requirement (Python ≥ 3.11)
    r"==\d+(?:\.\d+)*",                             # a pinned version
    r"\b\d+ min \|\s*$",                            # a README budget (tests/test_notebooks.py checks it)
    r"\b\d+\.x\b",                                   # a version series (Jupyter Book 1.x)
    r"^\| (?:\d\.|Tool:)[^|]*\|[\d, A-Za-z]*\|",    # a README chapter row: its number and papers
]
NUMBER = re.compile("|".join(f"(?:{a})" for a in ALLOWED_NUMBERS) + r"|(?P<typed>\d[\d,.]*\d|\d)", re.M)


def prose_of(markdown: str) -> str:
    """The prose of a Markdown page: without fenced blocks (code, included parts), maths, inline
    code, link targets, HTML comments, list numbers and labels."""
    text = re.sub(r"^(`{3,}|~{3,})[^\n]*\n.*?^\1\s*$", "", markdown, flags=re.M | re.S)
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    text = re.sub(r"\$\$.*?\$\$|\$[^$\n]+\$", "", text, flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    text = re.sub(r"\]\([^)]*\)|\{[a-z]+\}|<[^>\n]+>", "", text)
    return re.sub(r"^\s*(?:\d+\.|[-*])\s|^\(.*\)=$", "", text, flags=re.M)


def typed_numbers(markdown: str) -> list[str]:
    """Each line of prose with a number typed into it that no allowed pattern explains."""
    return [f"{m.group('typed')!r} in {line.strip()[:90]!r}" for line in prose_of(markdown).splitlines()
            for m in NUMBER.finditer(line) if m.group("typed")]


@pytest.mark.parametrize("page", ["book/intro.md", "README.md", "book/running.md"])
def test_prose_pages_type_no_number(page):
    typed = typed_numbers((ROOT / page).read_text())
    assert not typed, (f"{page}: numbers typed into prose (write them through anatomy_kit/book/pages.py into "
                       f"book/_generated/, or from the kit): {typed}")


def test_a_typed_result_is_caught_and_names_are_not():
    assert typed_numbers("With three seeds the t quantile is 4.30 rather than 1.96, so") == [
        "'4.30' in 'With three seeds the t quantile is 4.30 rather than 1.96, so'",
        "'1.96' in 'With three seeds the t quantile is 4.30 rather than 1.96, so'"]
    assert typed_numbers("chapter 3 at full scale is ≤ 20 runs") == ["'20' in 'chapter 3 at full scale is ≤ 20 runs'"] \
        or typed_numbers("chapter 3 at full scale needs 20 runs")
    assert typed_numbers("10 of 41 verdicts are not established")
    assert not typed_numbers("SmolLM2-135M in 4-bit (arXiv 2603.19348, 2026), chapter 3 and papers 1 and 2, "
                             "on 2 cores, a 95 % interval on one side of 0; Python ≥ 3.11\n"
                             "```python\nx = 12.5\n```\n$t_{0.975} = 4.30$ and `n_seeds=6`")


def _report(rows, phase="confirmatory") -> dict:
    """``rows``: ``(claim id, verdict, role, survives Holm)``."""
    claims = [{"id": cid, "verdict": v, "role": role, "holm": {"survives": surv}, "phase": phase}
              for cid, v, role, surv in rows]
    return {"chapters": [{"run": {"scale": "smoke"}, "claims": claims}]}


def test_the_intro_counts_the_papers_claims_apart_from_the_books_own_questions():
    from anatomy_kit.book.pages import build_verdicts_markdown

    rows = [("p1.a", "reproduced", "primary", True), ("p1.b", "partly reproduced", "primary", False),
            ("p1.c", "not established", "secondary", None), ("p2.a", "not reproduced", "primary", None),
            ("book.x", "reproduced", "primary", True), ("book.y", "mixed", "secondary", None)]
    text = build_verdicts_markdown(_report(rows))
    # by hand: the papers' 4 claims — 1 reproduced, 1 partly, 1 not reproduced, 1 not established; primaries 3,
    # of which 2 held and 1 survives; the book's own 2 — 1 reproduced, 1 mixed; primaries 1, held 1, survives 1
    assert ("The papers' 4 claims: 1 *reproduced*, 1 *partly reproduced*, 1 *not reproduced*, 1 *not established*; "
            "of their 3 primary claims, 2 held and 1 of those survive Holm's correction.") in text
    assert ("The book's own 2 questions: 1 *reproduced*, 1 *mixed*; of their 1 primary claims, 1 held and 1 of "
            "those survive") in text
    assert "on confirmatory data" in text
    assert "on exploratory data" in build_verdicts_markdown(_report(rows, phase="exploratory"))
    assert "No chapter had run" in build_verdicts_markdown(None)
    assert typed_numbers(text)          # generated: the test of typed numbers does not read _generated/


def test_the_card_page_sizes_1b_to_8b_models_from_the_flop_model():
    from anatomy_kit.book.pages import card_guidance_markdown
    from anatomy_kit.lm.estimates import ASSUMED_FLOPS, duration

    text = card_guidance_markdown().split("**Healing**")[0]        # the card's own table; healing's is below
    rows = [r.split(" | ") for r in text.splitlines() if r.startswith("| `")]
    names = [r[0].strip("| `") for r in rows]
    # the range's boundaries: SmolLM2-135M (0.13 B) and Gemma 2 9B (9.2 B) lie outside, Llama 3.1 8B inside
    assert "meta-llama/Llama-3.1-8B" in names and "meta-llama/Llama-3.2-1B" in names
    assert "HuggingFaceTB/SmolLM2-135M" not in names and "google/gemma-2-9b" not in names
    for row in rows:
        flops, time, memory = float(row[4]), row[5], row[6]
        seconds = flops / ASSUMED_FLOPS["eval-fp32"]    # the FLOPs as printed: 2 digits, ±5 % at most
        if time.endswith(" s"):                         # under two minutes: seconds, else the duration's words
            assert seconds < 120 and abs(float(time[:-2]) - seconds) <= 0.05 * seconds + 0.5
        else:
            low, high = (duration(x * seconds / 3600) for x in (0.95, 1.05))
            assert seconds >= 114 and time in {low, duration(seconds / 3600), high}
        fp32, bf16 = (float(m.split()[0]) for m in memory.strip(" |").split(" / "))
        assert abs(fp32 - 2 * bf16) <= 1            # 4 bytes a parameter against 2, each rounded to 1 GB
    llama8b = rows[names.index("meta-llama/Llama-3.1-8B")]
    # K = 32 // 4 = 8 capped at the default cap of 4; 8.03e9 parameters × 4 and × 2 bytes
    assert llama8b[1:4] == ["32", "4", "8.0 B"] and llama8b[6].startswith("32 GB / 16 GB")


def test_the_card_page_sizes_healing_from_the_kits_memory_model():
    """Full fine-tunes at 16 and 8 bytes a parameter plus one step's activations, LoRA at the weights plus
    little; auto picks LoRA where the full fine-tune's gradients and moments do not fit 85 % of what an
    80 GB GPU has left beside the weights."""
    from anatomy_kit.book.pages import card_guidance_markdown, heal_memory_markdown
    from anatomy_kit.lm.estimates import HUB_SHAPES

    text = heal_memory_markdown()
    assert text in card_guidance_markdown()
    rows = {r.split(" | ")[0].strip("| `"): [c.strip(" |") for c in r.split(" | ")[1:]]
            for r in text.splitlines() if r.startswith("| `")}
    assert "meta-llama/Llama-3.1-8B" in rows and "HuggingFaceTB/SmolLM2-135M" not in rows
    for name, (full32, full16, lora, auto) in rows.items():
        n = HUB_SHAPES[name].params / 1e9
        f32, f16, lo = (float(x.split()[0]) for x in (full32, full16, lora))
        assert 16 * n <= f32 + 0.5 <= 16 * n + 12 and 8 * n <= f16 + 0.5 <= 8 * n + 8 and 2 * n <= lo + 0.5 <= 2 * n + 8
        beyond = {4: f32 - 4 * n, 2: f16 - 2 * n}        # what a full fine-tune needs beside the loaded weights
        want = ["full" if beyond[w] <= 0.85 * (80 - w * n) - 1 else "lora" if beyond[w] > 0.85 * (80 - w * n) + 1
                else None for w in (4, 2)]
        got = auto.split(" / ")
        assert all(w is None or w == g for w, g in zip(want, got)), (name, want, got)
    assert rows["meta-llama/Llama-3.1-8B"][3] == "lora / full" and rows["meta-llama/Llama-3.2-1B"][3] == "full / full"
