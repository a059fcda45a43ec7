"""Reader of the NDHS 2018 microscopy results per LGA from the Nigeria HBHI modelling
repository (`malaria/hbhi_lga_pfpr_2018/`, see its SOURCES.md).

Only the number of children with a microscopy result is used, summed per state, as a
lower bound of the survey's sample: the file covers the 8,118 children in clusters
that were matched to an LGA, fewer than the survey tested. The per-LGA positivity
rests on 1 to 108 children and is never published.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipeline.errors import InputError
from pipeline.sources._csv import read_text_columns

LGA_CSV = Path("malaria") / "hbhi_lga_pfpr_2018" / "lga_2018_microscopy_with_state.csv"
SURVEY_YEAR = 2018


def read_lga_children(path: Path) -> pl.DataFrame:
    """Columns `lga` (HBHI spelling), `state` (name as written), `children` (unweighted
    children with a microscopy result), `row`."""
    frame = (
        read_text_columns(path, ["LGA", "State", "n"])
        .with_row_index("row", offset=2)
        .with_columns(pl.col("row").cast(pl.Int64))
    )
    out = frame.select(
        pl.col("LGA").alias("lga"),
        pl.col("State").alias("state"),
        pl.col("n").cast(pl.Int64, strict=False).alias("children"),
        "row",
    )
    checks = [
        (pl.col("children").is_null() | (pl.col("children") < 1), "n is not a positive whole number"),
        (pl.col("state").is_null() | (pl.col("state") == ""), "State is empty"),
        (~pl.col("lga").is_first_distinct(), "LGA appears more than once"),
    ]
    for cond, reason in checks:
        bad = out.filter(cond)
        if bad.height:
            raise InputError(path, reason, row=int(bad["row"][0]))
    return out
