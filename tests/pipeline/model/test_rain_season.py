"""The rain-season rules on made-up rainfall (pipeline/model/rain_season.py)."""

from __future__ import annotations

import datetime as dt

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.model.rain_season import (
    best_window_share,
    dekadal_rain_seasons,
    lga_rain_seasons,
    monthly_rain_seasons,
    rain_season_climate,
)


def _dekad_dates(years: range) -> list[dt.date]:
    return [dt.date(y, m, d) for y in years for m in range(1, 13) for d in (1, 11, 21)]


def dekads_frame(per_year: dict[str, np.ndarray], years: range, provisional: set[dt.date] | None = None) -> pl.DataFrame:
    """area -> 36 dekad values repeated every year (or a (years, 36) array)."""
    dates = _dekad_dates(years)
    rows = []
    for area, values in per_year.items():
        v = np.broadcast_to(values, (len(years), 36)).reshape(-1)
        rows.append(pl.DataFrame({"area": area, "dekad_start": dates, "rain_mm": v.astype(float),
                                  "provisional": [d in (provisional or set()) for d in dates]}))
    return pl.concat(rows)


def one_season(start: int, length: int, mm: float = 30.0) -> np.ndarray:
    v = np.zeros(36)
    v[start:start + length] = mm
    return v


@settings(max_examples=40, deadline=None)
@given(start=st.integers(6, 20), length=st.integers(4, 12))
def test_one_wet_season_has_its_first_and_last_wet_dekad(start: int, length: int) -> None:
    s = dekadal_rain_seasons(dekads_frame({"A": one_season(start, length)}, range(2000, 2003)))
    row = s.filter(pl.col("year") == 2001).row(0, named=True)
    assert row["complete"]
    assert row["onset_dekad"] == start + 1
    assert row["cessation_dekad"] == start + length
    assert row["season_dekads"] == length
    assert row["onset_month"] == start // 3 + 1
    assert row["onset_date"] == _dekad_dates(range(2001, 2002))[start]


@settings(max_examples=25, deadline=None)
@given(start=st.integers(8, 18), shift=st.integers(-5, 5))
def test_shifting_the_rains_shifts_onset_and_cessation_alike(start: int, shift: int) -> None:
    base = one_season(start, 8) + 1.0
    moved = np.roll(base, shift)
    s = dekadal_rain_seasons(dekads_frame({"A": base, "B": moved}, range(2000, 2003))).filter(pl.col("year") == 2001)
    a, b = s.row(0, named=True), s.row(1, named=True)
    assert b["onset_dekad"] - a["onset_dekad"] == shift
    assert b["cessation_dekad"] - a["cessation_dekad"] == shift


def test_the_start_of_season_thresholds_are_inclusive() -> None:
    exact = np.zeros(36)
    exact[10], exact[11], exact[12] = 25.0, 10.0, 10.0  # 25 mm, then exactly 20 mm in two dekads
    exact[15:22] = 40.0
    short = exact.copy()
    short[12] = 9.99  # 19.99 mm in the next two dekads: no onset there
    s = dekadal_rain_seasons(dekads_frame({"exact": exact, "short": short}, range(2000, 2003)))
    got = dict(s.filter(pl.col("year") == 2001).select("area", "onset_dekad").iter_rows())
    assert got == {"exact": 11, "short": 16}


def test_a_missing_or_provisional_dekad_makes_the_year_incomplete() -> None:
    frame = dekads_frame({"A": one_season(12, 9)}, range(2000, 2004), provisional={dt.date(2003, 7, 11)})
    frame = frame.filter(pl.col("dekad_start") != dt.date(2001, 2, 11))
    s = dekadal_rain_seasons(frame)
    got = {r["year"]: r for r in s.iter_rows(named=True)}
    assert [y for y, r in got.items() if r["complete"]] == [2000, 2002]
    assert got[2001]["onset_dekad"] is None and got[2001]["best4_share"] is None
    assert got[2003]["onset_dekad"] is None and got[2003]["annual_mm"] is None
    assert got[2002]["onset_dekad"] == 13


def test_a_wet_season_across_new_year_is_found_whole() -> None:
    v = np.full(36, 1.0)
    v[30:36] = 40.0  # November, December
    v[0:6] = 40.0  # January, February
    s = dekadal_rain_seasons(dekads_frame({"A": v}, range(2000, 2004)))
    row = s.filter(pl.col("year") == 2002).row(0, named=True)
    assert row["season_year_start"] == 3  # the first driest month, March
    assert row["onset_month"] == 11 and row["onset_date"] == dt.date(2002, 11, 1)
    assert row["cessation_month"] == 2 and row["cessation_date"] == dt.date(2003, 2, 21)
    assert row["season_dekads"] == 12
    assert row["best4_start_month"] == 11  # November to February, wrapping inside the year
    assert abs(row["best4_share"] - 480 / 504) < 1e-9


def test_best_window_share_exactly_sixty_percent_and_wrapping() -> None:
    m = np.array([[[20.0, 20, 20, 20, 60, 60, 60, 60, 20, 20, 20, 20]]])  # 240 of 400
    share, start = best_window_share(m)
    assert start[0, 0] == 5 and share[0, 0] == 0.6
    wrap = np.array([[[90.0, 60, 5, 5, 5, 5, 5, 5, 5, 5, 50, 100]]])  # November..February of the same year
    share, start = best_window_share(wrap)
    assert start[0, 0] == 11 and share[0, 0] == 300 / 340
    flat = np.full((1, 1, 12), 5.0)
    share, start = best_window_share(flat)
    assert share[0, 0] == 4 / 12 and start[0, 0] == 1
    gap = m.copy()
    gap[0, 0, 3] = np.nan
    share, start = best_window_share(gap)
    assert np.isnan(share[0, 0]) and start[0, 0] == 0


def test_monthly_onset_is_the_month_after_the_cumulative_anomaly_minimum() -> None:
    months = [f"{y}-{m:02d}" for y in range(2001, 2004) for m in range(1, 13)]
    shape = np.array([2, 2, 5, 30, 90, 150, 200, 250, 180, 60, 5, 1.0])
    frame = pl.DataFrame({"area": "L", "period": months, "rain_mm": np.tile(shape, 3)})
    s = monthly_rain_seasons(frame).filter(pl.col("year") == 2002).row(0, named=True)
    mean = shape.mean()  # 81.25: rain above the mean from May to September
    assert (shape > mean).nonzero()[0].tolist() == [4, 5, 6, 7, 8]
    assert s["onset_month"] == 5 and s["cessation_month"] == 9 and s["season_months"] == 5
    assert s["onset_dekad"] is None and s["onset_rule"] == "cumulative_anomaly_monthly"
    assert s["best4_start_month"] == 6 and abs(s["best4_share"] - 780 / shape.sum()) < 1e-9


def test_lga_rows_say_which_rain_they_come_from() -> None:
    state = dekadal_rain_seasons(dekads_frame({"S": one_season(12, 9)}, range(2001, 2005)))
    months = [f"{y}-{m:02d}" for y in range(2001, 2003) for m in range(1, 13)]
    lga = monthly_rain_seasons(pl.DataFrame({"area": "L1", "period": months,
                                             "rain_mm": np.tile([0, 0, 0, 0, 100, 100, 100, 100, 0, 0, 0, 0.0], 2)}))
    out = lga_rain_seasons(lga, state, pl.DataFrame({"lga": ["L1", "L2"], "state": ["S", "S"]}))
    src = {(r["lga"], r["year"]): r for r in out.iter_rows(named=True)}
    assert {k: v["rain_source"] for k, v in src.items() if k[0] == "L1"} == {
        ("L1", 2001): "lga_monthly", ("L1", 2002): "lga_monthly", ("L1", 2003): "state_dekadal", ("L1", 2004): "state_dekadal"}
    assert all(v["rain_source"] == "state_dekadal" for k, v in src.items() if k[0] == "L2")
    assert src[("L1", 2001)]["onset_month"] == 5 and src[("L1", 2001)]["best4_share"] == 1.0
    assert src[("L1", 2003)]["onset_month"] == 5 and src[("L1", 2003)]["onset_dekad"] == 13


def test_climate_uses_the_last_ten_complete_years() -> None:
    years = range(1990, 2006)
    vals = np.array([one_season(9 + (y % 4), 10) for y in years])  # onsets cycle through dekads 10..13
    frame = dekads_frame({"A": vals}, years, provisional={dt.date(2005, 6, 1)})
    s = dekadal_rain_seasons(frame)
    c = rain_season_climate(s).row(0, named=True)
    assert (c["first_year"], c["last_year"], c["n_years"]) == (1995, 2004, 10)
    ten = [9 + (y % 4) + 1 for y in range(1995, 2005)]
    assert c["onset_month_median"] == (int(np.round(np.median(ten))) - 1) // 3 + 1
    assert c["onset_month_earliest"] == 4 and c["onset_month_latest"] == 5
    assert c["onset_iqr_dekads"] == float(np.quantile(ten, 0.75) - np.quantile(ten, 0.25))
