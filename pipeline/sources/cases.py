"""Readers for the routine-data seasonality profiles used by the seasonality check.

The 22 archetype profiles (malaria SOURCES.md §7.2, `archetype_incidence_NGA_RIA_v3.csv`)
are the only independent monthly case records we have: 12-month climatologies of
facility incidence from the NMEP Rapid Impact Assessment, one per group of LGAs
("archetype", named after a representative LGA). `LGA_and_respective_archetype.csv`
says which LGAs each group covers. File reading only; the comparison lives in
`pipeline.datasets.transmission`.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipeline.errors import InputError

ARCHETYPE_PROFILES = (
    "malaria/cases/numalariamodeling_hbhi_nigeria_archetype_seasonality/archetype_incidence_NGA_RIA_v3.csv"
)
LGA_ARCHETYPES = "malaria/numalariamodeling_hbhi_nigeria/LGA_and_respective_archetype.csv"

CASES_SOURCE = (
    "NMEP Rapid Impact Assessment routine incidence, 22 archetype seasonality profiles as used by "
    "Ozodiegwu et al., Malaria Journal 2023 (numalariamodeling/hbhi-nigeria-publication-2021, Apache-2.0)"
)


def _require(path: Path) -> Path:
    if not path.exists():
        raise InputError(path, "file not found")
    return path


def read_archetype_profiles(data_dir: Path) -> pl.DataFrame:
    """archetype, month (1..12), incidence (per 1,000 per month): one 12-month profile each.

    Stops on a group without exactly the 12 calendar months or with a negative or
    missing incidence, because a gap would shift the compared peak month.
    """
    path = _require(Path(data_dir) / ARCHETYPE_PROFILES)
    df = pl.read_csv(path)
    need = {"seasonality", "month", "incidence"}
    if not need <= set(df.columns):
        raise InputError(path, f"missing columns {sorted(need - set(df.columns))}")
    df = df.with_row_index("row").select(
        "row",
        pl.col("seasonality").cast(pl.Utf8).str.strip_chars().alias("archetype"),
        pl.col("month").cast(pl.Int64, strict=False),
        pl.col("incidence").cast(pl.Float64, strict=False),
    )
    bad = df.filter(
        pl.col("archetype").is_null()
        | pl.col("month").is_null()
        | ~pl.col("month").is_between(1, 12)
        | pl.col("incidence").is_null()
        | (pl.col("incidence") < 0)
    )
    if bad.height:
        raise InputError(path, "archetype, month 1..12 and a non-negative incidence are required", int(bad["row"][0]) + 2)
    counts = df.group_by("archetype").agg(pl.col("month").n_unique().alias("n"), pl.len().alias("rows"))
    odd = counts.filter((pl.col("n") != 12) | (pl.col("rows") != 12))
    if odd.height:
        raise InputError(path, f"archetype(s) without exactly 12 distinct months: {sorted(odd['archetype'])}")
    return df.drop("row").sort("archetype", "month")


def read_lga_archetypes(data_dir: Path) -> pl.DataFrame:
    """lga (HBHI spelling), archetype: which case series each LGA belongs to."""
    path = _require(Path(data_dir) / LGA_ARCHETYPES)
    df = pl.read_csv(path)
    if not {"LGA", "archetype"} <= set(df.columns):
        raise InputError(path, "expected columns LGA, archetype")
    df = df.select(
        pl.col("LGA").cast(pl.Utf8).str.strip_chars().alias("lga"),
        pl.col("archetype").cast(pl.Utf8).str.strip_chars(),
    )
    if df["lga"].null_count() or df["archetype"].null_count():
        raise InputError(path, "empty LGA or archetype")
    dup = df.filter(pl.col("lga").is_duplicated())
    if dup.height:
        raise InputError(path, f"LGA listed twice: {sorted(dup['lga'].unique())[:5]}")
    return df
