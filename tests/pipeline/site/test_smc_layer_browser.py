"""The map's "SMC planning" layer in a real browser (Debian Chromium under Playwright) at phone width,
against the real release: loaded only when switched on, it shades states and LGAs by the rule's verdict
from the SMC routes, its panel shows the chosen area's verdict and timing, and without JavaScript the page
points to the tables of the SMC page instead."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

import httpx
import pytest

from tests.paths import data_marks
from tests.pipeline.site.conftest import RealSite
from tests.pipeline.site.screenshots import chromium_path, first_lga_of, open_map

pytestmark = [
    *data_marks(),
    pytest.mark.skipif(chromium_path() is None, reason="chromium is not installed (Debian package `chromium`)"),
]
ELIGIBLE, NARROW, NOT_ELIGIBLE = "#3182bd", "#9ecae1", "#fee6ce"


def _api(site: RealSite, path: str, **params: str) -> dict:
    r = httpx.get(site.url + path, params=params, headers={"Authorization": f"Bearer {site.key}"}, timeout=30)
    assert r.status_code == 200
    return r.json()


def _watch(page: Any) -> tuple[list[str], list[str]]:
    """The paths the page asks for and its script errors, as they come."""
    seen: list[str] = []
    errors: list[str] = []
    page.on("request", lambda r: seen.append(urlparse(r.url).path))
    page.on("pageerror", lambda e: errors.append(str(e)))
    return seen, errors


def _colour(r: dict) -> str:
    return NOT_ELIGIBLE if not r["eligible"] else ELIGIBLE if r["margin"] >= 0.05 else NARROW


def test_the_layer_shades_by_the_verdict_and_its_panel_reads_the_route(chromium: Any, real_site: RealSite) -> None:
    states = {r["state_code"]: r for r in _api(real_site, "/v1/transmission/smc/states")["states"]}
    context = chromium.new_context(viewport={"width": 360, "height": 740}, bypass_csp=True)
    page = context.new_page()
    seen, errors = _watch(page)
    try:
        open_map(page, real_site.url, real_site.key)
        assert not any(p.endswith(("/smc.js", "/smc/states")) for p in seen)  # not on first paint
        assert page.is_hidden("#smc-panel")
        page.check("#smc-layer")
        page.wait_for_selector("#smc-panel:not([hidden]) .smc-legend", timeout=30_000)
        assert any(p.endswith("/smc.js") for p in seen)
        for code in ("KN", "LA", "SO", "RI"):
            fill = page.get_attribute(f"path.smc-{code}", "fill")
            assert fill == _colour(states[code]), code
        assert "Choose a state" in page.text_content("#smc-panel")
        # a state's LGAs, then one LGA: the panel reads the LGA route
        lga = first_lga_of(page, "KN")
        lgas = {r["lga_code"]: r for r in _api(real_site, "/v1/transmission/smc/lgas", state="KN")["lgas"]}
        page.wait_for_function(f"(document.querySelector('path.smc-{lga}') || {{}}).getAttribute && "
                               f"document.querySelector('path.smc-{lga}').getAttribute('fill') === "
                               f"'{_colour(lgas[lga])}'", timeout=30_000)
        assert page.locator("path.smc-area").count() == len(lgas)
        page.select_option("#lga-select", lga)
        page.wait_for_function(f"document.querySelector('#smc-panel h2').textContent.includes("
                               f"{lgas[lga]['lga']!r})", timeout=30_000)
        text = page.text_content("#smc-panel")
        r = lgas[lga]
        assert ("eligible" in text) and f"{r['margin']:+.3f}" in text
        assert f"{r['years_passed']} of the last 10" in text
        kn = states["KN"]
        assert f"{kn['children_treated_mean_per_cycle']:,}" in text and str(r["cycles"]) in text
        box = page.eval_on_selector("#smc-panel", "e => e.getBoundingClientRect().right")
        assert box <= 360 + 0.5  # fits the phone's width
        # switched off: the risk colours come back
        page.uncheck("#smc-layer")
        page.wait_for_selector("#smc-panel", state="hidden", timeout=10_000)
        assert page.locator("path.smc-area").count() == 0
        assert page.get_attribute(f"path.lga-{lga}", "fill") not in (ELIGIBLE, NARROW, NOT_ELIGIBLE)
        assert not errors, errors
    finally:
        context.close()


def test_without_javascript_the_map_points_to_the_smc_tables(chromium: Any, real_site: RealSite) -> None:
    context = chromium.new_context(java_script_enabled=False, viewport={"width": 360, "height": 740})
    page = context.new_page()
    try:
        page.goto(real_site.url + "/docs/map.html")
        assert page.is_hidden("#smc-panel") and page.is_disabled("#smc-layer")
        link = page.locator(".layer-control a")
        assert link.count() == 1 and link.get_attribute("href").endswith("smc.html")
        page.goto(real_site.url + "/docs/smc.html")
        assert "Planning SMC with this service" in page.text_content("h1")
        assert page.locator("table").count() >= 2
        assert "Kano" in page.text_content("body")
    finally:
        context.close()
