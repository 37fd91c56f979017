"""Three kinds of fault a reader found on the chapters (issue 37), each caught by a test:

- a symbol used before the text that defines it, or defined only inside a folded dropdown (read statically from
  the chapter's MyST source, for the symbols listed in :data:`SYMBOLS`);
- a number typed into the prose (a percentage or a ratio) that appears in no output of the same page, no paper
  value (``data_manifest/references.yaml``) and no constant of the page's code (read from the executed notebook
  in ``build/notebooks``, after the book is built, like tests/test_book.py);
- a claims-table row whose unit label disagrees with what its values measure (the label the table prints against
  the unit the claim's own note names, read from ``build/metrics``).
"""

from __future__ import annotations

import json
import math
import os
import re

import pytest

from chapter_source import CHAPTERS, IDS
from conftest import ROOT
from test_page_rules import code_text
from test_page_sources import prose_of

# ---------------------------------------------------------------- symbols before their definition (static)

#: ``{chapter: {symbol: (its spellings, the text that defines it)}}``: a spelling is a regular expression (the
#: symbol in maths, in Unicode, in code output); the definition must come first on the page and lie outside any
#: folded dropdown. A chapter that introduces a symbol adds it here.
SYMBOLS: dict[str, dict[str, tuple[tuple[str, ...], str]]] = {
    "ch01_ablation_map": {
        "Δ_ℓ": ((r"\\Delta_\\ell", r"Δ_ℓ"), r"the layer's \*\*importance\*\* is the relative change"),
        "d_b": ((r"\bd_b\b",), r"a \*paired\* difference per evaluation block \$b\$"),
    },
    "ch02_anatomy_weights": {
        "ρ₁": ((r"\\rho_1", r"ρ₁", r"ρ1(?!\d)"), r"\$\\rho_1\$ \(ρ₁\): the Pearson\s+correlation"),
        "K": ((r"\$K\$", r"\$K \+ q\$", r"cap K\b"), r"within the step cap \$K\$"),
    },
    "ch03_growth_training": {
        "κ": ((r"\\kappa", r"κ"), r"by only a fraction \$\\kappa\$ of that"),
        "g₁": ((r"g_1", r"g₁"), r"of sizes \$g_1, \\dots, g_5\$"),
    },
}

CODE_CELL = re.compile(r"^(`{3,})\{code-cell\}[^\n]*\n(.*?)^\1\s*$", re.M | re.S)
OPEN_DROPDOWN = re.compile(r"^(:{3,}|`{3,})\{(?:dropdown|admonition)\}[^\n]*$")


def page_in_order(markdown: str) -> str:
    """The page as a reader meets it: the prose, and in place of each code cell the words it writes."""
    return CODE_CELL.sub(lambda m: code_text(m.group(2)), markdown)


def folded_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` offsets of every folded block: a ``{dropdown}`` (colon or backtick fence) and an
    admonition whose class folds it (``:class: … dropdown``)."""
    spans, stack, offset = [], [], 0
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        opened = OPEN_DROPDOWN.match(line.strip())
        if opened:
            fence = opened.group(1)
            folds = "{dropdown}" in line or any(re.match(r"\s*:class:.*\bdropdown\b", nxt)
                                                for nxt in lines[i + 1:i + 3])
            stack.append((fence, offset, folds))
        elif stack and re.fullmatch(rf"{re.escape(stack[-1][0])}\s*", line.strip()):
            fence, start, folds = stack.pop()
            if folds:
                spans.append((start, offset + len(line)))
        offset += len(line)
    return spans


def symbols_before_definition(markdown: str, symbols: dict[str, tuple[tuple[str, ...], str]]) -> list[str]:
    """What is wrong with each listed symbol on the page: used before its definition, defined only in a fold,
    or never defined."""
    text = page_in_order(markdown)
    folds = folded_spans(text)
    out = []
    for name, (spellings, definition) in symbols.items():
        defs = [m.start() for m in re.finditer(definition.replace(" ", r"\s+"), text)]
        unfolded = [d for d in defs if not any(a <= d < b for a, b in folds)]
        if not unfolded:
            out.append(f"{name}: {'defined only inside a folded block' if defs else 'never defined'}")
            continue
        uses = [m.start() for s in spellings for m in re.finditer(s, text)]
        early = [u for u in uses if u < unfolded[0]]
        if early:
            line = text.count("\n", 0, min(early)) + 1
            out.append(f"{name}: used (page text line {line}) before the text that defines it")
    return out


@pytest.mark.parametrize("chapter", sorted(SYMBOLS))
def test_every_symbol_is_defined_before_it_is_used(chapter):
    entry = next(c for c in CHAPTERS if c["id"] == chapter)
    wrong = symbols_before_definition((ROOT / "notebooks" / entry["file"]).read_text(), SYMBOLS[chapter])
    assert not wrong, f"{chapter}: {wrong}"


def test_a_symbol_used_early_or_defined_in_a_fold_is_caught():
    sym = {"ρ₁": ((r"ρ₁",), r"ρ₁ is the correlation")}
    assert not symbols_before_definition("ρ₁ is the correlation of neighbours.\n\nTable: ρ₁ = 0.\n", sym)
    assert symbols_before_definition("The table shows ρ₁.\n\nρ₁ is the correlation of neighbours.\n", sym) == [
        "ρ₁: used (page text line 1) before the text that defines it"]
    folded = ":::{dropdown} More\nρ₁ is the correlation of neighbours.\n:::\n\nThe table shows ρ₁.\n"
    assert symbols_before_definition(folded, sym) == ["ρ₁: defined only inside a folded block"]
    # a code cell's printed words are read where the cell stands
    code = "```{code-cell} ipython3\nprint(f\"|ρ₁| = {x}\")\n```\n\nρ₁ is the correlation of neighbours.\n"
    assert symbols_before_definition(code, sym)
    # a list entry may be missing its chapter: every symbol of SYMBOLS is checked on its own chapter's page
    assert set(SYMBOLS) <= set(IDS)


# ---------------------------------------------------------------- numbers in prose that no output shows (built)

BUILD = ROOT / "build"
REQUIRED = os.environ.get("ANATOMY_KIT_BOOK_BUILT") == "1"

#: A percentage or a ratio typed into prose (``63 %``, ``+2,381 %``, ``4.7×``), not a product (``4 × 2``).
PROSE_NUMBER = re.compile(r"(?<![\w.,])[−+-]?(\d[\d,]*(?:\.\d+)?)(?=\s?(?:%|×(?!\s*\d)))")
ANY_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
#: ``{chapter: {number as typed: why the prose may type it}}``: numbers that are definitions or hand-worked
#: steps of a derivation, not results of the run.
ALLOWED = {
    "ch03_growth_training": {"95.3": "the exact coverage 1 − 12/256 of the eight-seed sign-flip interval, "
                                     "worked by hand in the derivation"},
}


def _need(path):
    if not path.exists():
        if REQUIRED:
            pytest.fail(f"{path} is missing: the book build did not produce it")
        pytest.skip(f"{path} not built; run `make book`")


def _as_float(text: str) -> float:
    return float(text.replace(",", ""))


def output_text(nb: dict) -> str:
    """Everything the executed notebook shows as output: streams, plain text, HTML and Markdown."""
    out = []
    for cell in nb["cells"]:
        for o in cell.get("outputs", []):
            if "text" in o:
                out.append("".join(o["text"]))
            for kind in ("text/plain", "text/html", "text/markdown"):
                value = o.get("data", {}).get(kind)
                if value:
                    out.append("".join(value))
    return "\n".join(out)


def unexplained_numbers(prose: str, shown: str, allowed: dict[str, str] | None = None) -> list[str]:
    """Each percentage or ratio typed into ``prose`` that no number in ``shown`` gives at the prose's precision
    (a prose ``63`` matches a shown ``63.3``; ``2,381`` does not match ``2,380``), and ``allowed`` does not list."""
    values = {abs(_as_float(m.group(0))) for m in ANY_NUMBER.finditer(shown)}
    out = []
    for m in PROSE_NUMBER.finditer(prose):
        typed = m.group(1).rstrip(",")
        if typed in (allowed or {}):
            continue
        decimals = len(typed.split(".")[1]) if "." in typed else 0
        target = _as_float(typed)
        if not any(math.isclose(round(v, decimals), target, abs_tol=10 ** -(decimals + 3)) for v in values):
            end = prose.find("\n", m.end())
            line = prose[prose.rfind("\n", 0, m.start()) + 1:end if end >= 0 else len(prose)]
            out.append(f"{typed!r} in {line.strip()[:100]!r}")
    return out


def test_a_typed_number_no_output_shows_is_caught():
    shown = "<td>2,380</td> a saving of 63.3 % …"
    assert unexplained_numbers("the run saves 63 % of the steps", shown) == []
    assert unexplained_numbers("53 % fewer (g₁ = 2)", shown) == ["'53' in '53 % fewer (g₁ = 2)'"]
    assert unexplained_numbers("L11 costs +2,381 %", shown) == ["'2,381' in 'L11 costs +2,381 %'"]
    assert unexplained_numbers("L11 costs +2,380 %, and 4 × 2/256 = 0.031", shown) == []
    assert unexplained_numbers("coverage 95.3 %", shown, {"95.3": "by hand"}) == []


@pytest.mark.book
@pytest.mark.parametrize("chapter", sorted(SYMBOLS))
def test_every_number_in_the_prose_is_shown_by_the_page_or_is_the_papers(chapter):
    path = BUILD / "notebooks" / f"{chapter}.ipynb"
    _need(path)
    nb = json.loads(path.read_text())
    prose = prose_of("\n\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"))
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    shown = "\n".join([output_text(nb), (ROOT / "data_manifest" / "references.yaml").read_text(), code])
    typed = unexplained_numbers(prose, shown, ALLOWED.get(chapter))
    assert not typed, (f"{chapter}: numbers in the prose that no output of the page, no paper value and no constant "
                       f"of its code gives (compute them in the page): {typed}")


# ---------------------------------------------------------------- a unit label that disagrees with the values

#: Units a claim's note may name, each with the words that name it; a label belongs to the first unit it names.
UNITS = {"% PPL change": ("ΔPPL %", "% PPL", "PPL change", "perplexity change"),
         "steps": ("steps",), "nats": ("nats",)}


def unit_of(text: str) -> str | None:
    """The unit ``text`` names first (``None``: none of :data:`UNITS`)."""
    found = [(text.find(w), unit) for unit, words in UNITS.items() for w in words if w in text]
    return min(found)[1] if found else None


def mislabelled(claims: list[dict]) -> list[str]:
    """Claims whose row labels our values with one unit while the claim's note says they are in another."""
    from anatomy_kit.verdicts.tables import claim_row

    out = []
    for c in claims:
        label, measured = claim_row(c).ours_unit, unit_of(c.get("note") or "")
        if label and measured and unit_of(label) not in (None, measured):
            out.append(f"{c['id']}: labelled {label!r}, but its note measures {measured!r}")
    return out


def test_a_row_labelled_in_another_unit_than_its_values_is_caught():
    row = {"id": "p1.recovery_anti_steps", "ours": {"conditions": {"layers run": [True, "L14, L17"]},
                                                    "value": {"L14": [40.5, 89.3]}},
           "verdict": "not reproduced", "note": "ΔPPL % right after the noise, over 6 noise draws"}
    assert mislabelled([row]) == []                         # references.yaml: ours_unit "% PPL change"
    wrong = dict(row, id="p1.recovery_critical_steps", note="ΔPPL % right after the noise")
    assert mislabelled([wrong]) == ["p1.recovery_critical_steps: labelled 'steps', but its note measures "
                                    "'% PPL change'"]


@pytest.mark.book
@pytest.mark.parametrize("chapter", sorted(SYMBOLS))
def test_every_claims_row_is_labelled_in_the_unit_of_its_values(chapter):
    path = BUILD / "metrics" / f"{chapter}.json"
    _need(path)
    wrong = mislabelled(json.loads(path.read_text())["claims"])
    assert not wrong, f"{chapter}: {wrong}"
