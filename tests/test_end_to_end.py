"""The real thing: a build from DATA_DIR, served over HTTP on loopback, checked against the SPEC.

One build per test session (the `real_build` fixture of tests/conftest.py, shared with
tests/test_response_schemas.py); every assertion reads the answer a client would get.
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from edge.local.app import App
from edge.stores.sqlite import SQLiteKeyStore
from pipeline.build import CACHE_DIR, build
from tests.conftest import LiveServer, seed_fit_cache
from tests.paths import REPO_ROOT, data_marks, linked_data

PCODE = re.compile(r"^NG0\d{2}\d{3}$")
LEVELS = {"very_low", "low", "moderate", "high", "very_high"}

pytestmark = data_marks()


@pytest.fixture(scope="module")
def api(real_build: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    store = SQLiteKeyStore(tmp_path_factory.mktemp("keys") / "keys.sqlite")
    _, key = store.create("e2e", ["risk_scores", "forecasts", "lga_boundaries"], "test")
    with LiveServer(App(real_build, store)) as live, httpx.Client(
        base_url=live.url, headers={"Authorization": f"Bearer {key}"}, timeout=30
    ) as c:
        yield c


def test_kano_boundaries_have_44_ocha_features(api: httpx.Client):
    r = api.get("/v1/boundaries/lgas", params={"state": "KN"})
    assert r.status_code == 200 and r.headers["content-type"] == "application/geo+json"
    doc = r.json()
    assert doc["type"] == "FeatureCollection" and "CC BY" in doc["source"]
    assert len(doc["features"]) == 44
    for f in doc["features"]:
        assert f["type"] == "Feature" and PCODE.match(f["properties"]["lgaCode"])
        assert f["properties"]["state"] == "KN" and f["properties"]["lga"]
        assert f["geometry"]["type"] in ("Polygon", "MultiPolygon")
        lon, lat = f["geometry"]["coordinates"][0][0][0] if f["geometry"]["type"] == "MultiPolygon" \
            else f["geometry"]["coordinates"][0][0]
        assert 2.6 < lon < 14.7 and 4.2 < lat < 13.9


def test_states_hold_774_distinct_lgas(api: httpx.Client):
    states = [s["state_code"] for s in api.get("/v1/context/states").json()["states"]]
    assert len(states) == 37 and len(set(states)) == 37 and "FC" in states and "LA" in states
    codes: list[str] = []
    for s in states:
        feats = api.get("/v1/boundaries/lgas", params={"state": s}).json()["features"]
        codes += [f["properties"]["lgaCode"] for f in feats]
    assert len(codes) == 774 and len(set(codes)) == 774


def test_context_matches_spec(api: httpx.Client):
    doc = api.get("/v1/context/states").json()
    assert set(doc["source"]) >= {"name", "coverage_year", "note"}
    assert isinstance(doc["source"]["coverage_year"], int)
    fields = ["state_code", "state", "zone", "lgas", "population", "area_km2", "itn_use", "itn_access",
              "irs_coverage", "effective_treatment", "travel_minutes_to_care", "response_index"]
    for rec in doc["states"]:
        assert list(rec)[: len(fields)] == fields
        assert rec["irs_coverage"] == 0.0  # MAP 2022 surface: 0 over all of Nigeria (docs/context.md)
        for share in ("itn_use", "itn_access", "effective_treatment", "response_index"):
            assert rec[share] is None or 0 <= rec[share] <= 1
    total = sum(r["lgas"] for r in doc["states"])
    assert total == 774
    lgas = api.get("/v1/context/lgas", params={"state": "LA"}).json()
    assert lgas["state_code"] == "LA" and lgas["state"] == "Lagos" and len(lgas["lgas"]) == 20
    names = [r["lga"] for r in lgas["lgas"]]
    assert names == sorted(names, key=str.casefold) or names == sorted(names)
    assert any(r["is_urban"] for r in lgas["lgas"])


def test_periods_and_risk(api: httpx.Client):
    periods = api.get("/v1/periods").json()
    months = periods["months"]
    assert months[0]["period"] == "2018-01"
    assert [m["period"] for m in months] == sorted(m["period"] for m in months)
    est = [m["period"] for m in months if m["kind"] == "estimated"]
    fc = [m["period"] for m in months if m["kind"] == "forecast"]
    assert est[-1] == periods["last_estimated"] and fc[-1] == periods["last_forecast"] and len(fc) == 4
    assert periods["model_version"] and periods["updated_at"]

    latest = api.get("/v1/risk/states").json()
    assert latest["period"] == periods["last_estimated"] and latest["kind"] == "estimated"
    assert len(latest["states"]) == 37
    scores = [s["score"] for s in latest["states"]]
    assert scores == sorted(scores, reverse=True)
    for s in latest["states"]:
        assert 0 <= s["score_low"] <= s["score"] <= s["score_high"] <= 1 and s["level"] in LEVELS

    lgas = api.get("/v1/risk/lgas", params={"state": "KN", "period": "2018-01"}).json()
    assert lgas["period"] == "2018-01" and lgas["state_code"] == "KN" and len(lgas["lgas"]) == 44

    assert api.get("/v1/risk/states", params={"period": fc[0]}).json()["code"] == "FORECAST_PERIOD"
    assert api.get("/v1/risk/states", params={"period": "2017-12"}).json()["code"] == "PERIOD_NOT_AVAILABLE"

    f2 = api.get("/v1/forecasts/lgas", params={"state": "LA", "months": "2"}).json()
    assert [f["period"] for f in f2["forecasts"]] == fc[:2]
    assert all(f["kind"] == "forecast" and len(f["lgas"]) == 20 for f in f2["forecasts"])


STATE_RISK_FIELDS = ["state_code", "state", "zone", "score", "score_low", "score_high", "level", "lgas", "population"]
LGA_RISK_FIELDS = ["lga_code", "lga", "score", "score_low", "score_high", "level", "is_urban", "population"]
SEASON_FIELDS = ["peak_month", "season_start_month", "season_end_month", "season_months", "high_months",
                 "seasonal_index"]


def _check_ranked(records: list[dict], code: str) -> None:
    """Highest risk first, ties broken by code (docs/api.md)."""
    keys = [(-r["score"], r[code]) for r in records]
    assert keys == sorted(keys)
    for r in records:
        assert 0 <= r["score_low"] <= r["score"] <= r["score_high"] <= 1 and r["level"] in LEVELS


def test_risk_records_follow_spec_field_order(api: httpx.Client):
    states = api.get("/v1/risk/states", params={"period": "2020-08"}).json()
    assert list(states)[:3] == ["period", "kind", "states"]  # SPEC's order; additive fields after
    assert states["basis"] in ("survey_fit", "baseline_x_season")
    for r in states["states"]:
        assert list(r)[: len(STATE_RISK_FIELDS)] == STATE_RISK_FIELDS
    _check_ranked(states["states"], "state_code")
    assert sum(r["lgas"] for r in states["states"]) == 774
    lgas = api.get("/v1/risk/lgas", params={"state": "SO", "period": "2020-08"}).json()
    assert list(lgas)[:4] == ["period", "kind", "state_code", "state"] and lgas["kind"] == "estimated"
    for r in lgas["lgas"]:
        assert list(r)[: len(LGA_RISK_FIELDS)] == LGA_RISK_FIELDS
    _check_ranked(lgas["lgas"], "lga_code")
    # the state record is the population-weighted mean of its LGAs
    so = next(r for r in states["states"] if r["state_code"] == "SO")
    weighted = sum(r["score"] * r["population"] for r in lgas["lgas"]) / sum(r["population"] for r in lgas["lgas"])
    assert abs(weighted - so["score"]) < 1e-3 and so["lgas"] == len(lgas["lgas"]) == 23


def test_forecasts_nearest_first_and_ranked(api: httpx.Client):
    periods = api.get("/v1/periods").json()
    fc = [m["period"] for m in periods["months"] if m["kind"] == "forecast"]
    full = api.get("/v1/forecasts/states").json()
    assert list(full) == ["forecasts"] and [f["period"] for f in full["forecasts"]] == fc
    for f in full["forecasts"]:
        assert f["kind"] == "forecast" and len(f["states"]) == 37
        _check_ranked(f["states"], "state_code")
        for r in f["states"]:
            assert list(r)[: len(STATE_RISK_FIELDS)] == STATE_RISK_FIELDS
    one = api.get("/v1/forecasts/states", params={"months": "1"}).json()
    assert one["forecasts"] == full["forecasts"][:1]
    lg = api.get("/v1/forecasts/lgas", params={"state": "KN"}).json()
    assert [f["period"] for f in lg["forecasts"]] == fc
    for f in lg["forecasts"]:
        assert f["state_code"] == "KN" and len(f["lgas"]) == 44
        _check_ranked(f["lgas"], "lga_code")
    assert api.get("/v1/forecasts/lgas", params={"state": "KN", "months": "1.5"}).json()["code"] == "INVALID_MONTHS"


def test_transmission_shapes_and_orders(api: httpx.Client):
    doc = api.get("/v1/transmission/states").json()
    m = doc["method"]
    assert isinstance(m["cases_follow_rain_by_months"], (int, float))
    assert 0 < m["high_season_share_of_peak"] < 1 and m["description"]
    check = m["check"]
    assert isinstance(check["series"], int) and check["series"] > 0
    assert all(isinstance(n, str) for n in check["states"])
    for k in ("median_correlation", "mean_months_off", "mean_months_peak_is_off"):
        assert isinstance(check[k], (int, float))
    national = doc["national"]
    assert list(national["season"])[: len(SEASON_FIELDS)] == SEASON_FIELDS
    for entry in national["survey_trend"]:
        assert {"urban", "rural"} <= set(entry) and entry["survey_year"] in (2010, 2015, 2018, 2021)
    codes = [s["state_code"] for s in doc["states"]]
    assert len(codes) == 37 and codes == sorted(codes)
    for s in doc["states"]:
        season = s["season"]
        assert list(season)[: len(SEASON_FIELDS)] == SEASON_FIELDS
        assert max(season["seasonal_index"]) == 1
        if season["season_class"] == "weak":  # no month is reliably the peak: null, with the reason
            assert season["peak_month"] is None and season["peak_month_null_reason"]
        else:
            assert 1 <= season["peak_month"] <= 12 and season["peak_month_null_reason"] is None
            assert season["seasonal_index"][season["peak_month"] - 1] == 1
        # each season's own share (its floor varies with its dry season) defines its high months
        share = season["high_season_share_of_peak"]
        assert season["high_months"] == [k + 1 for k, v in enumerate(season["seasonal_index"]) if v >= share]
        years = [e["survey_year"] for e in s["survey_trend"]]
        assert years == sorted(years) and 2010 not in years
        for e in s["survey_trend"]:
            assert "urban" not in e and "rural" not in e and 0 <= e["positivity"] <= 1
    lg = api.get("/v1/transmission/lgas", params={"state": "KN"}).json()
    assert lg["state_code"] == "KN" and lg["state"] == "Kano" and len(lg["lgas"]) == 44
    names = [(r["lga"].casefold(), r["lga_code"]) for r in lg["lgas"]]
    assert names == sorted(names)
    for r in lg["lgas"]:
        assert list(r)[:2] == ["lga_code", "lga"] and len(r["typical_rainfall_mm"]) == 12
        assert len(r["seasonal_index"]) == 12 and all(v >= 0 for v in r["typical_rainfall_mm"])


def test_docs_site_is_served(api: httpx.Client):
    r = httpx.get(str(api.base_url) + "/docs/")
    assert r.status_code == 200 and "text/html" in r.headers["content-type"]


def test_docs_quote_the_figures_of_their_own_release(api: httpx.Client):
    check = api.get("/v1/transmission/states").json()["method"]["check"]
    page = httpx.get(str(api.base_url) + "/docs/seasons.html").text
    assert f"<strong>{check['median_correlation']}</strong>" in page
    assert f"<strong>{check['mean_months_peak_is_off']}</strong>" in page
    assert "{{" not in page
    periods = api.get("/v1/periods").json()
    model_page = httpx.get(str(api.base_url) + "/docs/model.html").text
    assert periods["last_estimated"] in model_page and periods["updated_at"] in model_page


def test_build_without_transmission_inputs_answers_503(real_build: Path, tmp_path: Path):
    """A data load lacking the state rainfall climatology (only the seasons use it) still
    builds every other endpoint, and the transmission endpoints say why they cannot answer."""
    data = linked_data(tmp_path / "data", "rainfall/nga_state_chirps_climatology_monthly.csv")
    seed_fit_cache(real_build, tmp_path / "build" / CACHE_DIR)
    result = build(data, tmp_path / "build")
    # the season ratios read the seasons: both say why they are missing
    assert [name for name, _ in result.unavailable] == ["pipeline.datasets.transmission", "pipeline.datasets.ratios"]
    store = SQLiteKeyStore(tmp_path / "keys.sqlite")
    _, key = store.create("t", ["risk_scores"], "test")
    with LiveServer(App(tmp_path / "build", store)) as live, httpx.Client(
        base_url=live.url, headers={"Authorization": f"Bearer {key}"}
    ) as c:
        for url in ("/v1/transmission/states", "/v1/transmission/lgas?state=KN", "/v1/transmission/ratios/states",
                    "/v1/transmission/ratios/lgas?state=KN"):
            r = c.get(url)
            assert r.status_code == 503 and r.json()["code"] == "TRANSMISSION_DATA_UNAVAILABLE"
            assert r.headers["content-type"] == "application/problem+json"
        assert c.get("/v1/transmission/lgas?state=XX").json()["code"] == "UNKNOWN_STATE"
        assert c.get("/v1/risk/states").status_code == 200
        assert len(c.get("/v1/context/states").json()["states"]) == 37
        # the bundle is still made, without the tables that need the seasons
        names = {f["name"] for f in c.get("/v1/downloads").json()["files"]}
        assert "risk_lga_month.csv" in names and "gazetteer.csv" in names and "lga_outlines.geojson" in names
        assert not {n for n in names if n.startswith(("transmission_", "survey_trend", "season_ratio_"))}
        assert c.get("/v1/transmission/lgas?state=KN&format=csv").status_code == 503


# --- bulk downloads and CSV responses ----------------------------------------------------------

RISK_COLUMNS = ["lga_code", "lga", "state_code", "state", "period", "kind", "horizon", "score", "score_low",
                "score_high", "level"]


@pytest.fixture(scope="module")
def downloads(api: httpx.Client) -> dict:
    r = api.get("/v1/downloads")
    assert r.status_code == 200
    return r.json()


def _file(api: httpx.Client, downloads: dict, name: str) -> bytes:
    entry = next(f for f in downloads["files"] if f["name"] == name)
    r = api.get(entry["path"])
    assert r.status_code == 200 and r.headers["content-type"] == entry["media_type"]
    assert hashlib.sha256(r.content).hexdigest() == entry["sha256"]
    return r.content


def _csv(data: bytes) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(data.decode("utf-8"))))


def test_download_index_names_the_agreed_files(api: httpx.Client, downloads: dict):
    periods = api.get("/v1/periods").json()
    assert downloads["model_version"] == periods["model_version"]
    names = {f["name"] for f in downloads["files"]}
    for stem in ("risk_lga_month", "risk_state_month", "context_lga", "context_state", "transmission_lga_month",
                 "transmission_state_month", "survey_trend", "gazetteer"):
        assert {f"{stem}.csv", f"{stem}.parquet"} <= names
    assert {"lga_outlines.geojson", "state_outlines.geojson", "lga_outlines.parquet", "state_outlines.parquet",
            "datapackage.json", "README.md", "SHA256SUMS", "malaria_risk_nigeria.zip"} <= names


def test_outline_downloads_cover_every_lga_and_state(api: httpx.Client, downloads: dict):
    lgas = orjson.loads(_file(api, downloads, "lga_outlines.geojson"))
    assert lgas["type"] == "FeatureCollection" and len(lgas["features"]) == 774
    props = [f["properties"] for f in lgas["features"]]
    assert len({p["lga_code"] for p in props}) == 774 and all(PCODE.match(p["lga_code"]) for p in props)
    assert all(p["lga"] and re.fullmatch(r"[A-Z]{2}", p["state_code"]) and p["state"] for p in props)
    # as served: the Kano features equal /v1/boundaries/lgas?state=KN but for the property names
    served = api.get("/v1/boundaries/lgas", params={"state": "KN"}).json()["features"]
    bundled = {f["properties"]["lga_code"]: f for f in lgas["features"] if f["properties"]["state_code"] == "KN"}
    assert len(bundled) == len(served) == 44
    for f in served:
        b = bundled[f["properties"]["lgaCode"]]
        assert b["geometry"] == f["geometry"] and b["properties"]["lga"] == f["properties"]["lga"]
    states = orjson.loads(_file(api, downloads, "state_outlines.geojson"))
    assert len(states["features"]) == 37
    assert {f["properties"]["state_code"] for f in states["features"]} == {p["state_code"] for p in props}
    assert all(f["geometry"]["type"] in ("Polygon", "MultiPolygon") for f in states["features"])


def test_agreed_csv_columns_and_rows(api: httpx.Client, downloads: dict):
    risk = _csv(_file(api, downloads, "risk_lga_month.csv"))
    assert list(risk[0])[: len(RISK_COLUMNS)] == RISK_COLUMNS
    periods = api.get("/v1/periods").json()
    est = [m["period"] for m in periods["months"] if m["kind"] == "estimated"]
    fc = [m["period"] for m in periods["months"] if m["kind"] == "forecast"]
    assert len(risk) == 774 * (len(est) + len(fc))
    assert {r["kind"] for r in risk} == {"estimated", "forecast"}
    for r in risk[:: 997]:
        assert (r["horizon"] == "") == (r["kind"] == "estimated")
        if r["kind"] == "forecast":
            assert fc[int(r["horizon"]) - 1] == r["period"]
        assert r["level"] in LEVELS and float(r["score_low"]) <= float(r["score"]) <= float(r["score_high"])
    state = _csv(_file(api, downloads, "risk_state_month.csv"))
    assert list(state[0])[: len(RISK_COLUMNS) - 2] == RISK_COLUMNS[2:]
    assert len(state) == 37 * (len(est) + len(fc))
    trans = _csv(_file(api, downloads, "transmission_lga_month.csv"))
    assert list(trans[0])[:7] == ["lga_code", "lga", "state_code", "month", "seasonal_index",
                                  "typical_rainfall_mm", "high_season"]
    assert len(trans) == 774 * 12 and {r["month"] for r in trans} == {str(m) for m in range(1, 13)}
    assert {r["high_season"] for r in trans} == {"true", "false"}
    gaz = _csv(_file(api, downloads, "gazetteer.csv"))
    assert list(gaz[0])[:10] == ["lga_code", "lga", "state_code", "state", "admin1_pcode", "zone", "population",
                                 "area_km2", "is_urban", "eha_code"]
    assert len(gaz) == 774 and all(r["admin1_pcode"] == r["lga_code"][:5] for r in gaz)


def test_bundle_csv_json_agree_for_a_sample(api: httpx.Client, downloads: dict):
    """The same figure three ways: the bundle table, the CSV response and the JSON response."""
    risk = _csv(_file(api, downloads, "risk_lga_month.csv"))
    by_key = {(r["lga_code"], r["period"]): r for r in risk}
    periods = api.get("/v1/periods").json()
    est = [m["period"] for m in periods["months"] if m["kind"] == "estimated"]
    for state, period in (("KN", est[-1]), ("LA", est[0]), ("BO", est[len(est) // 2]), ("FC", est[-13])):
        doc = api.get("/v1/risk/lgas", params={"state": state, "period": period}).json()
        r = api.get("/v1/risk/lgas", params={"state": state, "period": period, "format": "csv"})
        assert r.status_code == 200 and r.headers["content-type"] == "text/csv; charset=utf-8"
        rows = _csv(r.content)
        assert len(rows) == len(doc["lgas"])
        for rec, row in zip(doc["lgas"], rows, strict=True):
            assert row["period"] == period and row["state_code"] == state and row["lga_code"] == rec["lga_code"]
            bundled = by_key[(rec["lga_code"], period)]
            for f in ("score", "score_low", "score_high"):
                assert float(row[f]) == rec[f] == float(bundled[f])
            assert row["level"] == rec["level"] == bundled["level"]
            assert row["is_urban"] == str(rec["is_urban"]).lower() == bundled["is_urban"]
    fc = api.get("/v1/forecasts/lgas", params={"state": "KN", "months": 4}).json()["forecasts"]
    fc_csv = _csv(api.get("/v1/forecasts/lgas", params={"state": "KN", "months": 4, "format": "csv"}).content)
    assert len(fc_csv) == sum(len(f["lgas"]) for f in fc)
    flat = [(f["period"], rec) for f in fc for rec in f["lgas"]]
    for (period, rec), row in zip(flat, fc_csv, strict=True):
        assert row["period"] == period and row["kind"] == "forecast" and float(row["score"]) == rec["score"]
        assert float(by_key[(rec["lga_code"], period)]["score"]) == rec["score"]
    trans = {(r["lga_code"], r["month"]): r for r in _csv(_file(api, downloads, "transmission_lga_month.csv"))}
    for rec in api.get("/v1/transmission/lgas", params={"state": "KN"}).json()["lgas"][:5]:
        for m in range(1, 13):
            row = trans[(rec["lga_code"], str(m))]
            assert float(row["seasonal_index"]) == rec["seasonal_index"][m - 1]
            assert float(row["typical_rainfall_mm"]) == rec["typical_rainfall_mm"][m - 1]
            assert row["high_season"] == ("true" if m in rec["high_months"] else "false")
    ctx = {r["lga_code"]: r for r in _csv(_file(api, downloads, "context_lga.csv"))}
    for rec in api.get("/v1/context/lgas", params={"state": "LA"}).json()["lgas"]:
        for f in ("itn_use", "population", "area_km2", "travel_minutes_to_care"):
            assert (ctx[rec["lga_code"]][f] == "") if rec[f] is None else float(ctx[rec["lga_code"]][f]) == rec[f]


def test_every_csv_route_answers_csv_and_refuses_other_formats(api: httpx.Client):
    for path, params in (("/v1/risk/states", {}), ("/v1/risk/lgas", {"state": "KN"}),
                         ("/v1/forecasts/states", {"months": 2}), ("/v1/forecasts/lgas", {"state": "KN"}),
                         ("/v1/context/states", {}), ("/v1/context/lgas", {"state": "KN"}),
                         ("/v1/transmission/lgas", {"state": "KN"})):
        as_json = api.get(path, params=params)
        as_csv = api.get(path, params={**params, "format": "csv"})
        assert as_csv.status_code == 200 and as_csv.headers["content-type"] == "text/csv; charset=utf-8", path
        assert api.get(path, params={**params, "format": "json"}).content == as_json.content
        rows = _csv(as_csv.content)
        doc = as_json.json()
        records = [r for f in doc.get("forecasts", [doc]) for k in ("states", "lgas") for r in f.get(k, [])
                   if isinstance(f.get(k), list)]
        assert len(rows) == len(records) > 0, path
        for rec, row in zip(records, rows, strict=True):  # every field of every record, as CSV spells it
            for k, v in rec.items():
                cell = row[k]
                if v is None:
                    assert cell == "", (path, k)
                elif isinstance(v, bool):
                    assert cell == str(v).lower(), (path, k)
                elif isinstance(v, int | float):
                    assert float(cell) == v, (path, k)
                elif isinstance(v, list):
                    assert [float(x) for x in cell.split(";")] == v if v else cell == "", (path, k)
                else:
                    assert cell == v, (path, k)
        bad = api.get(path, params={**params, "format": "xml"})
        assert bad.status_code == 400 and bad.json()["code"] == "INVALID_FORMAT" and bad.json()["parameter"] == "format"


def test_one_call_histories_and_whole_country_month(api: httpx.Client):
    """An LGA's and a state's history hold the very figures of the monthly reports; the whole-country
    month is the 37 state reports merged; CSV and revalidation work like every data answer."""
    periods = api.get("/v1/periods").json()
    estimated = [m["period"] for m in periods["months"] if m["kind"] == "estimated"]
    forecast = [m["period"] for m in periods["months"] if m["kind"] == "forecast"]
    kano = api.get("/v1/risk/lgas", params={"state": "KN"}).json()
    top = kano["lgas"][0]
    hist = api.get("/v1/history/lgas", params={"lga": top["lga_code"]})
    assert hist.status_code == 200 and hist.headers["cache-control"] == "private, max-age=300, must-revalidate"
    doc = hist.json()
    assert (doc["lga_code"], doc["lga"], doc["state_code"], doc["state"]) == (top["lga_code"], top["lga"], "KN", "Kano")
    assert [m["period"] for m in doc["months"]] == estimated
    for period in (estimated[0], estimated[len(estimated) // 2], estimated[-1]):
        month = next(m for m in doc["months"] if m["period"] == period)
        report = api.get("/v1/risk/lgas", params={"state": "KN", "period": period}).json()
        rec = next(r for r in report["lgas"] if r["lga_code"] == top["lga_code"])
        assert {k: month[k] for k in ("score", "score_low", "score_high", "level")} == \
            {k: rec[k] for k in ("score", "score_low", "score_high", "level")}
    assert api.get("/v1/history/lgas", params={"lga": top["lga_code"]},
                   headers={"If-None-Match": hist.headers["etag"]}).status_code == 304
    with_fc = api.get("/v1/history/lgas", params={"lga": top["lga_code"], "include": "forecasts"}).json()
    assert [m["period"] for m in with_fc["months"]] == estimated + forecast
    assert with_fc["months"][: len(estimated)] == doc["months"]
    rows = _csv(api.get("/v1/history/lgas.csv", params={"lga": top["lga_code"]}).content)
    assert [r["period"] for r in rows] == estimated and {r["state_code"] for r in rows} == {"KN"}

    nasarawa = api.get("/v1/history/states", params={"state": "NA", "format": "csv"})
    assert nasarawa.headers["content-type"] == "text/csv; charset=utf-8"
    assert {r["state_code"] for r in _csv(nasarawa.content)} == {"NA"}  # as a string, read by csv

    country = api.get("/v1/risk/lgas/all").json()
    assert country["period"] == estimated[-1] and len(country["lgas"]) == 774
    assert len({r["lga_code"] for r in country["lgas"]}) == 774
    scores = [r["score"] for r in country["lgas"]]
    assert scores == sorted(scores, reverse=True)
    by_code = {r["lga_code"]: r for r in country["lgas"]}
    for r in kano["lgas"]:
        assert by_code[r["lga_code"]] == {**r, "state_code": "KN", "state": "Kano"}
    refused = api.get("/v1/risk/lgas/all", params={"period": forecast[0]})
    assert refused.status_code == 400 and refused.json()["code"] == "FORECAST_PERIOD"
    unknown = api.get("/v1/history/lgas", params={"lga": "NG999999"})
    assert unknown.status_code == 404 and unknown.json()["code"] == "UNKNOWN_LGA"


def test_release_list_names_the_release_that_answers(api: httpx.Client, downloads: dict):
    resp = api.get("/v1/releases")
    assert resp.status_code == 200 and resp.headers["cache-control"].startswith("private, max-age=60")
    doc = resp.json()
    current = next(r for r in doc["releases"] if r["current"])
    assert doc["current"] == current["release_id"] == resp.headers["x-release-id"] == downloads["release_id"]
    assert current["model_version"] == downloads["model_version"]
    periods = api.get("/v1/periods").json()
    assert current["data_window"]["last_estimated"] == periods["last_estimated"]
    assert current["data_window"]["last_forecast"] == periods["last_forecast"]
    assert api.get(current["bundle"]).status_code == 200  # the pinned zip answers
    assert api.get("/v1/releases", headers={"If-None-Match": resp.headers["etag"]}).status_code == 304


def test_documented_python_snippet_reads_the_api(api: httpx.Client, downloads: dict):
    """docs/downloads.md's pandas/polars snippet, run as written against the local server."""
    import subprocess
    import sys

    text = (REPO_ROOT / "docs" / "downloads.md").read_text()
    section = text.split("## Read it from Python", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    env = {"BASE_URL": str(api.base_url).rstrip("/"),
           "API_KEY": api.headers["authorization"].split(" ", 1)[1], "PATH": "/usr/bin:/bin"}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert f"release {downloads['release_id']} model {downloads['model_version']}" in run.stdout
    top = api.get("/v1/risk/lgas", params={"state": "KN"}).json()["lgas"][0]
    assert top["lga"] in run.stdout and "NG001001" in run.stdout  # the CSV route's head, the gazetteer's
    assert "states 37" in run.stdout  # Nasarawa's code "NA" is not read as missing


def test_documented_r_snippet_reads_the_api(api: httpx.Client, downloads: dict):
    """docs/downloads.md's R snippet, run as written with Rscript (skipped where R or httr2 is absent)."""
    import shutil
    import subprocess

    rscript = shutil.which("Rscript")
    if rscript is None or subprocess.run([rscript, "-e", "library(httr2)"], capture_output=True).returncode:
        pytest.skip("Rscript with httr2 is not installed")
    text = (REPO_ROOT / "docs" / "downloads.md").read_text()
    code = text.split("## Read it from R", 1)[1].split("```r\n", 1)[1].split("```", 1)[0]
    env = {"BASE_URL": str(api.base_url).rstrip("/"),
           "API_KEY": api.headers["authorization"].split(" ", 1)[1], "PATH": "/usr/bin:/bin", "HOME": "/tmp"}
    run = subprocess.run([rscript, "-e", code], env=env, capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr
    assert f"release {downloads['release_id']} model {downloads['model_version']}" in run.stdout
    top = api.get("/v1/risk/lgas", params={"state": "KN"}).json()["lgas"][0]
    assert top["lga"] in run.stdout and "states 37" in run.stdout


@pytest.fixture(scope="module")
def unzipped(api: httpx.Client, downloads: dict, tmp_path_factory: pytest.TempPathFactory) -> Path:
    import zipfile

    out = tmp_path_factory.mktemp("bundle")
    with zipfile.ZipFile(io.BytesIO(_file(api, downloads, "malaria_risk_nigeria.zip"))) as z:
        z.extractall(out)
    # everything in one folder, named by the release
    assert [p.name for p in out.iterdir()] == [f"malaria-risk-nigeria-{downloads['release_id']}"]
    return out / f"malaria-risk-nigeria-{downloads['release_id']}"


def test_zip_matches_sha256sums_and_the_index(unzipped: Path, downloads: dict):
    sums = dict(reversed(line.split("  ", 1)) for line in (unzipped / "SHA256SUMS").read_text().splitlines())
    on_disk = {p.name for p in unzipped.iterdir()}
    assert set(sums) == on_disk - {"SHA256SUMS"}
    index = {f["name"]: f for f in downloads["files"]}
    assert set(index) == on_disk | {"malaria_risk_nigeria.zip"}
    for name in on_disk:
        digest = hashlib.sha256((unzipped / name).read_bytes()).hexdigest()
        assert digest == index[name]["sha256"] and sums.get(name, digest) == digest
    readme = (unzipped / "README.md").read_text()
    assert downloads["release_id"] in readme and downloads["model_version"] in readme and "Licence" in readme


def test_datapackage_is_valid_and_describes_every_column(unzipped: Path, downloads: dict):
    import frictionless

    report = frictionless.validate(str(unzipped / "datapackage.json"))
    assert report.valid, report.flatten(["resourcePath", "type", "note"])[:5]
    package = orjson.loads((unzipped / "datapackage.json").read_bytes())
    assert package["id"] == downloads["release_id"] and package["licenses"] and package["sources"]
    paths = {r["path"] for r in package["resources"]}
    assert paths == {p.name for p in unzipped.iterdir()} - {"datapackage.json", "README.md", "SHA256SUMS"}
    for res in package["resources"]:
        assert res["sources"], res["name"]
        if res["path"].endswith(".csv"):
            header = (unzipped / res["path"]).read_text().split("\r\n", 1)[0].split("\n", 1)[0].split(",")
            assert [f["name"] for f in res["schema"]["fields"]] == header
            for f in res["schema"]["fields"]:
                assert f["description"], (res["name"], f["name"])


def test_parquet_reads_back_with_the_documented_schema(unzipped: Path):
    import polars as pl
    import shapely

    package = orjson.loads((unzipped / "datapackage.json").read_bytes())
    kinds = {"integer": "is_integer", "number": "is_float"}
    for res in package["resources"]:
        if not res["path"].endswith(".csv"):
            continue
        frame = pl.read_parquet(unzipped / res["path"].replace(".csv", ".parquet"))
        fields = res["schema"]["fields"]
        assert frame.columns == [f["name"] for f in fields]
        for f in fields:
            dtype = frame.schema[f["name"]]
            if f["type"] in kinds:
                assert getattr(dtype, kinds[f["type"]])(), (res["name"], f["name"], dtype)
            elif f["type"] == "boolean":
                assert dtype == pl.Boolean
            else:
                assert dtype == pl.String, (res["name"], f["name"], dtype)
        from_csv = pl.read_csv(unzipped / res["path"], schema=frame.schema, null_values=[""],
                               truncate_ragged_lines=False)
        assert from_csv.equals(frame), res["name"]
    for stem, n in (("lga_outlines", 774), ("state_outlines", 37)):
        meta = pl.read_parquet_metadata(unzipped / f"{stem}.parquet")
        geo = orjson.loads(meta["geo"])
        assert geo["version"].startswith("1.") and geo["primary_column"] == "geometry"
        assert geo["columns"]["geometry"]["encoding"] == "WKB"
        frame = pl.read_parquet(unzipped / f"{stem}.parquet")
        feats = orjson.loads((unzipped / f"{stem}.geojson").read_bytes())["features"]
        assert frame.height == len(feats) == n
        wkb = shapely.from_wkb(frame["geometry"].to_list())
        served = shapely.from_geojson([orjson.dumps(f["geometry"]) for f in feats])
        assert shapely.equals_exact(wkb, served).all()
        assert frame["state_code"].to_list() == [f["properties"]["state_code"] for f in feats]


def test_download_index_matches_its_openapi_schema(downloads: dict):
    import jsonschema

    from pipeline.site.openapi import openapi_document

    doc = openapi_document()
    schema = {**doc["paths"]["/v1/downloads"]["get"]["responses"]["200"]["content"]["application/json"]["schema"],
              "components": doc["components"]}
    jsonschema.validate(downloads, schema, cls=jsonschema.Draft202012Validator)
    bad = {**downloads, "files": [{**downloads["files"][0], "sha256": "xyz"}]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema, cls=jsonschema.Draft202012Validator)
