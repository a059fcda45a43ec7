"""Every page of the documentation site on a phone (Debian Chromium under Playwright, laid out as a
phone lays out pages): nothing wider than the screen at 360 and 390 px, on the real release.

Usable at that width means no sideways scrolling of the page and no element reaching past the
screen's edge; a wide table or code sample scrolls inside its own box instead.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

import pytest

from tests.paths import data_marks
from tests.pipeline.site.conftest import RealSite
from tests.pipeline.site.screenshots import PHONES, chromium_path, overflow, phone_context

pytestmark = [
    *data_marks(),  # slow, and skipped with a reason when the real data is absent
    pytest.mark.skipif(chromium_path() is None, reason="chromium is not installed (Debian package `chromium`)"),
]


def site_pages(site: RealSite) -> list[str]:
    """Every HTML page the release ships under docs/, as the manifest of the build lists them."""
    docs = (site.root / "current" / "docs").resolve()
    return sorted(p.name for p in docs.glob("*.html"))


@pytest.mark.parametrize(("width", "height"), PHONES)
def test_every_page_fits_a_phone(chromium: Any, real_site: RealSite, width: int, height: int) -> None:
    pages = site_pages(real_site)
    assert {"index.html", "api.html", "map.html", "errors.html", "quickstart.html"} <= set(pages)
    context = phone_context(chromium, width, height)
    host = urlparse(real_site.url).netloc
    foreign: list[str] = []
    errors: list[str] = []

    def guard(route: Any) -> None:
        if urlparse(route.request.url).netloc == host or urlparse(route.request.url).scheme in ("data", "blob"):
            route.continue_()
        else:
            foreign.append(route.request.url)
            route.abort()

    context.route("**/*", guard)
    page = context.new_page()
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    failures = {}
    for name in pages:
        page.goto(f"{real_site.url}/docs/{name}")
        for details in page.query_selector_all("details"):
            details.evaluate("d => d.open = true")  # folded examples and tables count too
        report = overflow(page, width)
        if report["scrollWidth"] > width or report["overflowing"]:
            failures[name] = {**report, "overflowing": report["overflowing"][:8]}
    context.close()
    assert not failures, failures
    assert not foreign and not errors, (foreign, errors)
