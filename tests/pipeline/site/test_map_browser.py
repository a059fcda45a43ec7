"""The risk map in a real browser (Debian Chromium under Playwright) against the real release,
served on loopback with a real key: what it draws, what it asks the API, what it shows.

Figures on the page are compared with the JSON API's answers for the same LGA and month,
not with numbers written here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest

from edge.routes import BY_PATH
from tests.paths import data_marks
from tests.pipeline.site.conftest import RealSite
from tests.pipeline.site.screenshots import (
    KEY_STORE,
    STATE,
    browser,
    chromium_path,
    first_lga_of,
    open_map,
    point_inside,
    take,
)

pytestmark = [
    *data_marks(),  # slow, and skipped with a reason when the real data is absent
    pytest.mark.skipif(chromium_path() is None, reason="chromium is not installed (Debian package `chromium`)"),
]

LGAS = 774
FIRST_PAINT_MAX_REQUESTS = 4  # downloads index, outlines, risk table, gazetteer


class Watched:
    """A page plus everything it did: requests, console errors, uncaught exceptions."""

    def __init__(self, page: Any, origin: str):
        self.page = page
        self.requests: list[str] = []
        self.foreign: list[str] = []
        self.errors: list[str] = []
        host = urlparse(origin).netloc
        page.on("request", self._request(host))
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(str(e)))

    def _request(self, host: str) -> Any:
        def on(req: Any) -> None:
            url = urlparse(req.url)
            if url.scheme in ("data", "blob"):
                return
            if url.netloc != host:
                self.foreign.append(req.url)
            self.requests.append(req.url)
        return on

    def api_requests(self) -> list[str]:
        return [u for u in self.requests if urlparse(u).path.startswith("/v1/")]


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    with browser() as b:
        yield b


@pytest.fixture
def watched(chromium: Any, real_site: RealSite) -> Iterator[Watched]:
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    # offline: anything not on the local server is refused (and recorded by the watcher)
    host = urlparse(real_site.url).netloc
    context.route("**/*", lambda route: route.continue_() if urlparse(route.request.url).netloc == host
                  or urlparse(route.request.url).scheme in ("data", "blob") else route.abort())
    page = context.new_page()
    w = Watched(page, real_site.url)
    yield w
    context.close()


def api(site: RealSite, path: str, **params: str) -> Any:
    r = httpx.get(site.url + path, params=params, headers={"Authorization": f"Bearer {site.key}"}, timeout=30)
    assert r.status_code == 200, (path, r.status_code, r.text[:300])
    return r.json()


def shape_fills(page: Any) -> list[str]:
    return page.eval_on_selector_all("#map path.lga", "ps => ps.map(p => p.getAttribute('fill'))")


def test_map_draws_every_lga_in_a_handful_of_requests_and_keeps_the_key_out_of_urls(
        watched: Watched, real_site: RealSite) -> None:
    page = watched.page
    page.goto(real_site.url + "/docs/map.html")
    assert page.get_attribute("#api-key", "type") == "password"
    assert page.locator("#map path").count() == 0  # nothing is served without a key
    open_map(page, real_site.url, real_site.key)

    assert page.locator("#map path.leaflet-interactive").count() == LGAS
    assert page.locator("#map path.lga").count() == LGAS
    first_paint = watched.api_requests()
    assert 1 <= len(first_paint) <= FIRST_PAINT_MAX_REQUESTS, first_paint
    assert all(real_site.key not in u for u in watched.requests)  # never in a URL
    assert real_site.key not in page.url
    assert page.evaluate(f"sessionStorage.getItem('{KEY_STORE}')") == real_site.key
    assert page.input_value("#api-key") == ""  # not left on screen
    # the month is the latest estimated one, as the API says
    periods = api(real_site, "/v1/periods")
    label = page.text_content("#month-label")
    assert label.startswith(periods["last_estimated"])
    provisional = {m["period"]: m.get("provisional", False) for m in periods["months"]}
    assert ("provisional" in label) == provisional[periods["last_estimated"]]
    # every shape has a level colour of the legend (or the no-figure grey)
    legend = set(page.eval_on_selector_all(".legend .swatch", "ss => ss.map(s => getComputedStyle(s).backgroundColor)"))
    assert len(legend) == 6
    fills = shape_fills(page)
    assert len(set(fills)) >= 3  # a choropleth, not one colour
    assert not watched.foreign and not watched.errors, (watched.foreign, watched.errors)


def test_slider_changes_month_and_colours_without_new_requests(watched: Watched, real_site: RealSite) -> None:
    page = watched.page
    open_map(page, real_site.url, real_site.key)
    before_label, before_fills = page.text_content("#month-label"), shape_fills(page)
    asked = len(watched.api_requests())

    page.focus("#month")
    page.keyboard.press("Home")  # the first month
    first_label = page.text_content("#month-label")
    assert first_label != before_label and first_label.startswith("2018-01")
    assert shape_fills(page) != before_fills

    page.keyboard.press("End")  # the last month: a forecast month, marked as one
    periods = api(real_site, "/v1/periods")
    last = page.text_content("#month-label")
    assert last.startswith(periods["last_forecast"]) and "forecast" in last
    assert page.get_attribute("#month-label", "class") == "forecast"
    assert page.get_attribute("#month", "aria-valuetext") == last
    assert len(watched.api_requests()) == asked  # every month was in the first table
    assert not watched.errors, watched.errors


def test_clicking_an_lga_shows_the_apis_figures_and_charts(watched: Watched, real_site: RealSite) -> None:
    page = watched.page
    open_map(page, real_site.url, real_site.key)
    code = first_lga_of(page, STATE)
    page.wait_for_timeout(300)  # the zoom to the state
    x, y = point_inside(page, f"path.lga-{code}")
    page.mouse.click(x, y)  # a real click on the shape
    page.wait_for_function("document.querySelectorAll('#season-table tbody tr').length === 12", timeout=30_000)

    period = page.text_content("#month-label").split(" ")[0]
    report = api(real_site, "/v1/risk/lgas", state=STATE, period=period)
    lga = next(x for x in report["lgas"] if x["lga_code"] == code)
    field = lambda name, attr="data-value": page.get_attribute(f'#details [data-field="{name}"]', attr)  # noqa: E731
    assert page.text_content('#details [data-field="lga_code"]') == code
    assert page.text_content("#d-name") == f"{lga['lga']}, {report['state']}"
    assert float(field("score")) == lga["score"]
    assert float(field("range", "data-low")) == lga["score_low"]
    assert float(field("range", "data-high")) == lga["score_high"]
    assert field("level") == lga["level"]
    assert int(field("population")) == lga["population"]
    assert field("is_urban") == str(lga["is_urban"]).lower()

    # seasonality: the table view holds the API's figures for this LGA
    trans = next(x for x in api(real_site, "/v1/transmission/lgas", state=STATE)["lgas"] if x["lga_code"] == code)
    rows = page.eval_on_selector_all("#season-table tbody tr", "rs => rs.map(r => [...r.cells].map(c => c.textContent))")
    assert [float(r[1]) for r in rows] == trans["seasonal_index"]
    assert [float(r[3]) for r in rows] == trans["typical_rainfall_mm"]
    assert [i + 1 for i, r in enumerate(rows) if r[4] == "yes"] == trans["high_months"]
    # survey trend of the LGA's state, with its table view
    states = api(real_site, "/v1/transmission/states")["states"]
    trend = next(s for s in states if s["state_code"] == STATE)["survey_trend"]
    survey_rows = page.eval_on_selector_all("#survey-table tbody tr", "rs => rs.map(r => r.cells[2].textContent)")
    assert sorted(float(v) for v in survey_rows) == sorted(e["positivity"] for e in trend)
    # both charts drew something: Chart.js holds their data and the canvases are not blank
    for chart_id in ("season-chart", "survey-chart"):
        drawn = page.evaluate(
            """(id) => { const c = document.getElementById(id); const ch = Chart.getChart(c);
                 const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
                 let ink = 0; for (let i = 3; i < px.length; i += 4) if (px[i] > 0) ink++;
                 return [ch ? ch.data.datasets.length : 0, ink]; }""",
            chart_id,
        )
        assert drawn[0] >= 2 and drawn[1] > 2000, (chart_id, drawn)
    # the map's own table view lists the state's LGAs with the same figures
    page.click("#map-table summary")
    page.wait_for_function("document.querySelectorAll('#map-table tbody tr').length > 0")  # built on toggle
    cells = page.eval_on_selector_all("#map-table tbody tr", "rs => rs.map(r => [r.cells[2].textContent, r.cells[3].textContent])")
    assert len(cells) == len(report["lgas"])
    assert {c: float(s) for c, s in cells} == {x["lga_code"]: x["score"] for x in report["lgas"]}
    assert not watched.foreign and not watched.errors, (watched.foreign, watched.errors)


def test_keyboard_reaches_the_controls_and_the_map(watched: Watched, real_site: RealSite) -> None:
    page = watched.page
    open_map(page, real_site.url, real_site.key)
    page.focus("body")
    reached: list[str] = []
    for _ in range(60):
        page.keyboard.press("Tab")
        reached.append(page.evaluate(
            "(e => e.id + '|' + (typeof e.className === 'string' ? e.className : ''))(document.activeElement)"))
        if reached[-1].startswith("map|"):
            break
    ids = {r.split("|")[0] for r in reached}
    assert {"month", "state-filter", "lga-select"} <= ids, reached
    assert reached[-1].startswith("map|") and "leaflet-container" in reached[-1], reached  # arrow keys pan it
    # choosing an LGA needs no mouse: the list selects it and shows its figures
    page.focus("#lga-select")
    code = page.eval_on_selector("#lga-select", "s => s.options[5].value")
    page.select_option("#lga-select", code)
    assert page.text_content('#details [data-field="lga_code"]') == code
    assert not watched.errors, watched.errors


def test_a_bad_key_is_explained_and_not_kept(watched: Watched, real_site: RealSite) -> None:
    page = watched.page
    page.goto(real_site.url + "/docs/map.html")
    page.fill("#api-key", "svc_test_" + "x" * 32)
    page.click("#key-form button[type=submit]")
    page.wait_for_function("document.querySelector('#map-status').textContent.includes('401')")
    assert "API_KEY_INVALID" in page.text_content("#map-status")
    assert page.evaluate(f"sessionStorage.getItem('{KEY_STORE}')") is None
    page.fill("#api-key", "not a key")
    page.click("#key-form button[type=submit]")
    assert "not an API key" in page.text_content("#map-status")
    # the only errors in the console are the browser's report of the 401 itself
    assert all("401" in e for e in watched.errors), watched.errors


def test_the_release_links_to_no_other_host(real_site: RealSite) -> None:
    """Offline from the release: every page, script and style the site ships refers only to itself."""
    docs = real_site.root / "current" / "docs"
    for path in docs.rglob("*"):
        if path.suffix not in (".html", ".css") or path.name.endswith(".gz"):
            continue
        text = path.read_text(encoding="utf-8")
        for attr in ('src="http', "src='http", 'href="http', "href='http", 'href="//', "url(http", "@import"):
            assert attr not in text, (path, attr)


def test_screenshots_are_written(chromium: Any, real_site: RealSite, tmp_path) -> None:
    shots = take(real_site.url, real_site.key, tmp_path / "shots", chromium)
    assert [p.name for p in shots] == ["landing.png", "map-national.png", "map-state.png", "lga-charts.png"]
    for p in shots:
        data = p.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000, p  # a blank page compresses far smaller


def test_downloads_route_is_the_one_the_map_reads() -> None:
    assert "/v1/downloads" in BY_PATH  # the map's first request; the route table owns it


def test_a_reload_revalidates_instead_of_downloading_again(chromium: Any, real_site: RealSite) -> None:
    """The key stays in the tab and the tables in the browser cache: a reload costs four 304s.

    Its own browser context: request routing (the offline guard of the other tests) turns
    Chromium's HTTP cache off.
    """
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    watched = Watched(page, real_site.url)
    open_map(page, real_site.url, real_site.key)
    page.reload()
    page.wait_for_selector("body.map-ready", timeout=60_000)  # no key pasted again
    sizes = page.evaluate("performance.getEntriesByType('resource').filter(e => e.name.includes('/v1/'))"
                          ".map(e => [e.name, e.transferSize, e.decodedBodySize])")
    assert len(sizes) <= FIRST_PAINT_MAX_REQUESTS
    for name, transferred, size in sizes:
        assert transferred < 2_000 < size or size < 2_000, (name, transferred, size)  # headers only: a 304
    assert page.locator("#map path.lga").count() == LGAS
    assert not watched.foreign and not watched.errors, (watched.foreign, watched.errors)
    context.close()


def test_the_map_runs_under_the_strict_content_security_policy(watched: Watched, real_site: RealSite) -> None:
    """Leaflet, Chart.js and map.js draw the map, the legend and both charts with nothing the policy refuses."""
    from edge.security import DOCS_CSP

    page = watched.page
    page.add_init_script("window.__violations = []; document.addEventListener('securitypolicyviolation', "
                         "e => window.__violations.push(e.violatedDirective + ' ' + e.blockedURI));")
    response = page.goto(real_site.url + "/docs/map.html")
    assert response.headers["content-security-policy"] == DOCS_CSP
    open_map(page, real_site.url, real_site.key)
    code = first_lga_of(page, STATE)
    page.wait_for_timeout(300)
    x, y = point_inside(page, f"path.lga-{code}")
    page.mouse.click(x, y)
    page.wait_for_function("document.querySelectorAll('#season-table tbody tr').length === 12", timeout=30_000)
    page.wait_for_selector("#season-chart")
    # the legend's colours come from the stylesheet, not from inline styles the policy would refuse
    swatch = page.eval_on_selector(".legend .swatch", "s => getComputedStyle(s).backgroundColor")
    assert swatch not in ("rgba(0, 0, 0, 0)", "transparent")
    assert page.evaluate("window.__violations") == []
    assert not [e for e in watched.errors if "Content Security Policy" in e], watched.errors
