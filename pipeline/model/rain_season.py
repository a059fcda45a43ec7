"""The rain season per area and year, from dekadal or monthly rainfall (no file I/O).

Why these rules: an onset that agronomists and early-warning services already publish is
easier to check than one fitted here, and the same numbers serve the transmission seasons
and SMC planning (docs/rain-season.md has the definitions, their sources and the choices).

* **Onset** (dekadal series): the AGRHYMET / FEWS NET start-of-season rule of the Water
  Requirement Satisfaction Index: the first dekad with at least 25 mm, followed by two dekads
  that together bring at least 20 mm.
* **Cessation**: the cumulative-anomaly rule of Liebmann & Marengo (2001) and Liebmann et
  al. (2012): with A(t) the running sum of (rain - the area's mean rain per time step) from
  the start of the season year, the season ends at the step where A(t) peaks (after onset).
* **Onset on monthly totals** (the LGA series has no dekads): the same cumulative-anomaly
  rule, whose onset is the step after A(t)'s minimum; it needs no dekadal threshold.
* **Season year**: onsets are searched from the first day of the area's climatologically
  driest month (from its complete years), so a wet season across the New Year is not cut
  in two. A driest month from July on starts the season year in the previous calendar year.
* **Best 4 consecutive months**: windows run around the calendar year (a window starting
  in November takes November, December, January and February *of the same year*), so each
  year is judged on its own twelve months and needs no rain from the next year; the share
  is the window's rain over the year's rain.
* A year counts only when all its steps are recorded and none is provisional.
"""

from __future__ import annotations

import numpy as np
import polars as pl

DEKADS = 36
SOS_FIRST_MM = 25.0  # AGRHYMET / FEWS NET WRSI start of season: the dekad itself
SOS_NEXT_TWO_MM = 20.0  # ... and the next two dekads together
BEST_WINDOW_MONTHS = 4

ONSET_RULE_DEKADAL = "agrhymet_wrsi_sos"
ONSET_RULE_MONTHLY = "cumulative_anomaly_monthly"
CESSATION_RULE = "cumulative_anomaly"

SEASON_COLUMNS = (
    "area", "year", "complete", "annual_mm", "season_year_start", "onset_date", "onset_dekad", "onset_month",
    "onset_rule", "cessation_date", "cessation_dekad", "cessation_month", "season_dekads", "season_months",
    "best4_start_month", "best4_share",
)


def _dense(frame: pl.DataFrame, step: pl.Expr, per_year: int) -> tuple[list[str], int, np.ndarray]:
    """(areas, first year, rain[area, year, step]) with NaN where a step is missing or provisional."""
    f = frame.with_columns(step.alias("_s"), pl.col("_date").dt.year().alias("_y"))
    if "provisional" in f.columns:
        f = f.with_columns(pl.when(pl.col("provisional")).then(None).otherwise(pl.col("rain_mm")).alias("rain_mm"))
    areas = sorted(f["area"].unique().to_list())
    y0, y1 = int(f["_y"].min()), int(f["_y"].max())  # type: ignore[arg-type]
    a_idx = f["area"].replace_strict(areas, list(range(len(areas))), return_dtype=pl.Int64).to_numpy()
    out = np.full((len(areas), y1 - y0 + 1, per_year), np.nan)
    vals = f["rain_mm"].cast(pl.Float64).fill_null(np.nan).to_numpy()
    out[a_idx, f["_y"].to_numpy() - y0, f["_s"].to_numpy()] = vals
    return areas, y0, out


def _driest_month(monthly: np.ndarray, complete: np.ndarray) -> np.ndarray:
    """Per area, the calendar month (1..12) with the least mean rain over its complete years."""
    w = np.where(complete[:, :, None], monthly, np.nan)
    with np.errstate(invalid="ignore"):
        clim = np.nanmean(w, axis=1)
    clim = np.where(np.isnan(clim), np.inf, clim)
    return np.argmin(clim, axis=1) + 1


def _season_offset(driest: np.ndarray, per_month: int) -> np.ndarray:
    """Steps from 1 January of year Y to the start of season year Y (negative: the previous year)."""
    start = (driest - 1) * per_month
    return np.where(driest >= 7, start - 12 * per_month, start)


def best_window_share(monthly: np.ndarray, window: int = BEST_WINDOW_MONTHS) -> tuple[np.ndarray, np.ndarray]:
    """(share, start month 1..12) of the wettest `window` consecutive months of each year,
    wrapping inside the same calendar year; NaN / 0 where a month is missing or the year is dry."""
    annual = monthly.sum(axis=-1)
    rolled = sum(np.roll(monthly, -k, axis=-1) for k in range(window))
    rolled = np.asarray(rolled)
    ok = np.isfinite(annual) & (annual > 0)
    filled = np.where(np.isfinite(rolled), rolled, -np.inf)
    start = np.argmax(filled, axis=-1)  # the first window on ties
    best = np.take_along_axis(filled, start[..., None], axis=-1)[..., 0]
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(ok, best / np.where(ok, annual, 1.0), np.nan)
    return share, np.where(ok, start + 1, 0)


def _windows(series: np.ndarray, first: np.ndarray, length: int) -> np.ndarray:
    """series[a, first[a, y] + k] for k < length, NaN outside the series."""
    pad = length + 3 * DEKADS
    padded = np.pad(series, ((0, 0), (pad, pad)), constant_values=np.nan)
    idx = first[:, :, None] + pad + np.arange(length)[None, None, :]
    return padded[np.arange(series.shape[0])[:, None, None], idx]


def _cum_anomaly_peak(window: np.ndarray, mean: np.ndarray, onset: np.ndarray) -> np.ndarray:
    """Index of the peak of the cumulative anomaly at or after onset (-1 where onset is -1)."""
    acc = np.cumsum(window - mean[:, None, None], axis=-1)
    steps = np.arange(window.shape[-1])[None, None, :]
    masked = np.where((steps >= onset[..., None]) & np.isfinite(acc), acc, -np.inf)
    peak = np.argmax(masked, axis=-1)
    return np.where(onset >= 0, peak, -1)


def _dates(y0: int, year_idx: np.ndarray, global_step: np.ndarray, per_month: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(year, month, step within month) of steps counted from 1 January of the first year."""
    per_year = 12 * per_month
    yr = y0 + np.floor_divide(global_step, per_year)
    within = np.mod(global_step, per_year)
    return yr, within // per_month + 1, within % per_month


def _frame(areas: list[str], y0: int, cols: dict[str, np.ndarray]) -> pl.DataFrame:
    n_a, n_y = cols["complete"].shape
    base = {
        "area": np.repeat(np.array(areas, dtype=object), n_y),
        "year": np.tile(np.arange(y0, y0 + n_y), n_a),
    }
    return pl.DataFrame({**base, **{k: v.reshape(-1) for k, v in cols.items()}}, strict=False)


def dekadal_rain_seasons(dekads: pl.DataFrame) -> pl.DataFrame:
    """Per area and calendar year, from columns area, dekad_start (date), rain_mm[, provisional].

    Returns SEASON_COLUMNS. `complete`: all 36 dekads of the calendar year recorded and none
    provisional; onset and cessation also need the whole season year recorded. Dates are the
    first day of the dekad; `onset_dekad` counts dekads of the calendar year (1 = 1-10 January;
    0 and below fall in the previous year); `season_dekads` runs onset to cessation inclusive.
    """
    d = dekads.rename({"dekad_start": "_date"})
    step = (pl.col("_date").dt.month() - 1) * 3 + ((pl.col("_date").dt.day() - 1) // 10).clip(0, 2)
    areas, y0, rain = _dense(d, step, DEKADS)
    n_a, n_y, _ = rain.shape
    complete = np.isfinite(rain).all(axis=-1)
    monthly = rain.reshape(n_a, n_y, 12, 3).sum(axis=-1)  # NaN when a dekad is missing
    with np.errstate(invalid="ignore"):
        clim_mean = np.nanmean(np.where(complete[:, :, None], rain, np.nan), axis=(1, 2))
    driest = _driest_month(monthly, complete)
    offset = _season_offset(driest, 3)
    series = rain.reshape(n_a, n_y * DEKADS)
    first = np.arange(n_y)[None, :] * DEKADS + offset[:, None]
    win = _windows(series, first, DEKADS + 2)  # two dekads of look-ahead for the onset rule
    season = win[..., :DEKADS]
    season_ok = np.isfinite(win).all(axis=-1)
    with np.errstate(invalid="ignore"):
        sos = (win[..., :DEKADS] >= SOS_FIRST_MM) & ((win[..., 1:DEKADS + 1] + win[..., 2:DEKADS + 2]) >= SOS_NEXT_TWO_MM)
    has = sos.any(axis=-1) & season_ok
    onset = np.where(has, np.argmax(sos, axis=-1), -1)
    cess = _cum_anomaly_peak(season, clim_mean, onset)
    cols = _step_columns(y0, first, onset, cess, 3)
    share, start = best_window_share(monthly)
    annual = monthly.sum(axis=-1)
    cols.update(
        complete=complete,
        annual_mm=np.where(complete, annual, np.nan),
        season_year_start=np.repeat(driest[:, None], n_y, axis=1),
        season_dekads=np.where(has, cess - onset + 1, -1),
        best4_start_month=np.where(complete, start, 0),
        best4_share=np.where(complete, share, np.nan),
    )
    return _finish(_frame(areas, y0, cols), ONSET_RULE_DEKADAL)


def _step_columns(y0: int, first: np.ndarray, onset: np.ndarray, cess: np.ndarray, per_month: int) -> dict[str, np.ndarray]:
    """Year, month and day of onset and cessation (0 where there is no onset), dekad of the year, length."""
    has = onset >= 0
    year_start = (np.arange(first.shape[1]) * 12 * per_month)[None, :]
    out: dict[str, np.ndarray] = {"_has": has}
    for name, idx in (("onset", onset), ("cessation", cess)):
        g = first + np.where(has, idx, 0)
        yr, mo, sub = _dates(y0, first, g, per_month)
        out[f"_{name}_y"] = np.where(has, yr, 0)
        out[f"{name}_month"] = np.where(has, mo, 0)
        out[f"_{name}_d"] = np.where(has, 1 + 10 * sub, 0) if per_month == 3 else np.where(has, 1, 0)
        out[f"{name}_dekad"] = np.where(has, g - year_start + 1, -999) if per_month == 3 else np.full(onset.shape, -999)
    out["season_months"] = np.where(has, (cess - onset) // per_month + 1, -1)
    return out


def _finish(df: pl.DataFrame, onset_rule: str) -> pl.DataFrame:
    """Sentinels -> nulls, dates typed, columns in SEASON_COLUMNS order."""
    int_null = {"onset_dekad": -999, "cessation_dekad": -999, "onset_month": 0, "cessation_month": 0,
                "season_dekads": -1, "season_months": -1, "best4_start_month": 0}
    if "season_dekads" not in df.columns:
        df = df.with_columns(pl.lit(-1).alias("season_dekads"))
    has = pl.col("_has")
    df = df.with_columns(
        *(pl.when(pl.col(c) == v).then(None).otherwise(pl.col(c)).cast(pl.Int64).alias(c) for c, v in int_null.items()),
        *(pl.when(has).then(pl.date(pl.col(f"_{n}_y"), pl.col(f"{n}_month").replace(0, 1), pl.col(f"_{n}_d").replace(0, 1)))
          .alias(f"{n}_date") for n in ("onset", "cessation")),
        pl.when(has).then(pl.lit(onset_rule)).alias("onset_rule"),
        pl.col("annual_mm").fill_nan(None), pl.col("best4_share").fill_nan(None),
        pl.col("season_year_start").cast(pl.Int64), pl.col("year").cast(pl.Int64), pl.col("complete").cast(pl.Boolean),
    )
    return df.select(SEASON_COLUMNS).sort("area", "year")


def monthly_rain_seasons(monthly: pl.DataFrame) -> pl.DataFrame:
    """Per area and calendar year, from columns area, period (YYYY-MM), rain_mm[, provisional].

    Monthly totals carry no dekads, so the onset is the cumulative-anomaly onset: the month
    after the minimum of the running sum of (month's rain - the area's mean monthly rain)
    from the start of the season year (a zero before the first month counts, so a season
    already running when the season year starts has its onset in its first month). The
    cessation is the month of the running sum's peak after onset. `onset_dekad`,
    `cessation_dekad` and `season_dekads` are null.
    """
    m = monthly.with_columns(pl.col("period").str.to_date("%Y-%m", strict=False).alias("_date"))
    areas, y0, rain = _dense(m, pl.col("_date").dt.month() - 1, 12)
    n_a, n_y, _ = rain.shape
    complete = np.isfinite(rain).all(axis=-1)
    with np.errstate(invalid="ignore"):
        clim_mean = np.nanmean(np.where(complete[:, :, None], rain, np.nan), axis=(1, 2))
    driest = _driest_month(rain, complete)
    offset = _season_offset(driest, 1)
    first = np.arange(n_y)[None, :] * 12 + offset[:, None]
    season = _windows(rain.reshape(n_a, n_y * 12), first, 12)
    season_ok = np.isfinite(season).all(axis=-1)
    acc = np.concatenate([np.zeros(season.shape[:-1] + (1,)), np.cumsum(season - clim_mean[:, None, None], axis=-1)],
                         axis=-1)
    low = np.argmin(np.where(np.isfinite(acc), acc, np.inf), axis=-1)  # index into [0, A1..A12]: the onset step
    has = season_ok & (low < 12)
    onset = np.where(has, low, -1)
    cess = _cum_anomaly_peak(season, clim_mean, onset)
    cols = _step_columns(y0, first, onset, cess, 1)
    share, start = best_window_share(rain)
    cols.update(
        complete=complete,
        annual_mm=np.where(complete, rain.sum(axis=-1), np.nan),
        season_year_start=np.repeat(driest[:, None], n_y, axis=1),
        best4_start_month=np.where(complete, start, 0),
        best4_share=np.where(complete, share, np.nan),
    )
    return _finish(_frame(areas, y0, cols), ONSET_RULE_MONTHLY)


def lga_rain_seasons(lga: pl.DataFrame, state: pl.DataFrame, lga_state: pl.DataFrame) -> pl.DataFrame:
    """Per LGA and year: the LGA's own monthly-rain season where its year is complete, else its
    state's dekadal season, with `rain_source` ("lga_monthly" / "state_dekadal") saying which.

    `lga`: monthly_rain_seasons output keyed by LGA (area); `state`: dekadal_rain_seasons output
    keyed by state (area); `lga_state`: columns lga, state mapping every LGA wanted to its state.
    """
    years = state.select("year").unique()
    grid = lga_state.join(years, how="cross")
    from_state = grid.join(state.rename({"area": "state"}), on=["state", "year"], how="left")
    own = lga.filter(pl.col("complete")).rename({"area": "lga"})
    cols = [c for c in SEASON_COLUMNS if c not in ("area", "year")]
    merged = from_state.join(own, on=["lga", "year"], how="left", suffix="_lga")
    use_own = pl.col("complete_lga").fill_null(False)
    out = merged.select(
        "lga", "state", "year",
        *(pl.when(use_own).then(pl.col(f"{c}_lga")).otherwise(pl.col(c)).alias(c) for c in cols),
        pl.when(use_own).then(pl.lit("lga_monthly")).otherwise(pl.lit("state_dekadal")).alias("rain_source"),
    )
    extra = own.join(lga_state, on="lga", how="inner").join(years, on="year", how="anti")
    if extra.height:
        out = pl.concat([out, extra.select("lga", "state", "year", *cols,
                                           pl.lit("lga_monthly").alias("rain_source"))], how="vertical_relaxed")
    return out.sort("lga", "year")


def last_complete_years(seasons: pl.DataFrame, key: str | list[str] = "area", n: int = 10) -> pl.DataFrame:
    """The last `n` complete years of each area: (key, year) rows."""
    keys = [key] if isinstance(key, str) else key
    last = seasons.filter(pl.col("complete")).group_by(keys).agg(pl.col("year").max().alias("_last"))
    return (seasons.join(last, on=keys).filter((pl.col("year") > pl.col("_last") - n) & (pl.col("year") <= pl.col("_last")))
            .select(*keys, "year"))


def rain_season_climate(seasons: pl.DataFrame, key: str | list[str] = "area", n: int = 10) -> pl.DataFrame:
    """Per area, over its last `n` complete years: years used, median onset and cessation month
    (and the median onset dekad of the year, where dekads exist),
    the onset's spread (earliest, latest, inter-quartile range in dekads where dekads exist),
    median wet-season length and median best-4-month share.

    The window is the last `n` calendar years ending at the last complete year; an incomplete
    year inside it is left out and `n_years` says how many remained.
    """
    keys = [key] if isinstance(key, str) else key
    window = last_complete_years(seasons, keys, n)
    s = seasons.join(window, on=[*keys, "year"]).filter(pl.col("complete"))
    # The onset as a step of the calendar year, for medians: dekads where they exist, else the month's first dekad.
    onset_step = pl.coalesce(pl.col("onset_dekad"), (pl.col("onset_month") - 1) * 3 + 1)
    cess_step = pl.coalesce(pl.col("cessation_dekad"), (pl.col("cessation_month") - 1) * 3 + 3)
    month_of = lambda e: ((e.round(0).cast(pl.Int64) - 1) // 3) % 12 + 1  # noqa: E731
    return (
        s.group_by(keys)
        .agg(
            pl.col("year").min().alias("first_year"),
            pl.col("year").max().alias("last_year"),
            pl.len().alias("n_years"),
            month_of(onset_step.median()).alias("onset_month_median"),
            pl.col("onset_dekad").median().alias("onset_dekad_median"),
            month_of(onset_step.min()).alias("onset_month_earliest"),
            month_of(onset_step.max()).alias("onset_month_latest"),
            (pl.col("onset_dekad").quantile(0.75, "linear") - pl.col("onset_dekad").quantile(0.25, "linear"))
            .alias("onset_iqr_dekads"),
            month_of(cess_step.median()).alias("cessation_month_median"),
            pl.col("season_months").median().alias("season_months_median"),
            pl.col("best4_share").median().alias("best4_share_median"),
        )
        .sort(keys)
    )


def state_dekadal_seasons(dekads: pl.DataFrame, states: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(the dekads of the geography's states keyed by state_code as `area`, their rain seasons per year):
    what SMC planning and model 7's onsets both read, from the file's rows (ocha_pcode, dekad_start,
    rain_mm, provisional, ...) and the states (ocha_pcode, state_code)."""
    codes = dict(zip(states["ocha_pcode"].to_list(), states["state_code"].to_list(), strict=True))
    dek = dekads.filter(pl.col("ocha_pcode").is_in(list(codes))).with_columns(
        pl.col("ocha_pcode").replace_strict(codes).alias("area"))
    return dek, dekadal_rain_seasons(dek.select("area", "dekad_start", "rain_mm", "provisional"))
