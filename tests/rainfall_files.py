"""Rainfall files in the real formats, small, made by the tests themselves.

`wfp_file`: WFP's HDX subnational CSV (header, HXL tag row, one row per area and dekad,
`version` final/prelim/forecast), as rainfall/SOURCES.md and pipeline/sources/rainfall.py
describe it, with a made-up but seasonal series. `wfp_from_real_dekads`: the same format
filled from the data directory's real state dekads (for end-to-end builds).
"""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl

WFP_HEADER = "date,adm_level,adm_id,PCODE,n_pixels,rfh,rfh_avg,r1h,r1h_avg,r3h,r3h_avg,rfq,r1q,r3q,version"
WFP_HXL = ("#date,#adm_level,#adm_id,#adm_pcode,#indicator+n_pixels,#indicator+rfh,#indicator+rfh_avg,"
           "#indicator+r1h,#indicator+r1h_avg,#indicator+r3h,#indicator+r3h_avg,#indicator+rfq,#indicator+r1q,"
           "#indicator+r3q,#status")
STATES = ["NG020", "NG026", "NG030"]
LGAS = {"NG020": ["NG020001", "NG020002"], "NG026": ["NG026001"], "NG030": ["NG030001"]}


def wfp_row(date: str, level: int, pcode: str, rfh: float, version: str) -> str:
    return (f"{date},{level},{100 + level},{pcode},120,{rfh:.4f},{rfh:.4f},{rfh * 3:.4f},{rfh * 3:.4f},"
            f"{rfh * 9:.4f},{rfh * 9:.4f},100,100,100,{version}")


def dekads(first: str, last: str) -> list[str]:
    """Dekad start dates from the first dekad of month `first` to the last of month `last`."""
    y, m = int(first[:4]), int(first[5:7])
    out = []
    while f"{y:04d}-{m:02d}" <= last:
        out += [f"{y:04d}-{m:02d}-{d}" for d in ("01", "11", "21")]
        y, m = (y + 1, 1) if m == 12 else (y, m + 1)
    return out


def dekad_mm(pcode: str, date: str) -> float:
    """A seasonal, year-to-year varying dekad total (mm): wet July-September, dry winter."""
    y, m, d = int(date[:4]), int(date[5:7]), int(date[8:10])
    season = max(0.0, math.sin((m - 3.5) / 12 * 2 * math.pi))
    wobble = 1 + 0.25 * math.sin(y * 1.7 + int(pcode[-3:]) + d)
    return round(2 + 60 * season * wobble, 4)


def wfp_lines(first: str = "2014-01", last: str = "2020-06", states: list[str] | None = None,
              lgas: dict[str, list[str]] | None = None, prelim: int = 2, forecast: int = 1) -> list[str]:
    """Header, HXL row and rows for every area and dekad up to `last`: its final `prelim` dekads
    are `prelim`, then `forecast` dekads of the next month are `forecast`."""
    areas = [(1, s) for s in (states or STATES)]
    if lgas is not None:
        areas += [(2, code) for codes in lgas.values() for code in codes]
    dates = dekads(first, last)
    y, m = int(last[:4]), int(last[5:7])
    nxt = f"{y + (m == 12):04d}-{m % 12 + 1:02d}"
    extra = dekads(nxt, nxt)[:forecast]
    rows = [WFP_HEADER, WFP_HXL]
    for level, pcode in areas:
        for i, date in enumerate(dates):
            version = "prelim" if i >= len(dates) - prelim else "final"
            rows.append(wfp_row(date, level, pcode, dekad_mm(pcode, date), version))
        rows += [wfp_row(date, level, pcode, dekad_mm(pcode, date), "forecast") for date in extra]
    return rows


def wfp_file(path: Path, **kw: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(wfp_lines(**kw)) + "\n")  # type: ignore[arg-type]
    return path


def wfp_from_real_dekads(data_dir: Path, path: Path, first: str = "2008-01", last: str = "2026-06",
                         prelim: int = 4) -> Path:
    """The real state dekads (rainfall/nga_state_chirps_dekadal_wfp_1981_2026.csv) in WFP's format,
    months `first`..`last`, the last `prelim` dekads flagged prelim, the next one forecast."""
    real = pl.read_csv(data_dir / "rainfall" / "nga_state_chirps_dekadal_wfp_1981_2026.csv")
    real = real.filter(pl.col("dekad_start").str.slice(0, 7) >= first).sort("pcode", "dekad_start")
    dates = sorted(real["dekad_start"].unique().to_list())
    in_window = [d for d in dates if d[:7] <= last]
    prelim_dates = set(in_window[-prelim:]) if prelim else set()
    after = [d for d in dates if d[:7] > last][:1]
    rows = [WFP_HEADER, WFP_HXL]
    for pcode, date, mm in real.select("pcode", "dekad_start", "rfh_mm").iter_rows():
        if date[:7] <= last:
            rows.append(wfp_row(date, 1, pcode, mm, "prelim" if date in prelim_dates else "final"))
        elif date in after:
            rows.append(wfp_row(date, 1, pcode, mm, "forecast"))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(rows) + "\n")
    return path
