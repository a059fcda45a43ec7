"""Headless Chromium (Debian package) driven by Playwright: the map and docs, looked at.

Used by the browser tests and by `make screenshots`, which writes PNGs of the map
(national and one state), an LGA's charts, its score over time, the map on a 390 px phone and
the landing page for a person to look at:

    python -m tests.pipeline.site.screenshots --root build --out build/screenshots
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

KEY_STORE = "malaria-risk.api-key"  # the sessionStorage entry map.js keeps the key in
STATE = "KN"  # the state the state view and the charts show
# Common laptop screens (CSS pixels of the browser's viewport) and phone widths the pages must fit.
LAPTOPS = ((1280, 800), (1366, 768), (1440, 900), (1920, 1080))
PHONES = ((360, 740), (390, 844))

# Elements that reach past the viewport's left or right edge and are not inside a box that scrolls
# or clips them: what makes a page scroll sideways or cuts its text off on a phone.
OVERFLOW_JS = """(vw) => {
  const clipped = (el) => {
    for (let a = el.parentElement; a && a !== document.documentElement; a = a.parentElement)
      if (getComputedStyle(a).overflowX !== 'visible') return true;
    return false;
  };
  const name = (el) => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
    (typeof el.className === 'string' && el.className ? '.' + el.className.trim().split(/\\s+/).join('.') : '');
  const out = [];
  for (const el of document.body.querySelectorAll('*')) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) continue;
    if ((r.right > vw + 0.5 || r.left < -0.5) && !clipped(el))
      out.push(name(el) + ' ' + Math.round(r.left) + '..' + Math.round(r.right));
  }
  return {scrollWidth: document.documentElement.scrollWidth, bodyWidth: document.body.scrollWidth, overflowing: out};
}"""


def overflow(page: Any, width: int) -> dict[str, Any]:
    """The document's scroll width and the elements that overflow a viewport `width` px wide."""
    return dict(page.evaluate(OVERFLOW_JS, width))


def phone_context(b: Any, width: int, height: int) -> Any:
    """A browser context that lays pages out as a phone does (meta viewport, touch, 2x pixels)."""
    return b.new_context(viewport={"width": width, "height": height}, is_mobile=True, has_touch=True,
                         device_scale_factor=2, bypass_csp=True)


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def real_browser_marks() -> list[Any]:
    """Marks of a test that drives Chromium against the real build: slow and skipped, with a reason, when
    the real data or the browser is absent."""
    import pytest

    from tests.paths import data_marks

    return [*data_marks(),
            pytest.mark.skipif(chromium_path() is None, reason="chromium is not installed (Debian package `chromium`)")]


@contextmanager
def browser() -> Iterator[Any]:
    """A headless Debian Chromium under Playwright; no browser download, no sandbox (root in CI)."""
    from playwright.sync_api import sync_playwright

    path = chromium_path()
    if path is None:
        raise RuntimeError("chromium is not installed (Debian package `chromium`)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"])
        try:
            yield b
        finally:
            b.close()


def open_map(page: Any, base_url: str, key: str, timeout_ms: int = 60_000) -> None:
    """Open the map, paste the key as a reader would, and wait until the LGAs are drawn."""
    page.goto(base_url + "/docs/map.html")
    page.fill("#api-key", key)
    page.click("#key-form button[type=submit]")
    page.wait_for_selector("body.map-ready", timeout=timeout_ms)


def point_inside(page: Any, selector: str) -> tuple[float, float]:
    """A viewport point where the element itself is hit (not a neighbour), for a real mouse click."""
    found = page.evaluate(
        """(sel) => {
          const el = document.querySelector(sel);
          const r = el.getBoundingClientRect();
          for (let i = 1; i < 12; i++) for (let j = 1; j < 12; j++) {
            const x = r.left + r.width * i / 12, y = r.top + r.height * j / 12;
            if (document.elementFromPoint(x, y) === el) return [x, y];
          }
          return null;
        }""",
        selector,
    )
    if found is None:
        raise AssertionError(f"no visible point inside {selector}")
    return float(found[0]), float(found[1])


def first_lga_of(page: Any, state: str) -> str:
    """Choose a state, wait until its LGAs are drawn and coloured, and return the first LGA code in the
    LGA list (alphabetical by name)."""
    page.select_option("#state-filter", state)
    page.wait_for_selector(f'body[data-view="{state}"]', timeout=60_000)
    return str(page.eval_on_selector("#lga-select", "s => s.options[1].value"))


def take(base_url: str, key: str, out: Path, running: Any = None) -> list[Path]:
    """Write the PNGs; `running` is a browser already launched (tests share one), else one is started."""
    out.mkdir(parents=True, exist_ok=True)
    if running is None:
        with browser() as b:
            return take(base_url, key, out, b)
    b = running
    shots: list[Path] = []
    # Playwright's wait_for_function polls by evaluating its text in the page, which the docs' CSP
    # (no 'unsafe-eval') refuses; the policy itself is tested on its own (test_security_headers.py)
    page = b.new_page(viewport={"width": 1280, "height": 900}, bypass_csp=True)
    page.goto(base_url + "/docs/")
    shots.append(out / "landing.png")
    page.screenshot(path=str(shots[-1]))

    page = b.new_page(viewport={"width": 1400, "height": 1050}, bypass_csp=True)
    open_map(page, base_url, key)
    page.locator("#map").scroll_into_view_if_needed()
    shots.append(out / "map-national.png")
    page.screenshot(path=str(shots[-1]), full_page=False)

    code = first_lga_of(page, STATE)
    page.wait_for_timeout(400)  # the zoom to the state
    x, y = point_inside(page, f"path.lga-{code}")
    page.mouse.click(x, y)
    page.wait_for_function("document.querySelector('#season-table tbody tr') !== null", timeout=30_000)
    shots.append(out / "map-state.png")
    page.screenshot(path=str(shots[-1]), full_page=False)
    page.wait_for_function(
        f"document.querySelector('#history-figure').dataset.code === '{code}'"
        " && document.querySelectorAll('#history-table tbody tr').length > 0", timeout=30_000)
    page.locator("#charts").scroll_into_view_if_needed()
    shots.append(out / "lga-charts.png")
    page.locator("#charts").screenshot(path=str(shots[-1]))
    shots.append(out / "history-chart.png")
    page.locator("#history-figure").screenshot(path=str(shots[-1]))
    page.close()

    context = phone_context(b, 390, 844)
    page = context.new_page()
    open_map(page, base_url, key)
    page.wait_for_timeout(300)  # the map fitted to its final size
    shots.append(out / "phone-map.png")
    page.screenshot(path=str(shots[-1]), full_page=False)
    context.close()
    return shots


def main(argv: list[str] | None = None) -> int:
    from edge.local.app import App
    from edge.stores.sqlite import SQLiteKeyStore
    from tests.conftest import LiveServer

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=Path("build"))
    ap.add_argument("--out", type=Path, default=Path("build/screenshots"))
    args = ap.parse_args(argv)
    if not (args.root / "current").exists():
        print(f"no release under {args.root}: run `make build` first", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:  # a throwaway key: the real key store is left alone
        store = SQLiteKeyStore(Path(tmp) / "keys.sqlite")
        _, key = store.create("screenshots", ["risk_scores", "forecasts", "lga_boundaries"], "test")
        with LiveServer(App(args.root, store)) as server:
            for path in take(server.url, key, args.out):
                print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
