"""Reader of the Malaria Atlas Project 2022 IRS coverage surface, summarised per LGA
(`malaria/map_2022_irs_effective_treatment/`, see its SOURCES.md).

The LGA table is keyed by the eHA/GRID3 LGA code, the same code the outlines carry;
mapping it to the service's OCHA `lga_code` is the caller's job (Geography.lgas
holds both), and so is checking that every LGA is present: an LGA missing here
would otherwise publish a null that reads as "no source". Each row must rest on at
least one pixel.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipeline.sources._csv import read_text_columns, require_rows

LGA_CSV = Path("malaria") / "map_2022_irs_effective_treatment" / "lga_map2022_irs_effective_treatment.csv"
YEAR = 2022


def read_lga_irs(path: Path) -> pl.DataFrame:
    """Columns `eha_code` (text), `irs_coverage` (share 0..1), `pixels`, `row`."""
    frame = (
        read_text_columns(path, ["lga_code", "map2022_irs_coverage_mean", "irs_pixels"])
        .with_row_index("row", offset=2)
        .with_columns(pl.col("row").cast(pl.Int64))
    )
    out = frame.select(
        pl.col("lga_code").alias("eha_code"),
        pl.col("map2022_irs_coverage_mean").cast(pl.Float64, strict=False).alias("irs_coverage"),
        pl.col("irs_pixels").cast(pl.Float64, strict=False).cast(pl.Int64, strict=False).alias("pixels"),
        "row",
    )
    checks = [
        (pl.col("eha_code").is_null() | (pl.col("eha_code") == ""), "lga_code is empty"),
        (pl.col("irs_coverage").is_null(), "map2022_irs_coverage_mean is not a number"),
        ((pl.col("irs_coverage") < 0) | (pl.col("irs_coverage") > 1), "map2022_irs_coverage_mean outside 0..1"),
        (pl.col("pixels").is_null() | (pl.col("pixels") < 1), "irs_pixels is not a positive whole number"),
        (~pl.col("eha_code").is_first_distinct(), "lga_code appears more than once"),
    ]
    require_rows(path, out, checks)
    return out
