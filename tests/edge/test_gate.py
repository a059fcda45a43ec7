"""The gate as a pure function: every rule, with an injected clock and a real SQLite store."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from edge.gate import Request, handle
from edge.release import LocalReleases
from edge.routes import ROUTES
from edge.stores.sqlite import SQLiteKeyStore
from pipeline.release.render import render_release
from tests.conftest import ESTIMATED, FORECAST, LGAS, NOW, synthetic_produced


@pytest.fixture
def release(release_root: Path):
    return LocalReleases(release_root).current()


def get(release, store, path: str, query: str = "", key: str | None = None, now=NOW, **headers: str):
    h = {k.replace("_", "-").lower(): v for k, v in headers.items()}
    if key is not None:
        h["authorization"] = f"Bearer {key}"
    return handle(Request("GET", path, query, h), now, store, release)


def code_of(resp) -> str:
    assert resp.body is not None, resp
    doc = json.loads(resp.body)
    assert doc["status"] == resp.status
    return doc["code"]


def test_every_route_serves_its_file(release, store, all_scopes_key):
    """The route table maps each endpoint to an existing file with its content type."""
    for route in ROUTES:
        if route.beside_pointer:  # the release list: test_release_list_*
            continue
        query = "state=KN" if route.param("state") else f"lga={LGAS[0]}" if route.param("lga") else ""
        resp = get(release, store, route.path, query, all_scopes_key)
        assert resp.status == 200, (route.path, resp.body)
        assert resp.file_key is not None and (release.root / resp.file_key).is_file()
        assert dict(resp.headers)["Content-Type"] == route.content_type


def test_defaults_map_to_latest_period_and_four_months(release, store, all_scopes_key):
    assert get(release, store, "/v1/risk/states", "", all_scopes_key).file_key == f"v1/risk/states/{ESTIMATED[-1]}.json"
    assert get(release, store, "/v1/risk/states", f"period={ESTIMATED[0]}", all_scopes_key).file_key == \
        f"v1/risk/states/{ESTIMATED[0]}.json"
    assert get(release, store, "/v1/forecasts/lgas", "state=LA", all_scopes_key).file_key == "v1/forecasts/lgas/LA/4.json"
    assert get(release, store, "/v1/forecasts/states", "months=2", all_scopes_key).file_key == "v1/forecasts/states/2.json"


def test_history_and_country_routes_map_to_their_files(release, store, all_scopes_key):
    assert get(release, store, "/v1/history/states", "state=KN", all_scopes_key).file_key == \
        "v1/history/states/KN/estimated.json"
    assert get(release, store, "/v1/history/states", "state=LA&include=forecasts&format=csv",
               all_scopes_key).file_key == "v1/history/states/LA/forecasts.csv"
    assert get(release, store, "/v1/history/lgas", f"lga={LGAS[1]}&include=forecasts", all_scopes_key).file_key == \
        f"v1/history/lgas/{LGAS[1]}/forecasts.json"
    assert get(release, store, "/v1/risk/lgas/all", "", all_scopes_key).file_key == \
        f"v1/risk/lgas_all/{ESTIMATED[-1]}.json"
    assert get(release, store, "/v1/risk/lgas/all", f"period={ESTIMATED[0]}&format=csv",
               all_scopes_key).file_key == f"v1/risk/lgas_all/{ESTIMATED[0]}.csv"


@pytest.mark.parametrize(("path", "query", "status", "code"), [
    ("/v1/history/lgas", "", 404, "UNKNOWN_LGA"),
    ("/v1/history/lgas", "lga=NG999999", 404, "UNKNOWN_LGA"),  # well-formed, not in the release
    ("/v1/history/lgas", "lga=ng020001", 404, "UNKNOWN_LGA"),
    ("/v1/history/lgas", "lga=../../manifest", 404, "UNKNOWN_LGA"),
    ("/v1/history/lgas", f"lga={LGAS[0]}&include=all", 400, "INVALID_INCLUDE"),
    ("/v1/history/lgas", f"lga={LGAS[0]}&include=", 400, "INVALID_INCLUDE"),
    ("/v1/history/states", "state=ZZ", 404, "UNKNOWN_STATE"),
    ("/v1/history/states", "state=KN&format=xml", 400, "INVALID_FORMAT"),
    ("/v1/history/states", "state=KN&period=2024-01", 400, "UNKNOWN_PARAMETER"),
    ("/v1/risk/lgas/all", "period=2024-1", 400, "INVALID_PERIOD"),
    ("/v1/risk/lgas/all", f"period={FORECAST[0]}", 400, "FORECAST_PERIOD"),
    ("/v1/risk/lgas/all", "period=1999-01", 404, "PERIOD_NOT_AVAILABLE"),
    ("/v1/risk/lgas/all", "state=KN", 400, "UNKNOWN_PARAMETER"),
])
def test_history_and_country_routes_refuse_bad_values(release, store, all_scopes_key, path, query, status, code):
    resp = get(release, store, path, query, all_scopes_key)
    assert resp.status == status and code_of(resp) == code, resp.body


def test_csv_twin_paths_are_the_format_csv_answer(release, store, all_scopes_key):
    for route in ROUTES:
        base = "state=KN" if route.param("state") else f"lga={LGAS[0]}" if route.param("lga") else ""
        twin = get(release, store, route.path + ".csv", base, all_scopes_key)
        if route.param("format") is None:
            assert twin.status == 404 and code_of(twin) == "NOT_FOUND", route.path
            continue
        same = get(release, store, route.path, (base + "&" if base else "") + "format=csv", all_scopes_key)
        assert twin.status == 200 and twin.file_key == same.file_key and twin.file_key.endswith(".csv"), route.path
    again = get(release, store, "/v1/risk/states.csv", "format=json", all_scopes_key)
    assert again.status == 400 and code_of(again) == "REPEATED_PARAMETER"
    assert get(release, store, "/v1/risk/states.csv", "").status == 401  # the key is still checked first
    assert code_of(get(release, store, "/v1/risk/states.csv.csv", "", all_scopes_key)) == "NOT_FOUND"


def test_forecast_months_of_a_history_need_the_forecasts_scope(release, store):
    _, risk_only = store.create("risk only", ["risk_scores"], "test", now=NOW)
    assert get(release, store, "/v1/history/lgas", f"lga={LGAS[0]}", risk_only).status == 200
    for path, query in (("/v1/history/lgas", f"lga={LGAS[0]}&include=forecasts"),
                        ("/v1/history/states", "state=KN&include=forecasts&format=csv")):
        refused = get(release, store, path, query, risk_only)
        assert refused.status == 403 and code_of(refused) == "SCOPE_REQUIRED"
        assert json.loads(refused.body)["required_scope"] == "forecasts" and refused.file_key is None
    # the remembered outcome of a query is per release, the scope check per key: the same query
    # asked again by a key with both scopes is served
    _, both = store.create("both", ["risk_scores", "forecasts"], "test", now=NOW)
    assert get(release, store, "/v1/history/lgas", f"lga={LGAS[0]}&include=forecasts", both).status == 200
    _, forecasts_only = store.create("forecasts only", ["forecasts"], "test", now=NOW)
    assert code_of(get(release, store, "/v1/history/lgas", f"lga={LGAS[0]}&include=forecasts",
                       forecasts_only)) == "SCOPE_REQUIRED"


def test_release_list_is_served_from_beside_the_pointer(release_root, store, all_scopes_key):
    releases = LocalReleases(release_root)
    current = releases.current()

    def ask(query: str = "", **headers: str):
        h = {"authorization": f"Bearer {all_scopes_key}", **{k.replace("_", "-"): v for k, v in headers.items()}}
        return handle(Request("GET", "/v1/releases", query, h), NOW, store, current, None, releases)

    resp = ask()
    assert resp.status == 200 and resp.file_key is None
    doc = json.loads(resp.body)
    assert doc == json.loads((release_root / "releases.json").read_bytes())
    assert doc["current"] == current.release_id and [r["current"] for r in doc["releases"]] == [True]
    assert doc["releases"][0]["data_window"] == {"first_estimated": ESTIMATED[0], "last_estimated": ESTIMATED[-1],
                                                 "last_forecast": FORECAST[-1]}
    hdrs = dict(resp.headers)
    assert hdrs["Content-Type"] == "application/json" and hdrs["Cache-Control"].startswith("private, max-age=60")
    assert ask(if_none_match=hdrs["ETag"]).status == 304
    assert code_of(ask("format=csv")) == "UNKNOWN_PARAMETER"
    # without a list (a root from before lists existed), a 503 rather than a list that omits releases
    (release_root / "releases.json").unlink()
    gone = ask()
    assert gone.status == 503 and code_of(gone) == "TEMPORARILY_UNAVAILABLE"


def test_release_list_needs_a_key(release_root, store):
    releases = LocalReleases(release_root)
    resp = handle(Request("GET", "/v1/releases", "", {}), NOW, store, releases.current(), None, releases)
    assert resp.status == 401


# -- authentication ------------------------------------------------------------------------


def test_missing_key_is_401(release, store):
    resp = get(release, store, "/v1/periods")
    assert resp.status == 401 and code_of(resp) == "API_KEY_MISSING"
    assert dict(resp.headers)["Content-Type"] == "application/problem+json"
    assert "WWW-Authenticate" in dict(resp.headers)


@pytest.mark.parametrize("header", [
    {"authorization": "Bearer svc_live_short"},
    {"authorization": "Basic dXNlcjpwYXNz"},
    {"authorization": "Bearer "},
    {"x-api-key": "sk_live_" + "a" * 32},
    {"x-api-key": "svc_live_" + "a" * 32},  # well-formed, but no such key
])
def test_bad_keys_are_401_invalid(release, store, header):
    resp = handle(Request("GET", "/v1/periods", "", header), NOW, store, release)
    assert resp.status == 401 and code_of(resp) == "API_KEY_INVALID"


def test_x_api_key_header_is_accepted(release, store, all_scopes_key):
    resp = handle(Request("GET", "/v1/periods", "", {"x-api-key": all_scopes_key}), NOW, store, release)
    assert resp.status == 200


def test_two_different_keys_are_refused(release, store, all_scopes_key):
    _, other = store.create("other", ["risk_scores"], "test", now=NOW)
    h = {"authorization": f"Bearer {all_scopes_key}", "x-api-key": other}
    resp = handle(Request("GET", "/v1/periods", "", h), NOW, store, release)
    assert resp.status == 401 and code_of(resp) == "API_KEY_INVALID"


def test_revocation_takes_effect_on_next_request(release, store):
    kid, key = store.create("r", ["risk_scores"], "live", now=NOW)
    assert get(release, store, "/v1/periods", key=key).status == 200
    store.revoke(kid, now=NOW)
    resp = get(release, store, "/v1/periods", key=key)
    assert resp.status == 401 and code_of(resp) == "API_KEY_REVOKED"


def test_expiry_uses_injected_clock(release, store):
    _, key = store.create("e", ["risk_scores"], "live", expires_on="2026-12-01", now=NOW)
    just_before = NOW.replace(month=11, day=30, hour=23, minute=59, second=59)
    assert get(release, store, "/v1/periods", key=key, now=just_before).status == 200
    at_expiry = NOW.replace(month=12, day=1, hour=0)
    resp = get(release, store, "/v1/periods", key=key, now=at_expiry)
    assert resp.status == 401 and code_of(resp) == "API_KEY_EXPIRED"


def test_suspended_org_and_removed_account(release, store):
    _, org_key = store.create("o", ["risk_scores"], "live", org="ngo-1", now=NOW)
    _, own_key = store.create("a", ["risk_scores"], "live", owner="researcher@x", now=NOW)
    store.set_org_suspended("ngo-1", True, now=NOW)
    assert code_of(get(release, store, "/v1/periods", key=org_key)) == "ORGANISATION_SUSPENDED"
    store.set_org_suspended("ngo-1", False, now=NOW)
    assert get(release, store, "/v1/periods", key=org_key).status == 200
    store.remove_account("researcher@x", now=NOW)
    assert code_of(get(release, store, "/v1/periods", key=own_key)) == "ACCOUNT_REMOVED"


def test_keys_are_stored_hashed_only(store, tmp_path):
    _, key = store.create("h", ["risk_scores"], "live", now=NOW)
    raw = (tmp_path / "var" / "keys.sqlite").read_bytes()
    assert key.encode() not in raw and key[9:].encode() not in raw


# -- scope and the order of checks -------------------------------------------------------------


def test_scope_required(release, store):
    _, key = store.create("s", ["risk_scores"], "live", now=NOW)
    for path, query in [("/v1/forecasts/states", ""), ("/v1/boundaries/lgas", "state=KN")]:
        resp = get(release, store, path, query, key)
        assert resp.status == 403 and code_of(resp) == "SCOPE_REQUIRED"
        assert json.loads(resp.body)["required_scope"] in ("forecasts", "lga_boundaries")
    # /v1/periods needs any valid key
    _, bkey = store.create("b", ["lga_boundaries"], "live", now=NOW)
    assert get(release, store, "/v1/periods", key=bkey).status == 200


def test_order_401_before_403_before_parameters(release, store):
    _, key = store.create("s", ["risk_scores"], "live", now=NOW)
    # bad key and bad parameter and missing scope: 401 wins
    assert get(release, store, "/v1/forecasts/lgas", "state=zz&months=9", "svc_live_" + "x" * 32).status == 401
    # valid key without scope and bad parameter: 403 wins
    assert code_of(get(release, store, "/v1/forecasts/lgas", "state=zz&months=9", key)) == "SCOPE_REQUIRED"
    # unknown parameter before value errors
    assert code_of(get(release, store, "/v1/risk/lgas", "state=zz&foo=1", key)) == "UNKNOWN_PARAMETER"
    # values are checked in route parameter order: state before period
    assert code_of(get(release, store, "/v1/risk/lgas", "period=bad&state=zz", key)) == "UNKNOWN_STATE"


# -- parameter values ------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["2024-13", "2024-7", "2024-07-01", "", "2024-00", "24-07", "2024/07", "%202024-01"])
def test_invalid_period(release, store, all_scopes_key, value):
    resp = get(release, store, "/v1/risk/states", f"period={value}", all_scopes_key)
    assert resp.status == 400 and code_of(resp) == "INVALID_PERIOD"


def test_forecast_period_and_not_available(release, store, all_scopes_key):
    resp = get(release, store, "/v1/risk/states", f"period={FORECAST[0]}", all_scopes_key)
    assert resp.status == 400 and code_of(resp) == "FORECAST_PERIOD"
    for p in ("2017-12", "2030-01"):
        resp = get(release, store, "/v1/risk/lgas", f"state=KN&period={p}", all_scopes_key)
        assert resp.status == 404 and code_of(resp) == "PERIOD_NOT_AVAILABLE"


@pytest.mark.parametrize("query", ["", "state=", "state=kn", "state=XX", "state=KNO", "state=../..", "state=%2e%2e",
                                   "state=K%4E%2F", "state=KN%20"])
def test_unknown_state(release, store, all_scopes_key, query):
    resp = get(release, store, "/v1/boundaries/lgas", query, all_scopes_key)
    assert resp.status == 404 and code_of(resp) == "UNKNOWN_STATE"


def test_lowercase_state_gets_a_hint(release, store, all_scopes_key):
    resp = get(release, store, "/v1/context/lgas", "state=kn", all_scopes_key)
    assert "use `KN`" in json.loads(resp.body)["detail"]


@pytest.mark.parametrize("value", ["0", "5", "1.5", "abc", "", "01", "+1", " 1", "４"])
def test_invalid_months(release, store, all_scopes_key, value):
    resp = get(release, store, "/v1/forecasts/states", f"months={value}", all_scopes_key)
    assert resp.status == 400 and code_of(resp) == "INVALID_MONTHS"


@pytest.mark.parametrize("query,code", [
    ("state=KN&state=LA", "REPEATED_PARAMETER"),
    ("state=KN&foo=bar", "UNKNOWN_PARAMETER"),
    ("State=KN", "UNKNOWN_PARAMETER"),
    ("state=KN%00", "INVALID_QUERY"),
    ("state=%ZZ", "INVALID_QUERY"),
    ("state=%", "INVALID_QUERY"),
    ("state=%C3%28", "INVALID_QUERY"),  # invalid UTF-8
    ("%00=KN", "INVALID_QUERY"),
])
def test_query_shape_errors(release, store, all_scopes_key, query, code):
    resp = get(release, store, "/v1/context/lgas", query, all_scopes_key)
    assert resp.status == 400 and code_of(resp) == code


@pytest.mark.parametrize("path", ["/v1/boundaries/lgas/../../manifest.json", "/v1/%62oundaries/lgas", "/v1//periods",
                                  "/v1/periods/", "/manifest.json", "/v1/boundaries/lgas%00", "/V1/periods",
                                  "/v1/risk/lgas/KN/2024-01.json", "/v1/risk/lgas/KN/../../../../etc/passwd"])
def test_path_tricks_are_404(release, store, all_scopes_key, path):
    resp = get(release, store, path, "state=KN", all_scopes_key)
    assert resp.status == 404 and code_of(resp) == "NOT_FOUND" and resp.file_key is None


def test_methods(release, store, all_scopes_key):
    resp = handle(Request("POST", "/v1/periods", "", {"authorization": f"Bearer {all_scopes_key}"}), NOW, store, release)
    assert resp.status == 405 and dict(resp.headers)["Allow"] == "GET, HEAD, OPTIONS"
    resp = handle(Request("OPTIONS", "/v1/risk/states", "", {"origin": "https://x.org"}), NOW, store, release)
    h = dict(resp.headers)
    assert resp.status == 204 and h["Access-Control-Allow-Origin"] == "*"
    assert "Authorization" in h["Access-Control-Allow-Headers"] and "x-api-key" in h["Access-Control-Allow-Headers"]


# -- caching, compression -------------------------------------------------------------------------


def test_etag_304_and_gzip(release, store, all_scopes_key):
    resp = get(release, store, "/v1/context/states", "", all_scopes_key)
    etag = dict(resp.headers)["ETag"]
    assert etag.startswith('"') and len(etag) == 34
    again = get(release, store, "/v1/context/states", "", all_scopes_key, if_none_match=etag)
    assert again.status == 304 and again.file_key is None and dict(again.headers)["ETag"] == etag
    other = get(release, store, "/v1/context/states", "", all_scopes_key, if_none_match='"nope", W/' + etag)
    assert other.status == 304
    stale = get(release, store, "/v1/context/states", "", all_scopes_key, if_none_match='"nope"')
    assert stale.status == 200
    gz = get(release, store, "/v1/context/states", "", all_scopes_key, accept_encoding="br, gzip;q=0.8")
    assert gz.file_key == "v1/context/states.json.gz" and dict(gz.headers)["Content-Encoding"] == "gzip"
    assert dict(gz.headers)["ETag"] != etag
    no = get(release, store, "/v1/context/states", "", all_scopes_key, accept_encoding="gzip;q=0, identity")
    assert no.file_key == "v1/context/states.json"
    # a Range request is answered from the identity bytes, at the CDN as locally: offsets are the manifest's
    ranged = get(release, store, "/v1/context/states", "", all_scopes_key, accept_encoding="gzip", range="bytes=0-9")
    assert ranged.file_key == "v1/context/states.json" and dict(ranged.headers)["ETag"] == etag
    assert "Content-Encoding" not in dict(ranged.headers)
    docs = get(release, store, "/docs/index.html", "", None, accept_encoding="gzip", range="bytes=0-9")
    assert docs.file_key == "docs/index.html"


def test_transmission_unavailable_is_503(tmp_path, store, all_scopes_key):
    root = tmp_path / "b2"
    render_release(root, synthetic_produced(with_transmission=False), "2026-11-22T10:00:00Z")
    rel = LocalReleases(root).current()
    for path, q in [("/v1/transmission/states", ""), ("/v1/transmission/lgas", "state=KN")]:
        resp = get(rel, store, path, q, all_scopes_key)
        assert resp.status == 503 and code_of(resp) == "TRANSMISSION_DATA_UNAVAILABLE"
    # the state is still validated first
    assert code_of(get(rel, store, "/v1/transmission/lgas", "state=QQ", all_scopes_key)) == "UNKNOWN_STATE"
    assert get(rel, store, "/v1/context/states", "", all_scopes_key).status == 200


def test_key_store_admin_errors(store: SQLiteKeyStore):
    from edge.keys import AdminError

    with pytest.raises(AdminError, match="unknown scope"):
        store.create("x", ["admin"], "live", now=NOW)
    with pytest.raises(AdminError, match="not in the future"):
        store.create("x", ["risk_scores"], "live", expires_on="2026-01-01", now=NOW)
    with pytest.raises(AdminError, match="YYYY-MM-DD"):
        store.create("x", ["risk_scores"], "live", expires_on="2027-1-1", now=NOW)
    with pytest.raises(AdminError, match="no key"):
        store.revoke("key_nope")
    with pytest.raises(AdminError, match="no organisation"):
        store.set_org_suspended("ghost", True)


def test_list_never_shows_the_key(store: SQLiteKeyStore):
    _, key = store.create("n", ["risk_scores"], "live", now=NOW)
    rows = store.list(NOW + timedelta(days=1))
    assert len(rows) == 1 and rows[0]["hint"] == f"svc_live_…{key[-4:]}"
    assert key not in json.dumps(rows)


def test_docs_are_public_and_exact(release, store):
    resp = get(release, store, "/docs/")
    assert resp.status == 200 and resp.file_key == "docs/index.html"
    assert get(release, store, "/docs/openapi.json").file_key == "docs/openapi.json"
    for path in ["/docs/../manifest.json", "/docs/%2e%2e/manifest.json", "/docs/nope.html", "/docs/v1/periods.json"]:
        assert get(release, store, path).status == 404, path


def test_trailing_newline_is_not_a_valid_value(release, store, all_scopes_key):
    from edge.keys import looks_like_key
    from edge.routes import PERIOD, STATE, Facts, ParamError

    facts = Facts(states=("KN",), estimated=("2024-01",))
    for param, value in ((STATE, "KN\n"), (PERIOD, "2024-01\n")):
        with pytest.raises(ParamError):
            param.validate(value, facts)
    assert not looks_like_key(all_scopes_key + "\n")


# -- format=csv and bundle downloads ------------------------------------------------------------


def test_format_selects_the_csv_file_and_refuses_anything_else(release, store, all_scopes_key):
    for route in ROUTES:
        base = "state=KN" if route.param("state") else f"lga={LGAS[0]}" if route.param("lga") else ""
        q = (base + "&" if base else "") + "format=csv"
        resp = get(release, store, route.path, q, all_scopes_key)
        if route.param("format") is None:
            assert resp.status == 400 and code_of(resp) == "UNKNOWN_PARAMETER", route.path
            continue
        assert resp.status == 200 and resp.file_key.endswith(".csv"), route.path
        assert dict(resp.headers)["Content-Type"] == "text/csv; charset=utf-8"
        as_json = get(release, store, route.path, q.replace("csv", "json"), all_scopes_key)
        assert as_json.file_key == get(release, store, route.path, base, all_scopes_key).file_key
        for bad in ("CSV", "xml", "", "csv%00", "json,csv"):
            r = get(release, store, route.path, q.replace("format=csv", f"format={bad}"), all_scopes_key)
            assert r.status == 400 and code_of(r) in ("INVALID_FORMAT", "INVALID_QUERY"), (route.path, bad)
    r = get(release, store, "/v1/risk/lgas", "state=KN&format=csv&format=json", all_scopes_key)
    assert code_of(r) == "REPEATED_PARAMETER"


def test_bundle_paths_map_only_to_listed_files_of_kept_releases(release, store, all_scopes_key, release_root):
    rid = release.release_id
    ok = get(release, store, f"/v1/downloads/{rid}/gazetteer.csv", "", all_scopes_key)
    assert ok.status == 200 and ok.file_key == "downloads/gazetteer.csv" and ok.release_id is None
    assert dict(ok.headers)["X-Release-Id"] == rid
    # raw paths exactly as a client could send them (nothing is decoded or normalised)
    tricks = {
        f"/v1/downloads/{rid}/../manifest.json": "UNKNOWN_FILE",
        f"/v1/downloads/{rid}/..": "UNKNOWN_FILE",
        f"/v1/downloads/{rid}/%2e%2e%2fmanifest.json": "UNKNOWN_FILE",
        f"/v1/downloads/{rid}/gazetteer.csv/": "UNKNOWN_FILE",
        f"/v1/downloads/{rid}/gazetteer.csv%00": "UNKNOWN_FILE",
        f"/v1/downloads/{rid}/.gazetteer.csv": "UNKNOWN_FILE",
        f"/v1/downloads/{rid}/manifest.json": "UNKNOWN_FILE",
        f"/v1/downloads/{rid}/gazetteer.csv.gz": "UNKNOWN_FILE",
        f"/v1/downloads/../releases/{rid}/manifest.json": "UNKNOWN_RELEASE",
        f"/v1/downloads/{rid}%2f..%2fmanifest.json": "UNKNOWN_RELEASE",
        f"/v1/downloads/{rid.replace('T', 't')}/gazetteer.csv": "UNKNOWN_RELEASE",  # ids are case-sensitive
        "/v1/downloads/current/gazetteer.csv": "UNKNOWN_RELEASE",
        "/v1/downloads//gazetteer.csv": "UNKNOWN_RELEASE",
    }
    for path, code in tricks.items():
        r = get(release, store, path, "", all_scopes_key)
        assert r.status == 404 and code_of(r) == code and r.file_key is None, path
    # without a pinned lookup an earlier release is unknown; with one it is served from there
    render_release(release_root, synthetic_produced()[:-1], "2026-11-22T12:00:00Z")
    newer = LocalReleases(release_root, check_every=0).current()
    assert newer.release_id != rid
    req = Request("GET", f"/v1/downloads/{rid}/gazetteer.csv", "", {"authorization": f"Bearer {all_scopes_key}"})
    assert code_of(handle(req, NOW, store, newer)) == "UNKNOWN_RELEASE"
    pinned = handle(req, NOW, store, newer, None, LocalReleases(release_root))
    assert pinned.status == 200 and pinned.release_id == rid and dict(pinned.headers)["X-Release-Id"] == rid
    assert pinned.file_key == "downloads/gazetteer.csv"
    # a pinned release offers its bundle only, never its other files
    req2 = Request("GET", f"/v1/downloads/{rid}/periods.json", "", {"authorization": f"Bearer {all_scopes_key}"})
    assert code_of(handle(req2, NOW, store, newer, None, LocalReleases(release_root))) == "UNKNOWN_FILE"
    assert LocalReleases(release_root).pinned(rid).entry("v1/periods.json") is None  # type: ignore[union-attr]
    # keys first: no key means 401 whatever the path
    assert code_of(get(release, store, f"/v1/downloads/{rid}/../manifest.json")) == "API_KEY_MISSING"


def test_smc_routes_map_to_their_files_and_refuse_bad_values_like_the_others(release, store, all_scopes_key):
    assert get(release, store, "/v1/transmission/smc/states", "", all_scopes_key).file_key == \
        "v1/transmission/smc/states.json"
    assert get(release, store, "/v1/transmission/smc/states.csv", "", all_scopes_key).file_key == \
        "v1/transmission/smc/states.csv"
    assert get(release, store, "/v1/transmission/smc/lgas", "state=KN&format=csv", all_scopes_key).file_key == \
        "v1/transmission/smc/lgas/KN.csv"
    for query, status, code in (("", 404, "UNKNOWN_STATE"), ("state=ZZ", 404, "UNKNOWN_STATE"),
                                ("state=kn", 404, "UNKNOWN_STATE"), ("state=KN&format=xml", 400, "INVALID_FORMAT"),
                                ("state=KN&period=2024-01", 400, "UNKNOWN_PARAMETER")):
        resp = get(release, store, "/v1/transmission/smc/lgas", query, all_scopes_key)
        assert resp.status == status and code_of(resp) == code, (query, resp.body)
    assert b"use `KN`" in get(release, store, "/v1/transmission/smc/lgas", "state=kn", all_scopes_key).body
    _, boundaries_only = store.create("outlines only", ["lga_boundaries"], "test", now=NOW)
    resp = get(release, store, "/v1/transmission/smc/states", "", boundaries_only)
    assert resp.status == 403 and code_of(resp) == "SCOPE_REQUIRED"
