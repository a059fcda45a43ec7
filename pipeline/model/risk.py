"""The risk model: rainfall in the preceding months x baseline endemicity -> score 0..1.

Everything here is numpy over whole [LGA x month] matrices (no loops over rows), is
deterministic, and takes and returns arrays: reading files and shaping documents
live elsewhere (pipeline/sources, pipeline/datasets/risk.py). docs/model.md has the formulas
with the reasons for each constant; the constants below are the single source.

    E[l,t]   = sum_k LAG_WEIGHTS[k] * R[l, t-k]                effective rain, k = 0..2
    S        = 1 - exp(-E / RAIN_SCALE_MM)                      rain suitability 0..1
    I[l,t]   = min(1, B[l,t] / BASELINE_SATURATION)              endemicity index 0..1
    score    = I * (DRY_FLOOR + (1 - DRY_FLOOR) * S)            0..1

score rises with every lagged rain term and with the baseline B (survey positivity,
urban-adjusted) and is bounded in [0, 1]; the range comes from pushing B and E to
their low / high ends, so score_low <= score <= score_high by monotonicity.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

MODEL_VERSION = "rain-lag-baseline/1.0.0"

# Share of month t's effective rain coming from the rain of month t, t-1, t-2:
# cases follow rain by one to two months, so t-1 weighs most.
LAG_WEIGHTS = (0.2, 0.5, 0.3)
# Effective rain (mm/month) at which suitability reaches 1 - 1/e = 0.63.
RAIN_SCALE_MM = 80.0
# Share of the rainy-season level that remains with no rain (dry-season transmission).
DRY_FLOOR = 0.35
# Microscopy positivity (children 6-59 months) at which the endemicity index saturates;
# above every state value observed 2015-2021 (max 0.636, Kebbi 2015).
BASELINE_SATURATION = 0.65
# Upper bounds of the levels: score < 0.10 very_low, < 0.20 low, < 0.35 moderate,
# < 0.50 high, otherwise very_high.
LEVEL_THRESHOLDS: tuple[tuple[float, str], ...] = (
    (0.10, "very_low"),
    (0.20, "low"),
    (0.35, "moderate"),
    (0.50, "high"),
)
TOP_LEVEL = "very_high"
# Relative error assumed for a recorded monthly rainfall value (CHIRPS state mean
# downscaled to an LGA); larger for provisional (CHIRPS-preliminary) months.
RAIN_REL_ERR = 0.15
PROVISIONAL_REL_ERR = 0.30
# Effective sample size of a state survey estimate, implied by the only published
# state 95% intervals (NDHS 2018 re-analysis: Kebbi ~150, Katsina ~160, FCT ~105).
SURVEY_N_EFF = 150.0
# Offset (mm) in the rainfall log-anomaly, so dry-season months do not dominate it.
ANOMALY_OFFSET_MM = 10.0
# Months averaged into the recent-anomaly predictor: a wet or dry year persists more
# than a single month does (1981-2018 pooled slopes at lag 1..4: 0.10, 0.03, 0.06, 0.00
# from one month; 0.23, 0.16, 0.16, 0.11 from a 12-month mean).
ANOMALY_WINDOW = 12
# Climatological quantiles bounding the rain still to come in a forecast.
FORECAST_QUANTILES = (0.1, 0.5, 0.9)
HORIZONS = 4


def suitability(effective_mm: np.ndarray) -> np.ndarray:
    """Saturating response: more rain never lowers risk, and 400 mm is not 5x 80 mm."""
    return 1.0 - np.exp(-np.maximum(effective_mm, 0.0) / RAIN_SCALE_MM)


def score_from(baseline: np.ndarray, effective_mm: np.ndarray) -> np.ndarray:
    """The score formula (module docstring); monotone in both arguments, in [0, 1]."""
    index = np.clip(baseline / BASELINE_SATURATION, 0.0, 1.0)
    return index * (DRY_FLOOR + (1.0 - DRY_FLOOR) * suitability(effective_mm))


def effective_rain(r0: np.ndarray, r1: np.ndarray, r2: np.ndarray) -> np.ndarray:
    """Weighted rain of the month and the two before it (r0 = this month)."""
    w0, w1, w2 = LAG_WEIGHTS
    return w0 * r0 + w1 * r1 + w2 * r2


def levels(score: np.ndarray) -> np.ndarray:
    """Map scores to level names with the fixed LEVEL_THRESHOLDS."""
    bounds = np.array([b for b, _ in LEVEL_THRESHOLDS])
    names = np.array([n for _, n in LEVEL_THRESHOLDS] + [TOP_LEVEL], dtype=object)
    return names[np.searchsorted(bounds, score, side="right")]


def survey_halfwidth(p: np.ndarray) -> np.ndarray:
    """95% half-width of a state positivity estimate with SURVEY_N_EFF children."""
    p = np.clip(p, 0.0, 1.0)
    return 1.96 * np.sqrt(p * (1.0 - p) / SURVEY_N_EFF)


def urban_split(
    state_baseline: np.ndarray, pop: np.ndarray, is_urban: np.ndarray, state_idx: np.ndarray, urban_ratio: float
) -> np.ndarray:
    """Per-LGA baseline: urban LGAs at `urban_ratio` x the rural level of their state,
    the rural level chosen so the state's population-weighted mean is unchanged.

    state_baseline: [n_states, ...]; returns [n_lgas, ...].
    """
    n_states = state_baseline.shape[0]
    shape = (-1,) + (1,) * (state_baseline.ndim - 1)
    w_urban = np.bincount(state_idx, weights=pop * is_urban, minlength=n_states).reshape(shape)
    w_all = np.bincount(state_idx, weights=pop, minlength=n_states).reshape(shape)
    w_rural = w_all - w_urban
    b = np.clip(state_baseline, 0.0, 1.0)
    rural = np.minimum(b * w_all / (w_rural + urban_ratio * w_urban), 1.0)
    # If the rural level would pass 1 (a mostly urban state with a very high baseline),
    # rural is capped and urban takes the rest, so the state mean is still preserved.
    with np.errstate(divide="ignore", invalid="ignore"):
        urban = np.where(
            rural >= 1.0, (b * w_all - w_rural) / np.where(w_urban > 0, w_urban, 1.0), urban_ratio * rural
        )
    return np.clip(np.where(is_urban.reshape(shape), urban[state_idx], rural[state_idx]), 0.0, 1.0)


@dataclass(frozen=True)
class Scores:
    score: np.ndarray
    low: np.ndarray
    high: np.ndarray


def estimate(
    rain: np.ndarray,
    provisional: np.ndarray,
    baseline: np.ndarray,
    baseline_low: np.ndarray,
    baseline_high: np.ndarray,
    start: int,
) -> Scores:
    """Scores for months start..end of `rain` ([n, T] mm; `provisional` [T] bool;
    baselines [n, T]). Needs two months of rain before `start`."""
    if start < 2:
        raise ValueError("need two months of rain before the first scored month")
    err = np.where(provisional, PROVISIONAL_REL_ERR, RAIN_REL_ERR)[None, :]
    t = slice(start, rain.shape[1])
    lag = [rain[:, start - k : rain.shape[1] - k] for k in range(3)]
    errs = [err[:, start - k : rain.shape[1] - k] for k in range(3)]
    e = effective_rain(*lag)
    e_lo = effective_rain(*(r * (1 - d) for r, d in zip(lag, errs, strict=True)))
    e_hi = effective_rain(*(r * (1 + d) for r, d in zip(lag, errs, strict=True)))
    return Scores(
        score=score_from(baseline[:, t], e),
        low=score_from(baseline_low[:, t], e_lo),
        high=score_from(baseline_high[:, t], e_hi),
    )


@dataclass(frozen=True)
class Climatology:
    """Rain quantiles per [n, 12 calendar months] and anomaly persistence per horizon."""

    q: np.ndarray  # [3, n, 12] for FORECAST_QUANTILES
    persistence: np.ndarray  # [HORIZONS] slope of the log-anomaly k months ahead on the recent mean anomaly


def log_anomaly(rain: np.ndarray, median: np.ndarray) -> np.ndarray:
    return np.log((rain + ANOMALY_OFFSET_MM) / (median + ANOMALY_OFFSET_MM))


def recent_anomaly_series(a: np.ndarray) -> np.ndarray:
    """Rolling ANOMALY_WINDOW-month mean of the log-anomaly along axis 1 (valid part only)."""
    c = np.cumsum(np.pad(a, ((0, 0), (1, 0))), axis=1)
    return (c[:, ANOMALY_WINDOW:] - c[:, :-ANOMALY_WINDOW]) / ANOMALY_WINDOW


def climatology(rain: np.ndarray, calendar_month: np.ndarray, upto: int) -> Climatology:
    """The climatological distribution from months [0, upto) only (so a hindcast issued
    at `upto - 1` sees no later data). calendar_month: [T] ints 1..12."""
    n = rain.shape[0]
    q = np.empty((len(FORECAST_QUANTILES), n, 12))
    cm = calendar_month[:upto]
    for m in range(1, 13):  # 12 vectorised quantile calls, not a loop over rows
        q[:, :, m - 1] = np.quantile(rain[:, :upto][:, cm == m], FORECAST_QUANTILES, axis=1)
    med = q[FORECAST_QUANTILES.index(0.5)][:, cm - 1]
    a = log_anomaly(rain[:, :upto], med)
    sm = recent_anomaly_series(a)  # sm[:, j] = mean of a over the window ending at j + ANOMALY_WINDOW - 1
    slopes = np.empty(HORIZONS)
    for k in range(1, HORIZONS + 1):
        x, y = sm[:, : sm.shape[1] - k].ravel(), a[:, ANOMALY_WINDOW - 1 + k :].ravel()
        var = float(np.dot(x, x))
        slopes[k - 1] = np.clip(np.dot(x, y) / var, 0.0, 1.0) if var > 0 else 0.0
    return Climatology(q=q, persistence=slopes)


def forecast(
    rain: np.ndarray,
    provisional: np.ndarray,
    calendar_month: np.ndarray,
    issue: int,
    baseline: np.ndarray,
    baseline_low: np.ndarray,
    baseline_high: np.ndarray,
    clim: Climatology,
) -> Scores:
    """Scores for months issue+1 .. issue+HORIZONS, using rain up to `issue` only.

    Rain still to come in month issue+k is the climatological quantile for its
    calendar month, shifted by the mean log-anomaly of the last ANOMALY_WINDOW months
    times its historical regression slope at lag k (damped anomaly persistence). Low/high use the 10th/90th percentiles (all unknown months
    at the same end), so more unknown months means a wider range; the gaps between
    score and each end are then made non-decreasing with horizon (a far forecast is
    never shown as surer than a near one), except where an end is clipped at 0 or 1. baselines: [n, HORIZONS].
    Returns [n, HORIZONS] arrays.
    """
    n = rain.shape[0]
    known = rain[:, : issue + 1]
    err = np.where(provisional[: issue + 1], PROVISIONAL_REL_ERR, RAIN_REL_ERR)
    lo_t = max(0, issue + 1 - ANOMALY_WINDOW)
    window = known[:, lo_t:]
    med_win = clim.q[1][:, calendar_month[lo_t : issue + 1] - 1]
    anomaly = log_anomaly(window, med_win).mean(axis=1)
    last_m = int(calendar_month[issue])
    out = np.empty((3, n, HORIZONS))
    for h in range(1, HORIZONS + 1):  # 4 horizons x 3 lags of whole-vector arithmetic
        terms = {"mid": [], "lo": [], "hi": []}
        for k in range(3):
            step = h - k  # months after issue of the lagged month
            if step <= 0:
                r = known[:, issue + step]
                d = err[issue + step]
                terms["mid"].append(r)
                terms["lo"].append(r * (1 - d))
                terms["hi"].append(r * (1 + d))
            else:
                m = (last_m - 1 + step) % 12
                shift = np.exp(clim.persistence[step - 1] * anomaly)
                for key, qi in (("lo", 0), ("mid", 1), ("hi", 2)):
                    base = clim.q[qi][:, m] + ANOMALY_OFFSET_MM
                    terms[key].append(np.maximum(base * shift - ANOMALY_OFFSET_MM, 0.0))
        out[0, :, h - 1] = score_from(baseline[:, h - 1], effective_rain(*terms["mid"]))
        out[1, :, h - 1] = score_from(baseline_low[:, h - 1], effective_rain(*terms["lo"]))
        out[2, :, h - 1] = score_from(baseline_high[:, h - 1], effective_rain(*terms["hi"]))
    score = out[0]
    lo_gap = np.maximum.accumulate(np.maximum(score - out[1], 0.0), axis=1)
    hi_gap = np.maximum.accumulate(np.maximum(out[2] - score, 0.0), axis=1)
    return Scores(score=score, low=np.clip(score - lo_gap, 0.0, 1.0), high=np.clip(score + hi_gap, 0.0, 1.0))


def climatology_forecast(
    calendar_month: np.ndarray, issue: int, baseline: np.ndarray, clim: Climatology
) -> np.ndarray:
    """The naive benchmark: score with median climatological rain in every lag month."""
    last_m = int(calendar_month[issue])
    cols = []
    for h in range(1, HORIZONS + 1):
        r = [clim.q[1][:, (last_m - 1 + h - k) % 12] for k in range(3)]
        cols.append(score_from(baseline[:, h - 1], effective_rain(*r)))
    return np.stack(cols, axis=1)


def aggregate(values: np.ndarray, group_idx: np.ndarray, weights: np.ndarray, n_groups: int) -> np.ndarray:
    """Weighted mean of rows of `values` ([n, ...]) per group: state = population-weighted LGAs."""
    onehot = np.zeros((n_groups, values.shape[0]))
    onehot[group_idx, np.arange(values.shape[0])] = weights
    totals = onehot.sum(axis=1, keepdims=True)
    flat = values.reshape(values.shape[0], -1)
    return (onehot @ flat / totals).reshape((n_groups,) + values.shape[1:])


# --- baseline endemicity from survey positivity -------------------------------------------

PREFERRED_TEST = "microscopy"
# Surveys report a year only; a round is placed at mid-year for interpolation.
ROUND_MONTH_OFFSET = 0.5


def urban_rural_ratio(survey: pl.DataFrame) -> tuple[float, int]:
    """Urban / rural positivity of the latest round that has both (microscopy preferred).

    Returns (ratio, survey_year). Raises ValueError when no round has the split.
    """
    res = survey.filter(pl.col("level") == "residence")
    for test in (PREFERRED_TEST, "RDT"):
        t = res.filter(pl.col("test") == test)
        years = sorted(set(t.filter(pl.col("area") == "urban")["survey_year"]) & set(t.filter(pl.col("area") == "rural")["survey_year"]))
        if years:
            y = years[-1]
            u = t.filter((pl.col("survey_year") == y) & (pl.col("area") == "urban"))["positivity"].mean()
            r = t.filter((pl.col("survey_year") == y) & (pl.col("area") == "rural"))["positivity"].mean()
            if r and r > 0:
                return float(u) / float(r), int(y)
    raise ValueError("no survey round with both urban and rural positivity")


def state_rounds(survey: pl.DataFrame, state_codes: list[str]) -> pl.DataFrame:
    """state_code, survey_year, positivity, test: one value per state and round.

    Microscopy where the round has it for the state (it measures current infection;
    RDTs stay positive for weeks after treatment, HRP2 persistence); otherwise the
    RDT value scaled by that round's median microscopy/RDT ratio across states.
    Where a round has two rows for one state and test (the 2018 paper re-analysis and
    the DHS table), the DHS table (a file source, not a "page:" transcription) wins.
    """
    st = (
        survey.filter(pl.col("level") == "state", pl.col("state_code").is_in(state_codes))
        .with_columns(pl.col("source").str.starts_with("page:").alias("_page"))
        .sort("_page")
        .unique(subset=["survey_year", "state_code", "test"], keep="first", maintain_order=True)
    )
    micro = st.filter(pl.col("test") == PREFERRED_TEST).select("state_code", "survey_year", pl.col("positivity").alias("m"))
    rdt = st.filter(pl.col("test") == "RDT").select("state_code", "survey_year", pl.col("positivity").alias("r"))
    both = micro.join(rdt, on=["state_code", "survey_year"], how="full", coalesce=True)
    ratio = both.filter(pl.col("m").is_not_null() & (pl.col("r") > 0)).group_by("survey_year").agg(
        (pl.col("m") / pl.col("r")).median().alias("k")
    )
    return (
        both.join(ratio, on="survey_year", how="left")
        .with_columns(
            pl.when(pl.col("m").is_not_null()).then(pl.col("m")).otherwise(pl.col("r") * pl.col("k")).alias("positivity"),
            pl.when(pl.col("m").is_not_null()).then(pl.lit("microscopy")).otherwise(pl.lit("RDT scaled")).alias("test"),
        )
        .filter(pl.col("positivity").is_not_null())
        .select("state_code", "survey_year", "positivity", "test")
        .sort("state_code", "survey_year")
    )


def state_baseline(rounds: pl.DataFrame, state_codes: list[str], times: np.ndarray) -> np.ndarray:
    """[n_states, len(times)] positivity, linear between rounds, held flat beyond them.

    times are decimal years (e.g. 2019.0 for January 2019). A state without any round
    raises ValueError: the model will not make a baseline up.
    """
    out = np.empty((len(state_codes), len(times)))
    by_state = {k[0]: g for k, g in rounds.partition_by("state_code", as_dict=True).items()}
    for i, code in enumerate(state_codes):  # 37 states, each a vectorised interp over all months
        g = by_state.get(code)
        if g is None or g.height == 0:
            raise ValueError(f"no survey positivity for state {code}")
        out[i] = np.interp(times, g["survey_year"].to_numpy() + ROUND_MONTH_OFFSET, g["positivity"].to_numpy())
    return out
