"""Reader of the University of Washington small-area estimates of ITN use by children
under 5 (`malaria/uw_sae_nga_itn/`, see its SOURCES.md): states and LGAs, NDHS 2018
and NDHS 2024, with 90% intervals.

LGA rows name their area `<State>_<LGA>` in eHA/GRID3 spelling; the state prefix is
split off here against the file's own state rows (state names contain spaces, LGA
names may contain anything), so a row whose prefix is no state of the file fails
with its line. Matching names to codes, and checking that every LGA of the service
has a value, is the caller's job.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipeline.errors import InputError
from pipeline.sources._csv import read_text_columns, require_rows

SAE_CSV = Path("malaria") / "uw_sae_nga_itn" / "NGA_ML_NETC_C_ITN_sae_2018_2024.csv"
INDICATOR = "ML_NETC_C_ITN"
YEARS = (2018, 2024)
INTERVAL = 0.9  # the file's interval is 90% (column Width_90_CI), not 95%


def read_itn_sae(path: Path) -> pl.DataFrame:
    """One row per (year, area): `year`, `admin` (1 state, 2 LGA), `state` (name as in
    the file), `lga` (eHA spelling; null for states), `mean`, `low`, `high` (shares,
    90% interval), `row`."""
    frame = (
        read_text_columns(path, ["Year", "Indicator", "Admin", "Region_Name", "Mean", "Lower_CI", "Upper_CI"])
        .with_row_index("row", offset=2)
        .with_columns(pl.col("row").cast(pl.Int64))
    )
    wrong = frame.filter(pl.col("Indicator") != INDICATOR)
    if wrong.height:
        raise InputError(path, f"indicator {wrong['Indicator'][0]!r}, expected {INDICATOR}", row=int(wrong["row"][0]))
    typed = frame.select(
        pl.col("Year").cast(pl.Int64, strict=False).alias("year"),
        pl.col("Admin").cast(pl.Int64, strict=False).alias("admin"),
        pl.col("Region_Name").alias("name"),
        pl.col("Mean").cast(pl.Float64, strict=False).alias("mean"),
        pl.col("Lower_CI").cast(pl.Float64, strict=False).alias("low"),
        pl.col("Upper_CI").cast(pl.Float64, strict=False).alias("high"),
        "row",
    )
    share = [(pl.col(c).is_null() | (pl.col(c) < 0) | (pl.col(c) > 1), f"{c} is not a share 0..1") for c in ("mean", "low", "high")]
    checks = [
        (~pl.col("year").is_in(list(YEARS)) | pl.col("year").is_null(), f"Year not one of {YEARS}"),
        (~pl.col("admin").is_in([1, 2]) | pl.col("admin").is_null(), "Admin is neither 1 (state) nor 2 (LGA)"),
        *share,
        ((pl.col("low") > pl.col("mean")) | (pl.col("mean") > pl.col("high")), "Mean lies outside its interval"),
        (~pl.struct("year", "name").is_first_distinct(), "area appears twice in one year"),
    ]
    require_rows(path, typed, checks)

    states = sorted(set(typed.filter(pl.col("admin") == 1)["name"]), key=len, reverse=True)
    lgas = typed.filter(pl.col("admin") == 2)
    prefix = pl.lit(None, dtype=pl.Utf8)
    for s in reversed(states):  # longest prefix wins: it is applied last
        prefix = pl.when(pl.col("name").str.starts_with(f"{s}_")).then(pl.lit(s)).otherwise(prefix)
    lgas = lgas.with_columns(prefix.alias("state"))
    orphan = lgas.filter(pl.col("state").is_null())
    if orphan.height:
        raise InputError(path, f"LGA area {orphan['name'][0]!r} does not start with a state of the file",
                         row=int(orphan["row"][0]))
    lgas = lgas.with_columns(pl.col("name").str.slice(pl.col("state").str.len_chars() + 1).alias("lga"))
    st = typed.filter(pl.col("admin") == 1).with_columns(pl.col("name").alias("state"), pl.lit(None, dtype=pl.Utf8).alias("lga"))
    out = pl.concat([st, lgas], how="diagonal_relaxed").select("year", "admin", "state", "lga", "mean", "low", "high", "row")
    for year in YEARS:
        if out.filter(pl.col("year") == year).height == 0:
            raise InputError(path, f"no rows for {year}")
    return out.sort("year", "admin", "state", "lga", nulls_last=False)
