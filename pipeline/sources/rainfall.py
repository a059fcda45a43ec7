"""Readers for the rainfall inputs (rainfall/SOURCES.md). File reading only; no model.

Two formats feed the recorded state series:
* the CHIRPS state monthly CSV of the data directory (`nga_state_chirps_monthly_1981_2026.csv`),
  which lost WFP's `version` column, so its trailing months are flagged provisional
  by rule (SOURCES.md: 2026-05 and 2026-06 "may be preliminary");
* WFP's HDX subnational file `nga-rainfall-subnat-full.csv` (dekadal, admin 1 and 2,
  HXL tag row, `version` final/prelim/forecast), the operator's next data load. Its
  `forecast` dekads are never recorded; `prelim` ones are recorded but flagged.

Only complete months (all three dekads recorded) count, so a month is never scored
on a third of its rain.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from pipeline.errors import InputError

CHIRPS_MONTHLY = "rainfall/nga_state_chirps_monthly_1981_2026.csv"
CHIRPS_CLIMATOLOGY = "rainfall/nga_state_chirps_climatology_monthly.csv"
LGA_CLIMATOLOGY = "rainfall/nga_lga_idm_gsod_climatology_2001_2016.csv"
WFP_SUBNATIONAL = "rainfall/nga-rainfall-subnat-full.csv"

# The data directory's CHIRPS file has no `version`; SOURCES.md says its last two months may be
# CHIRPS-preliminary. Flag that many trailing months provisional.
PROVISIONAL_TRAILING_MONTHS = 2

CHIRPS_SOURCE = "CHIRPS v2.0 (UCSB Climate Hazards Center), state means by WFP (HDX 'Rainfall Indicators at Subnational Level'); public domain / CC BY-IGO"
LGA_CLIM_SOURCE = "IDM/GSOD station-interpolated LGA climatology 2001-2016 (numalariamodeling/hbhi-nigeria-publication-2021, Apache-2.0), used for within-state shape only"

WFP_COLUMNS = (
    "date", "adm_level", "adm_id", "PCODE", "n_pixels", "rfh", "rfh_avg", "r1h", "r1h_avg",
    "r3h", "r3h_avg", "rfq", "r1q", "r3q", "version",
)


@dataclass(frozen=True)
class RecordedRainfall:
    """Recorded monthly rainfall as loaded, whichever format it came in.

    `state`: ocha_pcode, period (YYYY-MM), rainfall_mm, provisional.
    `lga`: lga_code, period, rainfall_mm, provisional — only from WFP admin-2 rows,
    else None (the producer downscales the state series instead).
    """

    state: pl.DataFrame
    lga: pl.DataFrame | None
    source: str
    file: str


def _require(path: Path) -> Path:
    if not path.exists():
        raise InputError(path, "file not found")
    return path


def read_state_chirps_monthly(data_dir: Path) -> pl.DataFrame:
    """ocha_pcode, state_name, period, rainfall_mm, provisional (trailing months)."""
    path = _require(Path(data_dir) / CHIRPS_MONTHLY)
    df = pl.read_csv(path, schema_overrides={"rainfall_mm": pl.Float64})
    need = {"pcode", "state_name", "month", "rainfall_mm"}
    if not need <= set(df.columns):
        raise InputError(path, f"missing columns {sorted(need - set(df.columns))}")
    bad = df.filter(~pl.col("month").str.contains(r"^\d{4}-(0[1-9]|1[0-2])$") | pl.col("rainfall_mm").is_null())
    if bad.height:
        row = df.with_row_index().filter(
            ~pl.col("month").str.contains(r"^\d{4}-(0[1-9]|1[0-2])$") | pl.col("rainfall_mm").is_null()
        )["index"][0]
        raise InputError(path, "month not YYYY-MM or rainfall missing", int(row) + 2)
    if df.filter(pl.col("rainfall_mm") < 0).height:
        raise InputError(path, "negative rainfall")
    months = sorted(df["month"].unique())
    prov = set(months[-PROVISIONAL_TRAILING_MONTHS:])
    return df.select(
        pl.col("pcode").alias("ocha_pcode"),
        "state_name",
        pl.col("month").alias("period"),
        "rainfall_mm",
        pl.col("month").is_in(list(prov)).alias("provisional"),
    ).sort("ocha_pcode", "period")


def read_state_chirps_climatology(data_dir: Path) -> pl.DataFrame:
    """ocha_pcode, month (1..12), rainfall_mm = 1991-2020 mean of the monthly totals."""
    path = _require(Path(data_dir) / CHIRPS_CLIMATOLOGY)
    df = pl.read_csv(path)
    if not {"pcode", "mo", "mean_1991_2020_mm"} <= set(df.columns):
        raise InputError(path, "expected columns pcode, mo, mean_1991_2020_mm")
    return df.select(
        pl.col("pcode").alias("ocha_pcode"),
        pl.col("mo").cast(pl.Int64).alias("month"),
        pl.col("mean_1991_2020_mm").cast(pl.Float64).alias("rainfall_mm"),
    ).sort("ocha_pcode", "month")


def read_lga_climatology(data_dir: Path) -> pl.DataFrame:
    """Long form: state, lga (HBHI spelling), lat, lon, month (1..12), rainfall_mm."""
    path = _require(Path(data_dir) / LGA_CLIMATOLOGY)
    df = pl.read_csv(path)
    mcols = [f"m{m:02d}_mm" for m in range(1, 13)]
    if not {"state", "lga", *mcols} <= set(df.columns):
        raise InputError(path, "expected columns state, lga, m01_mm..m12_mm")
    keep = [c for c in ("state", "lga", "lat", "lon") if c in df.columns]
    return (
        df.select(*keep, *mcols)
        .unpivot(index=keep, on=mcols, variable_name="m", value_name="rainfall_mm")
        .with_columns(pl.col("m").str.slice(1, 2).cast(pl.Int64).alias("month"), pl.col("rainfall_mm").cast(pl.Float64))
        .drop("m")
        .sort("state", "lga", "month")
    )


def read_wfp_subnational(path: Path) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """WFP HDX dekadal file -> (state monthly, LGA monthly or None).

    Each: pcode, period, rainfall_mm, provisional. A month is kept when it has three
    distinct non-forecast dekads; it is provisional when any of them is `prelim`.
    """
    path = _require(Path(path))
    df = pl.read_csv(path, infer_schema_length=0)
    missing = [c for c in WFP_COLUMNS if c not in df.columns]
    if missing:
        raise InputError(path, f"missing WFP columns {missing}")
    # the HXL tag row ("#date", "#adm1+code", ...) sits under the header
    df = df.filter(~pl.col("date").str.starts_with("#"))
    df = df.with_columns(
        pl.col("date").str.slice(0, 10).str.to_date("%Y-%m-%d", strict=False).alias("d"),
        pl.col("adm_level").cast(pl.Int64, strict=False),
        pl.col("rfh").cast(pl.Float64, strict=False),
        pl.col("version").str.strip_chars().str.to_lowercase(),
    )
    bad = df.with_row_index().filter(
        pl.col("d").is_null() | pl.col("adm_level").is_null() | pl.col("rfh").is_null()
    )
    if bad.height:
        # +3: header, HXL row, 1-based
        raise InputError(path, "unreadable date, adm_level or rfh", int(bad["index"][0]) + 3)
    unknown = set(df["version"].unique()) - {"final", "prelim", "forecast"}
    if unknown:
        raise InputError(path, f"unknown version value(s) {sorted(map(str, unknown))}")
    rec = df.filter(pl.col("version") != "forecast")
    monthly = (
        rec.group_by("adm_level", "PCODE", pl.col("d").dt.strftime("%Y-%m").alias("period"))
        .agg(
            pl.col("d").dt.day().n_unique().alias("dekads"),
            pl.col("rfh").sum().alias("rainfall_mm"),
            (pl.col("version") == "prelim").any().alias("provisional"),
        )
        .filter(pl.col("dekads") == 3)
        .drop("dekads")
        .rename({"PCODE": "pcode"})
        .sort("pcode", "period")
    )
    state = monthly.filter(pl.col("adm_level") == 1).drop("adm_level")
    lga = monthly.filter(pl.col("adm_level") == 2).drop("adm_level")
    if state.height == 0:
        raise InputError(path, "no complete admin-1 months")
    return state, (lga if lga.height else None)


def read_recorded_rainfall(data_dir: Path) -> RecordedRainfall:
    """The WFP HDX file when the operator has loaded it, else the data directory's CHIRPS CSV."""
    wfp = Path(data_dir) / WFP_SUBNATIONAL
    if wfp.exists():
        state, lga = read_wfp_subnational(wfp)
        return RecordedRainfall(
            state=state.rename({"pcode": "ocha_pcode"}),
            lga=lga.rename({"pcode": "lga_code"}) if lga is not None else None,
            source="WFP / CHIRPS (UCSB Climate Hazards Center), HDX 'Rainfall Indicators at Subnational Level'; CC BY-IGO",
            file=WFP_SUBNATIONAL,
        )
    st = read_state_chirps_monthly(data_dir)
    return RecordedRainfall(state=st.drop("state_name"), lga=None, source=CHIRPS_SOURCE, file=CHIRPS_MONTHLY)
