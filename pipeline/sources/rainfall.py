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
from pipeline.sources._csv import read_csv_text

CHIRPS_MONTHLY = "rainfall/nga_state_chirps_monthly_1981_2026.csv"
CHIRPS_CLIMATOLOGY = "rainfall/nga_state_chirps_climatology_monthly.csv"
LGA_CLIMATOLOGY = "rainfall/nga_lga_idm_gsod_climatology_2001_2016.csv"
WFP_SUBNATIONAL = "rainfall/nga-rainfall-subnat-full.csv"

# The data directory's CHIRPS file has no `version`; SOURCES.md says its last two months may be
# CHIRPS-preliminary. Flag that many trailing months provisional.
PROVISIONAL_TRAILING_MONTHS = 2

CHIRPS_SOURCE = "CHIRPS v2.0 (UCSB Climate Hazards Center), state means by WFP (HDX 'Rainfall Indicators at Subnational Level'); public domain / CC BY-IGO"
LGA_CLIM_SOURCE = "IDM/GSOD station-interpolated LGA climatology 2001-2016 (numalariamodeling/hbhi-nigeria-publication-2021, Apache-2.0), used for within-state shape only"

VERSIONS = ("final", "prelim", "forecast")  # WFP's `version` values: CHIRPS final, CHIRPS-prelim, CHIRPS-GEFS

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


_WFP_MEMO: list[tuple[tuple[str, int, int], pl.DataFrame]] = []  # the last file read (a build reads it thrice)


def _file_key(path: Path) -> tuple[str, int, int]:
    st = path.stat()
    return (str(path.resolve()), st.st_size, st.st_mtime_ns)


def _require(path: Path) -> Path:
    if not path.exists():
        raise InputError(path, "file not found")
    return path


def chirps_rows(path: Path) -> pl.DataFrame:
    """The CHIRPS monthly CSV, row by row: row (file line), pcode, state_name, month, rainfall_mm,
    version (lower-case text, or null when the file has no `version` column)."""
    path = _require(Path(path))
    cols = ["pcode", "state_name", "month", "rainfall_mm"]
    raw = read_csv_text(path)
    raw = raw.rename({c: c.strip() for c in raw.columns})
    has_version = "version" in raw.columns
    cols = [*cols, "version"] if has_version else cols
    missing = [c for c in cols if c not in raw.columns]
    if missing:
        raise InputError(path, f"missing column(s) {', '.join(missing)}; found {', '.join(raw.columns)}")
    raw = raw.select(cols).with_columns(pl.col(c).str.strip_chars() for c in cols).with_row_index("row", offset=2)
    df = raw.with_columns(pl.col("rainfall_mm").cast(pl.Float64, strict=False).alias("mm"))
    bad_month = df.filter(~pl.col("month").str.contains(r"^\d{4}-(0[1-9]|1[0-2])$"))
    if bad_month.height:
        raise InputError(path, f"month {bad_month['month'][0]!r} is not YYYY-MM", int(bad_month["row"][0]))
    bad_mm = df.filter(pl.col("mm").is_null() | pl.col("mm").is_nan() | pl.col("mm").is_infinite())
    if bad_mm.height:
        value = bad_mm["rainfall_mm"][0]
        reason = "rainfall_mm is missing" if not value else f"rainfall_mm {value!r} is not a number"
        raise InputError(path, reason, int(bad_mm["row"][0]))
    df = df.drop("rainfall_mm").rename({"mm": "rainfall_mm"})
    negative = df.filter(pl.col("rainfall_mm") < 0)
    if negative.height:
        raise InputError(path, f"negative rainfall_mm {negative['rainfall_mm'][0]}", int(negative["row"][0]))
    if has_version:
        df = df.with_columns(pl.col("version").str.to_lowercase())
        unknown = df.filter(~pl.col("version").is_in(list(VERSIONS)))
        if unknown.height:
            raise InputError(path, f"unknown version {unknown['version'][0]!r} (expected final, prelim or forecast)",
                             int(unknown["row"][0]))
    else:
        df = df.with_columns(pl.lit(None, dtype=pl.Utf8).alias("version"))
    return df.with_columns(pl.col("row").cast(pl.Int64))


def read_state_chirps_monthly(data_dir: Path) -> pl.DataFrame:
    """ocha_pcode, state_name, period, rainfall_mm, provisional.

    `provisional` comes from the file's own `version` column when it has one (`prelim`;
    `forecast` months are not recorded at all); the data directory's copy lost that column,
    so there its trailing PROVISIONAL_TRAILING_MONTHS months are flagged (SOURCES.md).
    """
    df = chirps_rows(Path(data_dir) / CHIRPS_MONTHLY)
    if df["version"].null_count() == 0:
        df = df.filter(pl.col("version") != "forecast")
        prov = pl.col("version") == "prelim"
    else:
        months = sorted(df["month"].unique())
        prov = pl.col("month").is_in(months[-PROVISIONAL_TRAILING_MONTHS:])
    return df.select(
        pl.col("pcode").alias("ocha_pcode"),
        "state_name",
        pl.col("month").alias("period"),
        "rainfall_mm",
        prov.alias("provisional"),
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


def wfp_rows(path: Path) -> pl.DataFrame:
    """WFP HDX dekadal file, row by row: row (file line), adm_level, pcode, d (dekad date), rfh,
    version. Every value is checked here, so later rules can name a row."""
    path = _require(Path(path))
    key = _file_key(path)
    if _WFP_MEMO and _WFP_MEMO[0][0] == key:
        return _WFP_MEMO[0][1]
    df = read_csv_text(path)
    missing = [c for c in WFP_COLUMNS if c not in df.columns]
    if missing:
        raise InputError(path, f"missing WFP columns {missing}")
    # line numbers: 1 is the header; the HXL tag row ("#date", "#adm1+code", ...) sits under it
    df = df.with_row_index("row", offset=2).filter(~pl.col("date").str.starts_with("#"))
    df = df.select(
        pl.col("row").cast(pl.Int64),
        pl.col("date"),
        pl.col("date").str.slice(0, 10).str.to_date("%Y-%m-%d", strict=False).alias("d"),
        pl.col("adm_level").cast(pl.Int64, strict=False),
        pl.col("PCODE").str.strip_chars().alias("pcode"),
        pl.col("rfh").cast(pl.Float64, strict=False),
        pl.col("version").str.strip_chars().str.to_lowercase(),
    )
    bad = df.filter(pl.col("d").is_null() | pl.col("adm_level").is_null() | pl.col("rfh").is_null()
                    | pl.col("rfh").is_nan() | pl.col("rfh").is_infinite())
    if bad.height:
        raise InputError(path, "unreadable date, adm_level or rfh", int(bad["row"][0]))
    negative = df.filter(pl.col("rfh") < 0)
    if negative.height:
        raise InputError(path, f"negative rfh {negative['rfh'][0]}", int(negative["row"][0]))
    unknown = df.filter(~pl.col("version").is_in(list(VERSIONS)) | pl.col("version").is_null())
    if unknown.height:
        raise InputError(path, f"unknown version {unknown['version'][0]!r} (expected final, prelim or forecast)",
                         int(unknown["row"][0]))
    not_dekad = df.filter(~pl.col("d").dt.day().is_in([1, 11, 21]))
    if not_dekad.height:
        raise InputError(path, f"date {not_dekad['date'][0]!r} is not a dekad start (day 1, 11 or 21)",
                         int(not_dekad["row"][0]))
    df = df.drop("date")
    _WFP_MEMO[:] = [(key, df)]
    return df


def wfp_monthly(rows: pl.DataFrame) -> pl.DataFrame:
    """Dekadal rows -> adm_level, pcode, period, rainfall_mm, provisional, dekads, row.

    Forecast dekads are not data and are left out; `dekads` counts the recorded ones (a month
    counts once it has all three); `provisional` when any of them is `prelim`; `row` is the
    line of the month's wettest dekad, for messages.
    """
    rec = rows.filter(pl.col("version") != "forecast")
    return (
        rec.group_by("adm_level", "pcode", pl.col("d").dt.strftime("%Y-%m").alias("period"))
        .agg(
            pl.col("d").dt.day().n_unique().alias("dekads"),
            pl.col("rfh").sum().alias("rainfall_mm"),
            (pl.col("version") == "prelim").any().alias("provisional"),
            pl.col("row").sort_by("rfh").last().alias("row"),
        )
        .sort("adm_level", "pcode", "period")
    )


def read_wfp_subnational(path: Path) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """WFP HDX dekadal file -> (state monthly, LGA monthly or None).

    Each: pcode, period, rainfall_mm, provisional. A month is kept when it has three
    distinct non-forecast dekads; it is provisional when any of them is `prelim`.
    """
    path = Path(path)
    monthly = wfp_monthly(wfp_rows(path)).filter(pl.col("dekads") == 3).drop("dekads", "row")
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


CHIRPS_DEKADAL = "rainfall/nga_state_chirps_dekadal_wfp_1981_2026.csv"
LGA_MONTHLY = "rainfall/nga_lga_idm_gsod_monthly_2001_2016.csv"
LGA_MONTHLY_SOURCE = ("IDM/GSOD station-interpolated LGA rainfall 2001-2016 (numalariamodeling/"
                      "hbhi-nigeria-publication-2021, Apache-2.0)")


def read_state_chirps_dekadal(data_dir: Path) -> pl.DataFrame:
    """ocha_pcode, state_name, dekad_start (date), rain_mm, lta_mm, rfq_pct, provisional.

    The file lost WFP's `version` column (SOURCES.md): its last PROVISIONAL_TRAILING_MONTHS
    complete months may be CHIRPS-preliminary and a trailing month with fewer than three
    dekads is incomplete (a CHIRPS-GEFS forecast, perhaps), so the dekads of both are flagged
    `provisional`; the rain-season rules never count a provisional dekad as recorded.
    """
    path = _require(Path(data_dir) / CHIRPS_DEKADAL)
    raw = read_csv_text(path)
    cols = ["pcode", "state_name", "dekad_start", "rfh_mm", "rfh_avg_mm", "rfq_pct"]
    missing = [c for c in cols if c not in raw.columns]
    if missing:
        raise InputError(path, f"missing column(s) {', '.join(missing)}; found {', '.join(raw.columns)}")
    df = raw.select(cols).with_row_index("row", offset=2).with_columns(
        pl.col("dekad_start").str.strip_chars().str.to_date("%Y-%m-%d", strict=False).alias("d"),
        *(pl.col(c).cast(pl.Float64, strict=False) for c in ("rfh_mm", "rfh_avg_mm", "rfq_pct")),
    )
    bad = df.filter(pl.col("d").is_null() | pl.col("rfh_mm").is_null() | pl.col("rfh_mm").is_nan()
                    | (pl.col("rfh_mm") < 0))
    if bad.height:
        raise InputError(path, f"unreadable dekad_start or rfh_mm {bad['rfh_mm'][0]!r}", int(bad["row"][0]))
    not_dekad = df.filter(~pl.col("d").dt.day().is_in([1, 11, 21]))
    if not_dekad.height:
        raise InputError(path, "dekad_start is not a dekad start (day 1, 11 or 21)", int(not_dekad["row"][0]))
    per_month = df.group_by(pl.col("d").dt.strftime("%Y-%m").alias("m")).agg(pl.col("d").dt.day().n_unique().alias("n"))
    months = sorted(per_month["m"].to_list())
    complete = set(per_month.filter(pl.col("n") == 3)["m"].to_list())
    trailing_incomplete = [m for m in months[-1:] if m not in complete]
    last_complete = [m for m in months if m in complete][-PROVISIONAL_TRAILING_MONTHS:]
    flagged = [*last_complete, *trailing_incomplete]
    return df.select(
        pl.col("pcode").str.strip_chars().alias("ocha_pcode"),
        pl.col("state_name").str.strip_chars(),
        pl.col("d").alias("dekad_start"),
        pl.col("rfh_mm").alias("rain_mm"),
        pl.col("rfh_avg_mm").alias("lta_mm"),
        "rfq_pct",
        pl.col("d").dt.strftime("%Y-%m").is_in(flagged).alias("provisional"),
    ).sort("ocha_pcode", "dekad_start")


def read_lga_monthly_rainfall(data_dir: Path) -> pl.DataFrame:
    """state, lga (HBHI spelling), period (YYYY-MM), rain_mm: the LGA series 2001-2016."""
    path = _require(Path(data_dir) / LGA_MONTHLY)
    df = pl.read_csv(path, schema_overrides={"month": pl.Utf8, "rainfall_mm": pl.Float64})
    if not {"state", "lga", "month", "rainfall_mm"} <= set(df.columns):
        raise InputError(path, "expected columns state, lga, month, rainfall_mm")
    bad = df.filter(~pl.col("month").str.contains(r"^\d{4}-(0[1-9]|1[0-2])$") | pl.col("rainfall_mm").is_null()
                    | (pl.col("rainfall_mm") < 0))
    if bad.height:
        raise InputError(path, f"bad month {bad['month'][0]!r} or rainfall_mm {bad['rainfall_mm'][0]!r}")
    return df.select("state", "lga", pl.col("month").alias("period"), pl.col("rainfall_mm").alias("rain_mm")).sort(
        "state", "lga", "period")
