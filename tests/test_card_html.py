"""The card's HTML opens offline in Chromium: no request leaves the page, and every figure loads.

Needs Debian's Chromium (``make system-deps``), driven by Playwright with the flags of
``tests/test_book.py``. Without it the test is skipped, unless ``ANATOMY_KIT_BOOK_BUILT=1`` (set by
``make test``), which makes a missing browser a failure.
"""

import os
from pathlib import Path

import pytest

from anatomy_kit.card import CardSettings, build_card
from anatomy_kit.card.figures import FIGURES

from conftest import tiny_llama
from test_card_architectures import TINY, small_corpus

CHROMIUM = Path("/usr/bin/chromium")
REQUIRED = os.environ.get("ANATOMY_KIT_BOOK_BUILT") == "1"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--disable-quic"]


def _browser_or_skip():
    if not CHROMIUM.exists():
        if REQUIRED:
            pytest.fail("Debian chromium is not installed (make system-deps)")
        pytest.skip("Debian chromium is not installed (make system-deps)")


@pytest.mark.parametrize("quick", [False, True])
def test_card_html_opens_offline_with_every_figure(quick, tmp_path, one_torch_thread):
    _browser_or_skip()
    from playwright.sync_api import sync_playwright

    from conftest import tiny_tokenizer

    settings = CardSettings(**{**TINY.to_dict(), "quick": quick})
    card = build_card(tiny_llama(), tokenizer=tiny_tokenizer(), corpus=small_corpus(tmp_path), settings=settings,
                      progress=False)
    page_path = card.write(tmp_path / "out")["html"]
    expected = len(FIGURES) - (2 if quick else 0)               # a quick card has no causal or pruning figure
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        requests, failed, errors = [], [], []
        page.on("request", lambda r: requests.append(r.url))
        page.on("requestfailed", lambda r: failed.append(r.url))
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(page_path.as_uri(), wait_until="load")
        images = page.evaluate("() => Array.from(document.images).map(i => [i.complete && i.naturalWidth > 0, "
                               "i.src.slice(0, 22)])")
        tables = page.evaluate("() => document.querySelectorAll('table').length")
        browser.close()
    leaving = [u for u in requests if not u.startswith(("file:", "data:", "about:"))]
    assert not leaving and not failed and not errors, (leaving, failed, errors)
    assert len(images) == expected and all(ok for ok, _ in images), images
    assert {src for _, src in images} == {"data:image/png;base64,"[:22]}
    assert tables == (3 if quick else 4)


def test_every_figure_shows_itself_in_a_notebook_without_pyplot(tmp_path, one_torch_thread):
    """The book page never imports pyplot: each figure must carry its own PNG for Jupyter to show it."""
    from IPython.core.formatters import PNGFormatter

    from conftest import tiny_tokenizer

    card = build_card(tiny_llama(), tokenizer=tiny_tokenizer(), corpus=small_corpus(tmp_path),
                      settings=CardSettings(**TINY.to_dict()), progress=False)
    for name, _, draw in FIGURES:
        png = PNGFormatter()(draw(card.doc))                    # what IPython's display puts under image/png
        assert isinstance(png, bytes) and png.startswith(b"\x89PNG"), name
