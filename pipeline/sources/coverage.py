"""Readers of the coverage context inputs in `DATA_DIR/malaria/` (see its SOURCES.md).

State names are returned as written in the file (trimmed); matching them to state
codes is the caller's job (`pipeline.datasets.context.match_states`), which knows the aliases.
Each frame carries `row`, the CSV line number (header = line 1), so a name that
matches no state can be reported where it is.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipeline.errors import InputError
from pipeline.sources._csv import read_text_columns

DHS_CSV = Path("sepmein_nga_report_2022") / "2023-04-05-nga_dhs.csv"
TRAVEL_CSV = Path("travel_time_phc_walking_state.csv")

COVERAGE_YEAR = 2018

# DHS STATcompiler indicator labels (column names of the export) -> service field.
DHS_INDICATORS = {
    "Population who slept under an insecticide-treated mosquito net (ITN) last night": "itn_use",
    "Persons with access to an insecticide-treated mosquito net (ITN)": "itn_access",
    "Children who took any ACT": "effective_treatment",
}
TRAVEL_COLUMN = "approx_mean_minutes_band_midpoints"

_MISSING = ("", "NA", "N/A", "na")


def _read_text_csv(path: Path, columns: list[str]) -> pl.DataFrame:
    return (
        read_text_columns(path, columns)
        .with_row_index("row", offset=2)
        .with_columns(pl.col("row").cast(pl.Int64))
    )


def _to_number(path: Path, frame: pl.DataFrame, column: str, lo: float, hi: float) -> pl.Expr:
    """Cast a text column to Float64 with "NA"/empty as null; anything else unparsable,
    or outside [lo, hi], fails with its row (a typo must not become a silent null)."""
    text = pl.when(pl.col(column).is_in(list(_MISSING))).then(None).otherwise(pl.col(column))
    value = text.cast(pl.Float64, strict=False)
    bad = frame.filter(text.is_not_null() & (value.is_null() | (value < lo) | (value > hi)))
    if bad.height:
        r = bad.row(0, named=True)
        raise InputError(path, f"column {column!r}: {r[column]!r} is not a number from {lo:g} to {hi:g}", row=r["row"])
    return value


def read_dhs_state_coverage(path: Path, year: int = COVERAGE_YEAR) -> pl.DataFrame:
    """State rows (Level L2) of one survey year: state, itn_use, itn_access,
    effective_treatment as shares 0..1 (null where the export says NA), row."""
    columns = ["Year", "Level", "State", *DHS_INDICATORS]
    frame = _read_text_csv(path, columns).filter((pl.col("Year") == str(year)) & (pl.col("Level") == "L2"))
    if frame.height == 0:
        raise InputError(path, f"no state (Level L2) rows for {year}")
    values = [(_to_number(path, frame, label, 0, 100) / 100).alias(field) for label, field in DHS_INDICATORS.items()]
    return frame.select(pl.col("State").alias("state"), *values, "row")


def read_travel_time(path: Path) -> pl.DataFrame:
    """Per state: approximate mean walking minutes to the nearest PHC facility, row."""
    frame = _read_text_csv(path, ["state", TRAVEL_COLUMN])
    return frame.select("state", _to_number(path, frame, TRAVEL_COLUMN, 0, 24 * 60).alias("travel_minutes_to_care"), "row")
