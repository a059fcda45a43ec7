"""A five-LGA, two-state Geography for model and rainfall tests.

Kano (3 LGAs, one urban) and Nasarawa (2 LGAs), with a repeated LGA name across the
two states ("Nasarawa") so name matching must use the state; outlines are unit boxes
around each LGA's representative point.
"""

from __future__ import annotations

import polars as pl
from shapely.geometry import box

from pipeline.geography import Geography


def small_geo() -> Geography:
    """Two states: Kano-like (3 LGAs, one shared name "Nasarawa") and Nasarawa (2 LGAs)."""
    states = pl.DataFrame(
        {
            "state_code": ["KN", "NA"],
            "state": ["Kano", "Nasarawa"],
            "zone": ["North West", "North Central"],
            "ocha_pcode": ["NG020", "NG026"],
            "lgas": [3, 2],
            "population": [600, 300],
            "area_km2": [30.0, 30.0],
        }
    )
    lgas = pl.DataFrame(
        {
            "lga_code": ["NG020001", "NG020002", "NG020003", "NG026001", "NG026002"],
            "lga": ["Fagge", "Nasarawa", "Takai", "Nasarawa", "Obi"],
            "state_code": ["KN", "KN", "KN", "NA", "NA"],
            "eha_code": ["1", "2", "3", "4", "5"],
            "population": [300, 200, 100, 100, 200],
            "area_km2": [5.0, 10.0, 15.0, 10.0, 20.0],
            "density_per_km2": [60.0, 20.0, 6.7, 10.0, 10.0],
            "is_urban": [True, False, False, False, False],
            "rep_lon": [0.5, 1.5, 2.5, 10.5, 11.5],
            "rep_lat": [0.5, 0.5, 0.5, 0.5, 0.5],
        }
    )
    outlines = {c: box(x - 0.5, 0, x + 0.5, 1) for c, x in zip(lgas["lga_code"], lgas["rep_lon"], strict=True)}
    cw = lgas.select("lga_code", "eha_code", pl.lit("fixture").alias("method"), pl.lit("").alias("note"))
    return Geography(states, lgas, outlines, cw)
