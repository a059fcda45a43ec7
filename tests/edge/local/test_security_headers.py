"""Security headers: every docs answer carries the strict policy, every API answer its own, and a
docs page cannot be framed by another site (checked in Chromium)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from edge.gate import Request, handle
from edge.local.app import App
from edge.release import LocalReleases
from edge.routes import PUBLIC_PREFIX
from edge.security import API_HEADERS, DOCS_HEADERS, DOCS_PREFIX, headers_for_key
from edge.viewer_response import viewer_response
from tests.conftest import NOW, LiveServer
from tests.pipeline.site.screenshots import browser, chromium_path


def _has(headers: Any, wanted: tuple[tuple[str, str], ...]) -> None:
    for name, value in wanted:
        assert headers.get(name) == value, (name, headers.get(name))


def test_docs_and_api_answers_carry_their_headers(client: httpx.Client, all_scopes_key: str):
    for path in ("/docs/", "/docs/index.html", "/docs/openapi.json", "/docs/nope.html", "/"):
        r = client.get(path)
        _has(r.headers, DOCS_HEADERS if r.status_code != 404 else API_HEADERS)
    etag = client.get("/docs/index.html").headers["etag"]
    _has(client.get("/docs/index.html", headers={"If-None-Match": etag}).headers, DOCS_HEADERS)
    auth = {"Authorization": f"Bearer {all_scopes_key}"}
    for path, headers in (("/v1/periods", auth), ("/v1/periods", {}), ("/v1/nope", auth),
                          ("/v1/risk/lgas?state=XX&period=2024-01", auth)):
        _has(client.get(path, headers=headers).headers, API_HEADERS)


def test_the_cdn_sets_the_same_headers_from_the_same_definition(release_root: Path, store, all_scopes_key: str):
    """The viewer-response function adds, for a rewritten request, what the local server sends."""
    assert DOCS_PREFIX == PUBLIC_PREFIX
    release = LocalReleases(release_root).current()
    for path, key in (("/docs/index.html", "docs/index.html"), ("/v1/periods", "v1/periods.json")):
        local = handle(Request("GET", path, "", {"authorization": f"Bearer {all_scopes_key}"}), NOW, store, release)
        event = {"Records": [{"cf": {
            "request": {"uri": f"/api/releases/{release.release_id}/{key}",
                        "headers": {"x-mr-release-id": [{"key": "x-mr-release-id", "value": release.release_id}]}},
            "response": {"status": "200", "headers": {}}}}]}
        out = viewer_response(event)["headers"]
        expected = headers_for_key(key)
        assert {(v[0]["key"], v[0]["value"]) for k, v in out.items() if k != "cache-control"} >= set(expected)
        assert set(expected) <= set(local.headers)


@pytest.mark.skipif(chromium_path() is None, reason="chromium is not installed (Debian package `chromium`)")
def test_a_docs_page_cannot_be_framed_by_another_site(release_root: Path, store):
    """Another origin frames the docs page: Chromium refuses it. The control frames the very same
    answer with only the security headers taken out, and it loads: the headers are what refuse it."""
    attacker = "http://attacker.test/"
    with LiveServer(App(release_root, store)) as live, browser() as chromium:
        context = chromium.new_context()
        target = live.url + "/docs/index.html"
        stripped = target + "?without-security-headers"

        def without_headers(route: Any) -> None:
            answer = route.fetch()
            assert answer.headers["content-security-policy"]  # the server sent them; this route drops them
            drop = {name.lower() for name, _ in DOCS_HEADERS}
            route.fulfill(response=answer, headers={k: v for k, v in answer.headers.items() if k.lower() not in drop})

        context.route(stripped, without_headers)
        context.route(attacker + "**", lambda route: route.fulfill(
            body=f'<iframe src="{target}"></iframe><iframe src="{stripped}"></iframe>', content_type="text/html"))
        page = context.new_page()
        page.goto(attacker)
        page.wait_for_load_state("load")
        framed, control = (f for f in page.frames if f is not page.main_frame)
        assert "<h1>docs</h1>" in control.content()  # framing works in this browser when the headers are absent
        assert "<h1>docs</h1>" not in framed.content() and framed.url != target, framed.url
        context.close()
