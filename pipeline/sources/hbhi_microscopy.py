"""Reader of the NDHS 2018 microscopy results per LGA from the Nigeria HBHI modelling
repository (`malaria/hbhi_lga_pfpr_2018/`, see its SOURCES.md).

The one reader of this file. The number of children with a microscopy result, summed per
state, is a lower bound of the survey's sample (the file covers the 8,118 children in
clusters that were matched to an LGA, fewer than the survey tested) and weights the 2018
round in the baseline; the per-LGA positivity (1 to 108 children each) feeds only the
small-area comparison of the validation report and is never published.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipeline.sources._csv import read_text_columns, require_rows

LGA_CSV = Path("malaria") / "hbhi_lga_pfpr_2018" / "lga_2018_microscopy_with_state.csv"
SURVEY_YEAR = 2018


def read_lga_children(path: Path) -> pl.DataFrame:
    """Columns `lga` (HBHI spelling), `state` (name as written), `positivity` (share of those
    tested), `children` (unweighted children with a microscopy result), `row`."""
    frame = (
        read_text_columns(path, ["LGA", "State", "n", "p_test"])
        .with_row_index("row", offset=2)
        .with_columns(pl.col("row").cast(pl.Int64))
    )
    out = frame.select(
        pl.col("LGA").alias("lga"),
        pl.col("State").alias("state"),
        pl.col("p_test").cast(pl.Float64, strict=False).alias("positivity"),
        pl.col("n").cast(pl.Int64, strict=False).alias("children"),
        "row",
    )
    checks = [
        (pl.col("children").is_null() | (pl.col("children") < 1), "n is not a positive whole number"),
        (pl.col("state").is_null() | (pl.col("state") == ""), "State is empty"),
        (~pl.col("lga").is_first_distinct(), "LGA appears more than once"),
        (pl.col("positivity").is_null() | ~pl.col("positivity").is_between(0, 1), "p_test is not a share 0..1"),
    ]
    require_rows(path, out, checks)
    return out


def read_lga_positivity(data_dir: Path) -> pl.DataFrame | None:
    """`lga`, `state`, `positivity`, `children` from DATA_DIR; None when the file is absent
    (the baseline then falls back to the typical per-state sample size, as documented)."""
    path = Path(data_dir) / LGA_CSV
    if not path.is_file():
        return None
    return read_lga_children(path).drop("row")
