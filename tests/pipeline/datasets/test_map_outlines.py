"""The map's screen-scale outlines: every LGA once, valid shapes whose shared edges stay shared, and
no edge moved by more than a pixel at the scale the map shows it (docs/geography.md#map-outlines)."""

from __future__ import annotations

import gzip
from typing import Any

import numpy as np
import orjson
import pytest
import shapely

from edge.files import NAMES_KEY
from pipeline.datasets import boundaries, map_outlines
from pipeline.datasets.base import BuildContext
from pipeline.geography import Geography, load_geography
from tests.paths import DATA_DIR
from tests.paths import needs_data as real_data

needs_data = real_data("admin/lgas.csv")


@pytest.fixture(scope="module")
def geo() -> Geography:
    return load_geography(DATA_DIR)


@pytest.fixture(scope="module")
def files(geo: Geography) -> dict[str, dict[str, Any]]:
    return map_outlines.map_outlines(geo)


def shapes(collection: dict[str, Any]) -> np.ndarray:
    return shapely.from_geojson([orjson.dumps(f["geometry"]) for f in collection["features"]])


@needs_data
def test_every_lga_once_and_the_states_list_them(geo: Geography, files: dict[str, dict[str, Any]]) -> None:
    states = files[map_outlines.STATES_KEY]
    assert sorted(f["properties"]["state_code"] for f in states["features"]) == sorted(geo.states["state_code"])
    listed = {c for f in states["features"] for c, _ in f["properties"]["lgas"]}
    drawn: list[str] = []
    for code in geo.states["state_code"]:
        doc = files[map_outlines.lga_key(code)]
        props = [f["properties"] for f in doc["features"]]
        assert {p["state_code"] for p in props} == {code} and doc["state_code"] == code
        drawn += [p["lga_code"] for p in props]
    assert sorted(drawn) == sorted(listed) == sorted(geo.lgas["lga_code"])  # 774, each once
    assert len(files) == 1 + geo.states.height


@needs_data
def test_shapes_are_valid_and_neighbours_share_their_edges(files: dict[str, dict[str, Any]]) -> None:
    for key, doc in files.items():
        geoms = shapes(doc)
        assert shapely.is_valid(geoms).all(), key
        assert shapely.coverage_is_valid(geoms), key  # no overlaps: shared edges are the same line
    # a state's own edge is the union of its simplified LGAs (the line the map draws over them)
    kn = files[map_outlines.lga_key("KN")]
    outline = shapely.from_geojson(orjson.dumps(kn["state_outline"]))
    union = shapely.union_all(shapes(kn))
    assert shapely.symmetric_difference(outline, union).area < 1e-6 * union.area


@needs_data
def test_no_edge_moves_more_than_a_pixel(geo: Geography, files: dict[str, dict[str, Any]]) -> None:
    """At the state view's scale (a pixel is the state's extent / 600): the lines of 99 % of LGAs stay
    within a pixel of the originals, and every LGA's within half a pixel on average (the area between
    old and new lines over their length). Snapping to the published grid may drop a sliver thinner than
    the grid (11 m), whose far end then counts as a long move while no pixel changes."""
    lgas = geo.lgas.sort("lga_code")
    of_state = np.array(lgas["state_code"].to_list())
    full = np.array([geo.outlines[c] for c in lgas["lga_code"]], dtype=object)
    worst, within = [], 0
    for code in geo.states["state_code"]:
        original = full[of_state == code]
        xmin, ymin, xmax, ymax = shapely.total_bounds(original)
        pixel = max(xmax - xmin, ymax - ymin) / map_outlines.PIXEL_OF_EXTENT
        simple = shapes(files[map_outlines.lga_key(code)])
        moved = shapely.hausdorff_distance(shapely.boundary(simple), shapely.boundary(original))
        within += int((moved <= pixel).sum())
        mean = shapely.area(shapely.symmetric_difference(simple, original)) / shapely.length(shapely.boundary(original))
        worst.append(float((mean / pixel).max()))
    print(f"\nLGAs within a pixel: {within}/{len(full)}; largest mean shift {max(worst):.2f} px")
    assert within >= 0.99 * len(full), within
    assert max(worst) <= 0.5, max(worst)
    # the country view: one pixel is at least 0.015 degrees; no state edge moves by two
    states = files[map_outlines.STATES_KEY]
    originals = [shapely.union_all(full[of_state == f["properties"]["state_code"]]) for f in states["features"]]
    moved = shapely.hausdorff_distance(shapely.boundary(shapes(states)), shapely.boundary(np.array(originals)))
    assert moved.max() <= 2 * map_outlines.STATE_TOLERANCE, moved.max()
    assert np.median(moved) <= 0.02


@needs_data
def test_simplified_for_the_screen_and_shipped_with_the_site(geo: Geography, files: dict[str, dict[str, Any]]) -> None:
    """Lighter than the served outlines, and in the build as public site files."""
    states = len(gzip.compress(orjson.dumps(files[map_outlines.STATES_KEY])))
    served = boundaries.feature_collections(geo)
    every_lga = sum(len(gzip.compress(orjson.dumps(d))) for d in served.values())
    assert states < every_lga / 10
    assert shapely.get_num_coordinates(shapes(files[map_outlines.STATES_KEY])).sum() < 10_000
    out = boundaries.produce(BuildContext(DATA_DIR, "t", geography=geo))
    shipped = {k: v for k, v in out.files.items() if k.startswith("docs/map/")}
    assert set(shipped) == set(files)
    assert all(ctype == map_outlines.GEOJSON for ctype, _ in shipped.values())
    assert set(out.files) - set(shipped) == {NAMES_KEY}  # the only other file: the edge's names index


def test_the_tolerance_follows_the_states_size() -> None:
    assert map_outlines.state_tolerance(0.5) == map_outlines.LGA_MIN_TOLERANCE  # never finer than the source
    assert map_outlines.state_tolerance(6.0) == pytest.approx(6.0 / map_outlines.LGA_PIXELS)
