"""The sources and licences page in Chromium: it fits a laptop and a phone without sideways scrolling,
and every source and licence links to its public page; links to other hosts are plain links only, so
the page loads nothing from anywhere else."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

import pytest

from pipeline.attribution import SOURCES
from tests.paths import data_marks
from tests.pipeline.site.conftest import RealSite
from tests.pipeline.site.screenshots import chromium_path, phone_context

pytestmark = [
    *data_marks(),
    pytest.mark.skipif(chromium_path() is None, reason="chromium is not installed (Debian package `chromium`)"),
]


@pytest.mark.parametrize(("width", "height"), [(1280, 800), (360, 740)], ids=["laptop", "phone"])
def test_the_sources_page_fits_and_links_every_source_and_licence(
        chromium: Any, real_site: RealSite, width: int, height: int) -> None:
    context = (phone_context(chromium, width, height) if width < 600
               else chromium.new_context(viewport={"width": width, "height": height}))
    page = context.new_page()
    host = urlparse(real_site.url).netloc
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url))
    page.goto(real_site.url + "/docs/attribution.html")
    page.wait_for_load_state("networkidle")
    fit = page.evaluate("[document.scrollingElement.scrollWidth, innerWidth]")
    assert fit[0] <= fit[1], fit  # no sideways scrolling
    for s in SOURCES:
        hrefs = page.eval_on_selector_all(f"#source-{s.key} a", "as => as.map(a => a.href)")
        assert [u for _, u in s.pages] + [u for _, u in s.licence_links] == hrefs, s.key
        assert s.pages, s.key  # each source has at least its public page
        assert bool(s.licence_links) == (s.terms != "none-stated" and "none stated" not in s.licence), s.key
    # other hosts appear only as plain links, and nothing was loaded from them
    foreign = page.evaluate("""(host) => [...document.querySelectorAll('[src], [href]')]
        .filter(e => { const u = new URL(e.getAttribute('src') || e.getAttribute('href'), location.href);
                       return u.host !== host && u.protocol.startsWith('http'); })
        .map(e => e.tagName)""", host)
    assert foreign and set(foreign) == {"A"}, foreign
    assert all(urlparse(u).netloc == host for u in asked if urlparse(u).scheme.startswith("http")), asked
    context.close()
