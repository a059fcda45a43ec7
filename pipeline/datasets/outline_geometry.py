"""What the served outlines (`/v1/boundaries/lgas`, pipeline.datasets.boundaries) and the map's
screen-scale outlines (pipeline.datasets.map_outlines) share: their source line and how a geometry
becomes GeoJSON. A module of its own, so each of the two imports it and neither the other's producer."""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import shapely

# Coordinates are published at the simplified file's precision (~1 m); more digits would
# only add bytes, fewer would move shared edges apart.
COORDINATE_DECIMALS = 5

SOURCE = (
    "LGA outlines: eHealth Africa / GRID3 Nigeria LGA boundaries (eHA GeoServer layer "
    "sv_local_government_areas, 2019), simplified with shared edges kept (tolerance 0.002 degrees). "
    "Upstream eHA/GRID3 boundary data are usually released under CC BY 4.0; the licence of the copy "
    "used here is not verified. Credit: eHealth Africa, GRID3 Nigeria. LGA codes (lgaCode) and names "
    "are OCHA COD-AB Nigeria p-codes and names (OCHA / OSGOF, CC BY-IGO); each OCHA LGA is linked to "
    "the eHA outline containing its OCHA centroid, or by name within the state where position is ambiguous."
)


def geometry_json(geometries: np.ndarray, decimals: int = COORDINATE_DECIMALS) -> list[dict[str, Any]]:
    """GeoJSON geometry objects (nested coordinate lists), rounded and oriented.

    Exterior rings are made counter-clockwise as RFC 7946 recommends, since some web
    map libraries fill by winding order. Rounding is done on the coordinate array in
    one vectorised call; GEOS then writes the JSON.
    """
    oriented = shapely.orient_polygons(np.asarray(geometries, dtype=object), exterior_cw=False)
    rounded = shapely.transform(oriented, lambda xy: np.round(xy, decimals))
    return [orjson.loads(text) for text in shapely.to_geojson(rounded)]
