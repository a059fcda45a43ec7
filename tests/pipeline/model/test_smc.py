"""Nigeria's SMC rule on made-up rainfall (pipeline/model/smc.py)."""

from __future__ import annotations

import datetime as dt

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.model import smc
from pipeline.model.rain_season import dekadal_rain_seasons, rain_season_climate


def year_rows(shares: dict[int, float | None], area: str = "A") -> pl.DataFrame:
    """Per-year rows as rain_season returns them (None: an incomplete year)."""
    return pl.DataFrame({
        "area": area, "year": list(shares),
        "complete": [v is not None for v in shares.values()],
        "best4_share": [v for v in shares.values()],
    }, schema_overrides={"best4_share": pl.Float64})


def monthly_to_dekads(months: np.ndarray) -> np.ndarray:
    """12 monthly totals -> 36 dekads, a third each."""
    return np.repeat(np.asarray(months, dtype=float) / 3.0, 3)


def dekad_frame(area_years: dict[str, list[np.ndarray]], first_year: int) -> pl.DataFrame:
    frames = []
    for area, years in area_years.items():
        dates = [dt.date(first_year + i, m, d) for i in range(len(years)) for m in range(1, 13) for d in (1, 11, 21)]
        frames.append(pl.DataFrame({"area": area, "dekad_start": dates, "rain_mm": np.concatenate(years),
                                    "lta_mm": 10.0, "provisional": False}))
    return pl.concat(frames)


def test_a_share_of_exactly_sixty_percent_passes_from_real_rainfall_sums() -> None:
    exact = monthly_to_dekads([20, 20, 20, 20, 60, 60, 60, 60, 20, 20, 20, 20])  # 240 of 400 mm
    below = monthly_to_dekads([20, 20, 20, 20.1, 60, 60, 60, 60, 20, 20, 20, 20])  # 240 of 400.1 mm
    s = dekadal_rain_seasons(dekad_frame({"exact": [exact] * 10, "below": [below] * 10}, 2010))
    e = {r["area"]: r for r in smc.eligibility(s).iter_rows(named=True)}
    assert e["exact"]["eligible"] is True and e["exact"]["margin"] == 0.0 and e["exact"]["years_passed"] == 10
    assert e["below"]["eligible"] is False and e["below"]["years_passed"] == 0
    assert e["below"]["margin"] == round(240 / 400.1 - 0.6, 4)


def test_four_consecutive_years_are_needed_and_a_missing_year_breaks_the_run() -> None:
    hi, lo = 0.7, 0.5
    three_and_three = {2016: hi, 2017: hi, 2018: hi, 2019: lo, 2020: hi, 2021: hi, 2022: hi, 2023: lo, 2024: lo, 2025: lo}
    four = {**three_and_three, 2019: hi}
    gap = {**four, 2018: None}  # 2018 incomplete: 2016-2017 and 2019-2022 are runs of 2 and 4
    gap_breaks = {**four, 2017: None, 2021: None}  # seven passing years broken into runs of 1, 3 and 1
    rows = pl.concat([year_rows(three_and_three, "three"), year_rows(four, "four"), year_rows(gap, "gap"),
                      year_rows(gap_breaks, "broken")])
    e = {r["area"]: r for r in smc.eligibility(rows).iter_rows(named=True)}
    assert (e["three"]["eligible"], e["three"]["longest_run"], e["three"]["years_passed"]) == (False, 3, 6)
    assert e["three"]["margin"] == round(lo - 0.6, 4)
    assert (e["four"]["eligible"], e["four"]["longest_run"], e["four"]["margin"]) == (True, 7, round(hi - 0.6, 4))
    assert (e["gap"]["eligible"], e["gap"]["longest_run"], e["gap"]["complete_years"]) == (True, 4, 9)
    assert e["gap"]["best_run_first_year"] == 2019
    assert (e["broken"]["eligible"], e["broken"]["longest_run"], e["broken"]["years_passed"]) == (False, 3, 5)
    assert e["broken"]["shares"][1] is None and e["broken"]["shares"][0] == hi


def test_fewer_than_four_complete_years_give_no_verdict() -> None:
    rows = year_rows({2016: 0.9, 2017: None, 2018: 0.9, 2019: 0.9, 2020: None, 2021: 0.9, 2022: None, 2023: None,
                      2024: 0.9, 2025: None})
    e = smc.eligibility(rows).row(0, named=True)
    assert e["eligible"] is None and e["margin"] is None and e["longest_run"] == 2


def test_the_window_is_the_last_ten_complete_years() -> None:
    shares: dict[int, float | None] = {y: 0.7 for y in range(2000, 2016)}  # passing long ago
    shares.update({y: 0.5 for y in range(2016, 2026)})
    shares[2026] = None  # the current, incomplete year
    e = smc.eligibility(year_rows(shares)).row(0, named=True)
    assert (e["first_year"], e["last_year"], e["eligible"], e["years_passed"]) == (2016, 2025, False, 0)


@settings(max_examples=30, deadline=None)
@given(shares=st.lists(st.one_of(st.none(), st.floats(0.3, 0.95)), min_size=10, max_size=10))
def test_eligible_exactly_when_the_margin_is_not_negative(shares: list[float | None]) -> None:
    e = smc.eligibility(year_rows(dict(zip(range(2016, 2026), shares, strict=True)))).row(0, named=True)
    if e["margin"] is None:
        assert e["eligible"] is None or e["eligible"] is False
    else:
        assert e["eligible"] == (e["margin"] >= 0)
        assert e["eligible"] == (e["longest_run"] >= 4)


def test_a_wet_season_across_new_year_is_judged_on_its_own_months() -> None:
    wrap = monthly_to_dekads([150, 120, 5, 5, 5, 5, 5, 5, 5, 5, 100, 130])  # Nov-Feb: 500 of 540 mm
    s = dekadal_rain_seasons(dekad_frame({"W": [wrap] * 10}, 2010))
    e = smc.eligibility(s).row(0, named=True)
    assert e["eligible"] is True and e["margin"] == round(500 / 540 - 0.6, 4)
    t = smc.timing(s, rain_season_climate(s)).row(0, named=True)
    assert t["best4_start_month_mode"] == 11 and t["first_cycle_month"] == 12
    assert t["cycle_months"][:2] == [12, 1]


def test_first_cycle_follows_the_wettest_months_and_a_long_season_gets_five_cycles() -> None:
    short = monthly_to_dekads([0, 0, 0, 0, 10, 80, 150, 200, 120, 5, 0, 0])  # rains end in September
    long = monthly_to_dekads([0, 0, 0, 10, 60, 90, 150, 200, 150, 120, 80, 0])  # rains run on into November
    s = dekadal_rain_seasons(dekad_frame({"short": [short] * 10, "long": [long] * 10}, 2010))
    t = {r["area"]: r for r in smc.timing(s, rain_season_climate(s)).iter_rows(named=True)}
    assert t["short"]["best4_start_month_mode"] == 6 and t["short"]["first_cycle_month"] == 7
    assert t["short"]["cycles"] == 4 and t["short"]["cycle_months"] == [7, 8, 9, 10]
    assert t["long"]["best4_start_month_mode"] == 7 and t["long"]["first_cycle_month"] == 8
    assert t["long"]["cycles"] == 5 and t["long"]["cycle_months"] == [8, 9, 10, 11, 12]


def test_rain_so_far_and_this_years_onset() -> None:
    dates = [dt.date(2026, m, d) for m in range(1, 6) for d in (1, 11, 21)]
    rain = [0.0] * 9 + [30.0, 5.0, 16.0, 40.0, 40.0, 40.0]  # onset 2026-04-01 (30, then 21 mm)
    frame = pl.DataFrame({"area": "A", "dekad_start": dates, "rain_mm": rain, "lta_mm": 20.0,
                          "provisional": [d >= dt.date(2026, 5, 1) for d in dates]})
    old = frame.with_columns(pl.col("dekad_start").dt.offset_by("-1y"), pl.lit(99.0).alias("rain_mm"))
    r = smc.rain_so_far(pl.concat([old, frame])).row(0, named=True)
    assert (r["year"], r["rain_mm"], r["lta_mm"], r["dekads"]) == (2026, 171.0, 300.0, 15)
    assert r["percent_of_average"] == 57 and r["provisional"] is True and r["through"] == dt.date(2026, 5, 21)
    o = smc.onset_so_far(frame).row(0, named=True)
    assert o["onset_date"] == dt.date(2026, 4, 1)
    none_yet = smc.onset_so_far(frame.with_columns(pl.lit(1.0).alias("rain_mm"))).row(0, named=True)
    assert none_yet["onset_date"] is None


def test_case_share_from_a_seasonal_index() -> None:
    idx = np.array([[0.1, 0.1, 0.1, 0.1, 0.2, 0.5, 1.0, 1.0, 0.8, 0.3, 0.1, 0.1],
                    [1.0] * 12])
    got = smc.case_share(idx)
    assert got[0] == round(3.3 / 4.4, 4) and got[1] == round(4 / 12, 4)
