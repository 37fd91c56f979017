"""The built book, checked in a real browser (Debian Chromium driven by Playwright) at a 1280 × 800 window.

These tests need `make book` first; `make test` builds it (or reuses an up-to-date build)
and sets ANATOMY_KIT_BOOK_BUILT=1, which turns a missing build into a failure. Layout checks on
the page of a chapter still listed in chapter_source.PENDING are expected to fail (xfail) until
the chapter is converted and the book rebuilt.
"""

import json
import os
import re
from pathlib import Path

import pytest

from chapter_source import IDS, pending
from conftest import ROOT

HTML = ROOT / "book" / "_build" / "html"
BUILD = ROOT / "build"
REQUIRED = os.environ.get("ANATOMY_KIT_BOOK_BUILT") == "1"
CHROMIUM = Path("/usr/bin/chromium")
WINDOW = {"width": 1280, "height": 800}
#: Words per chapter (rendered text outside code and output blocks) a reader should have to read.
WORD_LIMIT, WORD_LIMITS = 5_500, {"ch06_width_growth": 6_000}
#: A figure must be shown at this fraction of its natural (PNG pixel) width, or more.
MIN_FIGURE_SCALE = 0.70
#: The report page: its summary fits the first screen and the whole page stays short.
REPORT_MAX_HEIGHT = 10_000

pytestmark = pytest.mark.book


def _need(path: Path):
    if not path.exists():
        if REQUIRED:
            pytest.fail(f"{path} is missing: the book build did not produce it")
        pytest.skip(f"{path} not built; run `make book`")


#: Pages that run a tool on the reader's model and judge no paper claim (the report card).
TOOL_PAGES = {"card_report"}


@pytest.mark.parametrize("chapter", IDS)
def test_chapter_was_executed_at_smoke_scale_without_errors(chapter):
    path = BUILD / "notebooks" / f"{chapter}.ipynb"
    _need(path)
    nb = json.loads(path.read_text())
    outputs = [o for c in nb["cells"] for o in c.get("outputs", [])]
    assert not [o for o in outputs if o["output_type"] == "error"], f"{chapter} has error outputs"
    assert any("image/png" in o.get("data", {}) for o in outputs), f"{chapter} shows no figure"
    shown = [json.dumps(o) for c in nb["cells"] if "remove-cell" not in c["metadata"].get("tags", [])
             for o in c.get("outputs", [])]
    leaks = [s for s in shown if str(ROOT) in s or "Warning:" in s or "cpu:1" in s]
    assert not leaks, (f"{chapter} shows machine paths, warnings or the device guard's stand-in accelerator (cpu:1) "
                       f"in the book: {leaks[0][:300]}")
    metrics = json.loads((BUILD / "metrics" / f"{chapter}.json").read_text())
    assert metrics["run"]["scale"] == "smoke"
    if chapter not in TOOL_PAGES:
        assert metrics["claims"], f"{chapter} states no verdict on any paper claim"


def test_every_chapter_ran_under_the_device_guard():
    """The Makefile's book build starts every chapter's kernel with the CPU device guard (tests/device_guard.py)."""
    stamp = BUILD / "device-guard" / "device-guard-installed"
    _need(stamp)
    assert stamp.read_text().splitlines() == ["installed"] * len(IDS)


def test_report_lists_every_chapter():
    _need(BUILD / "report.json")
    report = json.loads((BUILD / "report.json").read_text())
    assert [c["chapter"] for c in report["chapters"]] == sorted(IDS)
    for c in report["chapters"]:
        for claim in c["claims"]:
            assert claim["paper"]["value"] is not None and claim["verdict"]


def _pages():
    return ([HTML / "index.html"] + [HTML / "chapters" / f"{i}.html" for i in IDS] + [HTML / "chapters" / "report.html"]
            + [HTML / f"{p}.html" for p in ("running", "glossary", "sources")])


def _page_params():
    """Every page a reader reads (``index.html`` only redirects to ``intro.html``)."""
    pages = [("intro", HTML / "intro.html", [])]
    pages += [(i, HTML / "chapters" / f"{i}.html", pending(i)) for i in IDS]
    pages += [("report", HTML / "chapters" / "report.html", [])]
    pages += [(p, HTML / f"{p}.html", []) for p in ("running", "glossary", "sources")]
    return [pytest.param(path, id=name, marks=marks) for name, path, marks in pages]


@pytest.fixture(scope="module")
def browser():
    _need(HTML / "index.html")
    if not CHROMIUM.exists():
        pytest.fail("Debian chromium is not installed (make system-deps)")
    from playwright.sync_api import sync_playwright

    args = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--disable-quic"]
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=args)
        yield chromium
        chromium.close()


def _open(browser, path: Path):
    _need(path)
    page = browser.new_page(viewport=WINDOW)
    page.goto(path.as_uri(), wait_until="load")
    page.wait_for_function("() => !window.MathJax || !MathJax.startup || MathJax.startup.promise !== undefined")
    page.evaluate("() => window.MathJax && MathJax.startup ? MathJax.startup.promise : null")
    return page


#: Lines of rendered cell output that look like a tqdm bar ("12%|█▎  | 4/30 [00:07<00:45, 1.75s/it]").
PROGRESS_BAR_LINES = r"""() => Array.from(document.querySelectorAll('.cell_output, .output'))
    .flatMap(e => e.innerText.split('\n'))
    .filter(l => /\d+%\|/.test(l) || /\d+\/\d+ \[\d+:\d+/.test(l) || /(it|s)\/(s|it)\]/.test(l))"""
#: Code blocks (inputs, outputs, shell snippets) that scroll horizontally at a 1280-px window; hidden
#: inputs are opened first, so collapsed solutions are measured too.
OVERFLOWING_CODE = r"""() => {
    document.querySelectorAll('details').forEach(d => { d.open = true; });
    return Array.from(document.querySelectorAll('div.highlight pre, .cell_output pre'))
        .filter(e => e.scrollWidth > e.clientWidth + 2)
        .map(e => (e.innerText.split('\n').sort((a, b) => b.length - a.length)[0] || '').slice(0, 90));
}"""


def test_every_page_renders_offline_in_chromium(browser):
    problems = []
    for page_path in _pages():
        assert page_path.exists(), f"{page_path} was not built"
        page = browser.new_page(viewport=WINDOW)
        external, failed, errors = [], [], []
        page.on("request", lambda r: external.append(r.url) if not r.url.startswith(("file:", "data:", "blob:", "about:")) else None)
        page.on("requestfailed", lambda r: failed.append(r.url))
        page.on("pageerror", lambda e: errors.append(str(e)) if "THEBE_JS_URL" not in str(e) else None)
        page.goto(page_path.as_uri(), wait_until="load")
        page.wait_for_function("() => !window.MathJax || !MathJax.startup || MathJax.startup.promise !== undefined")
        page.evaluate("() => window.MathJax && MathJax.startup ? MathJax.startup.promise : null")
        images = page.evaluate("() => Array.from(document.images).map(i => [i.src, i.complete && i.naturalWidth > 0])")
        has_tex = "$$" in page_path.read_text() or "\\(" in page_path.read_text()
        typeset = page.evaluate("() => document.querySelectorAll('mjx-container').length")
        name = page_path.relative_to(HTML)
        if external:
            problems.append(f"{name}: requests leaving the machine: {external[:3]}")
        if failed:
            problems.append(f"{name}: failed requests: {failed[:3]}")
        if errors:
            problems.append(f"{name}: page errors: {errors[:3]}")
        if [src for src, ok in images if not ok]:
            problems.append(f"{name}: images that did not load: {[s for s, ok in images if not ok][:3]}")
        if name.parts[0] == "chapters" and name.stem in IDS and not images:
            problems.append(f"{name}: a chapter page without a figure")
        if has_tex and typeset == 0:
            problems.append(f"{name}: maths present but not typeset by MathJax")
        bars = page.evaluate(PROGRESS_BAR_LINES)
        if bars:
            problems.append(f"{name}: {len(bars)} progress-bar line(s) in the rendered outputs, e.g. {bars[0]!r}")
        wide = page.evaluate(OVERFLOWING_CODE)
        if wide:
            problems.append(f"{name}: {len(wide)} code block(s) wider than the page, e.g. {wide[0]!r}")
        page.close()
    assert not problems, "\n".join(problems)


#: Every table of the article (claims tables, DataFrames, Markdown tables), with details opened: its
#: width against the article column, and whether it or any container up to the article scrolls sideways.
WIDE_TABLES = r"""() => {
    document.querySelectorAll('details').forEach(d => { d.open = true; });
    const art = document.querySelector('article.bd-article') || document.body;
    const right = art.getBoundingClientRect().right;
    const wide = [];
    for (const t of art.querySelectorAll('table')) {
        const r = t.getBoundingClientRect();
        if (r.width === 0) continue;
        let scrolls = t.scrollWidth > t.clientWidth + 2 || r.right > right + 1;
        for (let e = t.parentElement; e && e !== art; e = e.parentElement) {
            if (e.scrollWidth > e.clientWidth + 2) scrolls = true;
        }
        if (scrolls) wide.push([Math.round(r.width), (t.innerText || '').replace(/\s+/g, ' ').slice(0, 60)]);
    }
    return {column: Math.round(art.clientWidth), wide: wide};
}"""
#: Each article image: file name, rendered CSS width, natural (PNG pixel) width.
FIGURE_WIDTHS = r"""() => {
    document.querySelectorAll('details').forEach(d => { d.open = true; });
    const art = document.querySelector('article.bd-article') || document.body;
    return Array.from(art.querySelectorAll('img'))
        .filter(i => i.naturalWidth > 0 && i.getBoundingClientRect().width > 0)
        .map(i => [i.src.split('/').pop(), i.getBoundingClientRect().width, i.naturalWidth]);
}"""
OUTPUT_LINES = r"""() => Array.from(document.querySelectorAll('.cell_output, div.output'))
    .flatMap(e => e.innerText.split('\n')).filter(l => l.trim())"""
#: Progress of any kind: "[3/15] …", tqdm's rates and bars, "step 40/240", "eval loss" lines.
PROGRESS_LINE = re.compile(r"\[\s*\d+\s*/\s*\d+\s*\]|\bit/s\b|\bs/it\b|\d\s*%\|\S*|\bstep\s+\d+\s*/\s*\d+|\beval loss\b",
                           re.I)
#: A stray object repr in an output: ``CheckResult(name=…``, ``Interval(mean=…``.
STRAY_REPR = re.compile(r"\b[A-Z][A-Za-z0-9_]*\((?:[a-z_][a-z0-9_]*=)")
#: The text of every prose block of the article (paragraphs, list items, table cells, headings),
#: without code and maths, with its source line breaks kept (``textContent``): Markdown that did
#: not become a table shows there as pipes.
PROSE_BLOCKS = r"""() => {
    const art = (document.querySelector('article.bd-article') || document.body).cloneNode(true);
    art.querySelectorAll('pre, code, mjx-container, script, style, .cell_input').forEach(e => e.remove());
    return Array.from(art.querySelectorAll('p, li, dd, dt, td, th, h1, h2, h3, h4, h5, h6'))
        .map(e => e.textContent).filter(t => t.includes('|'));
}"""
#: Rows of the article's Markdown tables (not DataFrames) whose first cell alone holds text: a
#: paragraph written right under a table without a blank line becomes such a row.
SWALLOWED_ROWS = r"""() => {
    const art = document.querySelector('article.bd-article') || document.body;
    return Array.from(art.querySelectorAll('table:not(.dataframe):not(.ak-claims):not(.ak-matrix) tbody tr'))
        .filter(r => r.cells.length > 1 && r.cells[0].textContent.trim().split(/\s+/).length > 6
                && Array.from(r.cells).slice(1).every(c => !c.textContent.trim()))
        .map(r => r.cells[0].textContent.trim().slice(0, 80));
}"""
#: Verdict badges with a word broken across two lines ("constructio" / "n"): a word whose text
#: range covers more than one line box.
BROKEN_BADGE_WORDS = r"""() => {
    document.querySelectorAll('details').forEach(d => { d.open = true; });
    const broken = [];
    for (const badge of document.querySelectorAll('.ak-badge')) {
        const walker = document.createTreeWalker(badge, NodeFilter.SHOW_TEXT);
        for (let node = walker.nextNode(); node; node = walker.nextNode()) {
            const re = /\S+/g;
            for (let m = re.exec(node.data); m; m = re.exec(node.data)) {
                const range = document.createRange();
                range.setStart(node, m.index);
                range.setEnd(node, m.index + m[0].length);
                const tops = new Set(Array.from(range.getClientRects()).filter(r => r.width > 0)
                                     .map(r => Math.round(r.top)));
                if (tops.size > 1) broken.push(badge.textContent + ': ' + m[0]);
            }
        }
    }
    return broken;
}"""
#: A Markdown table's delimiter cell (``|---|``, ``| :-- |``, or smart-quoted ``|—|``) or a line
#: that is a row of at least two ``| … |`` cells.
RAW_TABLE_DELIMITER = re.compile(r"\|\s*:?(?:-{3,}|[—–]+):?\s*\|")
RAW_TABLE_ROW = re.compile(r"^\s*\|[^|\n]*\|[^|\n]*\|[^\n]*\|?\s*$", re.M)


def raw_table_markup(blocks: list[str]) -> list[str]:
    """The prose blocks that show Markdown table syntax as text instead of a rendered table."""
    return [" ".join(b.split())[:120] for b in blocks if RAW_TABLE_DELIMITER.search(b) or RAW_TABLE_ROW.search(b)]


#: The smallest text a figure may show, in CSS points (1 pt = 4/3 CSS px) at its rendered size.
MIN_FIGURE_TEXT_PT = 9.0
#: A font size written in a plotting call: ``fontsize=8``, ``labelsize="small"``, ``size=7``.
FONT_SIZE = re.compile(r"\b(?:fontsize|labelsize|size)\s*=\s*(?:([0-9]+(?:\.[0-9]*)?)|[\"']([a-z-]+)[\"'])")
#: matplotlib's default ``font.size`` (tick labels and legends use it as "medium") and its named
#: sizes relative to it (``matplotlib.font_manager.font_scalings``).
DEFAULT_FONT_PT = 10.0
FONT_SCALINGS = {"xx-small": 0.579, "x-small": 0.694, "small": 0.833, "smaller": 0.833, "medium": 1.0,
                 "large": 1.2, "larger": 1.2, "x-large": 1.44, "xx-large": 1.728}


def smallest_font_pt(code: str) -> float:
    """The smallest font size (matplotlib points) a plotting cell asks for: the default for tick
    labels and legends, or a smaller size written in the cell. Sizes set inside the kit's own
    plotting functions are not seen (this is a lower bound only where the cell draws itself)."""
    sizes = [DEFAULT_FONT_PT]
    for number, name in FONT_SIZE.findall(code):
        sizes.append(float(number) if number else DEFAULT_FONT_PT * FONT_SCALINGS.get(name, 1.0))
    return min(sizes)


def notebook_figures(nb: dict) -> list[tuple[float, float, int]]:
    """``(smallest font pt, PNG dpi, PNG pixel width)`` of every figure a rendered notebook shows, in
    page order (cells tagged ``remove-cell`` or ``remove-output`` show none)."""
    import base64
    import io

    from PIL import Image

    out = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "code" or {"remove-cell", "remove-output"} & set(cell["metadata"].get("tags", [])):
            continue
        for output in cell.get("outputs", []):
            png = output.get("data", {}).get("image/png")
            if png:
                image = Image.open(io.BytesIO(base64.b64decode(png)))
                dpi = float(image.info.get("dpi", (72.0, 72.0))[0])
                out.append((smallest_font_pt(cell["source"] if isinstance(cell["source"], str)
                                             else "".join(cell["source"])), dpi, image.width))
    return out


def rendered_text_pt(font_pt: float, dpi: float, natural_px: float, shown_px: float) -> float:
    """A figure's ``font_pt`` text in CSS points as the page shows it: font_pt · dpi/72 PNG pixels,
    scaled by shown/natural width to CSS pixels, 3/4 of a CSS pixel to the point."""
    return font_pt * dpi / 72 * shown_px / natural_px * 0.75


def _figure_text_problems(figures, shown) -> list[str]:
    """Figures (``notebook_figures``) whose smallest text is under :data:`MIN_FIGURE_TEXT_PT` as shown
    (``shown``: ``[(rendered CSS width, natural width)]`` of the page's output images, in order); a
    page whose images do not match the notebook's one for one is not measured."""
    if [w for _, _, w in figures] != [natural for _, natural in shown]:
        return []
    out = []
    for k, ((font, dpi, natural), (width, _)) in enumerate(zip(figures, shown), 1):
        pt = rendered_text_pt(font, dpi, natural, width)
        if pt < MIN_FIGURE_TEXT_PT:
            out.append(f"figure {k}: its {font:g}-pt text at {dpi:.0f} dpi, {natural} px shown at {width:.0f} px, "
                       f"reads as {pt:.1f} pt (at least {MIN_FIGURE_TEXT_PT:g})")
    return out


def _figure_problems(figures) -> list[str]:
    """Figures shown below ``MIN_FIGURE_SCALE`` of their natural width (scale = CSS width / PNG pixel width;
    with the 748-px chapter column that allows a figure up to ~1,068 px wide)."""
    return [f"{name} is shown at {100 * shown / natural:.0f} % of its {natural} px ({shown:.0f} px)"
            for name, shown, natural in figures if shown / natural < MIN_FIGURE_SCALE]


@pytest.mark.parametrize("path", _page_params())
def test_page_layout_tables_figures_and_outputs(browser, path):
    """No table wider than the column, every figure at ≥ 70 % of its width, no progress line and no
    stray repr in any output, no page saying a check "agrees" (the book never runs a solution), no
    Markdown table left as pipes in the text and no paragraph swallowed as a table row."""
    page = _open(browser, path)
    try:
        tables = page.evaluate(WIDE_TABLES)
        figures = page.evaluate(FIGURE_WIDTHS)
        lines = page.evaluate(OUTPUT_LINES)
        prose = page.evaluate(PROSE_BLOCKS)
        swallowed = page.evaluate(SWALLOWED_ROWS)
        broken = page.evaluate(BROKEN_BADGE_WORDS)
    finally:
        page.close()
    problems = [f"table {w} px wide in a {tables['column']} px column: {text!r}" for w, text in tables["wide"]]
    problems += _figure_problems(figures)
    problems += [f"progress line: {line[:100]!r}" for line in lines if PROGRESS_LINE.search(line)][:5]
    problems += [f"stray repr: {line[:100]!r}" for line in lines if STRAY_REPR.search(line)][:5]
    problems += [f"a check agrees with a solution the reader did not write: {line[:100]!r}"
                 for line in lines if "agrees with the kit" in line][:3]
    problems += [f"Markdown table shown as text: {b!r}" for b in raw_table_markup(prose)][:3]
    problems += [f"a paragraph swallowed by the table above it (leave a blank line after a table): {r!r}"
                 for r in swallowed][:3]
    problems += [f"a verdict badge breaks a word across lines: {b!r}" for b in broken][:3]
    assert not problems, f"{path.name}:\n" + "\n".join(problems)


#: Words a reader reads as prose: the article's text and the paragraphs chapters generate (Markdown
#: outputs), without code inputs, code blocks, stream/HTML/plain-text outputs (claims tables,
#: DataFrames, printed lines), tables inside outputs and maths (MathJax). A word holds a letter or digit.
ARTICLE_WORDS = r"""() => {
    const art = document.querySelector('article.bd-article').cloneNode(true);
    art.querySelectorAll('.cell_input, div.highlight, pre, mjx-container, script, style, .headerlink, '
        + '.prev-next-area, .cell_output div.output, .cell_output table').forEach(e => e.remove());
    return art.textContent.split(/\s+/).filter(w => /[\p{L}\p{N}]/u.test(w)).length;
}"""


#: The page's output images (cell outputs, in page order): rendered CSS width, natural pixel width.
OUTPUT_FIGURES = r"""() => Array.from(document.querySelectorAll('article.bd-article .cell_output img'))
    .map(i => [i.getBoundingClientRect().width, i.naturalWidth])"""


@pytest.mark.parametrize("chapter", [pytest.param(i, id=i, marks=pending(i)) for i in IDS])
def test_figure_text_is_readable_at_its_rendered_size(browser, chapter):
    """Prints every figure's smallest text as shown; fails below :data:`MIN_FIGURE_TEXT_PT`."""
    executed = ROOT / "book" / "chapters" / f"{chapter}.ipynb"
    _need(executed)
    figures = notebook_figures(json.loads(executed.read_text()))
    page = _open(browser, HTML / "chapters" / f"{chapter}.html")
    try:
        shown = page.evaluate(OUTPUT_FIGURES)
    finally:
        page.close()
    assert [w for _, _, w in figures] == [n for _, n in shown], \
        f"{chapter}: the page's figures {[n for _, n in shown]} px are not the notebook's {[w for _, _, w in figures]}"
    sizes = [rendered_text_pt(f, d, n, w) for (f, d, n), (w, _) in zip(figures, shown)]
    print(f"figure text {chapter}: " + ", ".join(f"{pt:.1f}" for pt in sizes) + " pt")
    problems = _figure_text_problems(figures, shown)
    assert not problems, f"{chapter}:\n" + "\n".join(problems)


@pytest.mark.parametrize("chapter", [pytest.param(i, id=i, marks=pending(i)) for i in IDS])
def test_chapter_word_count(browser, chapter):
    """Prints ``words <chapter>: N (limit L)``; run with -s (or -rA) to read every chapter's count."""
    page = _open(browser, HTML / "chapters" / f"{chapter}.html")
    try:
        words = page.evaluate(ARTICLE_WORDS)
    finally:
        page.close()
    limit = WORD_LIMITS.get(chapter, WORD_LIMIT)
    print(f"words {chapter}: {words:,} (limit {limit:,})")
    assert words <= limit, f"{chapter} has {words:,} words outside code and outputs; the limit is {limit:,}"


#: What a reader reads before opening anything: :data:`ARTICLE_WORDS` without what is folded (closed
#: dropdowns, folded code and claim details: a closed ``details`` shows only its ``summary``), and
#: the page's height in that state.
UNFOLDED = r"""() => {
    window.scrollTo(0, 0);
    const height = document.documentElement.scrollHeight;
    const art = document.querySelector('article.bd-article').cloneNode(true);
    art.querySelectorAll('details:not([open]) > :not(summary), .toggle-hidden').forEach(e => e.remove());
    art.querySelectorAll('.cell_input, div.highlight, pre, mjx-container, script, style, .headerlink, '
        + '.prev-next-area, .cell_output div.output, .cell_output table').forEach(e => e.remove());
    const words = art.textContent.split(/\s+/).filter(w => /[\p{L}\p{N}]/u.test(w)).length;
    return {words: words, height: height};
}"""
#: The learner's path (issue 29 item 8; issue 37): at most this many unfolded words per chapter, and at most
#: this many screens (the page's height at the window, folded parts closed, over the window's height).
UNFOLDED_WORD_TARGET = 2_500
SCREEN_TARGET = 20
#: Issue 37 is open on this point: the chapters run 20-30 screens after folding, so the screen target is printed
#: for every page and checked by the unit test of reading_cost_problems, but a page over it does not fail the build
#: until the pages are restructured (set True then). The word target is enforced.
SCREENS_ENFORCED = False


def reading_cost(words: int, height: float, window_height: int = WINDOW["height"]) -> dict:
    """``{"words": unfolded words, "screens": page height / window height}`` of one page."""
    if window_height <= 0:
        raise ValueError(f"window_height must be a positive number of pixels, got {window_height!r}")
    return {"words": words, "screens": height / window_height}


def reading_cost_problems(name: str, words: int, height: float, window_height: int = WINDOW["height"],
                          screens: bool = True) -> list[str]:
    """What makes a chapter's learner's path too long: more than :data:`UNFOLDED_WORD_TARGET` unfolded words or
    (with ``screens``) more than :data:`SCREEN_TARGET` screens (a page exactly at a limit passes)."""
    cost = reading_cost(words, height, window_height)
    problems = []
    if cost["words"] > UNFOLDED_WORD_TARGET:
        problems.append(f"{name}: {cost['words']:,} unfolded words; the learner's path is at most "
                        f"{UNFOLDED_WORD_TARGET:,}")
    if screens and cost["screens"] > SCREEN_TARGET:
        problems.append(f"{name}: {cost['screens']:.1f} screens of {window_height} px ({height:,.0f} px tall); "
                        f"a chapter is at most {SCREEN_TARGET}")
    return problems


@pytest.mark.parametrize(("name", "path"), [pytest.param(p.id, p.values[0], id=p.id, marks=p.marks)
                                            for p in _page_params()])
def test_reading_cost_unfolded_words_and_page_height(browser, name, path):
    """Prints ``reading <page>: N unfolded words (of M), H px tall (S screens)``; run with -s to read
    every page's. A chapter stays within :data:`UNFOLDED_WORD_TARGET` words and :data:`SCREEN_TARGET` screens."""
    page = _open(browser, path)
    try:
        folded = page.evaluate(UNFOLDED)
        words = page.evaluate(ARTICLE_WORDS)
    finally:
        page.close()
    cost = reading_cost(folded["words"], folded["height"])
    print(f"reading {name}: {folded['words']:,} unfolded words (of {words:,}), {folded['height']:,} px tall "
          f"({cost['screens']:.1f} screens at {WINDOW['width']} × {WINDOW['height']})")
    if name in IDS:
        problems = reading_cost_problems(name, folded["words"], folded["height"], screens=SCREENS_ENFORCED)
        assert not problems, "\n".join(problems)


REPORT_GEOMETRY = r"""() => {
    window.scrollTo(0, 0);
    const s = document.querySelector('.ak-summary');
    return {summary_bottom: s ? s.getBoundingClientRect().bottom + window.scrollY : null,
            height: document.documentElement.scrollHeight};
}"""


def test_report_summary_fits_one_screen_and_the_page_is_short(browser):
    page = _open(browser, HTML / "chapters" / "report.html")
    try:
        geometry = page.evaluate(REPORT_GEOMETRY)
    finally:
        page.close()
    print(f"report page: summary ends at {geometry['summary_bottom']} px, page {geometry['height']:,} px tall")
    assert geometry["summary_bottom"] is not None, "the report has no summary (.ak-summary)"
    assert geometry["summary_bottom"] <= WINDOW["height"], \
        f"the summary ends at {geometry['summary_bottom']:.0f} px, below the first {WINDOW['height']} px screen"
    assert geometry["height"] < REPORT_MAX_HEIGHT, f"the report page is {geometry['height']:,} px tall"
