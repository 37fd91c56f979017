"""The built book, checked in a real browser (Debian Chromium driven by Playwright).

These tests need `make book` first; `make test` builds it (or reuses an up-to-date build)
and sets ANATOMY_KIT_BOOK_BUILT=1, which turns a missing build into a failure.
"""

import json
import os
from pathlib import Path

import pytest

from anatomy_kit.book.runner import chapter_manifest

from conftest import ROOT

HTML = ROOT / "book" / "_build" / "html"
BUILD = ROOT / "build"
REQUIRED = os.environ.get("ANATOMY_KIT_BOOK_BUILT") == "1"
CHROMIUM = Path("/usr/bin/chromium")
IDS = [c["id"] for c in chapter_manifest()]

pytestmark = pytest.mark.book


def _need(path: Path):
    if not path.exists():
        if REQUIRED:
            pytest.fail(f"{path} is missing: the book build did not produce it")
        pytest.skip(f"{path} not built; run `make book`")


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
    leaks = [s for s in shown if str(ROOT) in s or "Warning:" in s]
    assert not leaks, f"{chapter} shows machine paths or warnings in the book: {leaks[0][:300]}"
    metrics = json.loads((BUILD / "metrics" / f"{chapter}.json").read_text())
    assert metrics["run"]["scale"] == "smoke"
    assert metrics["claims"], f"{chapter} states no verdict on any paper claim"


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


def test_every_page_renders_offline_in_chromium():
    _need(HTML / "index.html")
    if not CHROMIUM.exists():
        pytest.fail("Debian chromium is not installed (make system-deps)")
    from playwright.sync_api import sync_playwright

    args = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--disable-quic"]
    problems = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=args)
        for page_path in _pages():
            assert page_path.exists(), f"{page_path} was not built"
            page = browser.new_page(viewport={"width": 1280, "height": 900})
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
        browser.close()
    assert not problems, "\n".join(problems)
