"""Input rules for the recorded rainfall: the mistakes a parser cannot see.

A reader refuses what it cannot parse; these rules refuse what parses but is wrong,
before anything is built or published, each with the file and the row
(docs/data-load.md lists them):

* no duplicate rows (one value per area and month, or per area and dekad);
* no area the geography does not know;
* every month of the window has every state (and, where the file has admin-2 rows, every
  LGA), and the months are contiguous: a month present for one state only would move
  `last_estimated` or leave a hole;
* every value lies inside the plausible band of its own area and calendar month, defined
  from the file's own history (`plausible_upper`).

Each rule takes frames and returns nothing or raises `InputError`; `check_rainfall` reads
the file the build would read and applies them all.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from pipeline.errors import InputError
from pipeline.sources import rainfall

if TYPE_CHECKING:
    from pipeline.geography import Geography

# The plausible band of a month: from 0 to the area's highest value for that calendar month in
# the OTHER years of the file, plus BAND_WETTEST_MULTIPLE times the median of its wettest
# calendar month. On the real CHIRPS state series (1981-2026) the largest excess over the
# other years' record is 0.75 wettest-month medians (Osun, October 2024: 513 mm against a
# 319 mm record), so 2 passes every recorded month with room and still refuses a unit or
# keying error (x10 of a wet month, 99,999,999 mm).
BAND_WETTEST_MULTIPLE = 2.0
# Fewer other years of the same calendar month than this and the band is not applied.
MIN_HISTORY_YEARS = 5


@dataclass(frozen=True)
class RainfallReport:
    """What a checked rainfall file holds: the recorded window and its flags."""

    file: Path
    first: str  # first month recorded for every state
    last: str  # last month recorded for every state
    months: int
    states: int
    lgas: int  # 0 when the file has no admin-2 rows
    provisional: tuple[str, ...]  # months flagged provisional by the file's version field (or by rule)
    rows: int


def _months_between(first: str, last: str) -> list[str]:
    y, m = int(first[:4]), int(first[5:7])
    out = []
    while f"{y:04d}-{m:02d}" <= last:
        out.append(f"{y:04d}-{m:02d}")
        y, m = (y + 1, 1) if m == 12 else (y, m + 1)
    return out


def check_duplicates(rows: pl.DataFrame, keys: list[str], path: Path, what: str) -> None:
    """One row per key: a second row for the same area and date is an error naming both lines."""
    dup = rows.filter(pl.struct(keys).is_duplicated()).sort("row")
    if dup.height:
        first = dup.row(0, named=True)
        same = dup.filter(pl.all_horizontal(pl.col(k) == first[k] for k in keys))
        label = " ".join(str(first[k]) for k in keys)
        raise InputError(path, f"duplicate {what} {label} (also at row {first['row']})", int(same["row"][1]))


def check_known(rows: pl.DataFrame, expected: list[str], path: Path, what: str) -> None:
    unknown = rows.filter(~pl.col("pcode").is_in(expected)).sort("row")
    if unknown.height:
        raise InputError(path, f"unknown {what} p-code {unknown['pcode'][0]!r}", int(unknown["row"][0]))


def check_coverage(monthly: pl.DataFrame, expected: list[str], path: Path, what: str,
                   partial: pl.DataFrame | None = None) -> tuple[str, str]:
    """Every month from the first to the last has every expected area; returns (first, last).

    `monthly` holds complete months only (pcode, period, row); `partial`, for a dekadal file,
    the months with fewer than three recorded dekads, so the message can point at one of them.
    """
    if monthly.height == 0:
        raise InputError(path, f"no complete month for any {what}")
    periods = sorted(monthly["period"].unique().to_list())
    first, last = periods[0], periods[-1]
    present = set(periods)
    for period in _months_between(first, last):
        if period not in present:
            after = monthly.filter(pl.col("period") > period).sort("period", "row")
            raise InputError(path, f"no {what} has a complete {period}: months must be contiguous "
                                   f"(the series runs {first} to {last})", int(after["row"][0]))
    counts = monthly.group_by("period").agg(pl.col("pcode").n_unique().alias("n"), pl.col("row").min())
    short = counts.filter(pl.col("n") < len(expected)).sort("period")
    if short.height:
        period = short["period"][0]
        have = set(monthly.filter(pl.col("period") == period)["pcode"])
        missing = sorted(set(expected) - have)
        row = int(short["row"][0])
        hint = ""
        if partial is not None:
            part = partial.filter(pl.col("period") == period, pl.col("pcode") == missing[0])
            if part.height:
                row, hint = int(part["row"][0]), f" (it has {part['dekads'][0]} of 3 dekads)"
        raise InputError(path, f"{period} is recorded for {len(have)} of {len(expected)} {what}s: "
                               f"{', '.join(missing[:5])}{' …' if len(missing) > 5 else ''} lack it{hint}", row)
    return first, last


def plausible_upper(monthly: pl.DataFrame) -> pl.DataFrame:
    """`monthly` (pcode, period, rainfall_mm, …) with `upper` (mm) and `history` (other years).

    The band is each value's own area and calendar month: the record of the other years
    (leave-one-out, so an outlier cannot raise its own bar) plus BAND_WETTEST_MULTIPLE
    medians of the area's wettest calendar month (a median, so one outlier does not move it).
    """
    m = monthly.with_columns(pl.col("period").str.slice(5, 2).alias("_mo"))
    per = m.group_by("pcode", "_mo").agg(
        pl.col("rainfall_mm").top_k(2).alias("_top"),
        pl.col("rainfall_mm").median().alias("_median"),
        pl.len().alias("_n"),
    )
    wettest = per.group_by("pcode").agg(pl.col("_median").max().alias("_wettest"))
    top1, top2 = pl.col("_top").list.get(0), pl.col("_top").list.get(1, null_on_oob=True)
    return (
        m.join(per, on=["pcode", "_mo"]).join(wettest, on="pcode")
        .with_columns(
            (pl.when(pl.col("rainfall_mm") >= top1).then(top2).otherwise(top1)
             + BAND_WETTEST_MULTIPLE * pl.col("_wettest")).alias("upper"),
            (pl.col("_n") - 1).alias("history"),
            pl.col("_wettest").alias("wettest_median"),
        )
        .drop("_mo", "_top", "_median", "_n", "_wettest")
    )


def check_band(monthly: pl.DataFrame, path: Path, what: str) -> None:
    banded = plausible_upper(monthly)
    out = banded.filter(pl.col("history") >= MIN_HISTORY_YEARS, pl.col("rainfall_mm") > pl.col("upper")).sort("row")
    if out.height:
        r = out.row(0, named=True)
        raise InputError(
            path,
            f"{what} {r['pcode']} {r['period']}: {r['rainfall_mm']:,.1f} mm is outside its plausible band "
            f"0-{r['upper']:,.1f} mm (that calendar month's record in the other {r['history']} years plus "
            f"{BAND_WETTEST_MULTIPLE:g} x its wettest month's median {r['wettest_median']:,.1f} mm)",
            int(r["row"]),
        )


def _expected(geography: Geography | None, level: str, monthly: pl.DataFrame) -> list[str]:
    """The areas every month must have: the geography's, else (no geography at hand, e.g. a
    file checked on its own) every area the file names."""
    if geography is not None:
        col = geography.states["ocha_pcode"] if level == "state" else geography.lgas["lga_code"]
        return sorted(col.to_list())
    return sorted(monthly["pcode"].unique().to_list())


def check_wfp_file(path: Path, geography: Geography | None = None) -> RainfallReport:
    """Every rule on WFP's dekadal subnational file (admin 1, and admin 2 where present)."""
    rows = rainfall.wfp_rows(path)
    rows = rows.filter(pl.col("adm_level").is_in([1, 2]))
    check_duplicates(rows.select("row", "adm_level", "pcode", "d"), ["adm_level", "pcode", "d"], path, "dekad")
    monthly = rainfall.wfp_monthly(rows)
    report: dict[str, tuple[str, str] | int] = {}
    for level, adm in (("state", 1), ("LGA", 2)):
        lv_rows = rows.filter(pl.col("adm_level") == adm)
        if lv_rows.height == 0:
            if level == "state":
                raise InputError(path, "no admin-1 (state) rows")
            continue
        lv = monthly.filter(pl.col("adm_level") == adm)
        complete, partial = lv.filter(pl.col("dekads") == 3), lv.filter(pl.col("dekads") < 3)
        expected = _expected(geography, level, complete)
        check_known(lv_rows, expected, path, level)
        report[level] = check_coverage(complete, expected, path, level, partial)
        report[level + "s"] = len(expected)
        check_band(complete, path, level)
    state = monthly.filter(pl.col("adm_level") == 1, pl.col("dekads") == 3)
    first, last = report["state"]  # type: ignore[misc]
    prov = sorted(state.filter(pl.col("provisional"))["period"].unique().to_list())
    return RainfallReport(path, first, last, len(_months_between(first, last)), int(report["states"]),  # type: ignore[arg-type]
                          int(report.get("LGAs", 0)), tuple(prov), rows.height)  # type: ignore[arg-type]


def check_chirps_file(path: Path, geography: Geography | None = None) -> RainfallReport:
    """Every rule on the monthly state CSV (no admin-2 rows, so no LGA rule)."""
    rows = rainfall.chirps_rows(path)
    check_duplicates(rows, ["pcode", "month"], path, "state month")
    rec = rows.filter(pl.col("version").is_null() | (pl.col("version") != "forecast"))
    monthly = rec.select("row", "pcode", pl.col("month").alias("period"), "rainfall_mm")
    expected = _expected(geography, "state", monthly)
    check_known(monthly, expected, path, "state")
    first, last = check_coverage(monthly, expected, path, "state")
    check_band(monthly, path, "state")
    if rows["version"].null_count() == 0:  # the file's own flags
        prov = sorted(rows.filter(pl.col("version") == "prelim")["month"].unique().to_list())
    else:  # no version column: the reader's rule (its trailing months)
        prov = periods_flagged_by_rule(first, last)
    return RainfallReport(path, first, last, len(_months_between(first, last)), len(expected), 0, tuple(prov), rows.height)


def periods_flagged_by_rule(first: str, last: str) -> list[str]:
    return _months_between(first, last)[-rainfall.PROVISIONAL_TRAILING_MONTHS:]


def rainfall_file(data_dir: Path) -> Path:
    """The recorded-rainfall file the build reads: WFP's when it is there (rainfall.read_recorded_rainfall)."""
    wfp = Path(data_dir) / rainfall.WFP_SUBNATIONAL
    return wfp if wfp.exists() else Path(data_dir) / rainfall.CHIRPS_MONTHLY


def check_rainfall_file(path: Path, geography: Geography | None = None) -> RainfallReport:
    """The rules for whichever format `path` is in (a WFP file has `adm_level`)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(path, "file not found")
    with open(path, "rb") as f:
        head = f.readline()
    is_wfp = b"adm_level" in head
    return check_wfp_file(path, geography) if is_wfp else check_chirps_file(path, geography)


def check_rainfall(data_dir: Path, geography: Geography | None = None) -> RainfallReport:
    return check_rainfall_file(rainfall_file(data_dir), geography)


@dataclass(frozen=True)
class DataCheck:
    """`data check`: the data directory passes every input rule the build applies up front."""

    rainfall: RainfallReport
    states: int
    lgas: int
    survey_rows: int


def check_data_dir(data_dir: Path) -> DataCheck:
    """Read and check what the build reads before its model runs: geography (admin/), recorded
    rainfall (every rule above) and the survey table. Raises the first InputError."""
    from pipeline.geography import load_geography
    from pipeline.sources.names import state_name_codes
    from pipeline.sources.survey import read_survey_positivity

    geo = load_geography(Path(data_dir))
    report = check_rainfall(Path(data_dir), geo)
    survey = read_survey_positivity(Path(data_dir), state_name_codes(geo.states))
    return DataCheck(report, geo.states.height, geo.lgas.height, survey.height)
