"""The map page speaks plainly, with and without JavaScript, at 360 px and 1280 px (Debian Chromium
under Playwright, the real release on loopback with a real key): without a script, the explanation,
the data's age and a table of the latest month printed by the build, on the first screen, with no dead
control; with it, the LGA panel's 80 % range, both levels where the range straddles them, rank range and
evidence, and a colouring by rank within the state; in both, a menu that fits with "Get a key" on the
first screen. Figures are compared with the API's answers, not with numbers written here."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from pipeline.site.latest import MONTH_NAMES
from tests.pipeline.site.conftest import RealSite
from tests.pipeline.site.screenshots import (
    STATE,
    first_lga_of,
    open_map,
    overflow,
    real_browser_marks,
)

pytestmark = real_browser_marks()

VIEWS = (("phone", 360, 740), ("laptop", 1280, 800))


def api(site: RealSite, path: str, **params: str) -> Any:
    r = httpx.get(site.url + path, params=params, headers={"Authorization": f"Bearer {site.key}"}, timeout=30)
    assert r.status_code == 200, (path, r.status_code, r.text[:300])
    return r.json()


@pytest.fixture(params=[(w, h, js) for _, w, h in VIEWS for js in (False, True)],
                ids=[f"{n}-{'js' if js else 'nojs'}" for n, _, _ in VIEWS for js in (False, True)])
def page(request: pytest.FixtureRequest, chromium: Any) -> Iterator[tuple[Any, int, int, bool]]:
    width, height, js = request.param
    phone = width < 600
    context = chromium.new_context(viewport={"width": width, "height": height}, is_mobile=phone, has_touch=phone,
                                   device_scale_factor=2 if phone else 1, java_script_enabled=js, bypass_csp=True)
    yield context.new_page(), width, height, js
    context.close()


def rows(page: Any, selector: str) -> list[list[str]]:
    return page.eval_on_selector_all(f"{selector} tbody tr", "rs => rs.map(r => [r.dataset.code, ...[...r.cells]"
                                     ".map(c => c.textContent.replace(/\\s+/g, ' ').trim())])")


def levels_of(page: Any) -> list[dict[str, Any]]:
    return page.evaluate("JSON.parse(document.getElementById('map-config').textContent).levels")


def level_label(value: float, levels: list[dict[str, Any]]) -> str:
    return next(lv["label"] for lv in reversed(levels) if value >= lv["lower"])


def test_the_map_page_reads_without_a_script_or_with_one(page: tuple[Any, int, int, bool], real_site: RealSite):
    p, width, height, js = page
    p.goto(real_site.url + "/docs/map.html")
    periods = api(real_site, "/v1/periods")
    latest = periods["last_estimated"]
    report = api(real_site, "/v1/risk/states", period=latest)
    levels = levels_of(p)
    # the explanation and the data's age lead the page
    lead = p.inner_text("main .lead")
    assert "children 6–59 months" in lead and "microscopy" in lead and "80 % range" in lead
    assert latest in lead and periods["last_forecast"] in lead
    # the table of the latest month: every state, highest first, the API's figures, both levels where the
    # 80 % range straddles them, the season, and a link to the state's LGAs
    table = rows(p, "#latest table")
    assert [r[0] for r in table] == [s["state_code"] for s in report["states"]]
    seasons = {s["state_code"]: s["season"] for s in api(real_site, "/v1/transmission/states")["states"]}
    month = int(latest[5:7])
    for r, s in zip(table, report["states"], strict=True):
        assert r[1] == f"{s['state']} {s['state_code']}"
        assert (float(r[2]), r[3]) == (s["score"], f"{s['score_low']}–{s['score_high']}")
        low, high = level_label(s["score_low"], levels), level_label(s["score_high"], levels)
        assert r[4].startswith(level_label(s["score"], levels))
        assert (f"80 % range: {low} to {high}" in r[4]) == (low != high), r
        season = seasons[s["state_code"]]
        if season["season_start_month"] is not None:
            assert r[5].startswith(MONTH_NAMES[season["season_start_month"] - 1] + "–")
            assert (f"{MONTH_NAMES[month - 1]} high" in r[5]) == (month in season["high_months"])
    assert p.get_attribute(f'#latest tr[data-code="{STATE}"] a', "href") == f"/docs/map/{STATE}.html"
    assert overflow(p, width)["scrollWidth"] <= width
    if not js:
        # on the first screen: the table's head and first row; no control that cannot work
        first = p.locator("#latest tbody tr").first.bounding_box()
        assert first is not None and first["y"] + first["height"] <= height, first
        for sel in ("#key-form", "#map", "#state-filter", "#month", "#lga-select"):
            assert not p.is_visible(sel), sel
        assert p.is_visible("noscript p") or "needs JavaScript" in p.inner_text("main")
        # the staleness, said by the build where no script can say it by today's date
        passed = periods["updated_at"][:7] > periods["last_forecast"]
        assert p.locator("#passed-note").count() == int(passed)
        if passed:
            assert p.is_visible("#passed-note")
    else:
        assert p.is_visible("#key-form") and p.is_visible("#map")


def test_a_states_page_lists_its_lgas_with_rank_range_and_evidence(chromium: Any, real_site: RealSite):
    context = chromium.new_context(viewport={"width": 360, "height": 740}, is_mobile=True, has_touch=True,
                                   java_script_enabled=False)
    p = context.new_page()
    p.goto(real_site.url + "/docs/map.html")
    p.click(f'#latest tr[data-code="{STATE}"] a')
    assert p.url.endswith(f"/docs/map/{STATE}.html")
    report = api(real_site, "/v1/risk/lgas", state=STATE)
    table = rows(p, "table.latest-table")
    assert [r[0] for r in table] == [lga["lga_code"] for lga in report["lgas"]]
    for r, lga in zip(table, report["lgas"], strict=True):
        assert (float(r[2]), r[3]) == (lga["score"], f"{lga['score_low']}–{lga['score_high']}")
        ranks = f"{lga['rank_low']}–{lga['rank_high']}" if lga.get("rank_low") is not None else "range withheld"
        assert r[5] == f"{lga['rank']} ({ranks})"
        assert r[6] == lga["evidence"]
    assert overflow(p, 360)["scrollWidth"] <= 360
    context.close()


@pytest.mark.parametrize(("width", "height"), [(360, 740), (1280, 800)])
def test_the_lga_panel_explains_itself(chromium: Any, real_site: RealSite, width: int, height: int):
    phone = width < 600
    context = chromium.new_context(viewport={"width": width, "height": height}, is_mobile=phone, has_touch=phone,
                                   bypass_csp=True)
    p = context.new_page()
    open_map(p, real_site.url, real_site.key)
    first_lga_of(p, STATE)
    period = p.text_content("#month-label").split(" ")[0]
    report = api(real_site, "/v1/risk/lgas", state=STATE, period=period)
    levels = levels_of(p)
    # an LGA whose range straddles two levels, if the month has one, else the first
    straddling = [x for x in report["lgas"]
                  if level_label(x["score_low"], levels) != level_label(x["score_high"], levels)]
    lga = (straddling or report["lgas"])[0]
    p.select_option("#lga-select", lga["lga_code"])
    p.wait_for_function(f"document.querySelector('#details [data-field=\"lga_code\"]').textContent === '{lga['lga_code']}'")
    labels = p.eval_on_selector_all("#details dt", "ds => ds.map(d => d.textContent)")
    assert "80 % range" in labels and "Rank in state" in labels and "Evidence" in labels
    field = lambda name, attr="data-value": p.get_attribute(f'#details [data-field="{name}"]', attr)  # noqa: E731
    shown = lambda v: "" if v is None else str(v)  # noqa: E731
    assert (field("rank"), field("rank", "data-low"), field("rank", "data-high")) == (
        shown(lga["rank"]), shown(lga["rank_low"]), shown(lga["rank_high"]))
    assert field("evidence") == lga["evidence"]
    rank_text = p.text_content('#details [data-field="rank"]')
    assert f"of {len(report['lgas'])}" in rank_text
    assert (f"{lga['rank_low']}–{lga['rank_high']}" if lga.get("rank_low") is not None else "withheld") in rank_text
    level_text = p.text_content('#details [data-field="level"]')
    low, high = level_label(lga["score_low"], levels), level_label(lga["score_high"], levels)
    assert (f"{low} to {high}" in level_text) == (low != high), level_text
    assert "children" in p.inner_text("#details")  # what the score measures

    # the history chart's month labels never run together, on a phone too
    p.wait_for_function(f"document.querySelector('#history-figure').dataset.code === '{lga['lga_code']}'",
                        timeout=60_000)
    gaps = p.evaluate("""() => {
      const s = Chart.getChart('history-chart').scales.x, ctx = s.ctx;
      ctx.save(); ctx.font = Chart.helpers.toFont(s.options.ticks.font).string;
      const items = s.ticks.map((t, i) => ({x: s.getPixelForTick(i), w: ctx.measureText(s.getLabelForValue(t.value)).width}));
      ctx.restore();
      return items.slice(1).map((b, i) => (b.x - b.w / 2) - (items[i].x + items[i].w / 2));
    }""")
    assert len(gaps) >= 2 and min(gaps) >= 4, gaps
    # the projection table's month stays on one line
    p.wait_for_selector("#project-form", timeout=30_000)
    p.fill("#project-cases", "1000")
    p.fill("#project-month", "2024-06")
    p.click("#project-form button[type=submit]")
    p.wait_for_function("document.querySelectorAll('#project-table tbody tr').length === 4", timeout=30_000)
    lines = p.eval_on_selector_all("#project-table tbody td:first-child", """cs => cs.map(c => {
      const r = document.createRange(); r.selectNodeContents(c);
      return new Set([...r.getClientRects()].filter(x => x.width > 0).map(x => Math.round(x.top))).size;
    })""")
    assert lines == [1, 1, 1, 1], lines

    # within the state: colour by rank, in fifths, the top fifth in the highest level's colour
    fills_by_level = p.eval_on_selector_all("#map path.lga", "ps => ps.map(p => p.getAttribute('fill'))")
    assert p.is_visible("#level-legend") and not p.is_visible("#rank-legend")
    p.check("#by-rank")
    assert p.is_visible("#rank-legend") and not p.is_visible("#level-legend")
    colours = [lv["colour"] for lv in levels]
    n = len(report["lgas"])
    for x in report["lgas"]:
        want = colours[len(colours) - 1 - min(len(colours) - 1, (x["rank"] - 1) * len(colours) // n)]
        assert p.get_attribute(f"#map path.lga-{x['lga_code']}", "fill") == want, x["lga_code"]
    by_rank = p.eval_on_selector_all("#map path.lga", "ps => ps.map(p => p.getAttribute('fill'))")
    assert len(set(by_rank)) == len(colours) >= len(set(fills_by_level))
    # back to the whole country: states are coloured by level, and the legend says so
    p.select_option("#state-filter", "")
    assert p.is_visible("#level-legend") and not p.is_visible("#rank-legend")
    context.close()


def test_the_menu_fits_with_get_a_key_on_the_first_screen(page: tuple[Any, int, int, bool], real_site: RealSite):
    p, width, height, _ = page
    for path in ("/docs/index.html", "/docs/map.html", "/docs/api.html"):
        p.goto(real_site.url + path)
        key = p.locator("header.site a.get-key").bounding_box()
        assert key is not None and key["x"] >= 0 and key["x"] + key["width"] <= width and key["y"] + key["height"] <= height
        assert p.get_attribute("header.site a.get-key", "href").endswith("/")
        nav = p.locator("header.site nav").bounding_box()
        assert nav is not None and nav["y"] + nav["height"] <= height / 3, nav  # the menu leaves the screen to the page
        assert overflow(p, width)["scrollWidth"] <= width
        # the other pages behind "More pages", reachable without a script, inside the screen's width
        p.click("header.site li.more summary")
        links = p.locator("header.site li.more ul a")
        assert links.count() >= 10
        for box in (links.nth(i).bounding_box() for i in range(links.count())):
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, box
    # the landing page's title says the site's name once
    p.goto(real_site.url + "/docs/index.html")
    assert p.title() == "Malaria risk data service for Nigeria"
    p.goto(real_site.url + "/docs/map.html")
    assert p.title() == "Risk map · Malaria risk data service for Nigeria"
