"""Producer of `/v1/boundaries/lgas`: one GeoJSON FeatureCollection of LGA outlines per state.

Outlines are the simplified eHA/GRID3 shapes (coverage-simplified, so neighbours still
share edges), labelled with the OCHA p-code and name the rest of the API uses, so a
client can join a map to any other endpoint on `lgaCode` = `lga_code`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson

from edge.files import NAMES_KEY
from pipeline import cache
from pipeline.datasets.base import BuildContext, Produced
from pipeline.datasets.map_outlines import GEOJSON, map_outlines
from pipeline.datasets.names import names_file
from pipeline.datasets.outline_geometry import COORDINATE_DECIMALS, SOURCE, geometry_json
from pipeline.geography import Geography

ROUTE = "/v1/boundaries/lgas"

def feature_collections(geography: Geography) -> dict[tuple[str, ...], dict[str, Any]]:
    """One FeatureCollection per state code, features sorted by lgaCode."""
    lgas = geography.lgas.select("lga_code", "lga", "state_code").sort("lga_code")
    codes = lgas["lga_code"].to_list()
    geoms = geometry_json(np.array([geography.outlines[c] for c in codes], dtype=object))
    by_state: dict[tuple[str, ...], dict[str, Any]] = {
        (s,): {"type": "FeatureCollection", "source": SOURCE, "features": []}
        for s in geography.states["state_code"].to_list()
    }
    for (code, name, state), geom in zip(lgas.iter_rows(), geoms, strict=True):
        by_state[(state,)]["features"].append(
            {"type": "Feature", "properties": {"lgaCode": code, "lga": name, "state": state}, "geometry": geom}
        )
    return by_state


def produce(ctx: BuildContext) -> Produced:
    # the outlines change only with admin/ (what the geography is read from) and the code: kept between
    # builds (pipeline.cache), so a new month does not orient, round and simplify 774 outlines again
    return cache.cached("boundaries", ctx.data_dir, ["admin"],
                        cache.code_of("pipeline.datasets.boundaries", "pipeline.datasets.map_outlines",
                                      "pipeline.datasets.outline_geometry", "pipeline.datasets.names", "pipeline.datasets.base", "pipeline.geography",
                                      "pipeline.sources", "edge"),
                        lambda: outlines(ctx.geography), local=True)


def outlines(geography: Geography) -> Produced:
    states = sorted(geography.states["state_code"].to_list())
    return Produced(
        dataset="geography",
        documents={ROUTE: feature_collections(geography)},
        facts={"states": states},
        files={NAMES_KEY: names_file(geography),  # the edge's suggestions for names (datasets/names.py)
               # the map's screen-scale outlines (public site assets, docs/map/…)
               **{key: (GEOJSON, orjson.dumps(doc)) for key, doc in map_outlines(geography).items()}},
    )


__all__ = ["COORDINATE_DECIMALS", "ROUTE", "SOURCE", "feature_collections", "geometry_json", "produce"]
