"""Boundaries producer: FeatureCollection shape (SPEC 2.9 and section 4), order, precision."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import polars as pl
import pytest
import shapely

from pipeline.datasets import boundaries
from pipeline.datasets.base import BuildContext
from pipeline.geography import Geography, load_geography
from tests.paths import DATA_DIR
from tests.paths import needs_data as real_data

needs_data = real_data("admin/lgas.csv")


def small_geography() -> Geography:
    """Two states, three LGAs; LGA codes deliberately not in name order or insertion order."""
    states = pl.DataFrame(
        {"state_code": ["AA", "BB"], "state": ["Alpha", "Beta"], "zone": ["North West", "South West"],
         "ocha_pcode": ["NG001", "NG002"], "lgas": [2, 1], "population": [300, 50], "area_km2": [2.0, 1.0]}
    )
    lgas = pl.DataFrame(
        {"lga_code": ["NG001002", "NG001001", "NG002001"], "lga": ["Zed", "Ant", "Solo"],
         "state_code": ["AA", "AA", "BB"], "eha_code": ["2", "1", "3"], "population": [100, 200, 50],
         "area_km2": [1.0, 1.0, 1.0], "density_per_km2": [100.0, 200.0, 50.0], "is_urban": [False, False, False],
         "rep_lon": [0.5, 1.5, 5.5], "rep_lat": [0.5, 0.5, 0.5]}
    )
    # A clockwise exterior with more decimals than published, to check orientation and rounding.
    cw = shapely.Polygon([(0, 0), (0, 1.123456789), (1, 1), (1, 0)])
    outlines = {
        "NG001002": cw,
        "NG001001": shapely.MultiPolygon([shapely.box(1, 0, 2, 1), shapely.box(3, 0, 3.5, 0.5)]),
        "NG002001": shapely.box(5, 0, 6, 1),
    }
    crosswalk = pl.DataFrame({"lga_code": lgas["lga_code"], "eha_code": lgas["eha_code"],
                              "method": ["centroid"] * 3, "note": [""] * 3})
    return Geography(states=states, lgas=lgas, outlines=outlines, crosswalk=crosswalk)


def test_produce_shape_and_order() -> None:
    out = boundaries.produce(BuildContext(Path("."), "2024-01-01T00:00:00Z", geography=small_geography()))
    assert out.dataset == "geography"
    assert out.facts == {"states": ["AA", "BB"]}
    docs = out.documents[boundaries.ROUTE]
    assert set(docs) == {("AA",), ("BB",)}
    aa = docs[("AA",)]
    assert list(aa) == ["type", "source", "features"]
    assert aa["type"] == "FeatureCollection"
    assert "eHealth Africa" in aa["source"] and "GRID3" in aa["source"] and "CC BY-IGO" in aa["source"]
    assert "not verified" in aa["source"]
    # Sorted by lgaCode, not by name or input order.
    assert [f["properties"]["lgaCode"] for f in aa["features"]] == ["NG001001", "NG001002"]
    first = aa["features"][0]
    assert list(first) == ["type", "properties", "geometry"]
    assert first["type"] == "Feature"
    assert first["properties"] == {"lgaCode": "NG001001", "lga": "Ant", "state": "AA"}
    assert first["geometry"]["type"] == "MultiPolygon"
    assert [f["properties"]["state"] for f in docs[("BB",)]["features"]] == ["BB"]


def test_coordinates_rounded_lists_and_counter_clockwise() -> None:
    docs = boundaries.produce(BuildContext(Path("."), "t", geography=small_geography())).documents[boundaries.ROUTE]
    zed = docs[("AA",)]["features"][1]["geometry"]
    assert zed["type"] == "Polygon"
    ring = zed["coordinates"][0]
    assert isinstance(zed["coordinates"], list) and all(isinstance(p, list) for p in ring)
    assert [0.0, 1.12346] in ring  # 1.123456789 rounded to 5 decimals
    # RFC 7946: exterior ring counter-clockwise (positive signed area).
    assert shapely.Polygon(ring).exterior.is_ccw
    # orjson writes them as plain arrays.
    assert b'"coordinates":[[[' in orjson.dumps(zed)


def test_geometry_json_roundtrips_area() -> None:
    geom = shapely.box(7.123454, 5.0, 7.5, 5.25)
    (out,) = boundaries.geometry_json(np.array([geom], dtype=object))
    assert shapely.geometry.shape(out).area == pytest.approx(geom.area, rel=1e-4)


@needs_data
def test_real_boundaries() -> None:
    geo = load_geography(DATA_DIR)
    out = boundaries.produce(BuildContext(DATA_DIR, "t", geography=geo))
    docs = out.documents[boundaries.ROUTE]
    assert len(docs) == 37 and out.facts["states"] == sorted(k[0] for k in docs)
    assert len(docs[("KN",)]["features"]) == 44
    codes = [f["properties"]["lgaCode"] for d in docs.values() for f in d["features"]]
    assert len(codes) == 774 and len(set(codes)) == 774
    for (state,), doc in docs.items():
        props = [f["properties"] for f in doc["features"]]
        assert all(p["state"] == state for p in props)
        assert [p["lgaCode"] for p in props] == sorted(p["lgaCode"] for p in props)
    shapes = [shapely.geometry.shape(f["geometry"]) for d in docs.values() for f in d["features"]]
    assert all(s.is_valid for s in shapes)
    # Longitude/latitude order and Nigeria's bounding box (SOURCES: lon 2.69-14.68, lat 4.27-13.89).
    minx, miny, maxx, maxy = shapely.total_bounds(np.array(shapes, dtype=object))
    assert 2.6 < minx < 2.8 and 14.6 < maxx < 14.7 and 4.2 < miny < 4.3 and 13.8 < maxy < 13.9
    # A label point of Kano Municipal lies inside its published outline.
    kano = geo.lgas.filter(pl.col("lga") == "Kano Municipal").row(0, named=True)
    feature = next(f for f in docs[("KN",)]["features"] if f["properties"]["lgaCode"] == kano["lga_code"])
    assert shapely.geometry.shape(feature["geometry"]).buffer(0.01).contains(shapely.Point(kano["rep_lon"], kano["rep_lat"]))
    raw = orjson.dumps(docs[("KN",)])
    assert len(raw) < 400_000
