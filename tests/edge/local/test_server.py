"""The local server over real HTTP on 127.0.0.1: the gate's rules as a client sees them."""

from __future__ import annotations

import gzip
import json
import socket
from datetime import timedelta
from pathlib import Path

import httpx

from edge.local.app import App
from pipeline.release.render import render_release
from tests.conftest import ESTIMATED, NOW, LiveServer, synthetic_produced


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def raw_get(live: LiveServer, target: str, key: str) -> tuple[int, bytes]:
    """Send a request line byte-for-byte, so no client library normalises the path."""
    with socket.create_connection(("127.0.0.1", live.port), timeout=5) as s:
        s.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\nConnection: close\r\n\r\n"
                  .encode("latin-1"))
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def test_success_headers_and_body(client: httpx.Client, release_root: Path, all_scopes_key: str):
    r = client.get("/v1/risk/states", headers={**auth(all_scopes_key), "Accept-Encoding": "identity"})
    assert r.status_code == 200
    assert r.json()["period"] == ESTIMATED[-1]
    assert r.headers["content-type"] == "application/json"
    assert r.headers["access-control-allow-origin"] == "*"
    assert "etag" in r.headers["access-control-expose-headers"].lower()
    assert r.headers["cache-control"].startswith("private")
    expected = (release_root / "current" / f"v1/risk/states/{ESTIMATED[-1]}.json").read_bytes()
    assert r.content == expected
    g = client.get("/v1/boundaries/lgas", params={"state": "KN"}, headers=auth(all_scopes_key))
    assert g.headers["content-type"] == "application/geo+json"


def test_gzip_on_the_wire(live: LiveServer, all_scopes_key: str):
    with socket.create_connection(("127.0.0.1", live.port), timeout=5) as s:
        s.sendall((f"GET /v1/context/states HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {all_scopes_key}\r\n"
                   "Accept-Encoding: gzip\r\nConnection: close\r\n\r\n").encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    assert b"content-encoding: gzip" in head.lower()
    assert json.loads(gzip.decompress(body))["states"][0]["state_code"] == "KN"


def test_conditional_get_304(client: httpx.Client, all_scopes_key: str):
    r = client.get("/v1/context/lgas?state=LA", headers=auth(all_scopes_key))
    r2 = client.get("/v1/context/lgas?state=LA", headers={**auth(all_scopes_key), "If-None-Match": r.headers["etag"]})
    assert r2.status_code == 304 and r2.content == b"" and r2.headers["etag"] == r.headers["etag"]


def test_head_has_headers_no_body(client: httpx.Client, all_scopes_key: str):
    r = client.head("/v1/periods", headers=auth(all_scopes_key))
    assert r.status_code == 200 and r.content == b"" and int(r.headers["content-length"]) > 0


def test_preflight_without_key(client: httpx.Client):
    r = client.options("/v1/risk/lgas", headers={"Origin": "https://dash.example", "Access-Control-Request-Method": "GET",
                                                 "Access-Control-Request-Headers": "authorization"})
    assert r.status_code == 204
    assert r.headers["access-control-allow-origin"] == "*"
    allowed = r.headers["access-control-allow-headers"].lower()
    assert "authorization" in allowed and "x-api-key" in allowed


def test_every_request_error_code_over_http(client: httpx.Client, all_scopes_key: str, store):
    """Each code of the catalogue that a request alone can trigger, as a client receives it.
    (Expiry, limits and the 503 need a clock or a particular build: see their own tests.)"""
    _, narrow = store.create("narrow", ["risk_scores"], "live", now=NOW)
    _, removed = store.create("gone", ["risk_scores"], "live", owner="bob", now=NOW)
    store.remove_account("bob")
    good = auth(all_scopes_key)
    cases = [
        ("GET", "/v1/periods", {}, 401, "API_KEY_MISSING"),
        ("GET", "/v1/periods", {"x-api-key": "not-a-key"}, 401, "API_KEY_INVALID"),
        ("GET", "/v1/periods", auth("svc_test_" + "A" * 32), 401, "API_KEY_INVALID"),
        ("GET", "/v1/periods", auth(removed), 401, "ACCOUNT_REMOVED"),
        ("GET", "/v1/forecasts/states", auth(narrow), 403, "SCOPE_REQUIRED"),
        ("GET", "/v1/nothing", good, 404, "NOT_FOUND"),
        ("DELETE", "/v1/periods", good, 405, "METHOD_NOT_ALLOWED"),
        ("GET", "/v1/periods?format=csv", good, 400, "UNKNOWN_PARAMETER"),
        ("GET", "/v1/context/lgas?state=KN&state=LA", good, 400, "REPEATED_PARAMETER"),
        ("GET", "/v1/context/lgas?state=%FF", good, 400, "INVALID_QUERY"),
        ("GET", "/v1/risk/states?period=2024-13", good, 400, "INVALID_PERIOD"),
        ("GET", "/v1/risk/states?period=2024-03", good, 400, "FORECAST_PERIOD"),
        ("GET", "/v1/risk/lgas?state=KN&period=2017-12", good, 404, "PERIOD_NOT_AVAILABLE"),
        ("GET", "/v1/risk/lgas?state=ZZ", good, 404, "UNKNOWN_STATE"),
        ("GET", "/v1/forecasts/states?months=5", good, 400, "INVALID_MONTHS"),
    ]
    for method, url, headers, status, code in cases:
        r = client.request(method, url, headers=headers)
        assert r.status_code == status, (url, r.text)
        assert r.headers["content-type"] == "application/problem+json"
        assert r.headers["cache-control"] == "no-store"
        assert r.headers["access-control-allow-origin"] == "*"
        doc = r.json()
        assert doc["code"] == code and doc["status"] == status and doc["title"] and doc["detail"]
        assert doc["type"].endswith("#" + code) and doc["instance"] == url.split("?")[0]


def test_path_tricks_over_the_wire(live: LiveServer, all_scopes_key: str):
    for target in ["/v1/boundaries/lgas/../../manifest.json", "/v1/%2e%2e/manifest.json", "/manifest.json",
                   "/v1/boundaries/lgas?state=../../manifest", "/v1/boundaries/lgas?state=%2e%2e%2f%2e%2e",
                   "/v1/boundaries/lgas?state=KN%00", "/current/manifest.json", "//v1/periods"]:
        status, body = raw_get(live, target, all_scopes_key)
        assert status in (400, 404), target
        assert json.loads(body)["code"] in ("NOT_FOUND", "UNKNOWN_STATE", "INVALID_QUERY"), target


def test_revocation_and_suspension_over_http(client: httpx.Client, store):
    kid, key = store.create("r", ["risk_scores"], "live", org="ngo", owner="ann", now=NOW)
    assert client.get("/v1/periods", headers=auth(key)).status_code == 200
    store.set_org_suspended("ngo", True)
    assert client.get("/v1/periods", headers=auth(key)).json()["code"] == "ORGANISATION_SUSPENDED"
    store.set_org_suspended("ngo", False)
    store.revoke(kid)
    r = client.get("/v1/periods", headers=auth(key))
    assert r.status_code == 401 and r.json()["code"] == "API_KEY_REVOKED"


def test_expiry_over_http_with_a_clock(release_root: Path, store):
    clock = {"now": NOW}
    _, key = store.create("e", ["risk_scores"], "live", expires_on="2026-11-23", now=NOW)
    with LiveServer(App(release_root, store, clock=lambda: clock["now"])) as live, \
            httpx.Client(base_url=live.url) as c:
        assert c.get("/v1/periods", headers=auth(key)).status_code == 200
        clock["now"] = NOW + timedelta(days=1)
        assert c.get("/v1/periods", headers=auth(key)).json()["code"] == "API_KEY_EXPIRED"


def test_new_release_is_served_without_restart(release_root: Path, store, all_scopes_key):
    app = App(release_root, store)
    app.releases.check_every = 0
    with LiveServer(app) as live, httpx.Client(base_url=live.url) as c:
        first = c.get("/v1/periods", headers=auth(all_scopes_key)).headers["x-release-id"]
        render_release(release_root, synthetic_produced(), "2026-11-23T10:00:00Z")
        second = c.get("/v1/periods", headers=auth(all_scopes_key)).headers["x-release-id"]
    assert first != second and second.startswith("20261123T100000Z")
