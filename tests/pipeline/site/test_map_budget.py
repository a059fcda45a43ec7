"""What the risk map costs a reader, in bytes over the wire: the first view (the country, states
coloured) and a chosen state, each within 150 KB on a 360 px phone and a 1280 px laptop.

Counted by Chromium itself (DevTools `Network.loadingFinished.encodedDataLength`: headers and body as
received, so compressed where the server sent the gzip copy), in a fresh browser context each time, so
nothing comes from a cache. Scripts, styles, the page and the data all count.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

import pytest

from tests.pipeline.site.conftest import RealSite
from tests.pipeline.site.screenshots import (
    open_map,
    phone_context,
    real_browser_marks,
)

pytestmark = real_browser_marks()

BUDGET = 150_000  # bytes for the first view, and again for choosing a state (docs/map.md)
VIEWS = (("phone", 360, 740), ("laptop", 1280, 800))


class Wire:
    """Every response the page received, with the bytes it took (from Chromium's own count)."""

    def __init__(self, page: Any):
        self.urls: dict[str, str] = {}
        self.bytes: dict[str, int] = {}
        self.failed: list[str] = []
        cdp = page.context.new_cdp_session(page)
        cdp.send("Network.enable")
        cdp.on("Network.requestWillBeSent", lambda e: self.urls.__setitem__(e["requestId"], e["request"]["url"]))
        cdp.on("Network.loadingFinished", lambda e: self.bytes.__setitem__(e["requestId"], int(e["encodedDataLength"])))
        cdp.on("Network.loadingFailed", lambda e: self.failed.append(self.urls.get(e["requestId"], "?")))

    def total(self) -> int:
        return sum(self.bytes.values())

    def seen(self) -> list[tuple[str, int]]:
        return [(self.urls.get(i, "?"), n) for i, n in self.bytes.items()]


def settle(page: Any) -> None:
    """Until the network is quiet: everything the view asked for has arrived."""
    page.wait_for_load_state("networkidle")
    page.wait_for_timeout(300)
    page.wait_for_load_state("networkidle")


def largest_state(site: RealSite) -> str:
    """The state whose LGA outlines weigh most (as served, gzip): the dearest state to choose."""
    files = (site.root / "current" / "docs" / "map" / "lgas").glob("*.geojson.gz")
    return max(files, key=lambda p: p.stat().st_size).name.split(".")[0]


def measure(chromium: Any, site: RealSite, width: int, height: int, state: str) -> dict[str, Any]:
    """Bytes of the first view and of choosing `state`, with the responses of each step."""
    context = (phone_context(chromium, width, height) if width < 600
               else chromium.new_context(viewport={"width": width, "height": height}, bypass_csp=True))
    page = context.new_page()
    wire = Wire(page)
    open_map(page, site.url, site.key)
    settle(page)
    first, first_seen = wire.total(), wire.seen()
    page.select_option("#state-filter", state)
    page.wait_for_selector(f'body[data-view="{state}"]', timeout=60_000)
    page.wait_for_function(f"document.querySelector('#history-figure').dataset.code === '{state}'"
                           " && document.querySelectorAll('#survey-table tbody tr').length > 0", timeout=60_000)
    settle(page)
    lgas = page.locator("#map path.lga").count()
    out = {"first": first, "state": wire.total() - first, "first_seen": first_seen,
           "state_seen": [s for s in wire.seen() if s not in first_seen], "failed": wire.failed, "lgas": lgas,
           "host": urlparse(site.url).netloc}
    context.close()
    return out


@pytest.mark.parametrize(("name", "width", "height"), VIEWS, ids=[v[0] for v in VIEWS])
def test_the_map_fits_its_byte_budget(chromium: Any, real_site: RealSite, name: str, width: int, height: int) -> None:
    state = largest_state(real_site)
    m = measure(chromium, real_site, width, height, state)
    print(f"\nmap at {width} px: first view {m['first']} B, choosing {state} {m['state']} B")
    assert not m["failed"], m["failed"]
    urls = [u for u, _ in m["first_seen"] + m["state_seen"]]
    # everything from the site's own host; no whole-country table, no bundle file
    assert all(urlparse(u).netloc == m["host"] for u in urls if urlparse(u).scheme in ("http", "https")), urls
    assert not [u for u in urls if ".csv" in u or "/v1/downloads" in u or "format=csv" in u], urls
    # the first view draws the states only; Chart.js waits for a chart
    assert not [u for u in (x for x, _ in m["first_seen"]) if "chart.umd.js" in u or "/map/lgas/" in u]
    assert m["lgas"] > 0
    assert m["first"] <= BUDGET, sorted(m["first_seen"], key=lambda s: -s[1])
    assert m["state"] <= BUDGET, sorted(m["state_seen"], key=lambda s: -s[1])


def test_the_budget_counts_compressed_bytes(chromium: Any, real_site: RealSite) -> None:
    """The count is of bytes as sent: Leaflet arrives gzip-compressed, well under its file size."""
    context = chromium.new_context(viewport={"width": 1280, "height": 800}, bypass_csp=True)
    page = context.new_page()
    wire = Wire(page)
    page.goto(real_site.url + "/docs/map.html")
    settle(page)
    leaflet = [n for u, n in wire.seen() if u.endswith("/leaflet.js")]
    size = (real_site.root / "current" / "docs" / "vendor" / "leaflet" / "leaflet.js").stat().st_size
    assert leaflet and 0 < leaflet[0] < size / 2, (leaflet, size)
    context.close()
