"""The pre-registered tests of what a month carries (docs/validation.md, section (f)).

Pure numpy over [LGA x month] matrices. The outcome is the month-to-month movement of the
dated LGA case series: y = log(cases / A(cases)), A the centred 2x12 moving average. Each
candidate term is scored by Pearson r between y and its prediction over the LGA-months of a
held-out state, every coefficient fitted on the other states only; a term is adopted only if it
beats the climatological season in at least ADOPT_MIN_STATES of the held-out states. The rules
here are the ones written down before the tests were run; nothing is tuned to their result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

MONTHS = 12
MA_WEIGHTS = np.array([0.5] + [1.0] * 11 + [0.5]) / 12.0  # centred 2x12 moving average
RAIN_OFFSET_MM = 10.0  # keeps log rain anomalies finite in dry months
ANOMALY_LAGS = (0, 1, 2, 3)
SMC_MONTHS = (7, 8, 9, 10)  # July-October: the SMC cycles of the Sahel
SMC_YEARS = (2020, 2021)  # the years whose SMC deliveries are in the data
CAMPAIGN_MONTH = 7  # LLIN campaign placed at 1 July of its year (months not given for 2020+)
ADOPT_MIN_STATES = 4  # of 6: "most held-out states"
DECIMALS = 3


def centred_average(x: np.ndarray) -> np.ndarray:
    """2x12 centred moving average along the last axis; NaN where any of the 13 months is missing."""
    n = x.shape[-1]
    out = np.full(x.shape, np.nan)
    for t in range(6, n - 6):
        out[..., t] = (x[..., t - 6:t + 7] * MA_WEIGHTS).sum(axis=-1)
    return out


def outcome(cases: np.ndarray) -> np.ndarray:
    """y = log(cases / centred average); NaN where a case count or its average is missing."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(cases / centred_average(cases))


def lagged(series: np.ndarray, lag: np.ndarray, first: int) -> np.ndarray:
    """Series [L, T'] shifted later by each row's fractional lag, returned from column `first` on
    (linear between whole-month shifts, as the seasonal index does with the climatology)."""
    whole = np.floor(lag).astype(int)
    frac = lag - whole
    t = np.arange(first, series.shape[1])[None, :]
    a = np.take_along_axis(series, np.clip(t - whole[:, None], 0, None), axis=1)
    b = np.take_along_axis(series, np.clip(t - whole[:, None] - 1, 0, None), axis=1)
    return (1.0 - frac)[:, None] * a + frac[:, None] * b


def pearson(a: np.ndarray, b: np.ndarray) -> float:
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 3:
        return float("nan")
    x, y = a[ok] - a[ok].mean(), b[ok] - b[ok].mean()
    d = np.sqrt((x**2).sum() * (y**2).sum())
    return float((x * y).sum() / d) if d > 0 else float("nan")


@dataclass(frozen=True)
class MonthData:
    """Aligned matrices for the dated LGAs; months run from `t0` (a month index year*12+m-1)."""

    t0: int
    y: np.ndarray  # [L, T] outcome
    reference: np.ndarray  # [L, T] log(index / mean index): the climatological season
    actual_year: np.ndarray  # [L, T] term (a): the same rule on that year's lagged rainfall
    anomalies: np.ndarray  # [K, L, T] term (b): log rain anomaly at lags 0..3
    smc: np.ndarray  # [L, T] term (c1): 1 in SMC months, NaN outside the years the data cover
    llin: np.ndarray  # [L, T] term (c2): years since the last LLIN campaign (NaN if unknown)
    state: np.ndarray  # [L] state code of each LGA


def month_data(cases: np.ndarray, t0: int, state: np.ndarray, index: np.ndarray, floor: np.ndarray,
               lag: np.ndarray, rain: np.ndarray, rain_t0: int, rain_clim: np.ndarray,
               smc_state_years: set[tuple[str, int]], campaigns: dict[str, list[int]]) -> MonthData:
    """Build every term for LGAs with case matrix `cases` [L, T] from month index `t0`.

    index/floor/lag: each LGA's season from the fold that held its state out; rain: recorded
    monthly rainfall [L, T'] from month index `rain_t0` (at least 6 months before t0, to feed the
    lags); rain_clim: [L, 12] climatology.
    """
    L, T = cases.shape
    months = (np.arange(t0, t0 + T) % MONTHS)  # 0-based calendar month of each column
    years = np.arange(t0, t0 + T) // MONTHS
    y = outcome(cases)
    ref = np.log(index[:, months] / index.mean(axis=1, keepdims=True))
    # (a) that year's rainfall through the same floor, lag and scale as the climatology
    first = t0 - rain_t0
    clim_lagged_max = np.array([
        max((1 - (lg - np.floor(lg))) * rc[(m - int(np.floor(lg))) % MONTHS]
            + (lg - np.floor(lg)) * rc[(m - int(np.floor(lg)) - 1) % MONTHS] for m in range(MONTHS))
        for rc, lg in zip(rain_clim, lag, strict=True)
    ])
    shape = lagged(rain, lag, first - 6)[:, :T + 12] / clim_lagged_max[:, None]  # from t0-6 to t0+T+5
    pred_a = floor[:, None] + (1 - floor[:, None]) * shape
    full = np.full((L, T + 12), np.nan)
    full[:, :pred_a.shape[1]] = pred_a
    avg = centred_average(full)[:, 6:6 + T]
    actual = np.log(full[:, 6:6 + T] / avg)
    # (b) log rain anomalies at lags 0..3
    rm = (np.arange(rain_t0, rain_t0 + rain.shape[1]) % MONTHS)
    anom_all = np.log((rain + RAIN_OFFSET_MM) / (rain_clim[:, rm] + RAIN_OFFSET_MM))
    anomalies = np.stack([anom_all[:, first - k:first - k + T] for k in ANOMALY_LAGS])
    # (c1) SMC months of state-years with SMC; outside the covered years unknown (NaN)
    smc = np.full((L, T), np.nan)
    for j in range(T):
        if years[j] in SMC_YEARS:
            smc[:, j] = [(1.0 if (s, int(years[j])) in smc_state_years and months[j] + 1 in SMC_MONTHS else 0.0)
                         for s in state]
    # (c2) years since the state's last campaign before the month
    llin = np.full((L, T), np.nan)
    for i, s in enumerate(state):
        starts = np.array(sorted(y_ * MONTHS + CAMPAIGN_MONTH - 1 for y_ in campaigns.get(str(s), [])))
        for j in range(T):
            past = starts[starts <= t0 + j] if starts.size else starts
            if past.size:
                llin[i, j] = (t0 + j - past.max()) / MONTHS
    return MonthData(t0, y, ref, actual, anomalies, smc, llin, np.asarray(state))


def _fit(x: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Least squares without intercept over rows with every value finite."""
    ok = np.isfinite(target) & np.isfinite(x).all(axis=1)
    if ok.sum() < x.shape[1] + 2:
        return np.zeros(x.shape[1])
    beta, *_ = np.linalg.lstsq(x[ok], target[ok], rcond=None)
    return beta


def _score_term(md: MonthData, features: np.ndarray | None, replacement: np.ndarray | None,
                mask: np.ndarray | None = None) -> dict[str, Any]:
    """Leave-one-state-out r with and without a term.

    features [K, L, T]: added linearly (coefficients fitted on the other states);
    replacement [L, T]: replaces the reference prediction (nothing fitted).
    mask [L, T]: the LGA-months the test uses (both predictions scored on the same months).
    """
    states = sorted(set(md.state.tolist()))
    use = np.isfinite(md.y) & np.isfinite(md.reference)
    if mask is not None:
        use &= mask
    if features is not None:
        use &= np.isfinite(features).all(axis=0)
    if replacement is not None:
        use &= np.isfinite(replacement)
    out: dict[str, Any] = {}
    improved = 0
    for g in states:
        held = (md.state == g)[:, None] & use
        train = (md.state != g)[:, None] & use
        if held.sum() < 3:
            continue
        r0 = pearson(md.y[held], md.reference[held])
        if replacement is not None:
            r1 = pearson(md.y[held], replacement[held])
            beta = None
        else:
            assert features is not None
            x_train = features[:, train].T
            beta = _fit(x_train, (md.y - md.reference)[train])
            pred = md.reference[held] + features[:, held].T @ beta
            r1 = pearson(md.y[held], pred)
        improved += int(np.isfinite(r1) and np.isfinite(r0) and r1 > r0)
        out[g] = {"lga_months": int(held.sum()), "r_reference": _r(r0), "r_with_term": _r(r1),
                  **({"coefficients": [_r(b, 4) for b in beta]} if beta is not None else {})}
    n = len(out)
    return {"by_state": out, "states": n, "improved_in": improved, "adopted": improved >= ADOPT_MIN_STATES}


def _r(v: float, d: int = DECIMALS) -> float | None:
    return None if v is None or not np.isfinite(v) else round(float(v), d)


def run_tests(md: MonthData) -> dict[str, Any]:
    """Every pre-registered term, with its decision; the single lags of (b) as description only."""
    smc_mask = np.isfinite(md.smc)
    res: dict[str, Any] = {
        "a_actual_year_rainfall": _score_term(md, None, md.actual_year),
        "b_rain_anomalies_lags_0_3": _score_term(md, md.anomalies, None),
        "c1_smc_rounds": _score_term(md, md.smc[None], None, smc_mask),
        "c2_llin_campaign_timing": _score_term(md, md.llin[None], None),
    }
    res["b_single_lags_description_only"] = {
        f"lag_{k}": {kk: v for kk, v in _score_term(md, md.anomalies[i:i + 1], None).items() if kk != "adopted"}
        for i, k in enumerate(ANOMALY_LAGS)
    }
    res["adopted"] = [k for k in ("a_actual_year_rainfall", "b_rain_anomalies_lags_0_3", "c1_smc_rounds",
                                  "c2_llin_campaign_timing") if res[k]["adopted"]]
    res["rule"] = (f"a term is adopted only if r with it beats the climatological season in at least "
                   f"{ADOPT_MIN_STATES} of the held-out states (leave one whole state out)")
    return res


def fit_all(features: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Coefficients of `features` [K, L, T] on `target` [L, T] over every finite LGA-month (no intercept)."""
    x = features.reshape(features.shape[0], -1).T
    return _fit(x, target.reshape(-1))
