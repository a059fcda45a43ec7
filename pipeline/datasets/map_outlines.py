"""Outlines at screen scale for the risk map (`docs/map/…`): one light file of the 37 states for the
country view, one per state of its LGAs for the state view.

Why a second set beside `/v1/boundaries/lgas`: the served outlines keep every vertex of the source's
0.002-degree simplification (about 200 m), which a map on a screen cannot show; the map would fetch
them all (500 KB compressed) to draw a country it shows 1 px to 2 km. These files keep what a screen
shows at the zoom the map opens them at, and nothing more (docs/geography.md#map-outlines).

Simplification is `shapely.coverage_simplify`: the outlines are a coverage (neighbours share edges),
and simplifying the coverage as a whole keeps every shared edge shared, so no slivers or gaps open
between neighbours, and every polygon stays valid (the topology is preserved, as
`simplify(preserve_topology=True)` would for one polygon alone). One call per set, vectorised in GEOS.

The files are public (the site's own assets, served without a key): they are pictures of the
outlines at screen scale; the outlines for analysis (full precision, the `lga_boundaries` scope) stay
behind the key, and the whole-country files are in the bundle.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import shapely

from pipeline.datasets.outline_geometry import SOURCE, geometry_json
from pipeline.geography import Geography

GEOJSON = "application/geo+json"
PREFIX = "docs/map/"
STATES_KEY = PREFIX + "states.geojson"

# Country view: Nigeria (12 degrees of longitude, 10 of latitude) fits a map of at most ~1,000 by 600
# CSS px, so one pixel there is 0.015-0.02 degrees. Coverage simplification at 0.015 moves no state
# edge by more than ~0.025 degrees (~1.3 px; the median edge ~0.017, under one pixel).
STATE_TOLERANCE = 0.015
STATE_DECIMALS = 3  # ~110 m: a twentieth of a pixel in the country view
# State view: the map fits the chosen state into a frame of ~500-900 CSS px, so one pixel is about
# its extent / 600 degrees. The tolerance is half of that (extent / 1200), never finer than the
# source's own 0.002: the lines of 773 of 774 LGAs then stay within one pixel (the other loses a
# sliver thinner than the grid), 0.03 px on average at most (tests/pipeline/datasets/test_map_outlines.py).
LGA_PIXELS = 1200
PIXEL_OF_EXTENT = 600  # one CSS pixel of the state view is the state's extent / 600 degrees
LGA_MIN_TOLERANCE = 0.002
LGA_DECIMALS = 4  # ~11 m: a twentieth of a pixel in the closest state view (a 0.8-degree state)


def lga_key(state_code: str) -> str:
    return f"{PREFIX}lgas/{state_code}.geojson"


def state_tolerance(extent_degrees: float) -> float:
    """The LGA tolerance of one state's file from its larger side, in degrees."""
    return max(LGA_MIN_TOLERANCE, extent_degrees / LGA_PIXELS)


def _extent(geoms: np.ndarray) -> float:
    xmin, ymin, xmax, ymax = shapely.total_bounds(geoms)
    return float(max(xmax - xmin, ymax - ymin))


def map_outlines(geography: Geography) -> dict[str, dict[str, Any]]:
    """Release key -> GeoJSON FeatureCollection: the states file and one LGA file per state.

    The states file also lists each state's LGAs (code and name), so the map's LGA list works
    from the country view without another request.
    """
    lgas = geography.lgas.select("lga_code", "lga", "state_code").sort("lga_code")
    codes = np.array(lgas["lga_code"].to_list())
    names = np.array(lgas["lga"].to_list())
    of_state = np.array(lgas["state_code"].to_list())
    shapes = np.array([geography.outlines[c] for c in codes], dtype=object)
    states = geography.states.select("state_code", "state").sort("state_code")
    out: dict[str, dict[str, Any]] = {}
    unions = []
    for code, name in states.iter_rows():
        mask = of_state == code
        tolerance = state_tolerance(_extent(shapes[mask]))
        # snapped to the published grid (rounding alone can make a thin part cross itself); shared
        # vertices snap alike, so neighbours still share their edges
        simple = shapely.set_precision(shapely.coverage_simplify(shapes[mask], tolerance), 10.0 ** -LGA_DECIMALS)
        outline = shapely.coverage_union_all(simple)
        unions.append(shapely.coverage_union_all(shapes[mask]))
        geoms = geometry_json(np.concatenate([simple, np.array([outline], dtype=object)]), LGA_DECIMALS)
        out[lga_key(code)] = {
            "type": "FeatureCollection",
            "source": SOURCE,
            "state_code": code, "state": name,
            "simplified": {"method": "shapely.coverage_simplify", "tolerance_degrees": round(tolerance, 6),
                           "decimals": LGA_DECIMALS},
            # the state's own edge, from the same simplified LGAs, so it lies exactly on theirs
            "state_outline": geoms[-1],
            "features": [{"type": "Feature", "properties": {"lga_code": c, "lga": n, "state_code": code},
                          "geometry": gj} for c, n, gj in zip(codes[mask], names[mask], geoms[:-1], strict=True)],
        }
    simple_states = shapely.set_precision(shapely.coverage_simplify(np.array(unions, dtype=object), STATE_TOLERANCE),
                                          10.0 ** -STATE_DECIMALS)
    state_geoms = geometry_json(simple_states, STATE_DECIMALS)
    out[STATES_KEY] = {
        "type": "FeatureCollection",
        "source": SOURCE + " State outlines are the union of their LGAs' outlines.",
        "simplified": {"method": "shapely.coverage_simplify", "tolerance_degrees": STATE_TOLERANCE,
                       "decimals": STATE_DECIMALS},
        "features": [{"type": "Feature", "properties": {
            "state_code": code, "state": name,
            "lgas": [[c, n] for c, n in zip(codes[of_state == code], names[of_state == code], strict=True)],
        }, "geometry": gj} for (code, name), gj in zip(states.iter_rows(), state_geoms, strict=True)],
    }
    return out


__all__ = ["GEOJSON", "LGA_DECIMALS", "STATES_KEY", "STATE_TOLERANCE", "lga_key", "map_outlines", "state_tolerance"]
