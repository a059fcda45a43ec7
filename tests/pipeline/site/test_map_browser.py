"""The risk map in a real browser (Debian Chromium under Playwright) against the real release,
served on loopback with a real key: what it draws, what it asks the API, what it shows.

Figures on the page are compared with the JSON API's answers for the same LGA and month,
not with numbers written here.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest

from edge.routes import BY_PATH
from pipeline.attribution import SOURCES
from pipeline.settings import DEFAULT_DASHBOARD_URL
from tests.pipeline.site.conftest import RealSite
from tests.pipeline.site.screenshots import (
    KEY_STORE,
    LAPTOPS,
    PHONES,
    STATE,
    first_lga_of,
    open_map,
    overflow,
    phone_context,
    point_inside,
    real_browser_marks,
    take,
)

pytestmark = real_browser_marks()  # slow, and skipped with a reason when the real data or Chromium is absent

STATES = 37
FIRST_PAINT_MAX_REQUESTS = 2  # API requests: the period index and one month of state risk (outlines: a site file)


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


def offline(context: Any, origin: str) -> None:
    """Anything not on the local server is refused (and recorded by the watcher)."""
    host = urlparse(origin).netloc
    context.route("**/*", lambda route: route.continue_() if urlparse(route.request.url).netloc == host
                  or urlparse(route.request.url).scheme in ("data", "blob") else route.abort())


@pytest.fixture
def watched(chromium: Any, real_site: RealSite) -> Iterator[Watched]:
    """A page that ignores the docs' CSP: Playwright's wait_for_function evaluates its text in the page,
    which the policy (no 'unsafe-eval') refuses. The policy is tested with `strict` below."""
    context = chromium.new_context(viewport={"width": 1400, "height": 1000}, bypass_csp=True)
    offline(context, real_site.url)
    page = context.new_page()
    w = Watched(page, real_site.url)
    yield w
    context.close()


def api(site: RealSite, path: str, **params: str) -> Any:
    r = httpx.get(site.url + path, params=params, headers={"Authorization": f"Bearer {site.key}"}, timeout=30)
    assert r.status_code == 200, (path, r.status_code, r.text[:300])
    return r.json()


def shape_fills(page: Any, shapes: str = "path.state-base") -> list[str]:
    return page.eval_on_selector_all(f"#map {shapes}", "ps => ps.map(p => p.getAttribute('fill'))")


def state_fills(page: Any) -> dict[str, str]:
    """State code -> the fill the map gives it."""
    return dict(page.eval_on_selector_all("#map path.state-base", "ps => ps.map(p => "
                                          "[[...p.classList].find(c => /^state-[A-Z]{2}$/.test(c)).slice(6), p.getAttribute('fill')])"))


def api_colours(page: Any, site: RealSite, period: str) -> dict[str, str]:
    """State code -> the legend colour of its level in the API's answer for an estimated month."""
    colours = {lv["level"]: lv["colour"] for lv in page.evaluate(
        "JSON.parse(document.getElementById('map-config').textContent).levels")}
    return {s["state_code"]: colours[s["level"]] for s in api(site, "/v1/risk/states", period=period)["states"]}


def shown(page: Any, period: str, view: str = "") -> None:
    """Wait until the map shows `period` in `view` (a state code, or "" for the country)."""
    page.wait_for_selector(f'body[data-view="{view}"][data-period="{period}"]', timeout=30_000)


def test_map_draws_the_states_then_a_states_lgas_and_keeps_the_key_out_of_urls(
        watched: Watched, real_site: RealSite) -> None:
    page = watched.page
    page.goto(real_site.url + "/docs/map.html")
    assert page.get_attribute("#api-key", "type") == "password"
    assert page.locator("#map path").count() == 0  # nothing is served without a key
    open_map(page, real_site.url, real_site.key)

    # the first view: the 37 states coloured by their risk, no LGA yet
    assert page.locator("#map path.state-base").count() == STATES
    assert page.locator("#map path.lga").count() == 0
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
    # a choropleth: as many colours as the month has levels (and more than one)
    month_levels = {r["level"] for r in api(real_site, "/v1/risk/states", period=periods["last_estimated"])["states"]}
    assert len(set(fills)) == len(month_levels) >= 2
    # each state's colour is its level in the API's answer for the month
    assert state_fills(page) == api_colours(page, real_site, periods["last_estimated"])
    # a chosen state: every one of its LGAs, coloured, from per-state documents only
    asked = len(watched.requests)
    first_lga_of(page, STATE)
    lgas = api(real_site, "/v1/risk/lgas", state=STATE)["lgas"]
    assert page.locator("#map path.lga").count() == len(lgas)
    assert len(set(shape_fills(page, "path.lga"))) >= 2
    later = [urlparse(u) for u in watched.requests[asked:]]
    assert all(f"state={STATE}" in u.query or u.path.endswith((f"/{STATE}.geojson", "chart.umd.js"))
               or u.path == "/v1/transmission/states" for u in later), later
    assert not watched.foreign and not watched.errors, (watched.foreign, watched.errors)


def test_slider_changes_month_and_colours_with_one_small_request_a_month(watched: Watched, real_site: RealSite) -> None:
    page = watched.page
    open_map(page, real_site.url, real_site.key)
    periods = api(real_site, "/v1/periods")
    shown(page, periods["last_estimated"])
    before_label = page.text_content("#month-label")
    asked = len(watched.api_requests())

    page.focus("#month")
    page.keyboard.press("Home")  # the first month
    first_label = page.text_content("#month-label")
    assert first_label != before_label and first_label.startswith("2018-01")
    shown(page, "2018-01")
    assert state_fills(page) == api_colours(page, real_site, "2018-01")
    assert [urlparse(u).query for u in watched.api_requests()[asked:]] == ["period=2018-01"]

    page.keyboard.press("End")  # the last month: a forecast month, marked as one
    last = page.text_content("#month-label")
    assert last.startswith(periods["last_forecast"]) and "forecast" in last
    assert page.get_attribute("#month-label", "class") == "forecast"
    assert page.get_attribute("#month", "aria-valuetext") == last
    shown(page, periods["last_forecast"])
    forecasts = sum(m["kind"] == "forecast" for m in periods["months"])
    assert watched.api_requests()[asked + 1:] == [f"{real_site.url}/v1/forecasts/states?months={forecasts}"]
    page.keyboard.press("Home")  # a month seen before: nothing asked again
    shown(page, "2018-01")
    assert len(watched.api_requests()) == asked + 2
    # passing months on the way asks for none of them: only where the slider rests (the key's limits)
    for _ in range(8):
        page.keyboard.press("ArrowRight")
    shown(page, "2018-09")
    passed = [urlparse(u).query for u in watched.api_requests()[asked + 2:]]
    assert passed[-1] == "period=2018-09" and len(passed) < 4, passed
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
    # every chart drew something: Chart.js holds their data and the canvases are not blank (the survey
    # chart has a second series, the 95 % range, only where the source gives one)
    page.wait_for_function(f"document.querySelector('#history-figure').dataset.code === '{code}'")
    for chart_id, series in (("season-chart", 3), ("survey-chart", 1), ("history-chart", 4)):
        drawn = page.evaluate(
            """(id) => { const c = document.getElementById(id); const ch = Chart.getChart(c);
                 const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
                 let ink = 0; for (let i = 3; i < px.length; i += 4) if (px[i] > 0) ink++;
                 return [ch ? ch.data.datasets.length : 0, ink]; }""",
            chart_id,
        )
        assert drawn[0] >= series and drawn[1] > 2000, (chart_id, drawn)
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
    """Offline from the release: every page, script and style the site ships loads only from itself.
    Other hosts appear only as plain links (`<a href>`: the sources page links each source and
    licence), never as a script, style, image, frame or import."""
    docs = real_site.root / "current" / "docs"
    dashboard = re.compile(rf'href="{re.escape(DEFAULT_DASHBOARD_URL)}/?"')
    plain_link = re.compile(r'<a\s[^<>]*?\bhref="https?://[^"<>]*"')
    linked = 0
    for path in docs.rglob("*"):
        if path.suffix not in (".html", ".css") or path.name.endswith(".gz"):
            continue
        text = dashboard.sub("", path.read_text(encoding="utf-8"))
        text, n = plain_link.subn("<a", text)
        linked += n
        for attr in ('src="http', "src='http", 'href="http', "href='http", 'href="//', "src=\"//", "url(http",
                     "url(//", "@import"):
            assert attr not in text, (path, attr)
    assert linked >= len(SOURCES)  # the sources page's links were seen (and allowed) above


def test_screenshots_are_written(chromium: Any, real_site: RealSite, tmp_path) -> None:
    shots = take(real_site.url, real_site.key, tmp_path / "shots", chromium)
    assert [p.name for p in shots] == ["landing.png", "map-national.png", "map-state.png", "lga-charts.png",
                                       "history-chart.png", "phone-map.png"]
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
    context = chromium.new_context(viewport={"width": 1400, "height": 1000}, bypass_csp=True)
    page = context.new_page()
    watched = Watched(page, real_site.url)
    open_map(page, real_site.url, real_site.key)
    page.reload()
    page.wait_for_selector("body.map-ready", timeout=60_000)  # no key pasted again
    sizes = page.evaluate("performance.getEntriesByType('resource').filter(e => e.name.includes('/v1/') "
                          "|| e.name.includes('/map/')).map(e => [e.name, e.transferSize, e.decodedBodySize])")
    assert len(sizes) <= FIRST_PAINT_MAX_REQUESTS + 1  # and the state outlines
    for name, transferred, size in sizes:
        assert transferred < 2_000 < size or size < 2_000, (name, transferred, size)  # headers only: a 304
    assert page.locator("#map path.state-base").count() == STATES
    assert not watched.foreign and not watched.errors, (watched.foreign, watched.errors)
    context.close()


# --- the chosen area's score over time ------------------------------------------------------

HISTORY_JS = """() => { const ch = Chart.getChart(document.getElementById('history-chart'));
  const c = ch.canvas, px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let ink = 0; for (let i = 3; i < px.length; i += 4) if (px[i] > 0) ink++;
  return {labels: ch.data.labels, sets: Object.fromEntries(ch.data.datasets.map(d => [d.label, d.data])),
          legend: ch.legend.legendItems.map(i => i.text),
          dashed: ch.legend.legendItems.map(i => (i.lineDash || []).length > 0), ink: ink}; }"""


def wait_for_history(page: Any, code: str) -> dict[str, Any]:
    page.wait_for_function(
        f"document.querySelector('#history-figure').dataset.code === '{code}'"
        " && document.querySelectorAll('#history-table tbody tr').length > 0", timeout=30_000)
    return dict(page.evaluate(HISTORY_JS))


def assert_history_drawn(drawn: dict[str, Any], months: list[dict[str, Any]], page: Any) -> None:
    """The chart's series and its table view hold the route's months, in order, value for value."""
    assert drawn["labels"] == [m["period"] for m in months]
    sets = drawn["sets"]
    assert sets["80 % range, low"] == [m["score_low"] for m in months]
    assert sets["80 % range"] == [m["score_high"] for m in months]
    forecast = sets.get("Score, forecast", [None] * len(months))
    # each month's score is on the estimated line, or (forecast months) on the dashed one
    scores = [e if m["kind"] != "forecast" else f for m, e, f in zip(months, sets["Score, estimated"], forecast, strict=True)]
    assert scores == [m["score"] for m in months]
    assert all(e is None for m, e in zip(months, sets["Score, estimated"], strict=True) if m["kind"] == "forecast")
    rows = page.eval_on_selector_all("#history-table tbody tr", "rs => rs.map(r => [...r.cells].map(c => c.textContent))")
    assert [r[0] for r in rows] == [m["period"] for m in months]
    as_number = lambda v: None if v == "no figure" else float(v)  # noqa: E731
    assert [[as_number(v) for v in r[2:5]] for r in rows] == [[m["score"], m["score_low"], m["score_high"]] for m in months]
    assert drawn["ink"] > 5000  # the canvas is drawn, not blank


def test_history_chart_draws_the_history_routes_numbers(watched: Watched, real_site: RealSite) -> None:
    page = watched.page
    open_map(page, real_site.url, real_site.key)
    assert page.is_hidden("#charts")
    code = first_lga_of(page, STATE)  # choosing a state shows the state's history ...
    state_history = api(real_site, "/v1/history/states", state=STATE, include="forecasts")
    drawn = wait_for_history(page, STATE)
    assert any(m["kind"] == "forecast" for m in state_history["months"])  # the key has the forecasts scope
    assert_history_drawn(drawn, state_history["months"], page)
    assert page.text_content("#history-title") == f"Risk score over time: {state_history['state']} (state)"

    page.select_option("#lga-select", code)  # ... and choosing an LGA, the LGA's
    lga_history = api(real_site, "/v1/history/lgas", lga=code, include="forecasts")
    drawn = wait_for_history(page, code)
    assert_history_drawn(drawn, lga_history["months"], page)
    assert page.text_content("#history-title") == f"Risk score over time: {lga_history['lga']}, {lga_history['state']}"
    # the legend shows what the caption describes, and nothing else
    note = page.text_content("#history-note")
    assert drawn["legend"] == ["80 % range", "Score, estimated", "Score, forecast"]
    assert drawn["dashed"] == [False, False, True]  # the forecast entry is dashed, like its line
    assert "80 % range shaded" in note and "forecast months are dashed" in note
    assert f"{sum(m['kind'] == 'forecast' for m in lga_history['months'])} forecast months" in note
    # the history as CSV is the route's own CSV answer
    name, body = downloaded(page, "#history-csv")
    assert name == f"history_{code}.csv"
    assert body == api_bytes(real_site, "/v1/history/lgas", lga=code, include="forecasts", format="csv")
    assert not watched.foreign and not watched.errors, (watched.foreign, watched.errors)


def test_history_without_the_forecasts_scope_shows_the_estimated_months(chromium: Any, real_site: RealSite) -> None:
    context = chromium.new_context(viewport={"width": 1400, "height": 1000}, bypass_csp=True)
    offline(context, real_site.url)
    page = context.new_page()
    watched = Watched(page, real_site.url)
    open_map(page, real_site.url, real_site.narrow_key)
    page.select_option("#state-filter", STATE)
    drawn = wait_for_history(page, STATE)
    estimated = api(real_site, "/v1/history/states", state=STATE)["months"]
    assert_history_drawn(drawn, estimated, page)
    assert drawn["legend"] == ["80 % range", "Score, estimated"]
    note = page.text_content("#history-note")
    assert "dashed" not in note and "need a key with the forecasts scope" in note
    # the one refused request is the browser's report of the 403 that told the map so
    assert all("403" in e for e in watched.errors), watched.errors
    assert not watched.foreign
    context.close()


def test_no_empty_frames_before_an_area_is_chosen(watched: Watched, real_site: RealSite) -> None:
    page = watched.page
    display = lambda sel: page.eval_on_selector(sel, "e => getComputedStyle(e).display")  # noqa: E731
    page.goto(real_site.url + "/docs/map.html")
    assert display("#charts") == "none" and display("#details") == "none"
    open_map(page, real_site.url, real_site.key)
    assert display("#charts") == "none"  # the whole country, nothing chosen: no chart frames
    page.select_option("#state-filter", STATE)  # a state: its history and its survey rounds
    wait_for_history(page, STATE)
    page.wait_for_function("document.querySelectorAll('#survey-table tbody tr').length > 0")
    assert display("#charts") == "grid"
    assert [display(f) for f in ("#history-figure", "#survey-figure", "#season-figure")] == ["block", "block", "none"]
    page.select_option("#lga-select", page.eval_on_selector("#lga-select", "s => s.options[1].value"))
    page.wait_for_function("document.querySelectorAll('#season-table tbody tr').length === 12")
    assert [display(f) for f in ("#history-figure", "#survey-figure", "#season-figure")] == ["block", "block", "block"]
    page.select_option("#state-filter", "LA")  # another state: the LGA is let go, no stale frame stays
    wait_for_history(page, "LA")
    assert display("#season-figure") == "none" and display("#details") == "none"
    page.select_option("#state-filter", "")  # the whole country again
    assert display("#charts") == "none"
    assert not watched.errors, watched.errors


def test_legends_match_their_captions(watched: Watched, real_site: RealSite) -> None:
    """The survey chart shows a range (and its legend lists one) exactly when the source gives one."""
    page = watched.page
    open_map(page, real_site.url, real_site.key)
    states = api(real_site, "/v1/transmission/states")["states"]
    ranged = {s["state_code"]: any(e["low"] is not None and e["high"] is not None for e in s["survey_trend"])
              for s in states if s["survey_trend"]}
    # one state of each kind the release has (the current survey data gives no ranges at all)
    cases = [next(c for c, r in sorted(ranged.items()) if r is kind) for kind in (True, False) if kind in ranged.values()]
    assert cases
    for code in cases:
        page.select_option("#state-filter", code)
        page.wait_for_function(f"document.querySelector('#survey-title').textContent.endsWith("
                               f"{next(s['state'] for s in states if s['state_code'] == code)!r})")
        legend = page.evaluate("Chart.getChart(document.getElementById('survey-chart')).legend.legendItems.map(i => i.text)")
        note = page.text_content("#survey-note")
        if ranged[code]:
            assert legend == ["Positivity", "95% range"] and "bars show the 95% range" in note, (code, legend, note)
        else:
            assert legend == ["Positivity"] and "gives no 95% range" in note, (code, legend, note)
    # the seasonality legend names the shading its caption describes
    page.select_option("#lga-select", page.eval_on_selector("#lga-select", "s => s.options[1].value"))
    page.wait_for_function("document.querySelectorAll('#season-table tbody tr').length === 12")
    legend = page.evaluate("Chart.getChart(document.getElementById('season-chart')).legend.legendItems.map(i => i.text)")
    high = page.eval_on_selector_all("#season-table tbody tr", "rs => rs.filter(r => r.cells[4].textContent === 'yes').length")
    assert ("High season (shaded)" in legend) == (high > 0) == ("shaded:" in page.text_content("#season-note")), legend
    assert not watched.errors, watched.errors


# --- layout: the map on the first screen, state outlines, phones ---------------------------

def map_box(page: Any) -> dict[str, float]:
    """The map's frame and the box of what it draws: the chosen state's LGAs, else the states."""
    return dict(page.evaluate("""() => { const m = document.getElementById('map').getBoundingClientRect();
      const lgas = document.querySelectorAll('#map path.lga');
      const s = [...(lgas.length ? lgas : document.querySelectorAll('#map path.state-base'))].map(p => p.getBoundingClientRect());
      return {top: m.top, bottom: m.bottom, left: m.left, right: m.right, height: m.height, vh: innerHeight,
              lgaTop: Math.min(...s.map(r => r.top)), lgaBottom: Math.max(...s.map(r => r.bottom)),
              lgaLeft: Math.min(...s.map(r => r.left)), lgaRight: Math.max(...s.map(r => r.right))}; }"""))


def assert_whole_map_on_first_screen(box: dict[str, float], min_height: float) -> None:
    assert box["top"] >= 0 and box["bottom"] <= box["vh"], box  # no scrolling to see it
    assert box["height"] >= min_height, box
    # every state (Lagos in the south-west corner too) is inside the map's frame
    assert box["left"] <= box["lgaLeft"] and box["lgaRight"] <= box["right"], box
    assert box["top"] <= box["lgaTop"] and box["lgaBottom"] <= box["bottom"], box


@pytest.mark.parametrize(("width", "height"), LAPTOPS)
def test_the_map_is_on_the_first_screen_of_a_laptop(chromium: Any, real_site: RealSite, width: int, height: int) -> None:
    context = chromium.new_context(viewport={"width": width, "height": height}, bypass_csp=True)
    offline(context, real_site.url)
    page = context.new_page()
    open_map(page, real_site.url, real_site.key)
    page.wait_for_timeout(200)
    assert_whole_map_on_first_screen(map_box(page), min_height=0.5 * height)
    report = overflow(page, width)
    assert report["scrollWidth"] <= width and not report["overflowing"], report
    context.close()


@pytest.mark.parametrize(("width", "height"), PHONES)
def test_the_map_on_a_phone(chromium: Any, real_site: RealSite, width: int, height: int) -> None:
    """Above the fold, whole, nothing sideways; and the same after an LGA's charts open."""
    context = phone_context(chromium, width, height)
    offline(context, real_site.url)
    page = context.new_page()
    watched = Watched(page, real_site.url)
    page.goto(real_site.url + "/docs/map.html")
    report = overflow(page, width)
    assert report["scrollWidth"] <= width and not report["overflowing"], report
    open_map(page, real_site.url, real_site.key)
    page.wait_for_timeout(200)
    assert_whole_map_on_first_screen(map_box(page), min_height=250)
    code = first_lga_of(page, STATE)
    page.select_option("#lga-select", code)
    wait_for_history(page, code)
    page.wait_for_function("document.querySelectorAll('#season-table tbody tr').length === 12")
    for details in page.query_selector_all("details"):
        details.evaluate("d => d.open = true")  # the table views too
    page.wait_for_timeout(200)
    report = overflow(page, width)
    assert report["scrollWidth"] <= width and not report["overflowing"], report
    assert not watched.foreign and not watched.errors, (watched.foreign, watched.errors)
    context.close()


PANES_JS = """() => ['states-base', 'overlay', 'states-lines'].map(n => {
  const p = document.querySelector('.leaflet-' + n + '-pane');
  return [Number(getComputedStyle(p).zIndex), p.querySelectorAll('path').length, getComputedStyle(p).pointerEvents]; })"""


def test_state_outlines_are_the_base_layer(watched: Watched, real_site: RealSite) -> None:
    page = watched.page
    open_map(page, real_site.url, real_site.key)
    panes = page.evaluate(PANES_JS)
    (base_z, base_n, _), (lga_z, lga_n, _), (line_z, line_n, line_events) = panes
    assert base_z < lga_z < line_z, panes  # filled states beneath the LGAs, their edges above
    assert (base_n, lga_n, line_n) == (STATES, 0, STATES)  # the country view: states only
    assert line_events == "none"  # the edges above never catch the clicks meant for an LGA
    first_lga_of(page, STATE)
    panes = page.evaluate(PANES_JS)
    lgas = len(api(real_site, "/v1/risk/lgas", state=STATE)["lgas"])
    # the chosen state's LGAs, and its own edge (from the same simplified LGAs) over the others'
    assert [n for _, n, _ in panes] == [STATES, lgas, STATES + 1], panes
    assert page.locator(".leaflet-states-lines-pane path.state-chosen").count() == 1
    assert not watched.errors, watched.errors


# --- export of the view ---------------------------------------------------------------------

def api_bytes(site: RealSite, path: str, **params: str) -> bytes:
    r = httpx.get(site.url + path, params=params, headers={"Authorization": f"Bearer {site.key}"}, timeout=30)
    assert r.status_code == 200, (path, r.status_code, r.text[:300])
    return r.content


def downloaded(page: Any, button: str) -> tuple[str, bytes]:
    with page.expect_download() as info:
        page.click(button)
    d = info.value
    return d.suggested_filename, Path(d.path()).read_bytes()


def test_export_downloads_the_apis_csv_for_the_view_and_a_png(watched: Watched, real_site: RealSite) -> None:
    page = watched.page
    open_map(page, real_site.url, real_site.key)
    periods = api(real_site, "/v1/periods")
    month = periods["last_estimated"]
    name, body = downloaded(page, "#export-csv")  # the whole country (its states), the latest estimated month
    assert name == f"risk_states_{month}.csv"
    assert body == api_bytes(real_site, "/v1/risk/states", period=month, format="csv")
    assert len(body.decode().splitlines()) == STATES + 1

    page.select_option("#state-filter", STATE)  # a state, an earlier month
    page.focus("#month")
    page.keyboard.press("Home")
    first = periods["months"][0]["period"]
    name, body = downloaded(page, "#export-csv")
    assert name == f"risk_lgas_{STATE}_{first}.csv"
    assert body == api_bytes(real_site, "/v1/risk/lgas", state=STATE, period=first, format="csv")
    assert f"GET /v1/risk/lgas?state={STATE}&period={first}&format=csv" in page.text_content("#export-note")

    page.focus("#month")
    page.keyboard.press("End")  # the last forecast month of the state: the forecast route's answer
    months = str(sum(m["kind"] == "forecast" for m in periods["months"]))
    name, body = downloaded(page, "#export-csv")
    assert body == api_bytes(real_site, "/v1/forecasts/lgas", state=STATE, months=months, format="csv"), name

    name, png = downloaded(page, "#export-png")
    assert name == f"risk_map_{STATE}_{periods['last_forecast']}.png"
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    box = map_box(page)
    assert width == round(box["right"] - box["left"]) and height > box["height"]  # the map, title and legend
    assert len(png) > 30_000  # drawn shapes, not a blank frame
    page.select_option("#state-filter", "")  # forecast months of the whole country: the states' forecasts
    name, body = downloaded(page, "#export-csv")
    assert name == f"forecasts_states_{months}months.csv"
    assert body == api_bytes(real_site, "/v1/forecasts/states", months=months, format="csv")
    assert not watched.foreign and not watched.errors, (watched.foreign, watched.errors)


def test_the_map_runs_under_the_strict_content_security_policy(chromium: Any, real_site: RealSite) -> None:
    """Leaflet, Chart.js and map.js draw the map, the legend and both charts with nothing the policy refuses.

    The one test whose page keeps the policy: it waits on selectors only, since Playwright's
    wait_for_function evaluates text in the page, which the policy rightly refuses."""
    from edge.security import DOCS_CSP

    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    offline(context, real_site.url)
    page = context.new_page()
    watched = Watched(page, real_site.url)
    page.add_init_script("window.__violations = []; document.addEventListener('securitypolicyviolation', "
                         "e => window.__violations.push(e.violatedDirective + ' ' + e.blockedURI));")
    response = page.goto(real_site.url + "/docs/map.html")
    assert response.headers["content-security-policy"] == DOCS_CSP
    open_map(page, real_site.url, real_site.key)
    code = first_lga_of(page, STATE)
    page.wait_for_timeout(300)
    x, y = point_inside(page, f"path.lga-{code}")
    page.mouse.click(x, y)
    page.wait_for_selector("#season-table tbody tr:nth-child(12)", state="attached", timeout=30_000)
    page.wait_for_selector("#season-chart")
    page.wait_for_selector("#history-table tbody tr", state="attached", timeout=30_000)
    # the legend's colours come from the stylesheet, not from inline styles the policy would refuse
    swatch = page.eval_on_selector(".legend .swatch", "s => getComputedStyle(s).backgroundColor")
    assert swatch not in ("rgba(0, 0, 0, 0)", "transparent")
    assert page.evaluate("window.__violations") == []
    assert not [e for e in watched.errors if "Content Security Policy" in e], watched.errors
    context.close()
