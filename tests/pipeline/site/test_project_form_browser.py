"""The map's "last month's confirmed cases" form in a real browser (Debian Chromium under Playwright)
against the real release: loaded only when an area panel opens, its figures are the ratio route's times
the count, and without JavaScript it is not there."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

import httpx
import pytest

from tests.paths import data_marks
from tests.pipeline.site.conftest import RealSite
from tests.pipeline.site.screenshots import (
    STATE,
    chromium_path,
    first_lga_of,
    open_map,
    point_inside,
)

pytestmark = [
    *data_marks(),
    pytest.mark.skipif(chromium_path() is None, reason="chromium is not installed (Debian package `chromium`)"),
]


def test_the_form_projects_a_count_with_the_routes_ratios(chromium: Any, real_site: RealSite) -> None:
    context = chromium.new_context(viewport={"width": 1400, "height": 1000}, bypass_csp=True)
    page = context.new_page()
    seen: list[str] = []
    errors: list[str] = []
    page.on("request", lambda r: seen.append(urlparse(r.url).path))
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        open_map(page, real_site.url, real_site.key)
        assert not any(p.endswith("/project.js") for p in seen)  # not on first paint
        assert page.is_hidden("#project-panel")
        code = first_lga_of(page, STATE)
        page.wait_for_timeout(300)
        x, y = point_inside(page, f"path.lga-{code}")
        page.mouse.click(x, y)
        page.wait_for_selector("#project-form", timeout=30_000)
        assert any(p.endswith("/project.js") for p in seen)
        page.fill("#project-cases", "1000")
        page.fill("#project-month", "2024-06")
        page.click("#project-form button[type=submit]")
        page.wait_for_function("document.querySelectorAll('#project-table tbody tr').length === 4", timeout=30_000)
        rows = page.eval_on_selector_all("#project-table tbody tr",
                                         "rs => rs.map(r => [...r.cells].map(c => c.textContent))")
        r = httpx.get(real_site.url + "/v1/transmission/ratios/lgas", params={"state": STATE},
                      headers={"Authorization": f"Bearer {real_site.key}"}, timeout=30)
        mine = {x["horizon"]: x for x in r.json()["lgas"] if x["lga_code"] == code and x["start_month"] == 6}
        assert [row[0] for row in rows] == ["2024-07", "2024-08", "2024-09", "2024-10"]
        for h, row in enumerate(rows, start=1):
            rec = mine[h]
            if rec["beats_persistence"] is True:
                assert float(row[1]) == round(1000 * rec["ratio"], 1)
                assert row[2] == f"{round(1000 * rec['low'], 1):g} – {round(1000 * rec['high'], 1):g}"
            else:
                assert row[1] == "insufficient skill"
        if any(m["beats_persistence"] is True for m in mine.values()):
            drawn = page.evaluate("() => { const ch = Chart.getChart(document.getElementById('project-chart'));"
                                  " return ch ? ch.data.datasets.length : 0; }")
            assert drawn == 3
        # a bad count is explained, not projected
        page.fill("#project-cases", "-5")
        page.click("#project-form button[type=submit]")
        assert "0 or more" in page.text_content("#project-status")
        assert not errors, errors
    finally:
        context.close()


def test_without_javascript_the_form_is_not_shown(chromium: Any, real_site: RealSite) -> None:
    context = chromium.new_context(java_script_enabled=False)
    page = context.new_page()
    try:
        page.goto(real_site.url + "/docs/map.html")
        assert page.is_hidden("#project-panel")
        assert page.locator("#project-form").count() == 0
        assert page.locator("#project-cases").count() == 0
    finally:
        context.close()
