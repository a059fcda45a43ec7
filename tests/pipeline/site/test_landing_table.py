"""The landing page's endpoint table on a phone (Debian Chromium, 360 px, laid out as a phone lays
out pages): no header cell breaks inside a word ("Pat h", "Sc op e" before), the summaries' code is
rendered as code (no literal backticks) and the formula uses ×. The site is rendered from the
templates and stylesheet of this tree and served to the browser from memory (no server needed)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pipeline.site.pages import SITE_DIR, render_site
from tests.pipeline.site.screenshots import PHONES, browser, chromium_path, phone_context

pytestmark = pytest.mark.skipif(chromium_path() is None, reason="chromium is not installed (Debian package `chromium`)")

ORIGIN = "http://docs.test"

# every word of every cell: one client rect means the word sits on one line
WORDS_SPLIT = r"""(selector) => {
  const out = [];
  for (const cell of document.querySelectorAll(selector)) {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (node.parentElement.closest('code')) continue;  // paths may break at their slashes
      const text = node.textContent;
      for (const m of text.matchAll(/[^\s\-–—\/]+/g)) {  // a hyphen or slash may end a line
        const r = document.createRange();
        r.setStart(node, m.index); r.setEnd(node, m.index + m[0].length);
        const lines = new Set([...r.getClientRects()].filter(x => x.width > 0).map(x => Math.round(x.top)));
        if (lines.size > 1) out.push(m[0]);
      }
    }
  }
  return out;
}"""


@pytest.fixture(scope="module")
def site() -> dict[str, tuple[str, bytes]]:
    return render_site({}, SITE_DIR / "templates", (SITE_DIR / "static" / "style.css").read_bytes(),
                       "2026-11-22T10:00:00Z")


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    with browser() as b:
        yield b


def open_index(chromium: Any, site: dict[str, tuple[str, bytes]], width: int, height: int) -> tuple[Any, Any]:
    context = phone_context(chromium, width, height)

    def serve(route: Any) -> None:
        key = route.request.url.removeprefix(ORIGIN + "/")
        if key in site:
            ctype, body = site[key]
            route.fulfill(status=200, content_type=ctype, body=body)
        else:
            route.fulfill(status=404, body=b"")

    context.route("**/*", serve)
    page = context.new_page()
    page.goto(f"{ORIGIN}/docs/index.html")
    return context, page


@pytest.mark.parametrize(("width", "height"), PHONES)
def test_no_header_cell_breaks_inside_a_word(chromium: Any, site: dict[str, tuple[str, bytes]], width: int,
                                             height: int):
    context, page = open_index(chromium, site, width, height)
    assert page.locator("table.endpoints th").count() == 3
    assert page.evaluate(WORDS_SPLIT, "table.endpoints th") == []
    assert page.evaluate(WORDS_SPLIT, "table.endpoints td:last-child") == []
    # the page still fits the phone: the table scrolls inside itself if it must
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    context.close()


def test_summaries_render_code_and_the_formula(chromium: Any, site: dict[str, tuple[str, bytes]]):
    context, page = open_index(chromium, site, 1280, 800)
    cells = page.locator("table.endpoints td:last-child").all_inner_texts()
    assert cells and not any("`" in c for c in cells)
    assert page.locator("table.endpoints td:last-child code", has_text="include=forecasts").count() == 2
    periods = next(c for c in cells if c.startswith("Period index"))
    # what a month is made of is generated from the model's declared terms (the basis), and no formula
    # anywhere in the table writes "x" for ×
    assert "baseline_x_season" in periods and not any(" x " in c for c in cells)
    context.close()
