"""Seasonal malaria chemoprevention (SMC) planning by Nigeria's own rule (no file I/O).

Why a fixed rule and not a fit: Nigeria decides SMC eligibility from rainfall (at least 60 % of
the year's rain in 4 consecutive months, in 4 consecutive years), and an officer must be able to
re-derive every verdict from the published shares. The timing rule is set from the published
lag between rain and transmission, not tuned to the recorded rounds, so the comparison with the
rounds Nigeria delivered stays a check (docs/smc.md).

* **Year passes** when its best-4-month share (pipeline.model.rain_season, rounded to the
  published 4 decimals) is at least 0.60.
* **Eligible** when, over the last ten complete years, at least 4 consecutive years pass. A
  missing (incomplete) year breaks a run. Fewer than 4 complete years: no verdict (null).
* **Margin**: over every run of 4 consecutive complete years in the window, the lowest share of
  the run; the margin is the best such value minus 0.60 (eligible exactly when it is >= 0).
* **First cycle**: the month after the start of the best 4 rain months (the most frequent start
  over the ten years, the earliest on ties): cases follow the rain by about a month.
* **Cycles**: 4 monthly cycles, 5 when the median cessation month plus that month of lag falls
  after the fourth cycle (transmission still high in the month after it).
"""

from __future__ import annotations

import numpy as np
import polars as pl

SHARE_THRESHOLD = 0.60
RUN_YEARS = 4
WINDOW_YEARS = 10
SHARE_DECIMALS = 4
LAG_MONTHS = 1
MIN_CYCLES, MAX_CYCLES = 4, 5

RULE = ("Eligible when at least 60 % of the year's rainfall falls in 4 consecutive months (best_4_month_share "
        ">= 0.60) in at least 4 consecutive years of the last ten complete years; a missing year breaks a run.")
TIMING_RULE = ("First cycle in the month after the start of the wettest 4 consecutive months (their most frequent "
               "start over the last ten complete years): cases follow rain by about one month. Cycles are monthly: "
               "4, or 5 when the median end of the rains plus one month falls after the fourth cycle.")


def _matrix(years: pl.DataFrame, keys: list[str]) -> tuple[pl.DataFrame, np.ndarray, np.ndarray]:
    """(area keys, shares[area, 10 window years] with NaN for incomplete years, years[area, 10])."""
    # the window ends at the last complete year (or, with none, at the last year: no verdict then)
    last = years.group_by(keys).agg(pl.col("year").filter(pl.col("complete")).max().fill_null(pl.col("year").max())
                                    .alias("_last"))
    areas = last.sort(keys)
    offs = pl.DataFrame({"_k": list(range(WINDOW_YEARS))})
    grid = areas.join(offs, how="cross").with_columns(
        (pl.col("_last") - WINDOW_YEARS + 1 + pl.col("_k")).alias("year"))
    got = grid.join(years.select(*keys, "year", "complete", "best4_share"), on=[*keys, "year"], how="left")
    got = got.sort([*keys, "_k"])
    share = got.select(pl.when(pl.col("complete").fill_null(False)).then(pl.col("best4_share").round(SHARE_DECIMALS))
                       .otherwise(None)).to_series().cast(pl.Float64).fill_null(np.nan).to_numpy()
    yrs = got["year"].to_numpy()
    return areas.select(keys), share.reshape(-1, WINDOW_YEARS), yrs.reshape(-1, WINDOW_YEARS)


def eligibility(years: pl.DataFrame, key: str | list[str] = "area") -> pl.DataFrame:
    """Per area, from per-year rows (keys, year, complete, best4_share): first_year, last_year,
    complete_years, years_passed, longest_run, eligible, margin, best_run_first_year, shares
    (the ten window years' shares, null where incomplete)."""
    keys = [key] if isinstance(key, str) else key
    areas, share, yrs = _matrix(years, keys)
    passed = np.nan_to_num(share, nan=-1.0) >= SHARE_THRESHOLD
    run = np.zeros(passed.shape[0], dtype=np.int64)
    longest = np.zeros_like(run)
    for k in range(WINDOW_YEARS):  # over the ten years, vectorised over areas
        run = np.where(passed[:, k], run + 1, 0)
        longest = np.maximum(longest, run)
    windows = np.lib.stride_tricks.sliding_window_view(share, RUN_YEARS, axis=1).min(axis=-1)  # NaN if a year is missing
    any_run = np.isfinite(windows).any(axis=1)
    best_start = np.argmax(np.where(np.isfinite(windows), windows, -np.inf), axis=1)
    best = np.take_along_axis(windows, best_start[:, None], axis=1)[:, 0]
    complete = np.isfinite(share).sum(axis=1)
    return areas.with_columns(
        pl.Series("first_year", yrs[:, 0]),
        pl.Series("last_year", yrs[:, -1]),
        pl.Series("complete_years", complete),
        pl.Series("years_passed", passed.sum(axis=1)),
        pl.Series("longest_run", longest),
        pl.Series("eligible", np.where(any_run, longest >= RUN_YEARS, False)).cast(pl.Boolean),
        pl.Series("margin", np.where(any_run, np.round(best - SHARE_THRESHOLD, SHARE_DECIMALS), np.nan)).fill_nan(None),
        pl.Series("best_run_first_year", np.where(any_run, yrs[np.arange(len(yrs)), best_start], -1)),
        pl.Series("shares", [[None if np.isnan(v) else float(v) for v in row] for row in share],
                  dtype=pl.List(pl.Float64)),
    ).with_columns(
        pl.when(pl.col("best_run_first_year") < 0).then(None).otherwise(pl.col("best_run_first_year"))
        .alias("best_run_first_year"),
        pl.when(pl.Series(any_run)).then(pl.col("eligible")).otherwise(None).alias("eligible"),
    )


def _mode_earliest(values: list[int]) -> int | None:
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    counts = np.bincount(vals, minlength=13)
    return int(np.argmax(counts))  # argmax takes the first (earliest month) on ties


def timing(years: pl.DataFrame, climate: pl.DataFrame, key: str | list[str] = "area") -> pl.DataFrame:
    """Per area: best4_start_month (mode over the last ten complete years), first_cycle_month,
    cycles (4 or 5) and cycle_months, from per-year rows and rain_season_climate output."""
    keys = [key] if isinstance(key, str) else key
    from pipeline.model.rain_season import last_complete_years

    win = years.join(last_complete_years(years, keys, WINDOW_YEARS), on=[*keys, "year"]).filter(pl.col("complete"))
    starts = win.group_by(keys).agg(pl.col("best4_start_month").alias("_starts"))
    starts = starts.with_columns(pl.col("_starts").map_elements(_mode_earliest, return_dtype=pl.Int64)
                                 .alias("best4_start_month_mode"))
    df = starts.join(climate.select(*keys, "cessation_month_median"), on=keys, how="left")
    first = (pl.col("best4_start_month_mode") - 1 + LAG_MONTHS) % 12 + 1
    need = ((pl.col("cessation_month_median") - 1 + LAG_MONTHS) % 12 + 1 - first) % 12 + 1  # months first..last needed
    cycles = pl.when(need.is_between(MAX_CYCLES, 8)).then(MAX_CYCLES).otherwise(MIN_CYCLES)
    out = df.select(*keys, "best4_start_month_mode", first.alias("first_cycle_month"), cycles.alias("cycles")).sort(keys)
    months = [[int((m - 1 + k) % 12 + 1) for k in range(c)] if m is not None else None
              for m, c in zip(out["first_cycle_month"].to_list(), out["cycles"].to_list(), strict=True)]
    return out.with_columns(pl.Series("cycle_months", months, dtype=pl.List(pl.Int64)))


def case_share(index: np.ndarray) -> np.ndarray:
    """Modelled share of a year's cases in the best 4 consecutive months, from 12-value seasonal
    indices (rows): the same wrapping windows as the rain share."""
    from pipeline.model.rain_season import best_window_share

    share, _ = best_window_share(np.asarray(index, dtype=float)[:, None, :])
    return np.round(share[:, 0], SHARE_DECIMALS)


def rain_so_far(dekads: pl.DataFrame, key: str = "area") -> pl.DataFrame:
    """Per area, this year's rain to date against the long-term average of the same dekads.

    From dekadal rows (key, dekad_start, rain_mm, lta_mm, provisional) of the newest year in the
    file: rain_mm, lta_mm, percent_of_average (100 x rain / average), dekads, through (the last
    dekad's start), provisional (any of them provisional).
    """
    year = dekads["dekad_start"].dt.year().max()
    cur = dekads.filter(pl.col("dekad_start").dt.year() == year)
    return (cur.group_by(key).agg(
        pl.lit(year).cast(pl.Int64).alias("year"),
        pl.col("rain_mm").sum().round(1).alias("rain_mm"),
        pl.col("lta_mm").sum().round(1).alias("lta_mm"),
        (100 * pl.col("rain_mm").sum() / pl.col("lta_mm").sum()).round(0).cast(pl.Int64).alias("percent_of_average"),
        pl.len().alias("dekads"),
        pl.col("dekad_start").max().alias("through"),
        pl.col("provisional").any().alias("provisional"),
    ).sort(key))


def onset_so_far(dekads: pl.DataFrame, key: str = "area") -> pl.DataFrame:
    """Per area, the start of season (same rule as rain_season) in the newest year so far, from the
    dekads present (provisional ones count here, flagged by rain_so_far); null: not yet."""
    from pipeline.model.rain_season import SOS_FIRST_MM, SOS_NEXT_TWO_MM

    year = dekads["dekad_start"].dt.year().max()
    cur = dekads.filter(pl.col("dekad_start").dt.year() == year).sort(key, "dekad_start")
    nxt = pl.col("rain_mm").shift(-1).over(key) + pl.col("rain_mm").shift(-2).over(key)
    hit = cur.with_columns(((pl.col("rain_mm") >= SOS_FIRST_MM) & (nxt >= SOS_NEXT_TWO_MM)).fill_null(False).alias("_h"))
    first = hit.filter(pl.col("_h")).group_by(key).agg(pl.col("dekad_start").min().alias("onset_date"))
    return cur.select(key).unique().join(first, on=key, how="left").sort(key)
