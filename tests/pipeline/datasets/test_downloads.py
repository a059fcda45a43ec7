"""The bundle producer on small made-up documents: table shapes, column order, new fields, stamping.

The real bundle (every file, frictionless validation, equality with the API) is checked on the
real build in tests/test_end_to_end.py.
"""

from __future__ import annotations

import hashlib
import io
import zipfile

import orjson
import polars as pl
import shapely
from shapely.geometry import box, mapping

from edge.routes import CSV
from pipeline.datasets import downloads as d

PERIODS = {"last_estimated": "2024-02", "months": [
    {"period": "2024-01", "kind": "estimated", "provisional": False},
    {"period": "2024-02", "kind": "estimated", "provisional": True},
    {"period": "2024-03", "kind": "forecast", "provisional": False},
    {"period": "2024-04", "kind": "forecast", "provisional": False},
]}


def _lga(code: str, score: float, **extra: object) -> dict:
    return {"lga_code": code, "lga": code.lower(), "score": score, "score_low": score / 2,
            "score_high": score * 2, "level": "low", "is_urban": False, "population": 10, **extra}


def _est(period: str, extra: dict | None = None) -> dict:
    return {"period": period, "kind": "estimated", "state_code": "KN", "state": "Kano",
            "lgas": [_lga("NG020002", 0.2, **(extra or {})), _lga("NG020001", 0.1, **(extra or {}))]}


FC = {"forecasts": [{"period": p, "kind": "forecast", "state_code": "KN", "state": "Kano",
                     "lgas": [_lga("NG020001", 0.3), _lga("NG020002", 0.4)]} for p in ("2024-03", "2024-04")]}


def test_risk_table_order_kind_horizon_and_provisional():
    df = d.risk_table([_est("2024-01"), _est("2024-02")], [FC], PERIODS, "risk_lga_month")
    assert df.columns[:11] == list(d.LEAD["risk_lga_month"])
    assert df.height == 2 * 4
    # newest first within an area: the forecast rows, which carry `horizon`, lead the file
    assert df.select("lga_code", "period").rows()[:4] == [("NG020001", p) for p in
                                                         ("2024-04", "2024-03", "2024-02", "2024-01")]
    assert df["kind"].to_list()[:4] == ["forecast", "forecast", "estimated", "estimated"]
    assert df["horizon"].to_list()[:4] == [2, 1, None, None]
    assert df["provisional"].to_list()[:4] == [False, False, True, False]
    row = df.filter(pl.col("lga_code") == "NG020002", pl.col("period") == "2024-04").row(0, named=True)
    assert (row["score"], row["score_low"], row["score_high"]) == (0.4, 0.2, 0.8)


def test_a_field_the_api_gains_flows_into_the_table_after_the_agreed_columns():
    df = d.risk_table([_est("2024-01", {"new_figure": 1.5}), _est("2024-02", {"new_figure": None})], [FC],
                      PERIODS, "risk_lga_month")
    assert df.columns[:11] == list(d.LEAD["risk_lga_month"]) and "new_figure" in df.columns[11:]
    assert df.schema["new_figure"] == pl.Float64
    assert sorted(df["new_figure"].drop_nulls().to_list()) == [1.5, 1.5]


def test_transmission_is_one_row_per_area_and_calendar_month():
    season = {"peak_month": 9, "season_start_month": 8, "season_end_month": 10, "season_months": 3,
              "high_months": [8, 9, 10], "seasonal_index": [i / 12 for i in range(12)]}
    docs = {
        "/v1/transmission/lgas": {("KN",): {"state_code": "KN", "state": "Kano", "lgas": [
            {"lga_code": "NG020001", "lga": "a", **season, "typical_rainfall_mm": [float(i) for i in range(12)]}]}},
        "/v1/transmission/states": {(): {
            "national": {"season": season, "survey_trend": [{"survey_year": 2021, "positivity": 0.2, "low": None,
                                                             "high": None, "urban": 0.1, "rural": 0.3}]},
            "states": [{"state_code": "KN", "state": "Kano", "zone": "North West", "season": season,
                        "survey_trend": [{"survey_year": 2021, "positivity": 0.25, "low": 0.2, "high": 0.3}]}],
        }},
    }
    lga, state, survey = d.transmission_tables(docs)
    assert lga.columns[:7] == list(d.LEAD["transmission_lga_month"]) and "high_months" not in lga.columns
    assert lga["month"].to_list() == list(range(1, 13))
    assert lga["typical_rainfall_mm"].to_list() == [float(i) for i in range(12)]
    assert lga.filter(pl.col("high_season"))["month"].to_list() == [8, 9, 10]
    assert state.height == 24 and state["area_type"].unique(maintain_order=True).to_list() == ["national", "state"]
    assert state.filter(pl.col("area_type") == "national")["state_code"].to_list() == [d.NATIONAL_CODE] * 12 == ["NG"] * 12
    assert survey.columns[:7] == list(d.LEAD["survey_trend"]) and survey.height == 2
    assert survey.filter(pl.col("area_type") == "state")["urban"].to_list() == [None]


def test_geoparquet_holds_wkb_and_the_geo_metadata():
    coll = {"type": "FeatureCollection", "features": [
        {"type": "Feature", "properties": {"state_code": "KN", "state": "Kano"}, "geometry": mapping(box(0, 0, 1, 1))},
        {"type": "Feature", "properties": {"state_code": "LA", "state": "Lagos"}, "geometry": mapping(box(2, 0, 3, 2))},
    ]}
    raw = d.geoparquet(orjson.loads(orjson.dumps(coll)))
    geo = orjson.loads(pl.read_parquet_metadata(io.BytesIO(raw))["geo"])
    assert geo["primary_column"] == "geometry" and geo["columns"]["geometry"]["encoding"] == "WKB"
    assert geo["columns"]["geometry"]["bbox"] == [0.0, 0.0, 3.0, 2.0]
    assert geo["columns"]["geometry"]["geometry_types"] == ["Polygon"] and "crs" not in geo["columns"]["geometry"]
    df = pl.read_parquet(io.BytesIO(raw))
    assert df.columns == ["state_code", "state", "geometry"]
    assert shapely.from_wkb(df["geometry"][1]).equals(box(2, 0, 3, 2))


def test_stamp_names_the_release_and_checksums_cover_every_file():
    files = [d.BundleFile("gazetteer.csv", CSV, b"lga_code\r\nNG020001\r\n", "gazetteer")]
    produced = d.bundle(files, "2026-11-22T10:00:00Z", "m-1", lambda rid: {"id": rid, "resources": []})
    assert set(produced.files) == {"downloads/gazetteer.csv"} and produced.stamp is not None
    docs, extra = produced.stamp("20261122T100000Z-0123abcd")
    assert set(extra) == {"downloads/datapackage.json", "downloads/README.md", "downloads/SHA256SUMS",
                          "downloads/malaria_risk_nigeria.zip"}
    index = docs["/v1/downloads"][()]
    assert index["release_id"] == "20261122T100000Z-0123abcd" and index["model_version"] == "m-1"
    assert [f["name"] for f in index["files"]] == ["gazetteer.csv", "datapackage.json", "README.md", "SHA256SUMS",
                                                   "malaria_risk_nigeria.zip"]
    everything = {"downloads/gazetteer.csv": files[0].data, **{k: v for k, (_, v) in extra.items()}}
    for f in index["files"]:
        data = everything[f"downloads/{f['name']}"]
        assert f["bytes"] == len(data) and f["sha256"] == hashlib.sha256(data).hexdigest()
        assert f["path"] == f"/v1/downloads/20261122T100000Z-0123abcd/{f['name']}"
    assert b"20261122T100000Z-0123abcd" in extra["downloads/README.md"][1]
    with zipfile.ZipFile(io.BytesIO(extra["downloads/malaria_risk_nigeria.zip"][1])) as z:
        # one folder, named by the package and the release: unpacking it leaves one folder where it is unpacked
        folder = "malaria-risk-nigeria-20261122T100000Z-0123abcd/"
        assert z.namelist() == [folder + n for n in ("gazetteer.csv", "datapackage.json", "README.md", "SHA256SUMS")]
        assert z.getinfo(folder + "gazetteer.csv").date_time == (2026, 11, 22, 10, 0, 0)
        sums = z.read(folder + "SHA256SUMS").decode().splitlines()
    assert sums[0] == hashlib.sha256(files[0].data).hexdigest() + "  gazetteer.csv" and len(sums) == 3
    again = produced.stamp("20261122T100000Z-0123abcd")[1]
    assert again == extra  # the same release id gives the same bytes


def test_each_table_credits_exactly_its_named_sources() -> None:
    """Credits are chosen by attribution key, not by a word of a source's name: the risk tables
    do not credit the net-use estimates, and the context tables do not credit the rainfall."""
    from pipeline import attribution
    from pipeline.datasets.downloads import TABLE_SOURCES, _sources

    for table, keys in TABLE_SOURCES.items():
        titles = [s["title"] for s in _sources(keys)]
        assert len(titles) == len(set(keys)), table  # every key names one credited source
    risk = {s["title"] for s in _sources(TABLE_SOURCES["risk_lga_month"])}
    itn = attribution.source("uw_sae_itn")
    assert f"{itn.name}: {itn.provider}" not in risk
    context = {s["title"] for s in _sources(TABLE_SOURCES["context_lga"])}
    chirps = attribution.source("chirps")
    assert f"{chirps.name}: {chirps.provider}" not in context
    assert len(_sources()) == len(attribution.SOURCES)


def test_readme_and_package_cite_the_release_by_absolute_address_and_state_the_licence():
    files = [d.BundleFile("gazetteer.csv", CSV, b"lga_code\r\nNG020001\r\n", "gazetteer")]
    produced = d.bundle(files, "2026-11-22T10:00:00Z", "m-1", None, "https://api.example.org")
    _, extra = produced.stamp("20261122T100000Z-0123abcd")
    readme = extra["downloads/README.md"][1].decode()
    citation = readme.split("## Citation\n\n", 1)[1].split("\n", 1)[0]
    assert "https://api.example.org/v1/downloads/20261122T100000Z-0123abcd/malaria_risk_nigeria.zip" in citation
    assert "m-1" in citation and "2026-11-22" in citation and "CC BY 4.0" in citation
    assert "## Licence" in readme and "creativecommons.org/licenses/by/4.0" in readme


def test_datapackage_declares_keys_and_the_derived_licence_first():
    frames = {
        "gazetteer": pl.DataFrame({"lga_code": ["NG020001"], "lga": ["Ajingi"], "state_code": ["KN"]}),
        "context_state": pl.DataFrame({"state_code": ["KN"], "state": ["Kano"]}),
        "risk_lga_month": pl.DataFrame({"lga_code": ["NG020001"], "state_code": ["KN"], "period": ["2024-01"]}),
    }
    outline = orjson.dumps({"type": "FeatureCollection", "features": []})
    files = d.table_files(frames) + [d.BundleFile(f"{stem}.{ext}", CSV, outline, stem)
                                     for stem in ("lga_outlines", "state_outlines") for ext in ("geojson", "parquet")]
    pkg = d.datapackage("r1", "m-1", "2026-11-22T10:00:00Z", frames, files, {}, "https://api.example.org")
    assert pkg["licenses"][0]["name"] == "CC-BY-4.0" and pkg["homepage"] == "https://api.example.org/docs/"
    assert pkg["x-citation"].startswith("Malaria risk data service for Nigeria, release r1 (model m-1)")
    by_name = {r["name"]: r for r in pkg["resources"]}
    assert by_name["risk_lga_month"]["schema"]["primaryKey"] == ["lga_code", "period"]
    assert by_name["risk_lga_month"]["schema"]["foreignKeys"] == [
        {"fields": "lga_code", "reference": {"resource": "gazetteer", "fields": "lga_code"}},
        {"fields": "state_code", "reference": {"resource": "context_state", "fields": "state_code"}}]
    assert by_name["gazetteer"]["schema"]["primaryKey"] == ["lga_code"]
    assert "primaryKey" not in by_name["gazetteer-parquet"]["schema"]  # a file resource: keys are the CSV's
